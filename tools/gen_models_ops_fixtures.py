#!/usr/bin/python3
"""Writes spec/fixtures/models_ops.safetensors with PyTorch 1.13 and
torchvision 0.14, for spec/models_ops_spec.lua: torchvision.ops.misc's
Conv2dNormActivation and SqueezeExcitation (lunet.models.ops) with their
state_dicts, outputs and input gradients.

For each case "<name>": "<name>.x" (float32 input), "<name>.sd.<key>" (the
module's state_dict, torch's random init; BatchNorm running statistics set
to non-trivial values), "<name>.out" (eval-mode output, float64 from the
same values), "<name>.dx" (gradient of sum(out * "<name>.dout") for x). The
metadata "cases" lists {name, kind, args, opts (lunet's names; activation
names as strings), keys (state_dict order)}.
Run:  /usr/bin/python3 tools/gen_models_ops_fixtures.py
"""
import os
import sys

import torch
import torch.nn as nn
from torchvision.ops.misc import Conv2dNormActivation, SqueezeExcitation

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as g  # noqa: E402

torch.manual_seed(0)
ACT = {"ReLU": nn.ReLU, "Hardswish": nn.Hardswish, "Hardsigmoid": nn.Hardsigmoid, "Sigmoid": nn.Sigmoid,
       "SiLU": nn.SiLU}

CASES = [
    ("cna_default", "cna", [3, 8], {}),
    ("cna_stride_hswish", "cna", [4, 6], {"kernel_size": 5, "stride": 2, "activation_layer": "Hardswish"}),
    ("cna_depthwise_dilated", "cna", [6, 6], {"groups": 6, "dilation": 2}),
    ("cna_no_norm", "cna", [3, 5], {"kernel_size": 1, "norm_layer": False, "activation_layer": "SiLU"}),
    ("cna_no_act", "cna", [3, 5], {"activation_layer": False, "padding": 0}),
    ("se_default", "se", [8, 4], {}),
    ("se_mobilenet", "se", [12, 8], {"scale_activation": "Hardsigmoid"}),
    ("se_silu", "se", [6, 2], {"activation": "SiLU"}),
]


def build(kind, args, opts):
    kw = {}
    for k, v in opts.items():
        if k in ("activation_layer", "activation", "scale_activation"):
            kw[k] = None if v is False else ACT[v]
        elif k == "norm_layer":
            kw[k] = None if v is False else nn.BatchNorm2d
        else:
            kw[k] = v
    return Conv2dNormActivation(*args, **kw) if kind == "cna" else SqueezeExcitation(*args, **kw)


cases = []
for name, kind, args, opts in CASES:
    m = build(kind, args, opts)
    with torch.no_grad():
        for k, v in m.state_dict().items():
            if k.endswith("running_mean"):
                v.copy_(torch.randn(v.shape) * 0.1)
            elif k.endswith("running_var"):
                v.copy_(torch.rand(v.shape) + 0.5)
            elif k.endswith(".bias") or (k.endswith("weight") and v.dim() == 1):
                v.copy_(torch.randn(v.shape) * 0.2 + (1 if k.endswith("weight") else 0))
    m.eval()
    sd = m.state_dict()
    for k, v in sd.items():
        g.tensors[f"{name}.sd.{k}"] = v.float() if v.is_floating_point() else v
    x = g.f32(2, args[0], 9, 9)
    g.tensors[f"{name}.x"] = x
    md = build(kind, args, opts).double()
    md.load_state_dict(sd)
    md.eval()
    xd = x.double().requires_grad_(True)
    out = md(xd)
    dout = g.f32(*out.shape)
    (dx,) = torch.autograd.grad(out, [xd], dout.double())
    g.tensors[f"{name}.out"], g.tensors[f"{name}.dout"], g.tensors[f"{name}.dx"] = out.detach(), dout, dx
    cases.append({"name": name, "kind": kind, "args": args, "opts": opts, "keys": list(sd.keys()),
                  "repr": repr(m)})

g.write("models_ops.safetensors", g.tensors, cases)
