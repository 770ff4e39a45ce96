#!/usr/bin/python3
"""Writes spec/fixtures/act_fast.safetensors with PyTorch 1.13, for
spec/act_fast_spec.lua: the float32 activations that lunet runs on SLEEF's
vector functions (exp, sigmoid, tanh, erf, log1p, expm1, silu, gelu with approximate
'none' and 'tanh', mish, hardswish, hardsigmoid, elu (alpha 1 and 0.5), celu (alpha 2),
selu, softplus (default, and beta 2 threshold 5)) over one sweep of float32 inputs "x": a fine grid
over [-12, 12], +-10^k for k from -45 to 38 (denormals to near the float32
maximum), the neighbourhood of exp's overflow and underflow (+-88 .. 104),
and the specials +-0, +-inf, NaN, the largest float, the smallest normal and
denormal. For every op "<op>": torch's float32 output "<op>.out" and the
gradient "<op>.dx" of sum(out * g) ("g": one float32 gradient for all ops),
and the same computed in float64 from the same float32 values,
"<op>.out64" and "<op>.dx64" (the reference to count float32 ulps against).
The metadata entry "cases" is the JSON list of the ops.
Run:  /usr/bin/python3 tools/gen_act_fast_fixtures.py
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as g  # noqa: E402

torch.manual_seed(0)
fi = torch.finfo(torch.float32)
k = torch.arange(-45, 38.01, 0.25, dtype=torch.float64)
mags = (10.0 ** k).float()
parts = [
    torch.linspace(-12, 12, 2001),
    mags, -mags,
    torch.linspace(85, 104, 191), -torch.linspace(85, 104, 191),
    torch.tensor([0.0, -0.0, float('inf'), -float('inf'), float('nan'), fi.max, -fi.max, fi.tiny, -fi.tiny,
                  1e-45, -1e-45, 3.0, -3.0, 1.0, -1.0]),
]
x = torch.cat(parts).float()
gr = torch.randn(x.shape)

OPS = {
    'exp': torch.exp, 'sigmoid': torch.sigmoid, 'tanh': torch.tanh, 'erf': torch.erf,
    'log1p': torch.log1p, 'expm1': torch.expm1, 'silu': F.silu,
    'gelu': F.gelu, 'gelu_tanh': lambda t: F.gelu(t, approximate='tanh'), 'mish': F.mish,
    'hardswish': F.hardswish, 'hardsigmoid': F.hardsigmoid, 'elu': F.elu,
    'elu_a': lambda t: F.elu(t, 0.5), 'celu': lambda t: F.celu(t, 2.0), 'selu': F.selu,
    'softplus': F.softplus, 'softplus_b': lambda t: F.softplus(t, 2.0, 5.0),
}


def one_by_one(f, xv, gv):
    """f's gradient at each element of xv alone (torch's scalar loop)"""
    out = []
    for xi, gi in zip(xv, gv):
        xi = xi.reshape(1).clone().requires_grad_(True)
        d, = torch.autograd.grad(f(xi), xi, gi.reshape(1))
        out.append(d)
    return torch.cat(out)
tensors, cases = {'x': x, 'g': gr}, []
for name, f in OPS.items():
    for dt, sfx in ((torch.float32, ''), (torch.float64, '64')):
        xv = x.to(dt).clone().requires_grad_(True)
        y = f(xv)
        dx, = torch.autograd.grad(y, xv, gr.to(dt))
        if name == 'hardswish':
            # at x = +-3 torch's scalar loop (and its CUDA kernel) as lunet: its
            # vector loop gives g rather than 1.5 g at 3, so it depends on the position
            at = (x.abs() == 3).nonzero().flatten()
            dx[at] = one_by_one(f, x.to(dt)[at], gr.to(dt)[at])
        tensors[f'{name}.out{sfx}'] = y.detach()
        tensors[f'{name}.dx{sfx}'] = dx
    cases.append(name)
g.write('act_fast.safetensors', tensors, cases)
