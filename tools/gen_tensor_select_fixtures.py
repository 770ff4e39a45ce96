#!/usr/bin/python3
"""Writes spec/fixtures/tensor_select.safetensors with PyTorch 1.13, for
spec/tensor_select_spec.lua: nonzero (and as_tuple), masked_select, unique,
unique_consecutive and bincount over float32, float64, int64, int32, uint8
and bool inputs, transposed and narrowed views, empty and 0-d tensors,
broadcasting masks (either side, both sides), duplicates and runs, NaN and
-0.0, unique's dim, bincount's weights (float32, float64, int64, bool) and
minlength; and float64 input gradients of sum(masked_select(x, mask) * dout).

For every case "<name>": the input "<name>.x" (a mask "<name>.mask",
weights "<name>.w"), and PyTorch's results: "<name>.out" (nonzero: the
index matrix, stored 1-based), "<name>.c1".."<name>.cN" (nonzero's
as_tuple columns, 1-based), "<name>.values", "<name>.inverse" (1-based),
"<name>.counts"; a gradient case has "<name>.dout" and "<name>.dx". The
metadata entry "cases" is a JSON list of {name, op, opts (lunet's options
table: 1-based dim, as_tuple, sorted, return_inverse, return_counts), view
and mask_view (null, "t": stored as is, used transposed (dims 1 and 2),
"tn": transposed then narrowed to rows 2..3 of dim 1, "col2": column 2,
x:select(2, 2)), minlength (bincount,
null when not given), nan (true: PyTorch 1.13's CPU unique gives NaN
counts 0 and points NaN's inverse at the first value, so only values are
compared), unordered (sorted = false: PyTorch's CPU order is a hash's, so
values are compared as sets), grad}. One result differs from PyTorch's on
purpose: bincount of an empty input with weights is stored in the weights'
result dtype (PyTorch 1.13: int64 zeros, whatever the weights). Same writer as
tools/gen_nn_fixtures.py (fixture_lib's save), with bool, uint8 and int32.
Run:  /usr/bin/python3 tools/gen_tensor_select_fixtures.py
"""
import os
import sys
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as g  # noqa: E402

tensors, cases = {}, []
NAN = float("nan")
# (masked_select with a uint8 mask: deprecated in 1.13, and lunet accepts it as PyTorch does)
warnings.filterwarnings("ignore", message="masked_select received a mask with dtype torch.uint8")


def view_of(x, view):
    if view == "t":
        return x.transpose(0, 1)
    if view == "tn":
        return x.transpose(0, 1).narrow(0, 1, 2)
    if view == "col2":
        return x[:, 1]
    return x


def add(name, op, x, opts=None, mask=None, view=None, mask_view=None, w=None, minlength=None, nan=False,
        unordered=False, grad=False):
    opts = dict(opts or {})
    tensors[f"{name}.x"] = x
    y = view_of(x, view)
    if op in ("nonzero", "argwhere"):
        if opts.get("as_tuple"):
            for i, c in enumerate(torch.nonzero(y, as_tuple=True)):
                tensors[f"{name}.c{i + 1}"] = c + 1
        else:
            tensors[f"{name}.out"] = getattr(torch, op)(y) + 1
    elif op == "masked_select":
        tensors[f"{name}.mask"] = mask
        m = view_of(mask, mask_view)
        if grad:
            xd = y.detach().clone().requires_grad_(True)
            out = torch.masked_select(xd, m)
            dout = torch.randn(out.shape, dtype=out.dtype)
            (dx,) = torch.autograd.grad(out, [xd], dout)
            tensors[f"{name}.dout"], tensors[f"{name}.dx"] = dout, dx
            out = out.detach()
        else:
            out = torch.masked_select(y, m)
        tensors[f"{name}.out"] = out
    elif op in ("unique", "unique_consecutive"):
        kw = {k: v for k, v in opts.items()}
        if "dim" in kw and kw["dim"] is not None:
            kw["dim"] = kw["dim"] - 1 if kw["dim"] > 0 else kw["dim"]
        if op == "unique_consecutive":
            kw.pop("sorted", None)
        r = getattr(torch, op)(y, **kw)
        if not isinstance(r, tuple):
            r = (r,)
        tensors[f"{name}.values"] = r[0]
        i = 1
        if opts.get("return_inverse"):
            tensors[f"{name}.inverse"] = r[i] + 1
            i += 1
        if opts.get("return_counts"):
            tensors[f"{name}.counts"] = r[i]
    elif op == "bincount":
        if w is not None:
            tensors[f"{name}.w"] = w
        kw = {} if minlength is None else {"minlength": minlength}
        out = torch.bincount(y, w, **kw)
        if w is not None and y.numel() == 0:
            # PyTorch 1.13 gives int64 zeros for an empty input whatever the weights;
            # lunet keeps the weights' rule (a result's dtype not set by its size)
            out = out.to(torch.float32 if w.dtype == torch.float32 else torch.float64)
        tensors[f"{name}.out"] = out
    cases.append({"name": name, "op": op, "opts": opts, "view": view, "mask_view": mask_view,
                  "minlength": minlength, "nan": nan, "unordered": unordered, "grad": grad})


