#!/usr/bin/python3
"""Writes spec/fixtures/nn_layers3.safetensors with PyTorch 1.13, for
spec/nn_layers3_spec.lua: conv_transpose1d and conv_transpose3d (stride,
padding, output_padding, groups, dilation, no bias, unbatched, output_padding
past the padding and at or above the stride), adaptive_max_pool3d (uneven,
even and growing bins, None entries, unbatched, with indices), lp_pool1d and
lp_pool2d (norm types 1, 2, 3 and 1.5, stride, ceil_mode, unbatched), a
torch nn.ConvTranspose1d's state_dict with its output, and the two values
(kept, dropped) alpha_dropout and feature_alpha_dropout give ones, for p = 0.2
and 0.7 ("alpha_2.values", "feature_alpha_7.values", ...).

For every case "<name>": the float32 inputs "<name>.x" (and "<name>.weight",
"<name>.bias"); the output "<name>.out" and the gradients "<name>.dx"
("<name>.dweight", "<name>.dbias") of sum(out * "<name>.dout"), computed in
float64 from the same values; adaptive_max_pool3d adds "<name>.indices"
(1-based, lunet's convention). The metadata entry "cases" is a JSON list of
{name, op, args (lunet's option names and values)}.
Run:  /usr/bin/python3 tools/gen_nn_layers3_fixtures.py
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as g  # noqa: E402

tensors, cases = {}, []


def add(name, op, args, fn, inputs):
    """inputs: dict of float32 tensors, x first; fn(**float64 inputs) -> output or (output, indices)"""
    d = {}
    for k, v in inputs.items():
        tensors[f"{name}.{k}"] = v
        d[k] = v.double().requires_grad_(True)
    r = fn(**d)
    out, idx = r if isinstance(r, tuple) else (r, None)
    dout = torch.randn(out.shape)
    grads = torch.autograd.grad(out, list(d.values()), dout.double())
    tensors[f"{name}.out"], tensors[f"{name}.dout"] = out.detach(), dout
    for k, gr in zip(d.keys(), grads):
        tensors[f"{name}.d{k}"] = gr
    if idx is not None:
        tensors[f"{name}.indices"] = idx + 1
    cases.append({"name": name, "op": op, "args": args})


def conv_cases():
    for name, xs, cin, cout, k, kw, bias in [
        ("ct1_plain", (2, 3, 7), 3, 4, 3, {}, True),
        ("ct1_stride_pad_op", (2, 3, 6), 3, 5, 4, {"stride": 3, "padding": 2, "output_padding": 2}, True),
        ("ct1_dilation", (2, 2, 8), 2, 3, 3, {"dilation": 2, "padding": 1}, True),
        ("ct1_op_dil", (1, 2, 5), 2, 2, 3, {"dilation": 3, "output_padding": 2}, True),
        ("ct1_groups", (2, 6, 5), 6, 4, 3, {"groups": 2, "stride": 2, "output_padding": 1}, False),
        ("ct1_depthwise", (1, 4, 6), 4, 8, 5, {"groups": 4, "padding": 2, "stride": 2}, True),
        ("ct1_unbatched", (3, 6), 3, 2, 2, {"stride": 2, "padding": 1}, True),
    ]:
        w = torch.randn(cin, cout // kw.get("groups", 1), k)
        inputs = {"x": torch.randn(xs), "weight": w}
        if bias:
            inputs["bias"] = torch.randn(cout)
        add(name, "conv_transpose1d", kw,
            lambda x, weight, bias=None, kw=kw: F.conv_transpose1d(x, weight, bias, **kw), inputs)
    for name, xs, cin, cout, k, kw, bias in [
        ("ct3_plain", (2, 3, 3, 4, 3), 3, 2, (2, 3, 2), {}, True),
        ("ct3_stride_pad_op", (1, 2, 3, 3, 4), 2, 3, (3, 2, 3),
         {"stride": [2, 3, 2], "padding": [1, 0, 2], "output_padding": [1, 2, 0]}, True),
        ("ct3_op_past_pad", (1, 2, 3, 2, 2), 2, 2, 2, {"stride": 2, "output_padding": 1}, True),
        ("ct3_dilation_groups", (2, 4, 3, 3, 3), 4, 6, (2, 2, 3),
         {"dilation": [2, 1, 2], "groups": 2, "padding": 1}, False),
        ("ct3_op_dil", (1, 2, 2, 3, 2), 2, 2, 2, {"dilation": 3, "output_padding": [2, 1, 0]}, True),
        ("ct3_unbatched", (3, 2, 3, 3), 3, 2, 2, {"stride": [1, 2, 2], "padding": [1, 0, 1]}, True),
    ]:
        ks = k if isinstance(k, tuple) else (k, k, k)
        w = torch.randn(cin, cout // kw.get("groups", 1), *ks)
        inputs = {"x": torch.randn(xs), "weight": w}
        if bias:
            inputs["bias"] = torch.randn(cout)
        tkw = {a: tuple(v) if isinstance(v, list) else v for a, v in kw.items()}
        add(name, "conv_transpose3d", kw,
            lambda x, weight, bias=None, tkw=tkw: F.conv_transpose3d(x, weight, bias, **tkw), inputs)


def pool_cases():
    for name, xs, o in [
        ("amax3_uneven", (2, 2, 5, 7, 6), [2, 3, 4]), ("amax3_even", (1, 3, 4, 6, 4), [2, 3, 2]),
        ("amax3_grow", (1, 2, 2, 3, 2), [3, 4, 3]), ("amax3_none", (2, 2, 4, 5, 3), [None, 2, None]),
        ("amax3_unbatched", (2, 5, 4, 3), [3, 2, 2]), ("amax3_one", (2, 3, 3, 4, 5), [1, 1, 1]),
    ]:
        args = {"output_size": [v if v is not None else False for v in o]}
        add(name, "adaptive_max_pool3d", args,
            lambda x, o=o: F.adaptive_max_pool3d(x, tuple(o), return_indices=True), {"x": torch.randn(xs)})
    for name, xs, p, k, kw, pos in [
        ("lp1_p2", (2, 3, 10), 2, 3, {}, False),
        ("lp1_p1_signed", (2, 3, 9), 1, 3, {"stride": 2}, False),
        ("lp1_p3_ceil", (2, 2, 10), 3, 3, {"stride": 2, "ceil_mode": True}, True),
        ("lp1_p15_unbatched", (3, 8), 1.5, 2, {"stride": 1}, True),
    ]:
        x = torch.randn(xs).abs() + 0.1 if pos else torch.randn(xs)
        add(name, "lp_pool1d", dict(kw, norm_type=p, kernel_size=k),
            lambda x, p=p, k=k, kw=kw: F.lp_pool1d(x, p, k, **kw), {"x": x})
    for name, xs, p, k, kw, pos in [
        ("lp2_p2", (2, 3, 6, 7), 2, 2, {}, False),
        ("lp2_rect_stride", (1, 2, 7, 8), 2, [2, 3], {"stride": [2, 1]}, False),
        ("lp2_p3_ceil", (2, 2, 7, 6), 3, 3, {"stride": 2, "ceil_mode": True}, True),
        ("lp2_p1_signed", (1, 2, 5, 6), 1, 2, {"stride": 1}, False),
        ("lp2_unbatched", (3, 6, 5), 1.5, [3, 2], {}, True),
    ]:
        x = torch.randn(xs).abs() + 0.1 if pos else torch.randn(xs)
        tk = tuple(k) if isinstance(k, list) else k
        tkw = {a: tuple(v) if isinstance(v, list) else v for a, v in kw.items()}
        add(name, "lp_pool2d", dict(kw, norm_type=p, kernel_size=k),
            lambda x, p=p, tk=tk, tkw=tkw: F.lp_pool2d(x, p, tk, **tkw), {"x": x})


def state_dict_case():
    m = nn.ConvTranspose1d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2)
    x = torch.randn(2, 4, 5)
    for k, v in m.state_dict().items():
        tensors[f"sd.{k}"] = v.clone()
    tensors["sd.x"], tensors["sd.out"] = x, m.double()(x.double()).detach()


def dropout_values():
    """the two values alpha_dropout takes on ones (kept, dropped), for p = 0.2 and 0.7"""
    for p in (0.2, 0.7):
        for fn, x in (("alpha", torch.ones(4000, dtype=torch.float64)),
                      ("feature_alpha", torch.ones(400, 10, 2, dtype=torch.float64))):
            y = getattr(F, fn + "_dropout")(x, p, True)
            v = torch.unique(y)
            tensors[f"{fn}_{int(p * 10)}.values"] = v.flip(0)   # (kept first: it is the larger)


def main():
    torch.manual_seed(0)
    dropout_values()
    conv_cases()
    pool_cases()
    state_dict_case()
    g.write("nn_layers3.safetensors", tensors, cases)


if __name__ == "__main__":
    main()
