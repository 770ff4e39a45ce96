#!/usr/bin/python3
"""Writes spec/fixtures/nn_1d.safetensors with PyTorch 1.13, for
spec/nn_1d_layers_spec.lua: conv1d (stride, padding, 'same' with odd and
even reach, 'valid', dilation, groups, no bias, unbatched, a transposed
view), max_pool1d (stride, padding, dilation, ceil_mode, ties, unbatched),
avg_pool1d (padding with and without count_include_pad, ceil_mode),
adaptive_avg_pool1d and adaptive_max_pool1d (uneven, even and growing bins,
unbatched), BatchNorm1d on (N, C, L) input (training then eval), and a
torch nn.Conv1d's state_dict with its output.

For every case "<name>": the float32 inputs "<name>.x" (and "<name>.weight",
"<name>.bias"), stored as is (a case with view "t" runs on x:transpose(2, 3)
in the spec, x.transpose(1, 2) here, x stored (N, L, C)); the output
"<name>.out" and the gradients "<name>.dx" ("<name>.dweight", "<name>.dbias")
of sum(out * "<name>.dout"), computed in float64 from the same values; the
max pools add "<name>.indices" (stored 1-based, lunet's convention). The
metadata entry "cases" is a JSON list of {name, op, args (lunet's option
names and values), view}.
Run:  /usr/bin/python3 tools/gen_nn_1d_fixtures.py
"""
import json
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as g  # noqa: E402

tensors, cases = {}, []


def add(name, op, args, fn, inputs, view=None, extra=None):
    """inputs: dict of float32 tensors, x first; fn(**float64 inputs) -> output or (output, indices)"""
    d = {}
    for k, v in inputs.items():
        tensors[f"{name}.{k}"] = v
        d[k] = v.double().requires_grad_(True)
    call = dict(d)
    if view == "t":
        call["x"] = d["x"].transpose(1, 2)
    r = fn(**call)
    out, idx = r if isinstance(r, tuple) else (r, None)
    dout = torch.randn(out.shape)
    grads = torch.autograd.grad(out, list(d.values()), dout.double())
    tensors[f"{name}.out"], tensors[f"{name}.dout"] = out.detach(), dout
    for k, gr in zip(d.keys(), grads):
        tensors[f"{name}.d{k}"] = gr
    if idx is not None:
        tensors[f"{name}.indices"] = idx + 1
    for k, v in (extra or {}).items():
        tensors[f"{name}.{k}"] = v
    cases.append({"name": name, "op": op, "args": args, "view": view})


