#!/usr/bin/python3
"""Writes spec/fixtures/nn_more_layers.safetensors with PyTorch 1.13, for
spec/nn_more_layers_spec.lua: AdaptiveMaxPool2d (uneven, even and growing
bins, a None entry, ties, NaNs, 3-d input, a transposed view), PixelShuffle and
PixelUnshuffle (3-d, 4-d, 5-d, a view), Unflatten and InstanceNorm2d
(affine, tracked running statistics in training then eval, 3-d input).

For every case "<name>": the float32 input "<name>.x" (stored as is; a case
with view "t" runs on x:transpose(3, 4) in the spec, x.transpose(2, 3) here),
the output "<name>.out" and input gradient "<name>.dx" of sum(out *
"<name>.dout"), computed in float64 from the same values; AdaptiveMaxPool2d
adds "<name>.indices" (stored 1-based, lunet's convention), InstanceNorm2d
its parameters ("<name>.weight", "<name>.bias", set before the run) and,
when tracked, the running statistics after the training step and the eval
output on "<name>.x2" ("<name>.running_mean", "<name>.running_var",
"<name>.out2"). The metadata entry "cases" is a JSON list of {name, op,
args (lunet's: dims 1-based, None as false), view}.
Same writer as tools/gen_nn_fixtures.py (fixture_lib's save).
Run:  /usr/bin/python3 tools/gen_nn_more_layers_fixtures.py
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as g  # noqa: E402

tensors, cases = {}, []


def add(name, op, args, fn, x, view=None, extra=None):
    """fn(float64 input) -> output or (output, indices)"""
    tensors[f"{name}.x"] = x
    xd = x.double().requires_grad_(True)
    r = fn(xd.transpose(2, 3) if view == "t" else xd)
    out, idx = r if isinstance(r, tuple) else (r, None)
    dout = torch.randn(out.shape)
    (dx,) = torch.autograd.grad(out, [xd], dout.double())
    tensors[f"{name}.out"], tensors[f"{name}.dout"], tensors[f"{name}.dx"] = out.detach(), dout, dx
    if idx is not None:
        tensors[f"{name}.indices"] = idx + 1
    for k, v in (extra or {}).items():
        tensors[f"{name}.{k}"] = v
    cases.append({"name": name, "op": op, "args": args, "view": view})


def lua_size(s):
    return [False if v is None else v for v in s] if isinstance(s, tuple) else s


def adaptive_max_cases():
    for name, shape, size, view in [
        ("amp_uneven", (2, 3, 7, 9), (3, 4), None),
        ("amp_even", (2, 2, 8, 6), 2, None),
        ("amp_grow", (1, 2, 3, 2), (5, 4), None),
        ("amp_none", (2, 2, 5, 7), (None, 3), None),
        ("amp_3d", (3, 5, 7), (2, 5), None),
        ("amp_view", (2, 3, 9, 7), (4, 3), "t"),
        ("amp_one", (2, 3, 5, 6), 1, None),
    ]:
        add(name, "adaptive_max_pool2d", {"output_size": lua_size(size)},
            lambda x, size=size: F.adaptive_max_pool2d(x, size, return_indices=True), torch.randn(shape), view)
    # ties: integer values, many equal (torch's choice among them: the first in row-major order)
    x = torch.randint(0, 3, (2, 2, 7, 5)).float()
    add("amp_ties", "adaptive_max_pool2d", {"output_size": [3, 4]},
        lambda x: F.adaptive_max_pool2d(x, (3, 4), return_indices=True), x)
    # NaNs: a NaN wins its bin (the last one in row-major order, as torch's kernel)
    x = torch.randn(1, 2, 7, 5)
    x.view(-1)[torch.tensor([3, 4, 11, 12, 13, 30, 31, 44, 69])] = float("nan")
    add("amp_nan", "adaptive_max_pool2d", {"output_size": [3, 4]},
        lambda x: F.adaptive_max_pool2d(x, (3, 4), return_indices=True), x)


def shuffle_cases():
    for name, op, shape, r, view in [
        ("ps_4d", "pixel_shuffle", (2, 8, 3, 2), 2, None),
        ("ps_3d", "pixel_shuffle", (9, 2, 3), 3, None),
        ("ps_5d", "pixel_shuffle", (2, 2, 4, 2, 3), 2, None),
        ("ps_view", "pixel_shuffle", (2, 8, 2, 3), 2, "t"),
        ("pu_4d", "pixel_unshuffle", (2, 2, 6, 4), 2, None),
        ("pu_3d", "pixel_unshuffle", (1, 6, 9), 3, None),
        ("pu_view", "pixel_unshuffle", (1, 2, 4, 6), 2, "t"),
    ]:
        add(name, op, {"factor": r}, lambda x, op=op, r=r: getattr(F, op)(x, r), torch.randn(shape), view)


def unflatten_cases():
    add("uf_mid", "unflatten", {"dim": 2, "sizes": [3, 4]}, lambda x: nn.Unflatten(1, (3, 4))(x), torch.randn(2, 12, 3))
    add("uf_neg", "unflatten", {"dim": -1, "sizes": [2, -1]}, lambda x: nn.Unflatten(-1, (2, -1))(x), torch.randn(2, 3, 6))


def instance_norm_cases():
    for name, shape, kw in [
        ("in_plain", (2, 3, 4, 5), {}),
        ("in_affine", (2, 3, 4, 5), {"affine": True, "eps": 1e-3}),
        ("in_3d", (3, 4, 5), {"affine": True}),
        ("in_track", (3, 2, 3, 4), {"affine": True, "track_running_stats": True, "momentum": 0.3}),
    ]:
        m = nn.InstanceNorm2d(shape[-3], **kw).double()
        extra = {}
        if m.affine:
            with torch.no_grad():
                m.weight.copy_(torch.randn(shape[-3]) * 0.5 + 1)
                m.bias.copy_(torch.randn(shape[-3]))
            extra["weight"], extra["bias"] = m.weight.detach().float(), m.bias.detach().float()
        x = torch.randn(shape) * 2 + 0.5
        add(name, "instance_norm", {k: v for k, v in kw.items()}, m, x, extra=extra)
        if m.track_running_stats:
            tensors[f"{name}.running_mean"] = m.running_mean.clone()
            tensors[f"{name}.running_var"] = m.running_var.clone()
            x2 = torch.randn(shape)
            m.eval()
            tensors[f"{name}.x2"], tensors[f"{name}.out2"] = x2, m(x2.double()).detach()


def main():
    torch.manual_seed(0)
    adaptive_max_cases()
    shuffle_cases()
    unflatten_cases()
    instance_norm_cases()
    g.write("nn_more_layers.safetensors", tensors, cases)


if __name__ == "__main__":
    main()
