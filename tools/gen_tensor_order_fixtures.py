#!/usr/bin/python3
"""Writes spec/fixtures/tensor_order.safetensors with PyTorch 1.13, for
spec/tensor_order_stats_spec.lua: median, nanmedian, kthvalue, quantile and
nanquantile over all elements and along each dim (keepdim both ways) of
3-d tensors with odd and even sizes, of a transposed and narrowed view, of
rows holding NaNs (some, all, none), of ties (integer-valued floats), of
float64 and int64 tensors; kthvalue for several k; quantile with a number
q and a 1-d tensor q under all five interpolations; and float64 input
gradients of sum(out * dout).

For every case "<name>": the input "<name>.x", PyTorch's values
"<name>.values" (of the input's dtype) and, for the forms that give them,
"<name>.indices" (stored 1-based, lunet's convention); a tensor q is
"<name>.q"; a gradient case also has "<name>.dout" and "<name>.dx". The
metadata entry "cases" is a JSON list of {name, op, dim (1-based, lunet's,
or null: over all elements), keepdim, k, q (a number, or null for a tensor
q), interpolation, view (null, or "t": x is stored as is and reduced as
x:transpose(1, 3):narrow(2, 2, 3)), ties (true: the index among equal
values is not specified, so only x:gather(dim, indices) == values is
checked), grad}. Same writer as tools/gen_nn_fixtures.py (fixture_lib's save).
Run:  /usr/bin/python3 tools/gen_tensor_order_fixtures.py
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as g  # noqa: E402

tensors, cases = {}, []
NAN = float("nan")
INTERPOLATIONS = ["linear", "lower", "higher", "nearest", "midpoint"]
VIEW = lambda t: t.transpose(0, 2).narrow(1, 1, 3)  # noqa: E731


def run(op, x, dim, keepdim, k, q, interpolation):
    """PyTorch's op; dim 0-based or None -> (values, indices or None)"""
    f = getattr(torch, op)
    if op in ("median", "nanmedian"):
        if dim is None:
            return f(x), None
        r = f(x, dim, keepdim=keepdim)
        return r.values, r.indices
    if op == "kthvalue":
        r = f(x, k, dim, keepdim=keepdim)
        return r.values, r.indices
    return f(x, q, dim, keepdim=keepdim, interpolation=interpolation), None


def add(name, op, x, dim=None, keepdim=False, k=None, q=0.5, interpolation="linear", view=None, ties=False,
        grad=False):
    """one case; dim 0-based (or None); q a number or a tensor"""
    y = VIEW(x) if view else x
    if grad:
        xd = x.detach().clone().requires_grad_(True)
        vals, idx = run(op, xd, dim, keepdim, k, q, interpolation)
        dout = torch.randn(vals.shape, dtype=vals.dtype)
        (dx,) = torch.autograd.grad(vals, [xd], dout)
        tensors[f"{name}.dout"], tensors[f"{name}.dx"] = dout, dx
        vals = vals.detach()
    else:
        vals, idx = run(op, y, dim, keepdim, k, q, interpolation)
    tensors[f"{name}.x"], tensors[f"{name}.values"] = x, vals
    if idx is not None:
        tensors[f"{name}.indices"] = idx + 1
    qnum = q
    if torch.is_tensor(q):
        tensors[f"{name}.q"], qnum = q, None
    cases.append({"name": name, "op": op, "dim": None if dim is None else dim + 1 if dim >= 0 else dim, "keepdim": keepdim, "k": k,
                  "q": qnum, "interpolation": interpolation, "view": view, "ties": ties, "grad": grad})


