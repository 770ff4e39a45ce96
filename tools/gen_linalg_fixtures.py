#!/usr/bin/python3
"""Writes spec/fixtures/linalg.safetensors with PyTorch 1.13, for
spec/linalg_spec.lua: torch.linalg's det, slogdet, inv, solve, cholesky,
qr, eigh, svd, svdvals, matrix_rank, pinv, lstsq, vector_norm, matrix_norm,
norm, matrix_power and multi_dot on float64 (and float32) inputs, batched
ones, broadcast solves and 1-d right-hand sides.

For every case "<name>": the inputs "<name>.i1".."<name>.iK" (float64 or
float32), each output "<name>.o<j>" and, for a float64 case, "<name>.d<j>"
and the input gradients "<name>.g<k>" of
L = sum_j sum(f_j(o_j) * d_j) over the differentiable outputs, f_j the
square for outputs whose signs LAPACK leaves free (Q, R, eigenvectors, U,
Vh: "sq" lists them; the spec compares their squares too). The metadata
entry "cases" is a JSON list of {name, op, n (inputs), args (lunet's
arguments after the inputs: 1-based dims, option tables, "inf"/"-inf"),
outs (the output count), diff (which outputs are differentiable), sq}.
Run:  /usr/bin/python3 tools/gen_linalg_fixtures.py
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as g  # noqa: E402

torch.manual_seed(0)
tensors, cases = {}, []
D = torch.float64


def add(name, op, fn, inputs, args=None, diff=None, sq=(), grad=True):
    xs = [x.detach().clone() for x in inputs]
    for k, x in enumerate(xs):
        tensors[f"{name}.i{k + 1}"] = x
    grad = grad and all(x.dtype == D for x in xs)
    ins = [x.clone().requires_grad_(grad) for x in xs]
    outs = fn(*ins)
    if not isinstance(outs, tuple):
        outs = (outs,)
    diff = list(diff if diff is not None else range(1, len(outs) + 1))
    loss = 0
    for j, o in enumerate(outs, 1):
        tensors[f"{name}.o{j}"] = o.detach().clone()
        if grad and j in diff:
            d = torch.randn(o.shape, dtype=D)
            tensors[f"{name}.d{j}"] = d
            loss = loss + ((o * o if j in sq else o) * d).sum()
    if grad:
        gs = torch.autograd.grad(loss, ins, allow_unused=True)
        for k, gk in enumerate(gs):
            tensors[f"{name}.g{k + 1}"] = gk if gk is not None else torch.zeros_like(ins[k])
    cases.append({"name": name, "op": op, "n": len(xs), "args": args or [], "outs": len(outs),
                  "diff": diff if grad else [], "sq": list(sq)})


def r(*shape, dtype=D):
    return torch.randn(shape, dtype=dtype)


def spd(*shape, dtype=D):
    a = torch.randn(shape, dtype=dtype)
    return a @ a.mT + shape[-1] * torch.eye(shape[-1], dtype=dtype)


def sym(*shape):
    a = torch.randn(shape, dtype=D)
    return a + a.mT


L = torch.linalg
for nm, A in [("m3", r(3, 3)), ("b2x4", r(2, 4, 4)), ("f32", r(3, 3, dtype=torch.float32)), ("e1", r(1, 1))]:
    add(f"det_{nm}", "det", L.det, [A])
    add(f"slogdet_{nm}", "slogdet", lambda a: tuple(L.slogdet(a)), [A], diff=[2])
    add(f"inv_{nm}", "inv", L.inv, [A])
# (no gradient: torch 1.13 gives zeros for this singular matrix, whose cofactors
# are not all zero; lunet gives the cofactors, which the spec's gradcheck checks)
add("det_singular", "det", L.det, [torch.tensor([[1., 2, 3], [2, 4, 6], [1, 0, 1]], dtype=D)], grad=False)
add("det_neg", "det", L.det, [torch.tensor([[0., 1], [1, 0]], dtype=D)])
add("solve_mat", "solve", L.solve, [r(3, 3), r(3, 2)])
add("solve_vec", "solve", L.solve, [r(3, 3), r(3)])
add("solve_batchvec", "solve", L.solve, [r(2, 3, 3), r(2, 3)])
add("solve_bcast", "solve", L.solve, [r(2, 1, 3, 3), r(4, 3, 2)])
add("solve_left", "solve", lambda a, b: L.solve(a, b, left=False), [r(3, 3), r(2, 3)], args=[{"left": False}])
add("solve_f32", "solve", L.solve, [r(4, 4, dtype=torch.float32), r(4, 2, dtype=torch.float32)])
for nm, A in [("m4", spd(4, 4)), ("b3", spd(3, 3, 3)), ("f32", spd(3, 3, dtype=torch.float32))]:
    add(f"chol_{nm}", "cholesky", L.cholesky, [A])
    add(f"cholU_{nm}", "cholesky", lambda a: L.cholesky(a, upper=True), [A], args=[{"upper": True}])
for nm, A in [("tall", r(5, 3)), ("wide", r(3, 5)), ("sq", r(2, 4, 4)), ("f32", r(4, 3, dtype=torch.float32))]:
    add(f"qr_{nm}", "qr", lambda a: tuple(L.qr(a)), [A], sq=(1, 2))
    add(f"qrc_{nm}", "qr", lambda a: tuple(L.qr(a, mode="complete")), [A], args=[{"mode": "complete"}],
        sq=(1, 2), grad=A.shape[-2] <= A.shape[-1])
    add(f"qrr_{nm}", "qr", lambda a: L.qr(a, mode="r")[1], [A], args=[{"mode": "r"}], sq=(1,), grad=False)
for nm, A in [("m4", sym(4, 4)), ("b3", sym(2, 3, 3)), ("f32", sym(3, 3).float())]:
    add(f"eigh_{nm}", "eigh", lambda a: tuple(L.eigh(a)), [A], sq=(2,))
    add(f"eighU_{nm}", "eigh", lambda a: tuple(L.eigh(a, UPLO="U")), [A], args=[{"UPLO": "U"}], sq=(2,))
for nm, A in [("tall", r(5, 3)), ("wide", r(3, 4)), ("b", r(2, 3, 3)), ("f32", r(4, 3, dtype=torch.float32))]:
    add(f"svd_{nm}", "svd", lambda a: tuple(L.svd(a, full_matrices=False)), [A], args=[{"full_matrices": False}],
        sq=(1, 3))
    add(f"svdf_{nm}", "svd", lambda a: tuple(L.svd(a)), [A], sq=(1, 3))
    add(f"svdvals_{nm}", "svdvals", L.svdvals, [A])
    add(f"pinv_{nm}", "pinv", L.pinv, [A])
    add(f"rank_{nm}", "matrix_rank", L.matrix_rank, [A], grad=False)
low = r(5, 2) @ r(2, 4)
add("rank_low", "matrix_rank", L.matrix_rank, [low], grad=False)
add("rank_atol", "matrix_rank", lambda a: L.matrix_rank(a, atol=1.0), [r(4, 4)], args=[{"atol": 1.0}], grad=False)
add("rank_herm", "matrix_rank", lambda a: L.matrix_rank(a, hermitian=True), [sym(4, 4)],
    args=[{"hermitian": True}], grad=False)
add("pinv_low", "pinv", L.pinv, [low], grad=False)
add("lstsq_tall", "lstsq", lambda a, b: L.lstsq(a, b).solution, [r(6, 3), r(6, 2)])
add("lstsq_batch", "lstsq", lambda a, b: L.lstsq(a, b).solution, [r(2, 5, 3), r(2, 5, 1)])
add("lstsq_res", "lstsq_residuals", lambda a, b: L.lstsq(a, b).residuals, [r(6, 3), r(6, 2)], grad=False)
x = r(3, 4)
xz = x.clone()
xz[1] = 0
INF = math.inf
for nm, o in [("2", 2), ("1", 1), ("3", 3), ("half", 0.5), ("inf", INF), ("ninf", -INF), ("0", 0)]:
    ords = "inf" if o == INF else "-inf" if o == -INF else o
    add(f"vnorm_{nm}", "vector_norm", lambda a, o=o: L.vector_norm(a, o), [x], args=[ords], grad=o != 0)
    add(f"vnorm_d2_{nm}", "vector_norm", lambda a, o=o: L.vector_norm(a, o, dim=1), [x], args=[ords, 2],
        grad=o not in (0, 0.5))
add("vnorm_zero_row", "vector_norm", lambda a: L.vector_norm(a, 2, dim=1, keepdim=True), [xz], args=[2, 2, True])
add("vnorm_dims", "vector_norm", lambda a: L.vector_norm(a, 2, dim=(0, 2)), [r(2, 3, 4)], args=[2, [1, 3]])
add("vnorm_f32", "vector_norm", L.vector_norm, [r(5, dtype=torch.float32)])
A = r(2, 3, 4)
for nm, o in [("fro", "fro"), ("nuc", "nuc"), ("1", 1), ("m1", -1), ("2", 2), ("m2", -2), ("inf", INF),
              ("ninf", -INF)]:
    ords = "inf" if o == INF else "-inf" if o == -INF else o
    add(f"mnorm_{nm}", "matrix_norm", lambda a, o=o: L.matrix_norm(a, o), [A], args=[ords])
    add(f"mnorm_keep_{nm}", "matrix_norm", lambda a, o=o: L.matrix_norm(a, o, dim=(0, 2), keepdim=True), [A],
        args=[ords, [1, 3], True])
add("norm_vec", "norm", L.norm, [r(2, 3, 4)])
add("norm_mat", "norm", lambda a: L.norm(a, "nuc"), [r(3, 4)], args=["nuc"])
add("norm_ord", "norm", lambda a: L.norm(a, 1), [r(3, 4)], args=[1])
add("norm_vdim", "norm", lambda a: L.norm(a, 3, dim=1), [r(3, 4)], args=[3, 2])
for n in [0, 1, 2, 3, 5, -1, -2]:
    add(f"mpow_{n}".replace("-", "m"), "matrix_power", lambda a, n=n: L.matrix_power(a, n), [r(2, 3, 3)], args=[n])
add("mdot_3", "multi_dot", lambda a, b, c: L.multi_dot([a, b, c]), [r(2, 3), r(3, 4), r(4, 2)])
add("mdot_vec", "multi_dot", lambda a, b, c: L.multi_dot([a, b, c]), [r(3), r(3, 4), r(4)])
g.write("linalg.safetensors", tensors, cases)
