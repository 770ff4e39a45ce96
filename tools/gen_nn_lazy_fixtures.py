#!/usr/bin/python3
"""Writes spec/fixtures/nn_lazy.safetensors with PyTorch 1.13, for
spec/nn_lazy_spec.lua: each lazy module (LazyLinear, LazyConv1d/2d/3d,
LazyConvTranspose1d/2d/3d, LazyBatchNorm1d/2d/3d, LazyInstanceNorm1d/2d/3d)
materialized by a first forward on "<name>.x"; its parameters after that
("<name>.weight", "<name>.bias", the initial values, float32), then the
output "<name>.out" of a forward in training mode and the float64 gradients
"<name>.dx", "<name>.dweight", "<name>.dbias" of sum(out * "<name>.dout").
Case {name, op (the lunet class), args (lunet's constructor arguments, an
options table last), shapes (torch's state_dict shapes), fields (the
materialized in_features / in_channels / num_features)}.
Also "sd.*": a lazy torch model Sequential(LazyConv2d(4, 3), ReLU, Flatten,
LazyLinear(5)) after a forward: its state_dict "sd.<key>", input "sd.x" and
output "sd.out", for loading into an unmaterialized lunet model.
Run:  /usr/bin/python3 tools/gen_nn_lazy_fixtures.py
"""
import os
import sys
import warnings

import torch
import torch.nn as nn
from torch.nn.utils.stateless import functional_call

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as g  # noqa: E402

warnings.filterwarnings("ignore", message="Lazy modules")
torch.manual_seed(0)
tensors, cases = {}, []

# name, class, torch args, torch kwargs, lunet args, input shape, inferred field
CASES = [
    ("linear", "LazyLinear", (3,), {}, [3], (2, 5), "in_features"),
    ("linear_nobias_3d", "LazyLinear", (4, False), {}, [4, False], (2, 3, 6), "in_features"),
    ("conv1d", "LazyConv1d", (4, 3), {"stride": 2, "padding": 1}, [4, 3, {"stride": 2, "padding": 1}], (2, 3, 9),
     "in_channels"),
    ("conv2d_groups", "LazyConv2d", (4, 3), {"padding": 1, "groups": 2}, [4, 3, {"padding": 1, "groups": 2}],
     (2, 6, 5, 5), "in_channels"),
    ("conv2d_unbatched", "LazyConv2d", (2, (2, 3)), {}, [2, [2, 3]], (3, 5, 6), "in_channels"),
    ("conv3d", "LazyConv3d", (2, 2), {"bias": False}, [2, 2, {"bias": False}], (1, 3, 4, 4, 4), "in_channels"),
    ("convt1d", "LazyConvTranspose1d", (3, 4), {"stride": 2, "padding": 1, "output_padding": 1},
     [3, 4, {"stride": 2, "padding": 1, "output_padding": 1}], (2, 2, 5), "in_channels"),
    ("convt2d_groups", "LazyConvTranspose2d", (4, 3), {"stride": 2, "groups": 2}, [4, 3, {"stride": 2, "groups": 2}],
     (1, 4, 3, 3), "in_channels"),
    ("convt3d", "LazyConvTranspose3d", (2, 2), {"stride": 2}, [2, 2, {"stride": 2}], (1, 3, 2, 3, 2), "in_channels"),
    ("bn1d_2d", "LazyBatchNorm1d", (), {}, [], (4, 3), "num_features"),
    ("bn1d_3d", "LazyBatchNorm1d", (), {"momentum": 0.2}, [{"momentum": 0.2}], (2, 3, 5), "num_features"),
    ("bn2d", "LazyBatchNorm2d", (1e-3,), {}, [1e-3], (2, 3, 4, 4), "num_features"),
    ("bn3d_noaffine", "LazyBatchNorm3d", (), {"affine": False}, [{"affine": False}], (2, 2, 2, 3, 3),
     "num_features"),
    ("in1d_affine", "LazyInstanceNorm1d", (), {"affine": True}, [{"affine": True}], (2, 3, 6), "num_features"),
    ("in2d_unbatched", "LazyInstanceNorm2d", (), {}, [], (3, 4, 4), "num_features"),
    ("in3d_tracked", "LazyInstanceNorm3d", (), {"affine": True, "track_running_stats": True},
     [{"affine": True, "track_running_stats": True}], (1, 2, 3, 3, 3), "num_features"),
]


def lazy_case(name, cls, args, kwargs, largs, shape, field):
    m = getattr(nn, cls)(*args, **kwargs)
    x = g.f32(*shape)
    # (torch 1.13's lazy instance norm reads num_features off dim 1 of an
    # unbatched input too, a bug lunet does not copy: a batch of one here)
    fix = name == "in2d_unbatched"
    with torch.no_grad():
        m(x.unsqueeze(0) if fix else x)   # the dry run: materializes
    params = {k: v.detach().clone() for k, v in m.named_parameters()}
    tensors[f"{name}.x"] = x
    for k, v in params.items():
        tensors[f"{name}.{k}"] = v
    m = m.double()
    xd = x.double().requires_grad_(True)
    pd = {k: v.double().requires_grad_(True) for k, v in params.items()}
    out = functional_call(m, pd, (xd.unsqueeze(0) if fix else xd,))
    out = out.squeeze(0) if fix else out
    dout = g.f32(*out.shape)
    grads = torch.autograd.grad(out, [xd] + list(pd.values()), dout.double())
    tensors[f"{name}.out"], tensors[f"{name}.dout"] = out.detach(), dout
    for k, gr in zip(["x"] + list(pd.keys()), grads):
        tensors[f"{name}.d{k}"] = gr
    cases.append({"name": name, "op": cls, "args": largs, "field": field, "size": getattr(m, field),
                  "shapes": {k: list(v.shape) for k, v in m.state_dict().items()}})


for c in CASES:
    lazy_case(*c)

model = nn.Sequential(nn.LazyConv2d(4, 3), nn.ReLU(), nn.Flatten(), nn.LazyLinear(5))
x = g.f32(2, 3, 6, 6)
with torch.no_grad():
    out = model(x)
for k, v in model.state_dict().items():
    tensors[f"sd.{k}"] = v
tensors["sd.x"], tensors["sd.out"] = x, out

g.write("nn_lazy.safetensors", tensors, cases)