def sparse(*shape, dtype=torch.float32, p=0.5):
    """random values with about a fraction p of exact zeros"""
    x = torch.randn(*shape).to(dtype) if dtype.is_floating_point else torch.randint(0 if dtype == torch.uint8 else -5, 6, shape, dtype=dtype)
    return torch.where(torch.rand(*shape) < p, torch.zeros((), dtype=dtype), x)


def nonzero_cases():
    for op in ("nonzero", "argwhere"):
        add(f"{op}_f32_3d", op, sparse(3, 4, 5))
    add("nonzero_f64_2d", "nonzero", sparse(6, 7, dtype=torch.float64))
    add("nonzero_i64_2d", "nonzero", sparse(5, 4, dtype=torch.int64))
    add("nonzero_i32_1d", "nonzero", sparse(9, dtype=torch.int32))
    add("nonzero_u8_2d", "nonzero", sparse(4, 3, dtype=torch.uint8, p=0.6))
    add("nonzero_bool_3d", "nonzero", torch.rand(2, 3, 4) < 0.4)
    add("nonzero_view_t", "nonzero", sparse(5, 6), view="t")
    add("nonzero_view_tn", "nonzero", sparse(4, 6, 3), view="tn")
    add("nonzero_nan_negzero", "nonzero", torch.tensor([[0.0, NAN, -0.0], [1.0, 0.0, float("inf")]]))
    add("nonzero_all_zero", "nonzero", torch.zeros(3, 4))
    add("nonzero_all_nonzero", "nonzero", torch.ones(2, 3, dtype=torch.int64))
    add("nonzero_empty", "nonzero", torch.zeros(2, 0, 3))
    add("nonzero_empty_1d", "nonzero", torch.zeros(0))
    add("nonzero_0d_one", "nonzero", torch.tensor(2.5))
    add("nonzero_0d_zero", "nonzero", torch.tensor(0.0))
    add("nonzero_4d", "nonzero", sparse(2, 3, 2, 4, p=0.7))
    tup = {"as_tuple": True}
    add("nonzero_tuple_3d", "nonzero", sparse(3, 4, 5), tup)
    add("nonzero_tuple_bool", "nonzero", torch.rand(4, 5) < 0.5, tup)
    add("nonzero_tuple_view", "nonzero", sparse(5, 6), tup, view="t")
    add("nonzero_tuple_empty", "nonzero", torch.zeros(2, 0), tup)
    add("nonzero_tuple_0d_one", "nonzero", torch.tensor(3), tup)
    add("nonzero_tuple_0d_zero", "nonzero", torch.tensor(0), tup)


