#!/usr/bin/python3
"""Writes spec/fixtures/interp_kernels.safetensors with PyTorch 1.13, for
spec/nn_interp_kernels_spec.lua: F.interpolate cases the C kernels must get
as torch does: a kept size with a scale factor that is not 1 (bicubic
blends it, the linear modes copy it, nearest-exact may shift it), odd sizes,
downscaling, recompute_scale_factor.

Layout of tools/fixture_lib.py: case "<name>" with the float32 input
"<name>.x", "<name>.out", "<name>.dout" and the float64 gradient "<name>.dx"
of sum(out * dout); opts are lunet's option names.
Run:  /usr/bin/python3 tools/gen_interp_kernels_fixtures.py
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as g  # noqa: E402

torch.manual_seed(0)

CASES = [
    ("bicubic_kept_sf", (2, 3, 6, 6), {"mode": "bicubic", "scale_factor": [1.1, 2.0]}),
    ("bicubic_kept_both", (1, 2, 5, 7), {"mode": "bicubic", "scale_factor": 1.1}),
    ("bicubic_kept_ac", (1, 2, 5, 7), {"mode": "bicubic", "scale_factor": [1.1, 0.6], "align_corners": True}),
    ("bilinear_kept_sf", (2, 2, 6, 5), {"mode": "bilinear", "scale_factor": [1.1, 1.5]}),
    ("linear_kept_sf", (2, 3, 6), {"mode": "linear", "scale_factor": 1.1}),
    ("trilinear_kept_sf", (1, 2, 3, 4, 5), {"mode": "trilinear", "scale_factor": [1.2, 1.1, 0.5]}),
    ("nearest_exact_kept_sf", (1, 2, 9, 10), {"mode": "nearest-exact", "scale_factor": [1.1, 1.05]}),
    ("nearest_odd_down", (3, 2, 13, 11), {"mode": "nearest", "size": [5, 4]}),
    ("nearest_3d_odd", (1, 3, 5, 3, 7), {"mode": "nearest", "scale_factor": [1.5, 2.0, 0.6]}),
    ("bilinear_odd_down_ac", (2, 3, 13, 11), {"mode": "bilinear", "size": [4, 6], "align_corners": True}),
    ("bicubic_odd_down", (2, 3, 13, 11), {"mode": "bicubic", "scale_factor": [0.37, 0.55]}),
    ("bicubic_recompute", (1, 2, 7, 9), {"mode": "bicubic", "scale_factor": 1.3, "recompute_scale_factor": True}),
]

for name, shape, opts in CASES:
    kw = {k: (tuple(v) if isinstance(v, list) else v) for k, v in opts.items()}
    g.add("ik_" + name, "interpolate", opts, lambda x, kw=kw: F.interpolate(x, **kw), {"x": g.f32(*shape)}, ["x"])

g.write("interp_kernels.safetensors", g.tensors, g.cases)
