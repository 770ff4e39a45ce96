#!/usr/bin/python3
"""Writes spec/fixtures/models_b.safetensors with PyTorch 1.13 and torchvision
0.14, for spec/models_b_spec.lua: lunet.models' ShuffleNetV2, MNASNet,
GoogLeNet and Inception v3 against torchvision.models.

The scheme of tools/gen_models_fixtures.py (its fill and make_input are
imported): num_classes=10, every state_dict entry set by a formula of its
position, the input 2x3xSxS by a formula, references in float64. For each
case "<name>" (a constructor, or "<name>:<tag>" with options "opts"):
"<name>.eval"; with train: "<name>.train" (train mode, batch statistics) or,
for googlenet's aux heads, "<name>.train.logits", ".train.aux_logits2",
".train.aux_logits1" (torchvision's GoogLeNetOutputs fields); with grads:
"<name>.running_mean" (first batch norm after the train forward) and the
gradients of sum(train output) "<name>.d.<key>", grad_sq as models.safetensors.
Cases without a size store keys and parameter counts only.
Run:  /usr/bin/python3 tools/gen_models_b_fixtures.py
"""
import copy
import os
import sys
import warnings

import torch
import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as g  # noqa: E402
from gen_models_fixtures import fill, make_input  # noqa: E402

warnings.simplefilter("ignore")

# tag, constructor, input size, train ('model' | 'aux' | None), gradient keys, options
MODELS = [
    ("shufflenet_v2_x0_5", "shufflenet_v2_x0_5", 64, "model",
     ["conv1.0.weight", "stage2.0.branch1.0.weight", "stage2.1.branch2.3.weight", "stage4.3.branch2.6.bias",
      "fc.weight", "fc.bias"], {}),
    ("shufflenet_v2_x1_0", "shufflenet_v2_x1_0", 32, None, None, {}),
    ("mnasnet0_5", "mnasnet0_5", 64, "model",
     ["layers.0.weight", "layers.8.0.layers.3.weight", "layers.13.0.layers.7.weight", "classifier.1.weight"],
     {"dropout": 0.0}),
    ("googlenet:noaux", "googlenet", 32, None, None, {"aux_logits": False}),
    ("googlenet", "googlenet", 64, "aux", None, {"dropout": 0.0, "dropout_aux": 0.0}),
    ("googlenet:transform", "googlenet", 32, None, None, {"aux_logits": False, "transform_input": True}),
    ("inception_v3", "inception_v3", 75, None, None, {}),
] + [(n, n, None, None, None, {}) for n in ["shufflenet_v2_x1_5", "shufflenet_v2_x2_0", "mnasnet0_75", "mnasnet1_0",
                                            "mnasnet1_3"]]


def count(m):
    return sum(p.numel() for p in m.parameters())


def main():
    tensors, cases = {}, []
    for tag, name, size, train, grads, opts in MODELS:
        ctor = getattr(torchvision.models, name)
        slow = {"init_weights": False} if name in ("googlenet", "inception_v3") else {}
        model = ctor(num_classes=10, **opts, **slow).double()
        case = {"name": tag, "ctor": name, "opts": opts, "keys": [[k, list(t.shape)] for k, t in model.state_dict().items()],
                "params": count(model), "params_1000": count(ctor(**opts, **slow))}
        cases.append(case)
        if size is None:
            continue
        fill(model)
        x = make_input(size)
        model.eval()
        with torch.no_grad():
            tensors[tag + ".eval"] = model(x)
        case.update(size=size, train=train)
        if train is None:
            continue
        model.train()
        out = model(x)
        if train == "aux":
            for f in out._fields:
                tensors[f"{tag}.train.{f}"] = getattr(out, f).detach()
            out = out.logits
        else:
            tensors[tag + ".train"] = out.detach()
        with torch.no_grad():   # (conditioning: how much an input change of 1e-12 moves it)
            o2 = copy.deepcopy(model)(x * (1 + 1e-12))
            o2 = o2.logits if train == "aux" else o2
            print(tag, "train sensitivity", float((o2 - out).abs().max() / out.abs().max()))
        if grads:
            first_bn = next(m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d))
            tensors[tag + ".running_mean"] = first_bn.running_mean.clone()
            out.sum().backward()
            named = dict(model.named_parameters())
            for key in grads:
                tensors[tag + ".d." + key] = named[key].grad.clone()
            case["grads"] = grads
            case["grad_sq"] = {k: float((p.grad ** 2).sum()) for k, p in named.items()}
        print(tag, "ok", flush=True)
    g.write("models_b.safetensors", tensors, cases)


if __name__ == "__main__":
    main()