def masked_select_cases():
    ms = "masked_select"
    x = torch.randn(3, 4, 5)
    add("ms_f32_same", ms, x, mask=torch.rand(3, 4, 5) < 0.5)
    add("ms_f64_same", ms, torch.randn(4, 6, dtype=torch.float64), mask=torch.rand(4, 6) < 0.3)
    add("ms_i64", ms, torch.randint(-9, 9, (5, 3)), mask=torch.rand(5, 3) < 0.5)
    add("ms_bool", ms, torch.rand(4, 4) < 0.5, mask=torch.rand(4, 4) < 0.5)
    add("ms_u8_mask", ms, torch.randn(3, 5), mask=(torch.rand(3, 5) < 0.5).to(torch.uint8))
    add("ms_mask_row", ms, x, mask=torch.tensor([True, False, True, True, False]))
    add("ms_mask_col", ms, x, mask=(torch.rand(4, 1) < 0.5))
    add("ms_mask_bigger", ms, torch.randn(4), mask=torch.rand(3, 2, 4) < 0.5)
    add("ms_both_broadcast", ms, torch.randn(3, 1), mask=torch.rand(1, 4) < 0.6)
    add("ms_x_view", ms, torch.randn(5, 6), mask=torch.rand(6, 5) < 0.5, view="t")
    add("ms_mask_view", ms, torch.randn(6, 5), mask=torch.rand(5, 6) < 0.5, mask_view="t")
    add("ms_both_views", ms, torch.randn(4, 6, 3), mask=torch.rand(4, 6, 3) < 0.5, view="tn", mask_view="tn")
    add("ms_all_false", ms, torch.randn(3, 3), mask=torch.zeros(3, 3, dtype=torch.bool))
    add("ms_all_true", ms, torch.randn(3, 3), mask=torch.ones(3, dtype=torch.bool))
    add("ms_empty", ms, torch.randn(2, 0), mask=torch.ones(2, 0, dtype=torch.bool))
    add("ms_empty_mask_broadcast", ms, torch.randn(3), mask=torch.ones(0, 3, dtype=torch.bool))
    add("ms_0d_true", ms, torch.tensor(1.5), mask=torch.tensor(True))
    add("ms_0d_false", ms, torch.tensor(1.5), mask=torch.tensor(False))
    add("ms_0d_x", ms, torch.tensor(2.5), mask=torch.tensor([True, False, True]))
    add("ms_0d_mask", ms, torch.randn(2, 3), mask=torch.tensor(True))
    add("ms_nan", ms, torch.tensor([NAN, 1.0, -0.0, NAN]), mask=torch.tensor([True, True, True, False]))
    # gradients (float64): the gradient scattered back, summed over broadcast dims
    xd = torch.randn(3, 4, 5, dtype=torch.float64)
    add("grad_ms_same", ms, xd, mask=torch.rand(3, 4, 5) < 0.5, grad=True)
    add("grad_ms_x_broadcast", ms, torch.randn(4, 1, dtype=torch.float64), mask=torch.rand(2, 4, 3) < 0.6,
        grad=True)
    add("grad_ms_mask_broadcast", ms, torch.randn(3, 4, dtype=torch.float64), mask=torch.rand(4) < 0.5, grad=True)
    add("grad_ms_0d", ms, torch.tensor(0.7, dtype=torch.float64), mask=torch.tensor([True, False, True]), grad=True)


