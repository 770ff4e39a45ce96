#!/usr/bin/python3
"""Writes spec/fixtures/models_regnet.safetensors with PyTorch 1.13 and
torchvision 0.14, for spec/models_regnet_spec.lua: lunet.models' RegNets
against torchvision's, in the scheme of tools/gen_models_fixtures.py (its
fill and make_input are imported: every state_dict entry set by a formula of
its position, no weights stored; read its docstring).

For each case "<name>": "<name>.eval"; with train = "model": "<name>.train"
(float64, batch statistics), and with grads "<name>.running_mean" (of the
first batch norm, when the model has one) and "<name>.d.<key>". Models
without a size store only keys and parameter counts. run() is shared with
tools/gen_models_convnext_fixtures.py.
Run:  /usr/bin/python3 tools/gen_models_regnet_fixtures.py
"""
import copy
import os
import sys

import torch
import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as g  # noqa: E402
from gen_models_fixtures import fill, make_input  # noqa: E402

# name, input size, train ('model' | None), gradient keys, options
MODELS = [
    ("regnet_x_400mf", 32, None, None),
    ("regnet_y_400mf", 32, "model", ["stem.0.weight", "trunk_output.block1.block1-0.f.se.fc1.weight",
                                     "trunk_output.block4.block4-0.proj.1.weight", "fc.weight", "fc.bias"]),
] + [(n, None, None, None) for n in ["regnet_y_800mf", "regnet_y_1_6gf", "regnet_y_3_2gf", "regnet_y_8gf",
                                     "regnet_y_16gf", "regnet_y_32gf", "regnet_y_128gf", "regnet_x_800mf",
                                     "regnet_x_1_6gf", "regnet_x_3_2gf", "regnet_x_8gf", "regnet_x_16gf",
                                     "regnet_x_32gf"]]


def run(models, filename):
    tensors, cases = {}, []
    for name, size, train, grads, *kw in models:
        ctor = getattr(torchvision.models, name)
        opts = kw[0] if kw else {}
        params_1000 = sum(p.numel() for p in ctor(**opts).parameters())
        model = ctor(num_classes=10, **opts).double()
        keys = [[k, list(t.shape)] for k, t in model.state_dict().items()]
        case = {"name": name, "keys": keys, "opts": opts, "params_1000": params_1000,
                "params": sum(p.numel() for p in model.parameters())}
        cases.append(case)
        if size is None:   # (keys and counts only)
            continue
        fill(model)
        x = make_input(size)
        model.eval()
        with torch.no_grad():
            tensors[name + ".eval"] = model(x)
        case.update({"size": size, "train": train})
        if train == "model":
            model.train()
            out = model(x)
            tensors[name + ".train"] = out.detach()
            with torch.no_grad():   # (how much an input change of 1e-12 moves it: conditioning)
                m2 = copy.deepcopy(model)
                print(name, "train sensitivity", float((m2(x * (1 + 1e-12)) - out).abs().max() / out.abs().max()))
            if grads:
                bns = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
                if bns:
                    tensors[name + ".running_mean"] = bns[0].running_mean.clone()
                out.sum().backward()
                named = dict(model.named_parameters())
                for key in grads:
                    tensors[name + ".d." + key] = named[key].grad.clone()
                case["grads"] = grads
                case["grad_sq"] = {k: float((p.grad ** 2).sum()) for k, p in named.items()}
        print(name, "ok", flush=True)
    g.write(filename, tensors, cases)


if __name__ == "__main__":
    run(MODELS, "models_regnet.safetensors")
