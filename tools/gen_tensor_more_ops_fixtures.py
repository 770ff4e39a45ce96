#!/usr/bin/python3
"""Writes spec/fixtures/tensor_more_ops.safetensors with PyTorch 1.13, for
spec/tensor_more_ops_spec.lua: einsum, tensordot, diagonal, diag, trace,
movedim, repeat_interleave, meshgrid, cross, cdist, index_add, index_copy,
index_fill, scatter, take_along_dim and take. fixture_lib.add's layout:
float32 inputs "<name>.a", "<name>.b", the float64 output "<name>.out" and
gradients "<name>.da", "<name>.db" of sum(out * dout); integer inputs
(indices, 1-based) "<name>.i". Case opts: lunet's arguments (1-based dims),
"view": "t" when input a is used transposed (non-contiguous).
Run:  /usr/bin/python3 tools/gen_tensor_more_ops_fixtures.py
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as g  # noqa: E402

f32 = g.f32


def c0(d):
    return d - 1 if d > 0 else d


def einsum(name, eq, *shapes):
    ins = {k: f32(*s) for k, s in zip("abcd", shapes)}
    g.add(name, "einsum", {"eq": eq}, lambda **t: torch.einsum(eq, *[t[k] for k in sorted(t)]), ins, list(ins))


def main():
    torch.manual_seed(0)
    einsum("einsum_mm", "ij,jk->ik", (3, 4), (4, 5))
    einsum("einsum_bmm", "bij,bjk->bik", (2, 3, 4), (2, 4, 5))
    einsum("einsum_diag", "ii->i", (4, 4))
    einsum("einsum_trace", "ii", (4, 4))
    einsum("einsum_outer", "i,j->ij", (3,), (4,))
    einsum("einsum_ell", "...ij,...jk->...ik", (2, 3, 4), (4, 2))
    einsum("einsum_implicit", "ba,Ab", (2, 3), (4, 2))
    einsum("einsum_sum", "ijk->j", (2, 3, 4))
    einsum("einsum_three", "ij,jk,kl->il", (2, 3), (3, 4), (4, 2))
    einsum("einsum_bcast", "bij,bjk->bik", (1, 2, 3), (4, 3, 5))
    einsum("einsum_diag3", "iji->j", (3, 2, 3))
    einsum("einsum_dot", "i,i->", (5,), (5,))
    einsum("einsum_empty", "ij,jk->ik", (0, 3), (3, 2))
    einsum("einsum_batch_keep", "bi,bj->bij", (3, 2), (3, 4))
    einsum("einsum_ell_sum", "...i->i", (2, 3, 4))
    g.add("tensordot_2", "tensordot", {"dims": 2}, lambda a, b: torch.tensordot(a, b, 2),
          {"a": f32(2, 3, 4), "b": f32(3, 4, 5)}, ["a", "b"])
    g.add("tensordot_list", "tensordot", {"dims": [[1, 3], [2, 1]]},
          lambda a, b: torch.tensordot(a, b, ([0, 2], [1, 0])), {"a": f32(2, 3, 4), "b": f32(4, 2, 5)}, ["a", "b"])
    g.add("tensordot_0", "tensordot", {"dims": 0}, lambda a, b: torch.tensordot(a, b, 0),
          {"a": f32(2), "b": f32(3)}, ["a", "b"])
    for off, d1, d2 in ((0, 1, 2), (1, 1, 2), (-2, 1, 2), (1, 3, 1), (5, 1, 2)):
        g.add(f"diagonal_{off}_{d1}_{d2}".replace("-", "m"), "diagonal", {"args": [off, d1, d2]},
              lambda a, o=off, x=d1, y=d2: a.diagonal(o, c0(x), c0(y)), {"a": f32(3, 4, 5)}, ["a"])
    g.add("diagonal_view", "diagonal", {"args": [1, 1, 2], "view": "t"},
          lambda a: a.t().diagonal(1, 0, 1), {"a": f32(4, 3)}, ["a"])
    for k in (0, 2, -1):
        g.add(f"diag1_{k}".replace("-", "m"), "diag", {"k": k}, lambda a, k=k: torch.diag(a, k), {"a": f32(3)}, ["a"])
        g.add(f"diag2_{k}".replace("-", "m"), "diag", {"k": k}, lambda a, k=k: torch.diag(a, k), {"a": f32(3, 4)}, ["a"])
    g.add("trace", "trace", {}, lambda a: a.trace(), {"a": f32(3, 5)}, ["a"])
    g.add("movedim_1", "movedim", {"src": 1, "dst": 3}, lambda a: a.movedim(0, 2), {"a": f32(2, 3, 4)}, ["a"])
    g.add("movedim_list", "movedim", {"src": [1, -1], "dst": [3, 1]}, lambda a: a.movedim([0, -1], [2, 0]),
          {"a": f32(2, 3, 4, 5)}, ["a"])
    g.add("ri_num", "repeat_interleave", {"r": 2, "dim": 2}, lambda a: a.repeat_interleave(2, 1),
          {"a": f32(2, 3)}, ["a"])
    g.add("ri_flat", "repeat_interleave", {"r": 3}, lambda a: a.repeat_interleave(3), {"a": f32(2, 2)}, ["a"])
    rep = torch.tensor([2, 0, 3])
    g.add("ri_tensor", "repeat_interleave", {"dim": 1}, lambda a, i: a.repeat_interleave(i, 0),
          {"a": f32(3, 2), "i": rep}, ["a"])
    g.add("ri_view", "repeat_interleave", {"dim": 2, "view": "t"}, lambda a, i: a.t().repeat_interleave(i, 1),
          {"a": f32(3, 2), "i": rep}, ["a"])
    for ix in ("ij", "xy"):
        g.add(f"meshgrid_{ix}", "meshgrid", {"indexing": ix},
              lambda a, b, ix=ix: torch.stack(torch.meshgrid(a, b, indexing=ix)), {"a": f32(3), "b": f32(4)}, ["a", "b"])
    g.add("cross_last", "cross", {"dim": 2}, lambda a, b: torch.cross(a, b, 1), {"a": f32(4, 3), "b": f32(4, 3)}, ["a", "b"])
    g.add("cross_default", "cross", {}, lambda a, b: torch.cross(a, b), {"a": f32(3, 2), "b": f32(3, 2)}, ["a", "b"])
    g.add("cross_bcast", "cross", {"dim": -1}, lambda a, b: torch.linalg.cross(a, b), {"a": f32(2, 1, 3), "b": f32(1, 4, 3)},
          ["a", "b"])
    for p in (2.0, 1.0, 3.0, float("inf")):
        g.add(f"cdist_p{p}".replace(".", "_"), "cdist", {"p": "inf" if p == float("inf") else p},
              lambda a, b, p=p: torch.cdist(a, b, p), {"a": f32(4, 3), "b": f32(5, 3)}, ["a", "b"])
    g.add("cdist_batch_mm", "cdist", {"p": 2.0}, lambda a, b: torch.cdist(a, b), {"a": f32(2, 30, 3), "b": f32(2, 27, 3)},
          ["a", "b"])
    idx = torch.tensor([3, 1])
    g.add("index_add", "index_add", {"dim": 1, "alpha": 2.5},
          lambda a, b, i: a.index_add(0, i - 1, b, alpha=2.5), {"a": f32(4, 3), "b": f32(2, 3), "i": idx}, ["a", "b"])
    g.add("index_add_dup", "index_add", {"dim": 2},
          lambda a, b, i: a.index_add(1, i - 1, b), {"a": f32(3, 4), "b": f32(3, 3), "i": torch.tensor([2, 2, 4])},
          ["a", "b"])
    g.add("index_add_view", "index_add", {"dim": 1, "view": "t"},
          lambda a, b, i: a.t().index_add(0, i - 1, b), {"a": f32(3, 4), "b": f32(2, 3), "i": idx}, ["a", "b"])
    g.add("index_copy", "index_copy", {"dim": 2},
          lambda a, b, i: a.index_copy(1, i - 1, b), {"a": f32(3, 4), "b": f32(3, 2), "i": idx}, ["a", "b"])
    g.add("index_fill", "index_fill", {"dim": 2, "value": -1.5},
          lambda a, i: a.index_fill(1, i - 1, -1.5), {"a": f32(3, 4), "i": idx}, ["a"])
    sidx = torch.tensor([[2, 1, 3], [1, 3, 2]])
    g.add("scatter_src", "scatter", {"dim": 2},
          lambda a, b, i: a.scatter(1, i - 1, b), {"a": f32(2, 4), "b": f32(2, 3), "i": sidx}, ["a", "b"])
    g.add("scatter_dim1", "scatter", {"dim": 1},
          lambda a, b, i: a.scatter(0, i - 1, b), {"a": f32(3, 3), "b": f32(2, 3), "i": sidx}, ["a", "b"])
    g.add("scatter_value", "scatter", {"dim": 2, "value": 7.0},
          lambda a, i: a.scatter(1, i - 1, 7.0), {"a": f32(2, 4), "i": sidx}, ["a"])
    g.add("scatter_add", "scatter", {"dim": 2, "reduce": "add"},
          lambda a, b, i: a.scatter_add(1, i - 1, b), {"a": f32(2, 4), "b": f32(2, 3), "i": sidx}, ["a", "b"])
    tidx = torch.tensor([[3, 1], [2, 2], [1, 3]])
    g.add("take_along_dim", "take_along_dim", {"dim": 2},
          lambda a, i: torch.take_along_dim(a, i - 1, 1), {"a": f32(3, 3), "i": tidx}, ["a"])
    g.add("take_along_bcast", "take_along_dim", {"dim": 1},
          lambda a, i: torch.take_along_dim(a, i - 1, 0), {"a": f32(3, 1), "i": torch.tensor([[3, 1, 2]])}, ["a"])
    g.add("take_along_flat", "take_along_dim", {},
          lambda a, i: torch.take_along_dim(a, i - 1), {"a": f32(2, 3), "i": torch.tensor([6, 1, 1])}, ["a"])
    g.add("take", "take", {}, lambda a, i: torch.take(a, i - 1), {"a": f32(3, 4), "i": torch.tensor([[12, 1], [5, 5]])},
          ["a"])
    g.add("take_view", "take", {"view": "t"}, lambda a, i: torch.take(a.t(), i - 1),
          {"a": f32(3, 4), "i": torch.tensor([2, 3, 12])}, ["a"])
    g.write("tensor_more_ops.safetensors", g.tensors, g.cases)


if __name__ == "__main__":
    main()