def unique_cases():
    u = "unique"
    IC = {"return_inverse": True, "return_counts": True}
    dup = torch.randint(-3, 4, (4, 5)).float()
    add("unique_f32", u, dup)
    add("unique_f32_ic", u, dup, IC)
    add("unique_f32_i", u, dup, {"return_inverse": True})
    add("unique_f32_c", u, dup, {"return_counts": True})
    add("unique_f64_ic", u, torch.randint(0, 5, (3, 2, 4)).double(), IC)
    add("unique_i64_ic", u, torch.randint(-4, 4, (10,)), IC)
    add("unique_i32_ic", u, torch.randint(0, 3, (2, 6), dtype=torch.int32), IC)
    add("unique_u8_ic", u, torch.randint(0, 4, (7,), dtype=torch.uint8), IC)
    add("unique_bool_ic", u, torch.rand(3, 4) < 0.5, IC)
    add("unique_distinct", u, torch.randperm(9).double(), IC)
    add("unique_view_t", u, dup, IC, view="t")
    add("unique_view_tn", u, torch.randint(0, 4, (4, 6, 3)), IC, view="tn")
    add("unique_negzero", u, torch.tensor([0.0, -0.0, 1.0, -0.0]), IC)
    add("unique_inf", u, torch.tensor([float("inf"), 1.0, -float("inf"), float("inf")]), IC)
    add("unique_empty", u, torch.zeros(2, 0), IC)
    add("unique_0d", u, torch.tensor(3.0), IC)
    add("unique_unsorted", u, torch.tensor([3, 1, 2, 1, 3]), {"sorted": False, **IC}, unordered=True)
    add("unique_sorted_true", u, torch.tensor([3, 1, 2, 1, 3]), {"sorted": True, **IC})
    add("unique_nan", u, torch.tensor([NAN, 1.0, NAN, 1.0, 0.0]), IC, nan=True)
    # dim: slices compared as wholes, sorted lexicographically
    rows = torch.tensor([[1, 2, 0], [0, 3, 1], [1, 2, 0], [0, 3, 0], [1, 1, 9]])
    add("unique_dim1", u, rows, {"dim": 1, **IC})
    add("unique_dim2", u, rows.t().contiguous(), {"dim": 2, **IC})
    add("unique_dim_neg", u, rows.t().contiguous(), {"dim": -1, **IC})
    add("unique_dim1_view", u, rows.t().contiguous(), {"dim": 1, **IC}, view="t")
    add("unique_dim2_3d", u, torch.randint(0, 2, (2, 6, 3)).float(), {"dim": 2, **IC})
    add("unique_dim1_3d_f64", u, torch.randint(0, 2, (6, 2, 2)).double(), {"dim": 1, **IC})
    add("unique_dim1_1d", u, torch.tensor([3.0, 1.0, 3.0, 2.0]), {"dim": 1, **IC})
    add("unique_dim1_wide", u, torch.randint(0, 2, (8, 7)), {"dim": 1, **IC})
    add("unique_dim1_bool", u, torch.rand(6, 2) < 0.5, {"dim": 1, **IC})
    add("unique_dim1_one", u, torch.tensor([[4, 5, 6]]), {"dim": 1, **IC})
    add("unique_dim_empty", u, torch.zeros(3, 0), {"dim": 2, **IC})
    add("unique_dim_empty_rows", u, torch.zeros(0, 2), {"dim": 1, **IC})
    uc = "unique_consecutive"
    runs = torch.tensor([1, 1, 2, 2, 3, 1, 1, 2])
    add("uc_i64", uc, runs)
    add("uc_i64_ic", uc, runs, IC)
    add("uc_f32_2d", uc, torch.tensor([[1.0, 1.0, 2.0], [2.0, 5.0, 5.0]]), IC)
    add("uc_view_t", uc, torch.randint(0, 2, (4, 5)), IC, view="t")
    add("uc_bool", uc, torch.tensor([True, True, False, True]), IC)
    add("uc_empty", uc, torch.zeros(0), IC)
    add("uc_0d", uc, torch.tensor(2), IC)
    add("uc_nan", uc, torch.tensor([NAN, NAN, 1.0, 1.0, NAN]), IC)
    add("uc_dim1", uc, torch.tensor([[1, 2], [1, 2], [0, 3], [1, 2]]), {"dim": 1, **IC})
    add("uc_dim2", uc, torch.tensor([[1, 1, 2, 2], [3, 3, 3, 4]]), {"dim": 2, **IC})


def bincount_cases():
    b = "bincount"
    x = torch.randint(0, 8, (20,))
    add("bincount_i64", b, x)
    add("bincount_i32", b, x.to(torch.int32))
    add("bincount_u8", b, x.to(torch.uint8))
    add("bincount_minlength_more", b, x, minlength=12)
    add("bincount_minlength_less", b, x, minlength=3)
    add("bincount_w_f32", b, x, w=torch.randn(20))
    add("bincount_w_f64", b, x, w=torch.randn(20, dtype=torch.float64))
    add("bincount_w_i64", b, x, w=torch.randint(-3, 5, (20,)))
    add("bincount_w_bool", b, x, w=torch.rand(20) < 0.5)
    add("bincount_w_minlength", b, x, w=torch.randn(20), minlength=10)
    add("bincount_view", b, torch.randint(0, 5, (6, 4)), view="col2")
    add("bincount_empty", b, torch.zeros(0, dtype=torch.int64))
    add("bincount_empty_minlength", b, torch.zeros(0, dtype=torch.int64), minlength=4)
    add("bincount_empty_w", b, torch.zeros(0, dtype=torch.int64), w=torch.zeros(0), minlength=2)
    add("bincount_zeros", b, torch.zeros(5, dtype=torch.int64))


def main():
    torch.manual_seed(0)
    nonzero_cases()
    masked_select_cases()
    unique_cases()
    bincount_cases()
    g.write("tensor_select.safetensors", tensors, cases)


if __name__ == "__main__":
    main()
