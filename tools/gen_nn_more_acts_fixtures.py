#!/usr/bin/python3
"""Writes spec/fixtures/nn_more_acts.safetensors with PyTorch 1.13, for
spec/nn_more_acts_spec.lua: outputs and input gradients of the activations
hardtanh, selu, celu, logsigmoid, softsign, tanhshrink, threshold, glu,
softmin, hardshrink and softshrink, with values at and just around their
kinks and thresholds (hardtanh's bounds, 0 for selu/celu, threshold itself,
+-lambd), large magnitudes (logsigmoid at +-100, softmin over +-100, selu at
-100) and, for hardtanh, selu, celu and threshold, PyTorch's in-place forms
(on a non-leaf: x * 1).

Same layout as tools/gen_nn_fixtures.py (fixture_lib's save/add): for each
case "<name>", the float32 input "<name>.x", the output "<name>.out" and the
gradient "<name>.dx" of sum(out * <name>.dout), computed in float64 from the
same values. The metadata entry "cases" is a JSON list of {name, op, opts}
(lunet's options: dims 1-based; opts.inplace for the in-place cases).
Run:  /usr/bin/python3 tools/gen_nn_more_acts_fixtures.py
"""
import os
import sys
import warnings

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as g  # noqa: E402

warnings.filterwarnings("ignore")
f32, add = g.f32, g.add


def with_values(values, *shape, scale=3.0):
    """a random float32 tensor whose first elements are values"""
    x = f32(*shape, scale=scale)
    flat = x.view(-1)
    k = min(len(values), flat.numel())
    flat[:k] = torch.tensor(values[:k], dtype=torch.float32)
    return x


def around(*points, eps=1e-3):
    """each point, and just below and above it"""
    out = []
    for p in points:
        out += [p, p - eps, p + eps]
    return out


BIG = [100.0, -100.0, 30.0, -30.0, 20.0, -20.0, 19.5, -19.5, 25.0, -25.0]


def elementwise_cases():
    cases = [
        # name, op, lunet opts, torch fn, kinks
        ("hardtanh", "hardtanh", {}, lambda x: F.hardtanh(x), around(-1.0, 1.0) + [0.0]),
        ("hardtanh_m2_3", "hardtanh", dict(min_val=-2, max_val=3), lambda x: F.hardtanh(x, -2.0, 3.0),
         around(-2.0, 3.0)),
        ("hardtanh_0_6", "hardtanh", dict(min_val=0, max_val=6), lambda x: F.hardtanh(x, 0.0, 6.0), around(0.0, 6.0)),
        ("hardtanh_equal", "hardtanh", dict(min_val=0.5, max_val=0.5), lambda x: F.hardtanh(x, 0.5, 0.5),
         around(0.5)),
        ("selu", "selu", {}, lambda x: F.selu(x), around(0.0) + BIG),
        ("celu", "celu", {}, lambda x: F.celu(x), around(0.0) + BIG),
        ("celu_half", "celu", dict(alpha=0.5), lambda x: F.celu(x, 0.5), around(0.0) + BIG),
        ("celu_2", "celu", dict(alpha=2), lambda x: F.celu(x, 2.0), around(0.0) + BIG),
        ("logsigmoid", "logsigmoid", {}, lambda x: F.logsigmoid(x), around(0.0) + BIG),
        ("softsign", "softsign", {}, lambda x: F.softsign(x), around(0.0) + [1e4, -1e4, 1.0, -1.0]),
        ("tanhshrink", "tanhshrink", {}, lambda x: F.tanhshrink(x), around(0.0) + BIG),
        ("threshold", "threshold", dict(threshold=0.5, value=-2), lambda x: F.threshold(x, 0.5, -2.0),
         around(0.5) + [0.0]),
        ("threshold_relu", "threshold", dict(threshold=0, value=0), lambda x: F.threshold(x, 0.0, 0.0),
         around(0.0)),
        ("threshold_m1_10", "threshold", dict(threshold=-1, value=10), lambda x: F.threshold(x, -1.0, 10.0),
         around(-1.0) + [10.0]),
        ("hardshrink", "hardshrink", {}, lambda x: F.hardshrink(x), around(-0.5, 0.5) + [0.0]),
        ("hardshrink_0", "hardshrink", dict(lambd=0), lambda x: F.hardshrink(x, 0.0), around(0.0)),
        ("hardshrink_2", "hardshrink", dict(lambd=2), lambda x: F.hardshrink(x, 2.0), around(-2.0, 2.0)),
        ("softshrink", "softshrink", {}, lambda x: F.softshrink(x), around(-0.5, 0.5) + [0.0]),
        ("softshrink_0", "softshrink", dict(lambd=0), lambda x: F.softshrink(x, 0.0), around(0.0)),
        ("softshrink_1_5", "softshrink", dict(lambd=1.5), lambda x: F.softshrink(x, 1.5), around(-1.5, 1.5)),
    ]
    for name, op, opts, fn, kinks in cases:
        add(name, op, opts, fn, {"x": with_values(kinks, 4, 8)}, ["x"])
    # in place, as PyTorch runs it on a tensor with a history
    for name, op, opts, fn, kinks in [
        ("hardtanh_inplace", "hardtanh", dict(min_val=-2, max_val=3),
         lambda x: F.hardtanh(x * 1, -2.0, 3.0, inplace=True), around(-2.0, 3.0)),
        ("selu_inplace", "selu", {}, lambda x: F.selu(x * 1, inplace=True), around(0.0) + BIG),
        ("celu_inplace", "celu", dict(alpha=0.5), lambda x: F.celu(x * 1, 0.5, inplace=True), around(0.0) + BIG),
        ("threshold_inplace", "threshold", dict(threshold=0.5, value=-2),
         lambda x: F.threshold(x * 1, 0.5, -2.0, inplace=True), around(0.5) + [0.0]),
        # (a value above the threshold: what the backward of the overwritten tensor compares)
        ("threshold_inplace_up", "threshold", dict(threshold=0.5, value=2),
         lambda x: F.threshold(x * 1, 0.5, 2.0, inplace=True), around(0.5) + [0.0]),
    ]:
        add(name, op, dict(opts, inplace=True), fn, {"x": with_values(kinks, 4, 8)}, ["x"])


def dim_cases():
    # glu: lunet's dim is torch's + 1 (negative dims the same)
    for name, shape, dim in [("glu", (4, 6), -1), ("glu_dim1", (4, 3), 1), ("glu_3d_dim2", (3, 4, 5), 2),
                             ("glu_4d_dim2", (2, 4, 3, 3), 2), ("glu_1d", (8,), 1), ("glu_neg2", (2, 6, 3), -2)]:
        tdim = dim - 1 if dim > 0 else dim
        add(name, "glu", dict(dim=dim), lambda x, d=tdim: F.glu(x, d),
            {"x": with_values([0.0, 30.0, -30.0, 100.0, -100.0], *shape)}, ["x"])
    for name, shape, dim, scale in [("softmin", (4, 5), 2, 2.0), ("softmin_dim1", (3, 2, 4), 1, 2.0),
                                    ("softmin_big", (3, 6), -1, 100.0), ("softmin_1d", (7,), 1, 1.0)]:
        tdim = dim - 1 if dim > 0 else dim
        add(name, "softmin", dict(dim=dim), lambda x, d=tdim: F.softmin(x, d),
            {"x": with_values([1000.0, -1000.0], *shape, scale=scale)}, ["x"])


def main():
    torch.manual_seed(0)
    elementwise_cases()
    dim_cases()
    g.write("nn_more_acts.safetensors", g.tensors, g.cases)


if __name__ == "__main__":
    main()
