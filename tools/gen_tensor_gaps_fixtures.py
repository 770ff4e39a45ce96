#!/usr/bin/python3
"""Writes spec/fixtures/tensor_gaps.safetensors with PyTorch 1.13, for
spec/tensor_gaps_spec.lua: kron, cov (correction, fweights, aweights),
corrcoef, diag_embed, diagflat, diagonal/select/slice/as_strided_scatter,
scatter_reduce and index_reduce ('sum', 'mean', include_self), i0,
mvlgamma, ldexp, frexp, nextafter, histogram, mode, matrix_exp,
cholesky_inverse, cholesky_solve, triangular_solve.

Layout of tools/fixture_lib.py's add: float32 inputs "<name>.<k>" (integer
ones as they are), the output "<name>.out" and the float64 gradients
"<name>.d<k>" of sum(out * "<name>.dout"); second results in extra tensors.
Indices (index, mode's) are stored 1-based, lunet's convention; dims in the
cases' opts are lunet's (1-based).
Run:  /usr/bin/python3 tools/gen_tensor_gaps_fixtures.py
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as g  # noqa: E402

torch.manual_seed(0)
f32, add = g.f32, g.add


def spd(n):
    a = torch.randn(n, n, dtype=torch.float64)
    return a @ a.T + n * torch.eye(n, dtype=torch.float64)


# products, statistics
add("kron", "kron", {}, lambda a, b: torch.kron(a, b), {"a": f32(2, 3), "b": f32(3, 2)}, ["a", "b"])
add("kron_nd", "kron", {}, lambda a, b: torch.kron(a, b), {"a": f32(2, 1, 2), "b": f32(2, 2)}, ["a", "b"])
add("cov", "cov", {}, lambda x: torch.cov(x), {"x": f32(3, 6)}, ["x"])
add("cov_1d", "cov", {"correction": 0}, lambda x: torch.cov(x, correction=0), {"x": f32(5)}, ["x"])
fw = torch.tensor([1, 2, 1, 3, 1, 2])
aw = torch.rand(6).float() + 0.1
add("cov_w", "cov", {"correction": 1}, lambda x, fw, aw: torch.cov(x, fweights=fw, aweights=aw),
    {"x": f32(3, 6), "fw": fw, "aw": aw}, ["x", "aw"])
add("cov_fw", "cov", {"correction": 2}, lambda x, fw: torch.cov(x, correction=2, fweights=fw),
    {"x": f32(2, 6), "fw": fw}, ["x"])
add("corrcoef", "corrcoef", {}, lambda x: torch.corrcoef(x), {"x": f32(3, 6)}, ["x"])

# diagonals, scatters into copies
add("diag_embed", "diag_embed", {"offset": 1, "dim1": 1, "dim2": 3},
    lambda x: torch.diag_embed(x, 1, 0, 2), {"x": f32(2, 3)}, ["x"])
add("diag_embed_default", "diag_embed", {}, lambda x: torch.diag_embed(x), {"x": f32(2, 3)}, ["x"])
add("diagflat", "diagflat", {"offset": -1}, lambda x: torch.diagflat(x, -1), {"x": f32(2, 2)}, ["x"])
add("diagonal_scatter", "diagonal_scatter", {"offset": 1},
    lambda x, src: torch.diagonal_scatter(x, src, 1), {"x": f32(3, 4), "src": f32(3)}, ["x", "src"])
add("select_scatter", "select_scatter", {"dim": 1, "index": 2},
    lambda x, src: torch.select_scatter(x, src, 0, 1), {"x": f32(3, 4), "src": f32(4)}, ["x", "src"])
add("slice_scatter", "slice_scatter", {"dim": 2, "first": 2, "last": 5, "step": 2},
    lambda x, src: torch.slice_scatter(x, src, 1, 1, 5, 2), {"x": f32(4, 5), "src": f32(4, 2)}, ["x", "src"])
# (torch 1.13's gradient of as_strided_scatter in x is wrong, uninitialized
# memory included: only src's is stored; the spec gradchecks x's)
add("as_strided_scatter", "as_strided_scatter", {"size": [2, 2], "stride": [3, 1], "offset": 1},
    lambda x, src: torch.as_strided_scatter(x, src, (2, 2), (3, 1), 1), {"x": f32(6), "src": f32(2, 2)}, ["src"])

idx = torch.randint(0, 3, (3, 4))
for red in ["sum", "mean"]:
    for incl in [True, False]:
        add(f"scatter_reduce_{red}_{incl}", "scatter_reduce", {"dim": 1, "reduce": red, "include_self": incl},
            lambda x, src, index, red=red, incl=incl: torch.scatter_reduce(x, 0, index - 1, src, red, include_self=incl),
            {"x": f32(3, 4), "src": f32(3, 4), "index": idx + 1}, ["x", "src"])
iidx = torch.tensor([0, 2, 0, 3, 2])
for incl in [True, False]:
    add(f"index_reduce_mean_{incl}", "index_reduce", {"dim": 1, "reduce": "mean", "include_self": incl},
        lambda x, src, index, incl=incl: x.index_reduce(0, index - 1, src, "mean", include_self=incl),
        {"x": f32(4, 3), "src": f32(5, 3), "index": iidx + 1}, ["x", "src"])

# special, floating point
add("i0", "i0", {}, lambda x: torch.i0(x),
    {"x": torch.cat([f32(8, scale=5), torch.tensor([0.0, 24.9, 25.1, 30.0, -40.0, 60.0])])}, ["x"])
add("mvlgamma", "mvlgamma", {"p": 3}, lambda x: torch.mvlgamma(x, 3), {"x": torch.rand(6) * 4 + 1.2}, ["x"])
add("ldexp", "ldexp", {}, lambda x, e: torch.ldexp(x, e), {"x": f32(5), "e": torch.tensor([0, 3, -2, 10, -1])}, ["x"])
fr = torch.tensor([0.0, 1, 8, -3.5, 7.9999995, 1e-40, 3e38, -float("inf"), 0.375, 1e-3])
m, e = torch.frexp(fr)
add("frexp", "frexp", {}, lambda x: torch.frexp(x)[0], {"x": fr}, [], {"exponent": e})
nx = torch.tensor([1.0, 0, 2, -1, 0.5, 1e-40, 5, 3, -0.0, 1.5])
ny = torch.tensor([2.0, 1, 0, 0, 0, 0, 5, -float("inf"), -1, float("nan")])
g.tensors["nextafter32.x"], g.tensors["nextafter32.y"] = nx, ny
g.tensors["nextafter32.out"] = torch.nextafter(nx, ny)
g.tensors["nextafter64.x"], g.tensors["nextafter64.y"] = nx.double(), ny.double()
g.tensors["nextafter64.out"] = torch.nextafter(nx.double(), ny.double())
g.cases += [{"name": "nextafter32", "op": "nextafter", "opts": {}}, {"name": "nextafter64", "op": "nextafter", "opts": {}}]

# histogram, mode
hx = f32(50)
for name, kw, opts in [
    ("histogram_int", {"bins": 7}, {"bins": 7}),
    ("histogram_range", {"bins": 5, "range": (-1.0, 1.0), "density": True}, {"bins": 5, "range": [-1, 1], "density": True}),
]:
    h, edges = torch.histogram(hx, **kw)
    g.tensors[f"{name}.x"], g.tensors[f"{name}.out"], g.tensors[f"{name}.edges"] = hx, h, edges
    g.cases.append({"name": name, "op": "histogram", "opts": opts})
bins = torch.tensor([-2.0, -0.5, 0, 0.25, 1.5])
w = torch.rand(50)
h, edges = torch.histogram(hx, bins=bins, weight=w)
g.tensors.update({"histogram_edges.x": hx, "histogram_edges.bins": bins, "histogram_edges.weight": w,
                  "histogram_edges.out": h, "histogram_edges.edges": edges})
g.cases.append({"name": "histogram_edges", "op": "histogram", "opts": {}})
mx = torch.randint(0, 4, (3, 9)).float()
for name, dim, keep in [("mode_last", 1, False), ("mode_first", 0, True)]:
    v, i = torch.mode(mx, dim, keep)
    g.tensors.update({f"{name}.x": mx, f"{name}.out": v, f"{name}.indices": i + 1})
    g.cases.append({"name": name, "op": "mode", "opts": {"dim": dim + 1, "keepdim": keep}})

# linalg methods
add("matrix_exp", "matrix_exp", {}, lambda x: torch.matrix_exp(x), {"x": f32(3, 3, scale=2)}, ["x"])
add("matrix_exp_batch", "matrix_exp", {}, lambda x: torch.matrix_exp(x), {"x": f32(2, 4, 4, scale=0.3)}, ["x"])
add("matrix_exp_big", "matrix_exp", {}, lambda x: torch.matrix_exp(x), {"x": f32(3, 3, scale=6)}, [])
Lf = torch.linalg.cholesky(spd(3)).float()
add("cholesky_inverse", "cholesky_inverse", {}, lambda u: torch.cholesky_inverse(u), {"u": Lf}, ["u"])
add("cholesky_inverse_upper", "cholesky_inverse", {"upper": True}, lambda u: torch.cholesky_inverse(u, upper=True),
    {"u": Lf.T.contiguous()}, ["u"])
add("cholesky_solve", "cholesky_solve", {}, lambda b, u: torch.cholesky_solve(b, u), {"b": f32(3, 2), "u": Lf}, ["b", "u"])
At = (torch.randn(3, 3) + 3 * torch.eye(3)).float()
for name, opts in [("triangular_solve", {}), ("triangular_solve_lower_t", {"upper": False, "transpose": True}),
                   ("triangular_solve_unit", {"unitriangular": True})]:
    add(name, "triangular_solve", opts,
        lambda b, A, o=opts: torch.triangular_solve(b, A, upper=o.get("upper", True), transpose=o.get("transpose", False),
                                                    unitriangular=o.get("unitriangular", False))[0],
        {"b": f32(3, 2), "A": At}, ["b", "A"])

g.write("tensor_gaps.safetensors", g.tensors, g.cases)
