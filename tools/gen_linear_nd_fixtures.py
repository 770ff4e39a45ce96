#!/usr/bin/python3
"""Writes spec/fixtures/linear_nd.safetensors with PyTorch 1.13, for
spec/linear_nd_spec.lua: F.linear on input of 1, 3 and 4 dims (its leading
dims folded into rows), with and without bias, and on a permuted (NHWC view
of an NCHW) input as ConvNeXt's blocks feed it. Cases {name, op, opts}:
opts.permute (x stored N,C,H,W, used as x.permute(0, 2, 3, 1)), opts.bias.
Tensors as tools/fixture_lib.py's add: x, w, b, out, dout, dx, dw, db.
Run:  /usr/bin/python3 tools/gen_linear_nd_fixtures.py
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as g  # noqa: E402

torch.manual_seed(0)


def case(name, xshape, fin, fout, bias=True, permute=False):
    inputs = {"x": g.f32(*xshape), "w": g.f32(fout, fin)}
    if bias:
        inputs["b"] = g.f32(fout)

    def fn(x, w, b=None):
        return F.linear(x.permute(0, 2, 3, 1) if permute else x, w, b)
    g.add(name, "linear", {"permute": permute, "bias": bias}, fn, inputs, list(inputs))


case("x1d", (5,), 5, 4)
case("x3d", (2, 3, 5), 5, 4)
case("x3d_nobias", (2, 3, 5), 5, 4, bias=False)
case("x4d", (2, 3, 2, 5), 5, 6)
case("x4d_permuted", (2, 5, 3, 4), 5, 7, permute=True)
case("x5d", (2, 1, 3, 2, 4), 4, 3)
g.write("linear_nd.safetensors", g.tensors, g.cases)
