#!/usr/bin/python3
"""Writes spec/fixtures/models.safetensors with PyTorch 1.13 and torchvision
0.14, for spec/models_spec.lua: lunet.models against torchvision.models
without storing weights.

Every model is built with num_classes=10, then the k-th entry (0-based) of
its state_dict(), element i (0-based, flat), is set to
    0.05 * sin(0.37 * i + 1.3 * k)       (running_var: 1 + 0.1 * cos(...))
rounded to float32 (num_batches_tracked untouched); the spec does the same.
The input x (2x3xSxS, element i) is sin(0.7 * i) + 0.5 * cos(0.031 * i),
rounded to float32. References run in float64.

For each case "<name>": "<name>.eval" (output in eval mode), "<name>.train"
(output in train mode, batch statistics; models with dropout: of
model.features instead, "<name>.train_features"); with grads: after the train
forward, "<name>.running_mean" (of the first batch norm), and the gradients of
sum(train output) for the parameters listed in the case ("<name>.d.<key>").
Models built with options (mobilenet_v2{dropout = 0}, for its train mode)
list them in "opts". The VGGs past vgg11 (their classifiers hold 100M parameters: slow
to fill and run), densenet161 and densenet201 store only keys and counts.
The metadata "cases" lists {name, size, train, grads, keys ([key, shape] in
state_dict order), params (count at num_classes=10), params_1000 (at the
default), grad_sq ({key: sum of squares of its gradient})}.
Run:  /usr/bin/python3 tools/gen_models_fixtures.py
"""
import copy
import os
import sys

import torch
import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as g  # noqa: E402

# name, input size, train output of ('model' | 'features' | None), gradient keys (or None).
# Train mode is compared only where it is well conditioned: with these weights,
# batch statistics over 2 samples make deep nets chaotic (resnet101 in train
# mode moves 15% for an input change of 1e-12 in torch itself).
MODELS = [
    ("resnet18", 64, "model", ["conv1.weight", "layer1.0.bn1.weight", "layer2.0.downsample.0.weight", "fc.weight", "fc.bias"]),
    ("resnet34", 64, "model", None),
    ("resnet50", 64, "model", None),
    ("resnet101", 32, None, None),
    ("resnet152", 32, None, None),
    ("resnext50_32x4d", 32, "model", None),
    ("wide_resnet50_2", 32, None, None),
    ("vgg11", 32, "features", None),
    ("vgg11_bn", 32, "features", None),
    ("alexnet", 64, None, None),
    ("squeezenet1_0", 64, None, None),
    ("squeezenet1_1", 64, None, None),
    ("mobilenet_v2", 64, "model", ["features.0.0.weight", "features.1.conv.0.1.weight", "features.17.conv.1.1.weight",
                                   "classifier.1.bias"], {"dropout": 0.0}),
    ("densenet121", 64, "model", ["features.conv0.weight", "features.denseblock1.denselayer2.norm1.weight",
                                  "features.norm5.bias", "classifier.weight"]),
    ("densenet169", 32, None, None),
] + [(n, None, None, None) for n in ["vgg13", "vgg16", "vgg19", "vgg13_bn", "vgg16_bn", "vgg19_bn",
                                     "densenet161", "densenet201"]]


def fill(model):
    with torch.no_grad():
        for k, (key, t) in enumerate(model.state_dict().items()):
            if key.endswith("num_batches_tracked"):
                continue
            i = torch.arange(t.numel(), dtype=torch.float64)
            if key.endswith("running_var"):
                v = 1 + 0.1 * torch.cos(0.37 * i + 1.3 * k)
            else:
                v = 0.05 * torch.sin(0.37 * i + 1.3 * k)
            t.copy_(v.float().double().view(t.shape))


def make_input(size):
    i = torch.arange(2 * 3 * size * size, dtype=torch.float64)
    return (torch.sin(0.7 * i) + 0.5 * torch.cos(0.031 * i)).float().double().view(2, 3, size, size)


def main():
    tensors, cases = {}, []
    for name, size, train, grads, *kw in MODELS:
        ctor = getattr(torchvision.models, name)
        opts = kw[0] if kw else {}
        params_1000 = sum(p.numel() for p in ctor().parameters())
        model = ctor(num_classes=10, **opts).double()
        keys = [[k, list(t.shape)] for k, t in model.state_dict().items()]
        if size is None:   # (keys and counts only)
            cases.append({"name": name, "keys": keys, "params_1000": params_1000,
                          "params": sum(p.numel() for p in model.parameters())})
            continue
        fill(model)
        x = make_input(size)
        model.eval()
        with torch.no_grad():
            tensors[name + ".eval"] = model(x)
        case = {"name": name, "size": size, "train": train, "keys": keys, "opts": opts,
                "params": sum(p.numel() for p in model.parameters()), "params_1000": params_1000}
        model.train()
        if train == "features":
            with torch.no_grad():
                tensors[name + ".train_features"] = model.features(x)
        elif train == "model":
            out = model(x)
            tensors[name + ".train"] = out.detach()
            with torch.no_grad():   # (how much an input change of 1e-12 moves it: conditioning)
                m2 = copy.deepcopy(model)
                print(name, "train sensitivity", float((m2(x * (1 + 1e-12)) - out).abs().max() / out.abs().max()))
            if grads:
                first_bn = next(m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d))
                tensors[name + ".running_mean"] = first_bn.running_mean.clone()
                out.sum().backward()
                named = dict(model.named_parameters())
                for key in grads:
                    tensors[name + ".d." + key] = named[key].grad.clone()
                case["grads"] = grads
                case["grad_sq"] = {k: float((p.grad ** 2).sum()) for k, p in named.items()}
        cases.append(case)
        print(name, "ok", flush=True)
    g.write("models.safetensors", tensors, cases)


if __name__ == "__main__":
    main()