def conv_cases():
    for name, xs, cin, cout, k, kw, bias, view in [
        ("conv_plain", (2, 3, 11), 3, 4, 3, {}, True, None),
        ("conv_stride_pad", (2, 3, 12), 3, 5, 4, {"stride": 3, "padding": 2}, True, None),
        ("conv_dilation", (2, 2, 13), 2, 3, 3, {"dilation": 2, "padding": 1}, True, None),
        ("conv_groups", (2, 6, 9), 6, 4, 3, {"groups": 2, "stride": 2}, False, None),
        ("conv_depthwise", (1, 4, 8), 4, 8, 5, {"groups": 4, "padding": 2}, True, None),
        ("conv_same_odd", (2, 3, 10), 3, 2, 4, {"padding": "same"}, True, None),
        ("conv_same_dil", (2, 3, 10), 3, 2, 3, {"padding": "same", "dilation": 3}, True, None),
        ("conv_valid", (2, 3, 10), 3, 2, 4, {"padding": "valid"}, True, None),
        ("conv_unbatched", (3, 9), 3, 2, 2, {"stride": 2, "padding": 1}, True, None),
        ("conv_view", (2, 10, 3), 3, 4, 3, {"padding": 1}, True, "t"),
    ]:
        w = torch.randn(cout, cin // kw.get("groups", 1), k)
        inputs = {"x": torch.randn(xs), "weight": w}
        if bias:
            inputs["bias"] = torch.randn(cout)
        add(name, "conv1d", kw, lambda x, weight, bias=None, kw=kw: F.conv1d(x, weight, bias, **kw), inputs, view)


def pool_cases():
    for name, xs, k, kw in [
        ("max_plain", (2, 3, 10), 3, {}),
        ("max_stride_pad", (2, 3, 11), 4, {"stride": 2, "padding": 2}),
        ("max_dilation", (2, 2, 13), 3, {"dilation": 2, "stride": 1, "padding": 1}),
        ("max_ceil", (2, 2, 10), 3, {"stride": 2, "ceil_mode": True}),
        ("max_ceil_pad", (1, 2, 9), 4, {"stride": 3, "padding": 1, "ceil_mode": True}),
        ("max_unbatched", (3, 9), 2, {"stride": 1}),
    ]:
        add(name, "max_pool1d", dict(kw, kernel_size=k),
            lambda x, k=k, kw=kw: F.max_pool1d(x, k, return_indices=True, **kw), {"x": torch.randn(xs)})
    # ties: the first maximum in the window, as torch's kernel
    x = torch.randint(0, 3, (2, 2, 11)).float()
    add("max_ties", "max_pool1d", {"kernel_size": 3, "stride": 2},
        lambda x: F.max_pool1d(x, 3, 2, return_indices=True), {"x": x})
    for name, xs, k, kw in [
        ("avg_plain", (2, 3, 10), 3, {}),
        ("avg_pad", (2, 3, 11), 4, {"stride": 2, "padding": 2}),
        ("avg_pad_excl", (2, 3, 11), 4, {"stride": 2, "padding": 2, "count_include_pad": False}),
        ("avg_ceil", (2, 2, 10), 3, {"stride": 2, "ceil_mode": True}),
        ("avg_ceil_pad", (1, 2, 9), 4, {"stride": 3, "padding": 1, "ceil_mode": True}),
        ("avg_ceil_pad_excl", (1, 2, 9), 4, {"stride": 3, "padding": 1, "ceil_mode": True,
                                             "count_include_pad": False}),
        ("avg_unbatched", (3, 9), 2, {}),
    ]:
        add(name, "avg_pool1d", dict(kw, kernel_size=k), lambda x, k=k, kw=kw: F.avg_pool1d(x, k, **kw),
            {"x": torch.randn(xs)})
    for name, xs, n in [
        ("aavg_uneven", (2, 3, 10), 4), ("aavg_even", (2, 2, 12), 3), ("aavg_grow", (1, 2, 3), 5),
        ("aavg_unbatched", (3, 7), 3), ("aavg_one", (2, 3, 5), 1),
    ]:
        add(name, "adaptive_avg_pool1d", {"output_size": n}, lambda x, n=n: F.adaptive_avg_pool1d(x, n),
            {"x": torch.randn(xs)})
    for name, xs, n in [
        ("amax_uneven", (2, 3, 10), 4), ("amax_even", (2, 2, 12), 3), ("amax_grow", (1, 2, 3), 5),
        ("amax_unbatched", (3, 7), 3), ("amax_one", (2, 3, 5), 1),
    ]:
        add(name, "adaptive_max_pool1d", {"output_size": n},
            lambda x, n=n: F.adaptive_max_pool1d(x, n, return_indices=True), {"x": torch.randn(xs)})


def batch_norm_cases():
    m = nn.BatchNorm1d(3, momentum=0.2).double()
    with torch.no_grad():
        m.weight.copy_(torch.randn(3) * 0.5 + 1)
        m.bias.copy_(torch.randn(3))
    extra = {"w": m.weight.detach().float(), "b": m.bias.detach().float()}
    x = torch.randn(4, 3, 5) * 2 + 0.5
    add("bn_3d", "batch_norm1d", {"momentum": 0.2}, lambda x: m(x), {"x": x}, extra=extra)
    tensors["bn_3d.running_mean"], tensors["bn_3d.running_var"] = m.running_mean.clone(), m.running_var.clone()
    x2 = torch.randn(4, 3, 5)
    m.eval()
    tensors["bn_3d.x2"], tensors["bn_3d.out2"] = x2, m(x2.double()).detach()


def state_dict_case():
    m = nn.Conv1d(4, 6, 3, stride=2, padding=1, groups=2)
    x = torch.randn(2, 4, 9)
    for k, v in m.state_dict().items():
        tensors[f"sd.{k}"] = v.clone()
    tensors["sd.x"], tensors["sd.out"] = x, m.double()(x.double()).detach()


def main():
    torch.manual_seed(0)
    conv_cases()
    pool_cases()
    batch_norm_cases()
    state_dict_case()
    here = os.path.dirname(os.path.abspath(__file__))
    out = os.path.join(here, "..", "spec", "fixtures", "nn_1d.safetensors")
    g.save(out, tensors, {"cases": json.dumps(cases), "torch": torch.__version__})
    print(f"wrote {out}: {len(cases)} cases, {len(tensors)} tensors, {os.path.getsize(out)} bytes")


if __name__ == "__main__":
    main()
