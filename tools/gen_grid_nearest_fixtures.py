"""grid_sample 'nearest' far outside the input (spec/nn_interp_rows_spec.lua):
reflection beyond two spans, exact multiples of the span, ties, inf and NaN,
each padding mode and align_corners, 2-d and 3-d. Float32 throughout (the
rounding to a pixel is float32's, as lunet's kernel computes it).
Writes spec/fixtures/grid_nearest_far.safetensors."""
import math

import torch
import torch.nn.functional as F

import fixture_lib as fl

torch.manual_seed(0)
for sd in (2, 3):
    size = (5, 6) if sd == 2 else (3, 4, 5)
    x = torch.randn((1, 2) + size)
    # far points (up to 9 spans), half-pixel ties, exact span multiples, inf, NaN
    n = 60
    g = torch.rand(n, sd) * 18 - 9
    g[:8] = torch.tensor([-3.0, -1.0, 1.0, 3.0, 5.0, 7.0, 0.5, -0.5]).unsqueeze(1).expand(8, sd)
    g[8, 0], g[9, 0], g[10, 0], g[11, 0] = math.inf, -math.inf, math.nan, 1e30
    g = g.view((1,) + (1,) * (sd - 2) + (n // 4, 4, sd))
    for pad in ("zeros", "border", "reflection"):
        for ac in (False, True):
            name = f"nn{sd}d_{pad}_{'ac' if ac else 'nac'}"
            fl.tensors[name + ".x"] = x
            fl.tensors[name + ".grid"] = g
            fl.tensors[name + ".out"] = F.grid_sample(x, g, mode="nearest", padding_mode=pad, align_corners=ac)
            fl.cases.append({"name": name, "op": "grid_sample",
                             "opts": {"mode": "nearest", "padding_mode": pad, "align_corners": ac}})
fl.write("grid_nearest_far.safetensors", fl.tensors, fl.cases)