def median_cases():
    # sizes 3 (odd), 4 (even), 5 (odd) along the dims; distinct values
    x = torch.randn(3, 4, 5)
    xe = torch.randn(2, 6, 4)   # even sizes only
    for op in ("median", "nanmedian"):
        add(f"{op}_all_odd", op, x)
        add(f"{op}_all_even", op, xe)
        for d in range(3):
            for kd in (False, True):
                add(f"{op}_3d_dim{d + 1}_kd{int(kd)}", op, x, d, kd)
                add(f"{op}_even_dim{d + 1}_kd{int(kd)}", op, xe, d, kd)
            add(f"{op}_view_dim{d + 1}", op, torch.randn(4, 6, 5), d, view="t")
        add(f"{op}_neg_dim", op, x, -1)
    # ties: integer-valued floats
    t = torch.randint(0, 4, (4, 7)).float()
    for op in ("median", "nanmedian"):
        add(f"{op}_ties_all", op, t)
        for d in range(2):
            add(f"{op}_ties_dim{d + 1}", op, t, d, ties=True)
    # NaNs: a row with one, with two, all NaN, none; a column all NaN
    n = torch.tensor([[1.0, NAN, 3.0, 2.0, 0.5],
                      [NAN, 4.0, NAN, -1.0, 2.0],
                      [NAN, NAN, NAN, NAN, NAN],
                      [5.0, -2.0, 7.0, 1.5, 0.0],
                      [2.5, NAN, 6.0, 3.5, -4.0],
                      [-1.0, 8.0, NAN, 9.0, 1.0]])
    for op in ("median", "nanmedian"):
        add(f"{op}_nan_all", op, n)
        add(f"{op}_nan_allnan", op, torch.full((3,), NAN))
        for d in range(2):
            for kd in (False, True):
                # (nanmedian's index in an all-NaN row is unspecified: PyTorch's nth_element picks one)
                add(f"{op}_nan_dim{d + 1}_kd{int(kd)}", op, n, d, kd, ties=op == "nanmedian")
    # float64 and int64
    xd = torch.randn(5, 4, dtype=torch.float64)
    xi = torch.randperm(40).view(5, 8) - 20
    for op in ("median", "nanmedian"):
        add(f"{op}_f64_all", op, xd)
        add(f"{op}_i64_all", op, xi)
        for d in range(2):
            add(f"{op}_f64_dim{d + 1}", op, xd, d)
            add(f"{op}_i64_dim{d + 1}", op, xi, d, True)
    xt = torch.randint(-3, 3, (6, 5))
    add("median_i64_ties_dim1", "median", xt, 0, ties=True)
    add("median_i64_ties_all", "median", xt)


