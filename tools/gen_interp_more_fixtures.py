#!/usr/bin/python3
"""Writes spec/fixtures/interp_more.safetensors with PyTorch 1.13, for
spec/nn_interp_more_spec.lua and spec/nn_grid_sample_spec.lua:
F.interpolate in every mode x input dims x align_corners, by size and by
scale_factor (up, down, non-integer, per dim, recompute_scale_factor),
antialias for bilinear and bicubic;
F.grid_sample in every mode x padding_mode x align_corners on 4-d (and 5-d)
input, grids partly outside [-1, 1], gradients for input and grid;
F.affine_grid (4-d and 5-d sizes, both align_corners), theta gradients.

Layout of tools/fixture_lib.py: case "<name>" with float32 inputs
"<name>.x" (and "<name>.grid", "<name>.theta"), "<name>.out", "<name>.dout"
and the float64 gradients "<name>.dx" ... of sum(out * dout); opts are
lunet's option names.
Run:  /usr/bin/python3 tools/gen_interp_more_fixtures.py
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as g  # noqa: E402

torch.manual_seed(0)

SHAPES = {3: (2, 3, 5), 4: (2, 2, 4, 5), 5: (1, 2, 3, 4, 5)}
MODES = [("nearest", [3, 4, 5]), ("nearest-exact", [3, 4, 5]), ("area", [3, 4, 5]),
         ("linear", [3]), ("bilinear", [4]), ("bicubic", [4]), ("trilinear", [5])]
INTERP = {"linear", "bilinear", "bicubic", "trilinear"}


def geometries(nd):
    sd = nd - 2
    per = [1.5, 2.0, 0.7][:sd]
    sizes = [7, 3, 9][:sd]
    down = [2, 2, 3][:sd]
    return [
        ("s2", {"scale_factor": 2}),
        ("snonint", {"scale_factor": 1.7}),
        ("sper", {"scale_factor": per}),
        ("sdown", {"scale_factor": 0.6}),
        ("size", {"size": sizes}),
        ("sizedown", {"size": down}),
        ("size1", {"size": 1}),
        ("recompute", {"scale_factor": 1.3, "recompute_scale_factor": True}),
    ]


def interp_cases():
    for mode, dims in MODES:
        for nd in dims:
            for gname, geo in geometries(nd):
                for ac in ([False, True] if mode in INTERP else [None]):
                    opts = dict(geo, mode=mode)
                    if ac is not None:
                        opts["align_corners"] = ac
                    name = f"interp_{mode}_{nd}d_{gname}" + ("" if ac is None else ("_t" if ac else "_f"))
                    kw = dict(opts)
                    if "size" in kw and isinstance(kw["size"], list):
                        kw["size"] = tuple(kw["size"])
                    if isinstance(kw.get("scale_factor"), list):
                        kw["scale_factor"] = tuple(kw["scale_factor"])
                    g.add(name, "interpolate", opts, lambda x, kw=kw: F.interpolate(x, **kw),
                          {"x": g.f32(*SHAPES[nd])}, ["x"])


def antialias_cases():
    for mode in ["bilinear", "bicubic"]:
        for gname, geo in [("down", {"size": [3, 2]}), ("downsf", {"scale_factor": [0.45, 0.3]}),
                           ("up", {"scale_factor": [1.5, 2.0]}), ("mixed", {"size": [9, 3]}), ("size1", {"size": 1})]:
            for ac in [False, True]:
                opts = dict(geo, mode=mode, align_corners=ac, antialias=True)
                kw = {k: (tuple(v) if isinstance(v, list) else v) for k, v in opts.items()}
                g.add(f"interp_aa_{mode}_{gname}_{'t' if ac else 'f'}", "interpolate", opts,
                      lambda x, kw=kw: F.interpolate(x, **kw), {"x": g.f32(2, 2, 7, 8)}, ["x"])


def grid_cases():
    for nd, xs, gs in [(4, (2, 3, 4, 5), (2, 3, 6, 2)), (5, (1, 2, 3, 4, 5), (1, 2, 3, 4, 3))]:
        for mode in ["bilinear", "nearest", "bicubic"]:
            if nd == 5 and mode == "bicubic":
                continue
            for pad in ["zeros", "border", "reflection"]:
                for ac in [False, True]:
                    name = f"grid_{nd}d_{mode}_{pad}_{'t' if ac else 'f'}"
                    grid = (torch.rand(gs) * 3.4 - 1.7).float()   # partly outside [-1, 1]
                    opts = {"mode": mode, "padding_mode": pad, "align_corners": ac}
                    g.add(name, "grid_sample", opts,
                          lambda x, grid, o=opts: F.grid_sample(x, grid, **o),
                          {"x": g.f32(*xs), "grid": grid}, ["x", "grid"])
    for nd, size in [(4, [2, 3, 4, 5]), (4, [1, 1, 1, 3]), (5, [2, 2, 3, 4, 5])]:
        for ac in [False, True]:
            name = f"affine_{nd}d_{'x'.join(map(str, size))}_{'t' if ac else 'f'}"
            theta = g.f32(size[0], nd - 2, nd - 1)
            g.add(name, "affine_grid", {"size": size, "align_corners": ac},
                  lambda theta, size=size, ac=ac: F.affine_grid(theta, size, align_corners=ac),
                  {"theta": theta}, ["theta"])


interp_cases()
antialias_cases()
grid_cases()
g.write("interp_more.safetensors", g.tensors, g.cases)
