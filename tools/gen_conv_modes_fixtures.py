#!/usr/bin/python3
"""Writes spec/fixtures/conv_modes.safetensors with PyTorch 1.13, for
spec/nn_conv_modes_spec.lua: nn.Conv1d/2d/3d with padding_mode 'reflect',
'replicate' and 'circular' (numeric, per-dim and 'same' padding, stride,
dilation, groups,  a sample alone), and nn.ConvTranspose1d/2d/3d called with
output_size; F.pad of any rank (constant, reflect, replicate, circular).

For every case "<name>": float64 "<name>.x", "<name>.weight", "<name>.bias"
(torch's initialisation), the output "<name>.out" and the gradients
"<name>.dx", "<name>.dweight", "<name>.dbias" of sum(out * "<name>.dout").
The metadata entry "cases" is a JSON list of {name, module, cin, cout, k,
opts (lunet's option names), output_size}.
Run:  /usr/bin/python3 tools/gen_conv_modes_fixtures.py
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as g  # noqa: E402

torch.manual_seed(0)
tensors, cases = {}, []


def add(name, module, cin, cout, k, opts, xshape, output_size=None):
    ctor = getattr(nn, module)
    kw = dict(opts)
    m = ctor(cin, cout, k, **kw).double()
    x = torch.randn(xshape, dtype=torch.float64, requires_grad=True)
    out = m(x, output_size) if output_size is not None else m(x)
    dout = torch.randn(out.shape, dtype=torch.float64)
    dx, dw, db = torch.autograd.grad(out, [x, m.weight, m.bias], dout)
    for key, v in [("x", x), ("weight", m.weight), ("bias", m.bias), ("out", out), ("dout", dout),
                   ("dx", dx), ("dweight", dw), ("dbias", db)]:
        tensors[f"{name}.{key}"] = v.detach().clone()
    lopts = {key: (list(v) if isinstance(v, tuple) else v) for key, v in opts.items()}
    cases.append({"name": name, "module": module, "cin": cin, "cout": cout,
                  "k": list(k) if isinstance(k, tuple) else k, "opts": lopts, "output_size": output_size})


for mode in ["reflect", "replicate", "circular"]:
    add(f"c1_{mode}", "Conv1d", 3, 4, 3, {"padding": 2, "padding_mode": mode}, (2, 3, 9))
    add(f"c1_{mode}_same", "Conv1d", 2, 4, 4, {"padding": "same", "dilation": 2, "padding_mode": mode,
                                                "groups": 2}, (2, 2, 11))
    add(f"c1_{mode}_stride", "Conv1d", 3, 2, 3, {"padding": 1, "stride": 2, "padding_mode": mode},
        (1, 3, 8))
    add(f"c2_{mode}", "Conv2d", 3, 4, 3, {"padding": (1, 2), "padding_mode": mode}, (2, 3, 6, 7))
    add(f"c2_{mode}_same", "Conv2d", 2, 3, (2, 3), {"padding": "same", "dilation": (1, 2), "padding_mode": mode},
        (1, 2, 6, 8))
    add(f"c2_{mode}_valid", "Conv2d", 2, 3, 3, {"padding": "valid", "padding_mode": mode}, (1, 2, 5, 5))
    add(f"c3_{mode}", "Conv3d", 2, 2, 3, {"padding": (1, 0, 2), "stride": (1, 2, 1), "padding_mode": mode},
        (1, 2, 4, 5, 5))
    add(f"c3_{mode}_same", "Conv3d", 2, 2, (2, 3, 2), {"padding": "same", "padding_mode": mode}, (1, 2, 5, 4, 5))

add("t1_output_size", "ConvTranspose1d", 3, 2, 3, {"stride": 3, "padding": 1}, (2, 3, 5), [15])
add("t2_output_size", "ConvTranspose2d", 3, 2, 3, {"stride": (2, 3), "padding": 1}, (1, 3, 4, 4), [1, 2, 8, 11])
add("t3_output_size", "ConvTranspose3d", 2, 4, 3, {"stride": 2, "padding": 1, "dilation": (1, 2, 1)},
    (1, 2, 3, 4, 3), [6, 10, 6])



def add_pad(name, shape, pad, mode, value=None):
    x = torch.randn(shape, dtype=torch.float64, requires_grad=True)
    out = F.pad(x, pad, mode=mode, value=value) if value is not None else F.pad(x, pad, mode=mode)
    dout = torch.randn(out.shape, dtype=torch.float64)
    (dx,) = torch.autograd.grad(out, [x], dout)
    for key, v in [("x", x), ("out", out), ("dout", dout), ("dx", dx)]:
        tensors[f"{name}.{key}"] = v.detach().clone()
    cases.append({"name": name, "module": "pad", "pad": list(pad), "mode": mode, "value": value})


add_pad("pad_1d_constant", (5,), (2, 1), "constant", 1.5)
add_pad("pad_3d_constant_2pairs", (2, 3, 4), (1, 0, 2, 1), "constant")
add_pad("pad_5d_constant_3pairs", (1, 2, 3, 2, 2), (1, 1, 0, 2, 1, 0), "constant", -2.0)
add_pad("pad_3d_reflect", (2, 3, 5), (2, 1), "reflect")
add_pad("pad_3d_replicate", (2, 3, 5), (0, 3), "replicate")
add_pad("pad_3d_circular", (2, 3, 5), (2, 3), "circular")
add_pad("pad_5d_reflect", (1, 2, 4, 3, 5), (1, 2, 2, 1, 1, 3), "reflect")
add_pad("pad_5d_replicate", (1, 2, 3, 3, 4), (0, 2, 1, 1, 2, 0), "replicate")
add_pad("pad_5d_circular", (2, 1, 3, 4, 2), (1, 2, 0, 3, 2, 1), "circular")
add_pad("pad_4d_constant_3pairs", (2, 3, 2, 2), (1, 0, 0, 1, 2, 1), "constant")

g.write("conv_modes.safetensors", tensors, cases)