def kthvalue_cases():
    x = torch.randn(3, 4, 5)
    for d in range(3):
        size = x.shape[d]
        for k in sorted({1, 2, (size + 1) // 2, size}):
            add(f"kthvalue_3d_dim{d + 1}_k{k}", "kthvalue", x, d, False, k)
        add(f"kthvalue_3d_dim{d + 1}_kd", "kthvalue", x, d, True, 2)
        add(f"kthvalue_view_dim{d + 1}", "kthvalue", torch.randn(4, 6, 5), d, k=2, view="t")
    t = torch.randint(0, 3, (5, 6)).float()
    for k in (1, 3, 6):
        add(f"kthvalue_ties_k{k}", "kthvalue", t, 1, k=k, ties=True)
    n = torch.tensor([[1.0, NAN, 3.0, 2.0], [NAN, NAN, 0.0, -1.0]])
    for k in (1, 2, 3, 4):
        add(f"kthvalue_nan_k{k}", "kthvalue", n, 1, k=k)
    add("kthvalue_f64", "kthvalue", torch.randn(4, 6, dtype=torch.float64), 0, k=3)
    add("kthvalue_i64", "kthvalue", torch.randperm(30).view(5, 6), 1, k=4)
    add("kthvalue_i64_ties", "kthvalue", torch.randint(-2, 2, (5, 6)), 0, True, 2, ties=True)


def quantile_cases():
    x = torch.randn(3, 4, 5)
    # q * (n - 1) for n = 5: 0, 0.5 (ties to even: 0), 1.5 (2), 2.92, 3.6, 4
    qs = torch.tensor([0.0, 0.125, 0.375, 0.73, 0.9, 1.0])
    for op in ("quantile", "nanquantile"):
        for it in INTERPOLATIONS:
            add(f"{op}_all_{it}", op, x, q=0.3, interpolation=it)
            add(f"{op}_all_qt_{it}", op, x, q=qs, interpolation=it)
            for d in range(3):
                add(f"{op}_dim{d + 1}_{it}", op, x, d, q=0.62, interpolation=it)
                add(f"{op}_dim{d + 1}_qt_{it}_kd", op, x, d, True, q=qs, interpolation=it)
        add(f"{op}_all_kd", op, x, None, True, q=0.4)
        add(f"{op}_all_qt_kd", op, x, None, True, q=qs)
        add(f"{op}_q0d", op, x, 1, q=torch.tensor(0.25))
        add(f"{op}_view_dim2", op, torch.randn(4, 6, 5), 1, q=qs, view="t")
        add(f"{op}_f64", op, torch.randn(4, 7, dtype=torch.float64), 1, q=qs.double())
        add(f"{op}_ties", op, torch.randint(0, 3, (4, 7)).float(), 1, q=qs)
    n = torch.tensor([[1.0, NAN, 3.0, 2.0, 0.5],
                      [NAN, 4.0, NAN, -1.0, 2.0],
                      [NAN, NAN, NAN, NAN, NAN],
                      [5.0, -2.0, 7.0, 1.5, 0.0]])
    for op in ("quantile", "nanquantile"):
        for it in INTERPOLATIONS:
            add(f"{op}_nan_{it}", op, n, 1, q=qs, interpolation=it)
        add(f"{op}_nan_dim1", op, n, 0, q=0.5)
        add(f"{op}_nan_all", op, n, q=0.5)


def grad_cases():
    x = torch.randn(3, 4, 5, dtype=torch.float64)
    for d in range(3):
        add(f"grad_median_dim{d + 1}", "median", x, d, grad=True)
        add(f"grad_nanmedian_dim{d + 1}_kd", "nanmedian", x, d, True, grad=True)
        add(f"grad_kthvalue_dim{d + 1}", "kthvalue", x, d, k=2, grad=True)
        add(f"grad_quantile_dim{d + 1}", "quantile", x, d, q=torch.tensor([0.1, 0.5, 0.8], dtype=torch.float64),
            grad=True)
    add("grad_median_all", "median", x, grad=True)
    add("grad_nanmedian_all", "nanmedian", x, grad=True)
    # over all elements PyTorch shares the gradient among the tied medians
    add("grad_median_all_ties", "median", torch.tensor([[1.0, 2.0, 2.0], [3.0, 2.0, 0.0]], dtype=torch.float64),
        grad=True)
    add("grad_median_all_nan", "median", torch.tensor([1.0, NAN, 2.0, NAN], dtype=torch.float64), grad=True)
    add("grad_nanmedian_all_nan", "nanmedian", torch.tensor([1.0, NAN, 2.0, 3.0], dtype=torch.float64),
        grad=True)
    for it in INTERPOLATIONS:
        add(f"grad_quantile_all_{it}", "quantile", x, q=0.37, interpolation=it, grad=True)
    n = torch.tensor([[1.0, NAN, 3.0, 2.0, 0.5], [4.0, 1.0, -1.0, 2.0, 0.25]], dtype=torch.float64)
    add("grad_nanquantile_nan", "nanquantile", n, 1, q=torch.tensor([0.2, 0.7], dtype=torch.float64), grad=True)
    add("grad_nanmedian_nan", "nanmedian", n, 1, grad=True)


def main():
    torch.manual_seed(0)
    median_cases()
    kthvalue_cases()
    quantile_cases()
    grad_cases()
    g.write("tensor_order.safetensors", tensors, cases)


if __name__ == "__main__":
    main()
