#!/usr/bin/python3
"""Writes spec/fixtures/tensor_more_ops2.safetensors with PyTorch 1.13, for
spec/tensor_more_ops2_spec.lua: unfold, searchsorted, bucketize, histc,
logspace, block_diag, cartesian_prod, combinations, trapezoid,
cumulative_trapezoid, baddbmm, addbmm, addmv, addr. fixture_lib.add's
layout: float32 inputs "<name>.a", "<name>.b", "<name>.c", the output
"<name>.out" (float64, or int64 for positions: 1-based, torch's plus one)
and the gradients "<name>.da", ... of sum(out * dout). Case opts: lunet's
arguments (1-based dims), "view": "t" when input a is used transposed.
Run:  /usr/bin/python3 tools/gen_tensor_more_ops2_fixtures.py
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as g  # noqa: E402

f32 = g.f32


def c0(d):
    return d - 1 if d > 0 else d


def ints(lo, hi, *shape):
    return torch.randint(lo, hi, shape).float()


def main():
    torch.manual_seed(0)
    # ---- unfold
    for nm, shape, d, size, step in (("unfold_1d", (7,), 1, 3, 2), ("unfold_overlap", (3, 6), 2, 4, 1),
                                     ("unfold_dim1", (5, 2, 3), 1, 2, 3), ("unfold_neg", (2, 5), -1, 5, 1),
                                     ("unfold_zero", (4,), 1, 0, 1), ("unfold_0d", (), 1, 1, 1)):
        g.add(nm, "unfold", {"dim": d, "size": size, "step": step},
              lambda a, d=d, s=size, t=step: a.unfold(c0(d), s, t), {"a": f32(*shape)}, ["a"])
    g.add("unfold_view", "unfold", {"dim": 1, "size": 2, "step": 1, "view": "t"},
          lambda a: a.t().unfold(0, 2, 1), {"a": f32(3, 4)}, ["a"])
    # ---- searchsorted, bucketize (positions + 1)
    srt = ints(0, 5, 9).sort().values
    vals = torch.cat([ints(-1, 7, 10), torch.tensor([2.5, float("nan")])]).reshape(3, 4)
    for right in (False, True):
        nm = "ss_right" if right else "ss_left"
        g.add(nm, "searchsorted", {"opts": {"right": right}},
              lambda a, b, r=right: torch.searchsorted(a, b, right=r) + 1, {"a": srt, "b": vals}, [])
        g.add(nm + "_batched", "searchsorted", {"opts": {"side": "right" if right else "left"}},
              lambda a, b, r=right: torch.searchsorted(a, b, right=r) + 1,
              {"a": ints(0, 4, 2, 3, 6).sort().values, "b": ints(-1, 5, 2, 3, 5)}, [])
        g.add("bucketize_" + ("right" if right else "left"), "bucketize", {"opts": {"right": right}},
              lambda a, b, r=right: torch.bucketize(a, b, right=r) + 1, {"a": vals, "b": srt}, [])
    g.add("ss_empty_seq", "searchsorted", {}, lambda a, b: torch.searchsorted(a, b) + 1,
          {"a": f32(0), "b": f32(3)}, [])
    g.add("ss_scalar", "searchsorted", {"value": 2.0}, lambda a: torch.searchsorted(a, 2.0) + 1, {"a": srt}, [])
    # ---- histc
    x = f32(50) * 2
    g.add("histc_default", "histc", {}, lambda a: torch.histc(a), {"a": x}, [])
    g.add("histc_range", "histc", {"bins": 7, "min": -1.0, "max": 2.0},
          lambda a: torch.histc(a, bins=7, min=-1, max=2), {"a": x}, [])
    g.add("histc_auto", "histc", {"bins": 5}, lambda a: torch.histc(a, bins=5), {"a": f32(4, 6)}, [])
    # ---- logspace
    for nm, args in (("logspace_10", (0.0, 2.0, 5)), ("logspace_base2", (-1.0, 3.0, 9, 2.0)),
                     ("logspace_one", (1.5, 4.0, 1)), ("logspace_empty", (0.0, 1.0, 0))):
        g.add(nm, "logspace", {"args": list(args)}, lambda a=args: torch.logspace(*a, dtype=torch.float64), {}, [])
    # ---- block_diag, cartesian_prod, combinations
    g.add("block_diag", "block_diag", {}, lambda a, b, c: torch.block_diag(a, b, c),
          {"a": f32(2, 3), "b": f32(4), "c": f32()}, ["a", "b", "c"])
    g.add("block_diag_empty", "block_diag", {}, lambda a, b: torch.block_diag(a, b),
          {"a": f32(0, 2), "b": f32(2, 0)}, ["a", "b"])
    g.add("cartesian_prod", "cartesian_prod", {}, lambda a, b, c: torch.cartesian_prod(a, b, c),
          {"a": f32(2), "b": f32(3), "c": f32(2)}, ["a", "b", "c"])
    for nm, r, wr in (("comb_2", 2, False), ("comb_3", 3, False), ("comb_2_rep", 2, True), ("comb_1", 1, False),
                      ("comb_too_many", 5, False)):
        g.add(nm, "combinations", {"r": r, "with_replacement": wr},
              lambda a, r=r, wr=wr: torch.combinations(a, r, wr), {"a": f32(4)}, ["a"])
    # ---- trapezoid, cumulative_trapezoid
    for fname, fn in (("trapezoid", torch.trapezoid), ("cumulative_trapezoid", torch.cumulative_trapezoid)):
        g.add(fname + "_dx", fname, {"opts": {"dx": 0.5, "dim": 1}}, lambda a, f=fn: f(a, dx=0.5, dim=0),
              {"a": f32(5, 3)}, ["a"])
        g.add(fname + "_x1d", fname, {}, lambda a, b, f=fn: f(a, b), {"a": f32(3, 4), "b": f32(4).sort().values},
              ["a", "b"])
        g.add(fname + "_xnd", fname, {"opts": {"dim": 1}}, lambda a, b, f=fn: f(a, b, dim=0),
              {"a": f32(4, 2), "b": f32(4, 2)}, ["a", "b"])
        g.add(fname + "_view", fname, {"view": "t"}, lambda a, f=fn: f(a.t()), {"a": f32(4, 3)}, ["a"])
        g.add(fname + "_len1", fname, {}, lambda a, f=fn: f(a), {"a": f32(3, 1)}, ["a"])
    # ---- baddbmm, addbmm, addmv, addr
    fused = (("baddbmm", torch.baddbmm, (2, 3, 5), (2, 3, 4), (2, 4, 5)),
             ("addbmm", torch.addbmm, (3, 5), (2, 3, 4), (2, 4, 5)),
             ("addmv", torch.addmv, (3,), (3, 4), (4,)),
             ("addr", torch.addr, (3, 4), (3,), (4,)))
    for nm, fn, sa, sb, sc in fused:
        g.add(nm, nm, {}, lambda a, b, c, f=fn: f(a, b, c), {"a": f32(*sa), "b": f32(*sb), "c": f32(*sc)},
              ["a", "b", "c"])
        g.add(nm + "_scaled", nm, {"opts": {"beta": 0.5, "alpha": -2.0}},
              lambda a, b, c, f=fn: f(a, b, c, beta=0.5, alpha=-2.0),
              {"a": f32(*sa[-1:]), "b": f32(*sb), "c": f32(*sc)}, ["a", "b", "c"])
        g.add(nm + "_beta0", nm, {"opts": {"beta": 0.0, "alpha": 1.5}},
              lambda a, b, c, f=fn: f(a, b, c, beta=0, alpha=1.5),
              {"a": torch.full(sa, float("nan")), "b": f32(*sb), "c": f32(*sc)}, ["a", "b", "c"])
    g.add("baddbmm_view", "baddbmm", {"view": "t"}, lambda a, b, c: torch.baddbmm(a.t(), b, c),
          {"a": f32(5, 3), "b": f32(2, 3, 4), "c": f32(2, 4, 5)}, ["a", "b", "c"])
    g.add("addbmm_empty_batch", "addbmm", {}, lambda a, b, c: torch.addbmm(a, b, c),
          {"a": f32(3, 2), "b": f32(0, 3, 4), "c": f32(0, 4, 2)}, ["a", "b", "c"])
    # ---- special functions (C kernels) and xlogy, copysign
    spread = f32(3, 5) * 3
    for nm in ("lgamma", "digamma", "erfc", "sgn", "signbit"):
        g.add("special_" + nm, nm, {}, lambda a, nm=nm: getattr(torch, nm)(a), {"a": spread},
              [] if nm == "signbit" else ["a"])
    g.add("special_erfinv", "erfinv", {}, lambda a: torch.erfinv(a), {"a": torch.rand(4, 5) * 1.98 - 0.99}, ["a"])
    g.add("special_erfinv_view", "erfinv", {"view": "t"}, lambda a: torch.erfinv(a.t()), {"a": torch.rand(3, 2) - 0.5},
          ["a"])
    g.add("special_trigamma", "polygamma", {"n": 1}, lambda a: torch.polygamma(1, a), {"a": spread}, [])
    g.add("special_polygamma0", "polygamma", {"n": 0}, lambda a: torch.polygamma(0, a), {"a": spread.abs() + 0.1}, ["a"])
    xz = f32(3, 4)
    xz[0, :2] = 0
    yz = f32(3, 4).abs() + 0.1
    g.add("xlogy", "xlogy", {}, lambda a, b: torch.xlogy(a, b), {"a": xz, "b": yz}, ["a", "b"])
    g.add("xlogy_bcast", "xlogy", {}, lambda a, b: torch.xlogy(a, b), {"a": f32(3, 1), "b": f32(4).abs()}, ["a", "b"])
    g.add("copysign", "copysign", {}, lambda a, b: torch.copysign(a, b), {"a": f32(3, 4), "b": f32(3, 4)}, ["a", "b"])
    g.add("copysign_bcast", "copysign", {}, lambda a, b: torch.copysign(a, b), {"a": f32(2, 3), "b": f32(3)}, ["a", "b"])
    g.write("tensor_more_ops2.safetensors", g.tensors, g.cases)


if __name__ == "__main__":
    main()
