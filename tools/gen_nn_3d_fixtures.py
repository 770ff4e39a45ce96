#!/usr/bin/python3
"""Writes spec/fixtures/nn_3d.safetensors with PyTorch 1.13, for
spec/nn_3d_spec.lua: conv3d (stride, padding, dilation, anisotropic
kernels, groups, depthwise, 'same' with odd reach, 'valid', a (1, k, k)
kernel, no bias, unbatched, a transposed view), max_pool3d (stride, padding,
dilation, ceil_mode with padding, ties, unbatched), avg_pool3d (padding with
and without count_include_pad, ceil_mode), adaptive_avg_pool3d (uneven, even,
growing bins, None entries, unbatched), BatchNorm3d (training then eval) and
a torch nn.Conv3d's state_dict with its output.

Layout of tools/fixture_lib.py's add: "<name>.x" (and ".weight", ".bias")
float32, ".out", ".dout" and the float64 gradients ".dx" (".dweight",
".dbias"); a case's opts are lunet's option names and values ("view": "t"
runs on x:transpose(4, 5)).
Run:  /usr/bin/python3 tools/gen_nn_3d_fixtures.py
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as g  # noqa: E402

f32 = g.f32


def tv(x, view):
    return x.transpose(3, 4) if view == "t" else x


def conv_cases():
    for name, xs, cin, cout, k, kw, bias, view in [
        ("conv_plain", (2, 3, 5, 6, 7), 3, 4, 3, {}, True, None),
        ("conv_stride_pad", (2, 3, 7, 6, 9), 3, 5, (3, 2, 3), {"stride": (2, 1, 2), "padding": (1, 0, 1)}, True, None),
        ("conv_dilation", (1, 2, 8, 7, 6), 2, 3, 3, {"dilation": (2, 1, 2), "padding": (2, 1, 0)}, True, None),
        ("conv_groups", (2, 4, 6, 5, 7), 4, 6, 3, {"groups": 2, "stride": 2, "padding": 1}, False, None),
        ("conv_depthwise", (1, 3, 5, 5, 5), 3, 6, (3, 1, 3), {"groups": 3, "padding": (1, 0, 1)}, True, None),
        ("conv_same_odd", (2, 2, 6, 5, 7), 2, 3, (4, 3, 2), {"padding": "same"}, True, None),
        ("conv_same_dil", (1, 2, 7, 6, 5), 2, 3, 3, {"padding": "same", "dilation": (2, 3, 1)}, True, None),
        ("conv_valid", (2, 3, 5, 6, 4), 3, 2, (2, 3, 2), {"padding": "valid"}, True, None),
        ("conv_k1", (2, 3, 4, 6, 6), 3, 4, (1, 3, 3), {"padding": (0, 1, 1)}, True, None),
        ("conv_depth_stride", (1, 2, 9, 4, 4), 2, 2, (2, 1, 1), {"stride": (3, 1, 1), "padding": (1, 0, 0)}, True, None),
        ("conv_unbatched", (3, 5, 6, 5), 3, 2, 2, {"stride": 2, "padding": 1}, True, None),
        ("conv_view", (2, 3, 4, 7, 5), 3, 4, 3, {"padding": 1}, True, "t"),
    ]:
        w = f32(cout, cin // kw.get("groups", 1), *((k,) * 3 if isinstance(k, int) else k))
        inputs = {"x": f32(*xs), "weight": w}
        if bias:
            inputs["bias"] = f32(cout)
        opts = {kk: (list(v) if isinstance(v, tuple) else v) for kk, v in kw.items()}
        g.add(name, "conv3d", dict(opts, view=view),
              lambda x, weight, bias=None, kw=kw, view=view: F.conv3d(tv(x, view), weight, bias, **kw),
              inputs, list(inputs))


def listed(kw):
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in kw.items()}


def pool_cases():
    for name, xs, k, kw in [
        ("max_plain", (2, 3, 4, 6, 6), 2, {}),
        ("max_stride_pad", (2, 2, 7, 6, 9), 3, {"stride": 2, "padding": 1}),
        ("max_aniso", (1, 2, 6, 7, 8), (2, 3, 1), {"stride": (1, 2, 3)}),
        ("max_dilation", (1, 2, 7, 8, 6), (2, 3, 2), {"dilation": (2, 1, 2), "padding": (1, 1, 0), "stride": 1}),
        ("max_ceil", (2, 2, 6, 7, 5), 3, {"stride": 2, "ceil_mode": True}),
        ("max_ceil_pad", (1, 2, 8, 9, 7), (3, 4, 3), {"stride": (2, 3, 2), "padding": 1, "ceil_mode": True}),
        ("max_unbatched", (3, 5, 4, 6), 2, {"stride": 1}),
    ]:
        g.add(name, "max_pool3d", dict(listed(kw), kernel_size=list(k) if isinstance(k, tuple) else k),
              lambda x, k=k, kw=kw: F.max_pool3d(x, k, **kw), {"x": f32(*xs)}, ["x"])
    # ties: the first maximum in (d, h, w) order gets the gradient, as torch's kernel
    g.add("max_ties", "max_pool3d", {"kernel_size": 3, "stride": 2},
          lambda x: F.max_pool3d(x, 3, 2), {"x": torch.randint(0, 3, (2, 2, 7, 7, 7)).float()}, ["x"])
    for name, xs, k, kw in [
        ("avg_plain", (2, 3, 4, 6, 6), 2, {}),
        ("avg_pad", (2, 2, 7, 6, 9), 3, {"stride": 2, "padding": 1}),
        ("avg_pad_excl", (2, 2, 7, 6, 9), 3, {"stride": 2, "padding": 1, "count_include_pad": False}),
        ("avg_aniso", (1, 2, 6, 7, 8), (2, 3, 1), {"stride": (1, 2, 3), "padding": (1, 0, 0)}),
        ("avg_ceil", (2, 2, 6, 7, 5), 3, {"stride": 2, "ceil_mode": True}),
        ("avg_ceil_pad", (1, 2, 8, 9, 7), (3, 4, 3), {"stride": (2, 3, 2), "padding": 1, "ceil_mode": True}),
        ("avg_ceil_pad_excl", (1, 2, 8, 9, 7), (3, 4, 3), {"stride": (2, 3, 2), "padding": 1, "ceil_mode": True,
                                                           "count_include_pad": False}),
        ("avg_unbatched", (3, 5, 4, 6), 2, {}),
    ]:
        g.add(name, "avg_pool3d", dict(listed(kw), kernel_size=list(k) if isinstance(k, tuple) else k),
              lambda x, k=k, kw=kw: F.avg_pool3d(x, k, **kw), {"x": f32(*xs)}, ["x"])
    for name, xs, n in [
        ("aavg_uneven", (2, 3, 5, 7, 9), (2, 3, 4)), ("aavg_even", (2, 2, 4, 6, 6), 2),
        ("aavg_grow", (1, 2, 3, 2, 4), (5, 3, 6)), ("aavg_none", (1, 2, 5, 6, 7), (None, 4, None)),
        ("aavg_unbatched", (3, 5, 6, 7), 3), ("aavg_one", (2, 3, 4, 5, 3), 1),
    ]:
        opt = [False if v is None else v for v in n] if isinstance(n, tuple) else n
        g.add(name, "adaptive_avg_pool3d", {"output_size": opt},
              lambda x, n=n: F.adaptive_avg_pool3d(x, n), {"x": f32(*xs)}, ["x"])


def batch_norm_cases():
    m = nn.BatchNorm3d(3, momentum=0.2).double()
    with torch.no_grad():
        m.weight.copy_(torch.randn(3) * 0.5 + 1)
        m.bias.copy_(torch.randn(3))
    extra = {"w": m.weight.detach().float(), "b": m.bias.detach().float()}
    x = f32(4, 3, 3, 4, 5) * 2 + 0.5
    g.add("bn", "batch_norm3d", {"momentum": 0.2}, lambda x: m(x), {"x": x}, ["x"], extra=extra)
    x1 = f32(2, 3, 2, 3, 4) - 1
    m(x1.double())   # a second step of the running statistics
    g.tensors["bn.x1"] = x1
    g.tensors["bn.running_mean"], g.tensors["bn.running_var"] = m.running_mean.clone(), m.running_var.clone()
    x2 = f32(2, 3, 2, 3, 4)
    m.eval()
    g.tensors["bn.x2"], g.tensors["bn.out2"] = x2, m(x2.double()).detach()


def state_dict_case():
    m = nn.Conv3d(4, 6, (3, 2, 3), stride=(2, 1, 1), padding=1, groups=2)
    x = f32(2, 4, 5, 6, 5)
    for k, v in m.state_dict().items():
        g.tensors[f"sd.{k}"] = v.clone()
    g.tensors["sd.x"], g.tensors["sd.out"] = x, m.double()(x.double()).detach()


def main():
    torch.manual_seed(0)
    conv_cases()
    pool_cases()
    batch_norm_cases()
    state_dict_case()
    g.write("nn_3d.safetensors", g.tensors, g.cases)


if __name__ == "__main__":
    main()
