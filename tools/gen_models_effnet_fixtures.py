#!/usr/bin/python3
"""Writes spec/fixtures/models_effnet.safetensors with PyTorch 1.13 and
torchvision 0.14, for spec/models_effnet_spec.lua: lunet.models'
MobileNetV3s and EfficientNets against torchvision.models.

The scheme of tools/gen_models_fixtures.py (its fill and make_input are
imported): every state_dict entry set by a formula of its position, the
input 2x3xSxS by a formula, references in float64; per case "<name>.eval",
"<name>.train" (train mode, batch statistics), "<name>.running_mean" and
"<name>.d.<key>" gradients of sum(train output), and in the metadata the
keys ([key, shape] in state_dict order at num_classes=10), parameter counts
(at 10 and at the default 1000 classes) and grad_sq (sum of squares of
every parameter's gradient). The models past b0 / v2_s store only keys and
counts.

Train mode runs with dropout 0 and stochastic_depth_prob 0 (deterministic):
torchvision 0.14's efficientnet_* pass dropout positionally, so
efficientnet_b0(dropout=0.0) raises there; the classifier's Dropout p is
set to 0 after construction instead (lunet takes the dropout option, as
later torchvisions do).
Run:  /usr/bin/python3 tools/gen_models_effnet_fixtures.py
"""
import copy
import os
import sys

import torch
import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as g  # noqa: E402
from gen_models_fixtures import fill, make_input  # noqa: E402

# name, input size (None: keys and counts only), train ('model' | None), gradient keys, options
MODELS = [
    ("mobilenet_v3_small", 64, "model", ["features.0.0.weight", "features.1.block.1.fc1.weight",
                                         "features.4.block.2.fc2.bias", "features.11.block.3.1.weight",
                                         "classifier.3.bias"], {"dropout": 0.0}),
    ("mobilenet_v3_large", 32, None, None, {}),
    ("efficientnet_b0", 64, "model", ["features.0.0.weight", "features.2.0.block.2.fc1.weight",
                                      "features.6.3.block.1.1.bias", "features.8.1.bias", "classifier.1.bias"],
     {"dropout": 0.0, "stochastic_depth_prob": 0.0}),
    ("efficientnet_v2_s", 32, None, None, {}),
] + [(n, None, None, None, {}) for n in ["efficientnet_b1", "efficientnet_b2", "efficientnet_b3", "efficientnet_b4",
                                         "efficientnet_b5", "efficientnet_b6", "efficientnet_b7",
                                         "efficientnet_v2_m", "efficientnet_v2_l"]]


def build(name, opts, **kw):
    ctor = getattr(torchvision.models, name)
    o = dict(opts)
    p = o.pop("dropout", None) if name.startswith("efficientnet") else None
    m = ctor(**o, **kw)
    if p is not None:
        m.classifier[0].p = p
    return m


def main():
    tensors, cases = {}, []
    for name, size, train, grads, opts in MODELS:
        params_1000 = sum(p.numel() for p in build(name, {}).parameters())
        model = build(name, opts, num_classes=10).double()
        keys = [[k, list(t.shape)] for k, t in model.state_dict().items()]
        case = {"name": name, "keys": keys, "params_1000": params_1000,
                "params": sum(p.numel() for p in model.parameters())}
        if size is None:
            cases.append(case)
            continue
        fill(model)
        x = make_input(size)
        model.eval()
        with torch.no_grad():
            tensors[name + ".eval"] = model(x)
        case.update({"size": size, "train": train, "opts": opts})
        if train == "model":
            model.train()
            out = model(x)
            tensors[name + ".train"] = out.detach()
            with torch.no_grad():   # (conditioning: how much an input change of 1e-12 moves it)
                m2 = copy.deepcopy(model)
                print(name, "train sensitivity", float((m2(x * (1 + 1e-12)) - out).abs().max() / out.abs().max()))
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
    g.write("models_effnet.safetensors", tensors, cases)


if __name__ == "__main__":
    main()
