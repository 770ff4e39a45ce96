#!/usr/bin/python3
"""Writes spec/fixtures/nn_fold_pad.safetensors with PyTorch 1.13, for
spec/nn_fold_pad_spec.lua: unfold and fold (square and non-square kernels,
stride, padding, dilation, L = 1, overlapping blocks, strides that skip
positions, unbatched), the padding modules (ReflectionPad1d/2d,
ReplicationPad1d/2d, ConstantPad1d/2d, batched and unbatched, constant on
1-d and 5-d input), normalize (p, dim, eps, an all-zero row),
local_response_norm (3-d to 5-d input, size larger than C) and
channel_shuffle.

fixture_lib's layout: for a case "<name>", the float32 input "<name>.x", the
output "<name>.out" and the gradient "<name>.dx" of sum(out * "<name>.dout"),
in float64 from the same values. The metadata "cases" lists {name, op, opts}
with lunet's argument names and 1-based dims.
Run:  /usr/bin/python3 tools/gen_nn_fold_pad_fixtures.py
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as g  # noqa: E402

torch.manual_seed(0)
f32, add = g.f32, g.add


def lua_geo(kw):
    """torch's geometry keywords as lunet's options (tuples as lists)"""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in kw.items()}


def fold_cases():
    for name, xs, k, kw in [
        ("unfold_plain", (2, 3, 5, 6), 2, {}),
        ("unfold_rect", (2, 2, 6, 7), (2, 3), {"stride": (2, 1), "padding": (1, 0), "dilation": (1, 2)}),
        ("unfold_all", (1, 2, 7, 8), 3, {"stride": 2, "padding": 1, "dilation": 2}),
        ("unfold_l1", (2, 3, 3, 4), (3, 4), {}),
        ("unfold_unbatched", (3, 5, 5), 2, {"stride": 2}),
        ("unfold_1x1", (2, 3, 4, 3), 1, {"stride": (1, 2)}),
    ]:
        add(name, "unfold", {"kernel_size": lua_geo({"k": k})["k"], "opts": lua_geo(kw)},
            lambda x, k=k, kw=kw: F.unfold(x, k, **kw), {"x": f32(*xs)}, ["x"])
    for name, out, k, kw, c, batch in [
        ("fold_overlap", (5, 6), 2, {}, 3, 2),
        ("fold_rect", (6, 7), (2, 3), {"stride": (2, 1), "padding": (1, 0), "dilation": (1, 2)}, 2, 2),
        ("fold_gaps", (7, 8), 2, {"stride": 3}, 2, 2),
        ("fold_all", (7, 8), 3, {"stride": 2, "padding": 1, "dilation": 2}, 2, 1),
        ("fold_l1", (3, 4), (3, 4), {}, 2, 2),
        ("fold_unbatched", (5, 5), 3, {"stride": 2, "padding": 1}, 3, None),
    ]:
        kk = k if isinstance(k, tuple) else (k, k)
        L = F.unfold(torch.zeros(1, 1, *out), k, **kw).shape[-1]
        xs = (c * kk[0] * kk[1], L) if batch is None else (batch, c * kk[0] * kk[1], L)
        add(name, "fold", {"output_size": list(out), "kernel_size": lua_geo({"k": k})["k"], "opts": lua_geo(kw)},
            lambda x, out=out, k=k, kw=kw: F.fold(x, out, k, **kw), {"x": f32(*xs)}, ["x"])


def pad_cases():
    for name, cls, xs, p, value in [
        ("reflect1d", "ReflectionPad1d", (2, 3, 6), (2, 3), None),
        ("reflect1d_unbatched", "ReflectionPad1d", (3, 5), 4, None),
        ("reflect2d", "ReflectionPad2d", (2, 2, 5, 6), (1, 2, 3, 4), None),
        ("reflect2d_unbatched", "ReflectionPad2d", (2, 4, 3), 2, None),
        ("replicate1d", "ReplicationPad1d", (2, 3, 4), (3, 1), None),
        ("replicate1d_unbatched", "ReplicationPad1d", (2, 1), 2, None),
        ("replicate2d", "ReplicationPad2d", (2, 2, 3, 4), (2, 0, 1, 3), None),
        ("replicate2d_unbatched", "ReplicationPad2d", (2, 3, 3), 1, None),
        ("constant1d", "ConstantPad1d", (2, 3, 4), (1, 2), 1.5),
        ("constant1d_1d", "ConstantPad1d", (5,), 2, -1.0),
        ("constant2d", "ConstantPad2d", (3, 4), (1, 0, 2, 3), -2.0),
        ("constant2d_5d", "ConstantPad2d", (1, 2, 2, 3, 4), 1, 0.5),
    ]:
        m = getattr(nn, cls)(p) if value is None else getattr(nn, cls)(p, value)
        opts = {"module": cls, "padding": list(p) if isinstance(p, tuple) else p}
        if value is not None:
            opts["value"] = value
        add(name, "pad", opts, lambda x, m=m: m(x), {"x": f32(*xs)}, ["x"])


def norm_cases():
    for name, xs, kw in [
        ("normalize_default", (3, 4), {}),
        ("normalize_p1_dim1", (3, 4), {"p": 1, "dim": 0}),
        ("normalize_p3_last", (2, 3, 4), {"p": 3, "dim": -1}),
        ("normalize_inf", (2, 5), {"p": float("inf")}),
        ("normalize_eps", (2, 3, 2), {"eps": 2.0}),
    ]:
        opts = dict(kw)
        if "dim" in opts and opts["dim"] >= 0:
            opts["dim"] += 1
        if opts.get("p") == float("inf"):
            opts["p"] = "inf"
        add(name, "normalize", opts, lambda x, kw=kw: F.normalize(x, **kw), {"x": f32(*xs)}, ["x"])
    x = f32(3, 4)
    x[1] = 0
    add("normalize_zero_row", "normalize", {"dim": 2}, lambda x: F.normalize(x, dim=1), {"x": x}, ["x"])
    for name, xs, size, kw in [
        ("lrn_3d", (2, 5, 4), 3, {}),
        ("lrn_4d", (2, 6, 3, 4), 2, {"alpha": 0.1, "beta": 0.5, "k": 2.0}),
        ("lrn_5d_big", (1, 4, 2, 2, 2), 5, {"alpha": 0.5, "beta": 1.5}),
    ]:
        add(name, "local_response_norm", {"size": size, "opts": kw},
            lambda x, size=size, kw=kw: F.local_response_norm(x, size, **kw), {"x": f32(*xs)}, ["x"])
    for name, xs, groups in [("shuffle_4d", (2, 6, 3, 2), 3), ("shuffle_3d", (2, 4, 5), 2)]:
        add(name, "channel_shuffle", {"groups": groups}, lambda x, gr=groups: shuffle(x, gr), {"x": f32(*xs)}, ["x"])


def shuffle(x, groups):
    """torch 1.13's channel_shuffle has no derivative: the same values, as a view and a copy"""
    n, c = x.shape[:2]
    out = x.reshape(n, groups, c // groups, -1).transpose(1, 2).reshape(x.shape)
    assert torch.equal(out.detach(), F.channel_shuffle(x.detach(), groups))
    return out


fold_cases()
pad_cases()
norm_cases()
g.write("nn_fold_pad.safetensors", g.tensors, g.cases)
