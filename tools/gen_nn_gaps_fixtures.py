#!/usr/bin/python3
"""Writes spec/fixtures/nn_gaps.safetensors with PyTorch 1.13, for
spec/nn_gaps_spec.lua: max_unpool1d/2d/3d (from max_pool's output and
indices, default and given output_size, unbatched), fractional_max_pool2d/3d
with _random_samples (output_size and output_ratio, unbatched, output 1),
rrelu in eval, pdist (p = 0, 0.5, 1, 2, 3, inf; repeated rows), the 3-d
paddings, Softmax2d, CrossMapLRN2d (sizes 3, 4, 5: values only, torch's
backward is not its forward's derivative), upsample_nearest /
upsample_bilinear, and an AdaptiveLogSoftmaxWithLoss (its state_dict, the
output, loss, log_prob, predict and the float64 gradients).

fixture_lib.add's layout: for a case "<name>", float32 inputs "<name>.<k>"
(indices int64, stored 1-based, lunet's convention), the output
"<name>.out" and the gradients "<name>.d<k>" of sum(out * <name>.dout) in
float64; max_unpool's and fractional's "<name>.indices" 1-based. The
metadata entry "cases" is a JSON list of {name, op, opts}.
Run:  /usr/bin/python3 tools/gen_nn_gaps_fixtures.py
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as g  # noqa: E402

torch.manual_seed(0)
f32 = g.f32


def unpool_cases():
    for name, nd, shape, k, s, p, osz, unb in [
        ("unpool1d", 1, (2, 3, 8), 2, None, 0, None, False),
        ("unpool1d_os", 1, (2, 3, 9), 3, 2, 1, [10], False),
        ("unpool2d", 2, (2, 2, 6, 6), 2, None, 0, None, False),
        ("unpool2d_os", 2, (2, 2, 7, 7), 3, 2, 1, [2, 2, 7, 8], False),
        ("unpool2d_unb", 2, (3, 5, 4), [2, 1], [2, 1], 0, None, True),
        ("unpool3d", 3, (1, 2, 4, 4, 4), 2, None, 0, None, False),
        ("unpool3d_os", 3, (2, 1, 5, 4, 5), 2, 2, 0, [5, 4, 5], False),
    ]:
        pool = getattr(F, f"max_pool{nd}d")
        x = f32(*shape)
        y, idx = pool(x, k, s, p, return_indices=True)
        unpool = getattr(F, f"max_unpool{nd}d")
        g.add(name, f"max_unpool{nd}d", {"kernel_size": k, "stride": s, "padding": p, "output_size": osz},
              lambda x, idx: unpool(x, idx - 1, k, s, p, osz), {"x": y, "idx": idx + 1}, ["x"])


def fractional_cases():
    for name, nd, shape, k, osz, ratio in [
        ("frac2d", 2, (2, 3, 9, 8), 2, [4, 5], None),
        ("frac2d_ratio", 2, (2, 2, 10, 9), [3, 2], None, [0.5, 0.7]),
        ("frac2d_unb", 2, (3, 7, 7), 2, 3, None),
        ("frac2d_one", 2, (1, 2, 5, 6), 3, [1, 2], None),
        ("frac3d", 3, (2, 2, 7, 6, 8), 2, [3, 3, 4], None),
        ("frac3d_unb", 3, (2, 6, 6, 7), [2, 3, 2], None, 0.6),
    ]:
        x = f32(*shape)
        n = 1 if len(shape) == nd + 1 else shape[0]
        u = torch.rand(n, shape[-nd - 1], nd)
        fn = getattr(F, f"fractional_max_pool{nd}d")
        out, idx = fn(x.double(), k, osz, ratio, True, u.double())
        out32, idx32 = fn(x, k, osz, ratio, True, u)
        assert torch.equal(idx, idx32), name
        g.add(name, f"fractional_max_pool{nd}d", {"kernel_size": k, "output_size": osz, "output_ratio": ratio},
              lambda x, u: fn(x, k, osz, ratio, False, u), {"x": x, "u": u}, ["x"], {"indices": idx + 1})


def misc_cases():
    x = f32(4, 5)
    g.add("rrelu_default", "rrelu", {}, lambda x: F.rrelu(x), {"x": x}, ["x"])
    g.add("rrelu_lu", "rrelu", {"lower": 0.1, "upper": 0.3}, lambda x: F.rrelu(x, 0.1, 0.3), {"x": f32(3, 2, 4)}, ["x"])
    for p, pn in [(0, "0"), (0.5, "0_5"), (1, "1"), (2, "2"), (3, "3"), (float("inf"), "inf")]:
        g.add("pdist_" + pn, "pdist", {"p": "inf" if p == float("inf") else p}, lambda x: F.pdist(x, p),
              {"x": f32(6, 4)}, ["x"])
    rep = f32(5, 3)
    rep[3] = rep[1]
    g.add("pdist_rep", "pdist", {"p": 2}, lambda x: F.pdist(x, 2), {"x": rep}, ["x"])
    g.add("pdist_rep3", "pdist", {"p": 3}, lambda x: F.pdist(x, 3), {"x": rep}, ["x"])
    for mode in ["constant", "reflect", "replicate"]:
        pad = [1, 2, 0, 1, 2, 1]
        g.add("pad3d_" + mode, "pad3d", {"mode": mode, "padding": pad},
              lambda x: F.pad(x, pad, mode, 0.5) if mode == "constant" else F.pad(x, pad, mode),
              {"x": f32(2, 2, 3, 4, 5)}, ["x"])
    g.add("pad3d_reflect_unb", "pad3d", {"mode": "reflect", "padding": 2},
          lambda x: nn.ReflectionPad3d(2)(x), {"x": f32(2, 3, 4, 3)}, ["x"])
    g.add("softmax2d", "softmax2d", {}, lambda x: nn.Softmax2d()(x), {"x": f32(2, 3, 2, 4)}, ["x"])
    for size in (3, 4, 5):
        x = f32(2, 7, 3, 2)
        out = nn.CrossMapLRN2d(size, 0.5, 0.75, 2)(x.double())
        g.tensors[f"crossmap{size}.x"] = x
        g.tensors[f"crossmap{size}.out"] = out.detach()
        g.cases.append({"name": f"crossmap{size}", "op": "crossmap", "opts": {"size": size, "alpha": 0.5,
                                                                                "beta": 0.75, "k": 2}})
    g.add("upsample_bilinear", "upsample_bilinear", {"size": [5, 7]},
          lambda x: F.upsample_bilinear(x, [5, 7]), {"x": f32(1, 2, 3, 4)}, ["x"])
    g.add("upsample_nearest", "upsample_nearest", {"scale_factor": 2},
          lambda x: F.upsample_nearest(x, scale_factor=2), {"x": f32(1, 2, 3, 4)}, ["x"])
    g.add("upsample_area", "upsample", {"size": [2, 2], "mode": "area"},
          lambda x: F.upsample(x, [2, 2], mode="area"), {"x": f32(1, 2, 4, 5)}, ["x"])


def asm_case():
    m = nn.AdaptiveLogSoftmaxWithLoss(16, 20, [4, 10, 15], div_value=2.0, head_bias=True)
    sd = {k: v.detach().clone() for k, v in m.state_dict().items()}
    for k, v in sd.items():
        g.tensors["asm.sd." + k] = v
    x = f32(9, 16)
    t = torch.tensor([0, 3, 4, 9, 10, 14, 15, 19, 2])
    m64 = m.double()
    x64 = x.double().requires_grad_(True)
    r = m64(x64, t)
    dout = f32(9)
    (r.output * dout.double()).sum().add(r.loss).backward()
    g.tensors.update({"asm.x": x, "asm.target": t + 1, "asm.out": r.output.detach(), "asm.loss": r.loss.detach(),
                      "asm.dout": dout, "asm.dx": x64.grad, "asm.log_prob": m64.log_prob(x64).detach(),
                      "asm.predict": m64.predict(x64) + 1})
    for k, p in m64.named_parameters():
        g.tensors["asm.d." + k] = p.grad
    # one row, 0-d target
    r1 = m64(x64[2], t[2])
    g.tensors.update({"asm.out1": r1.output.detach(), "asm.loss1": r1.loss.detach()})
    g.cases.append({"name": "asm", "op": "asm", "opts": {"in_features": 16, "n_classes": 20, "cutoffs": [4, 10, 15],
                                                          "div_value": 2.0, "head_bias": True}})


unpool_cases()
fractional_cases()
misc_cases()
asm_case()
g.write("nn_gaps.safetensors", g.tensors, g.cases)
