#!/usr/bin/python3
"""Writes spec/fixtures/nn_interp.safetensors with PyTorch, for
spec/nn_interp_spec.lua: forward outputs and input gradients of
torch.nn.functional.interpolate(mode='bilinear') over upsampling and
downsampling, integer and non-integer scale factors, sizes, align_corners
both ways, recompute_scale_factor, output size 1 and input size 1, batch
and channels above 1.

As tools/gen_nn_fixtures.py: for every case "<name>", the input "<name>.x"
holds float32 values; the output "<name>.out" and the gradient "<name>.dx"
of sum(out * <name>.dout) are computed in float64 from those same values.
The metadata entry "cases" is a JSON list of {name, shape, opts}. Written
with tools/fixture_lib.py (its save).
Run:  /usr/bin/python3 tools/gen_nn_interp_fixtures.py
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as g  # noqa: E402

tensors, cases = {}, []
f32 = g.f32


def add(name, shape, opts):
    x = f32(*shape)
    tensors[f"{name}.x"] = x
    xd = x.double().requires_grad_(True)
    out = F.interpolate(xd, size=opts.get("size"), scale_factor=opts.get("scale_factor"), mode="bilinear",
                        align_corners=opts["align_corners"],
                        recompute_scale_factor=opts.get("recompute_scale_factor"))
    dout = f32(*out.shape)
    tensors[f"{name}.out"] = out.detach()
    tensors[f"{name}.dout"] = dout
    (dx,) = torch.autograd.grad(out, [xd], dout.double())
    tensors[f"{name}.dx"] = dx
    cases.append({"name": name, "shape": list(shape), "opts": opts})


def interp_cases():
    for ac in (False, True):
        t = "t" if ac else "f"
        add(f"up2_{t}", (2, 3, 4, 5), dict(scale_factor=2, align_corners=ac))
        add(f"down_size_{t}", (1, 2, 7, 9), dict(size=[3, 4], align_corners=ac))
        add(f"up_size_{t}", (2, 2, 4, 5), dict(size=[6, 9], align_corners=ac))
        add(f"mixed_size_{t}", (1, 3, 4, 6), dict(size=[7, 3], align_corners=ac))
        add(f"sf_nonint_{t}", (2, 2, 5, 6), dict(scale_factor=[1.7, 2.3], align_corners=ac))
        add(f"sf_down_{t}", (1, 2, 9, 8), dict(scale_factor=0.6, align_corners=ac))
        add(f"out1_{t}", (2, 2, 5, 4), dict(size=[1, 3], align_corners=ac))
        add(f"in1_{t}", (2, 3, 1, 1), dict(size=[3, 4], align_corners=ac))
        add(f"in1_sf_{t}", (1, 2, 1, 3), dict(scale_factor=2.5, align_corners=ac))
    # scale_factor 1.2 on 3x4 gives 3x4: PyTorch copies the input
    add("same_size_sf_f", (1, 2, 3, 4), dict(scale_factor=1.2, align_corners=False))
    # recompute_scale_factor: the source coordinates from in/out, not 1/scale_factor
    add("recompute_f", (2, 2, 5, 6), dict(scale_factor=[1.7, 2.3], align_corners=False, recompute_scale_factor=True))
    add("recompute_down_f", (1, 2, 9, 8), dict(scale_factor=0.6, align_corners=False, recompute_scale_factor=True))


def main():
    torch.manual_seed(0)
    interp_cases()
    g.write("nn_interp.safetensors", tensors, cases)


if __name__ == "__main__":
    main()
