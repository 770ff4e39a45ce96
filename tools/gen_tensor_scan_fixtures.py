#!/usr/bin/python3
"""Writes spec/fixtures/tensor_scan.safetensors with PyTorch 1.13, for
spec/tensor_scan_spec.lua: cumsum and cumprod along each dim of a 3-d
tensor (float32 and float64), of a transposed and narrowed view, of int32,
int64, uint8 and bool tensors (int64 results, wrapping past 2^63), with the
dtype option, with NaN and inf, and float64 gradients of cumprod on rows
holding no zero, one zero, two zeros in a row, zeros at both ends and only
zeros.

For every case "<name>": the input "<name>.x" and PyTorch's result
"<name>.out" (of its dtype); a gradient case also has "<name>.dout" and
"<name>.dx", the gradient of sum(out * dout). The metadata entry "cases" is
a JSON list of {name, op, dim (1-based, lunet's), dtype (the option, or
null), view (null, or "t": x is stored as is and scanned as
x:transpose(1, 3):narrow(2, 2, 3)), grad (true for a gradient case)}.
Same writer as tools/gen_nn_fixtures.py (fixture_lib's save), with
the integer and bool dtypes.  Run:  /usr/bin/python3 tools/gen_tensor_scan_fixtures.py
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as g  # noqa: E402

LUNET_DTYPE = {torch.float32: "float32", torch.float64: "float64", torch.int32: "int32",
               torch.int64: "int64", torch.uint8: "uint8"}

tensors, cases = {}, []
NAN, INF = float("nan"), float("inf")


def add(name, op, x, dim, dtype=None, view=None, fn=None):
    """PyTorch's op of x (or of fn(x), the view) along 0-based dim, with dtype"""
    y = fn(x) if fn else x
    kw = {"dtype": dtype} if dtype is not None else {}
    out = getattr(torch, op)(y, dim, **kw)
    tensors[f"{name}.x"], tensors[f"{name}.out"] = x, out
    cases.append({"name": name, "op": op, "dim": dim + 1, "dtype": LUNET_DTYPE.get(dtype), "view": view,
                  "grad": False})


def add_grad(name, op, x, dim):
    """float64 output and gradient of sum(op(x, dim) * dout)"""
    xd = x.double().requires_grad_(True)
    out = getattr(torch, op)(xd, dim)
    dout = torch.randn(out.shape, dtype=torch.float64)
    (dx,) = torch.autograd.grad(out, [xd], dout)
    tensors[f"{name}.x"], tensors[f"{name}.out"] = xd.detach(), out.detach()
    tensors[f"{name}.dout"], tensors[f"{name}.dx"] = dout, dx
    cases.append({"name": name, "op": op, "dim": dim + 1, "dtype": None, "view": None, "grad": True})


def float_cases():
    # cumprod's inputs near +-1, so that products of up to 5 stay moderate
    xs = torch.randn(3, 4, 5)
    xp = (torch.rand(3, 4, 5) + 0.5) * torch.sign(torch.randn(3, 4, 5))
    for dt, tag in [(torch.float32, "f32"), (torch.float64, "f64")]:
        for d in range(3):
            add(f"cumsum_3d_{tag}_dim{d + 1}", "cumsum", xs.to(dt), d)
            add(f"cumprod_3d_{tag}_dim{d + 1}", "cumprod", xp.to(dt), d)
    # a strided view: transposed (non-contiguous along every dim) and narrowed
    base = torch.randn(4, 6, 5)
    view = lambda t: t.transpose(0, 2).narrow(1, 1, 3)  # noqa: E731
    for d in range(3):
        add(f"cumsum_view_dim{d + 1}", "cumsum", base, d, view="t", fn=view)
        add(f"cumprod_view_dim{d + 1}", "cumprod", base, d, view="t", fn=view)
    # NaN and inf along each row; a -0.0 alone sums to 0.0 (the scan starts at 0)
    special = torch.tensor([[1.0, NAN, 2.0, INF, -INF, 3.0],
                            [1.0, INF, 0.0, 2.0, 5.0, -1.0],
                            [INF, -INF, 1.0, 2.0, 3.0, 4.0],
                            [-0.0, 2.0, -INF, 0.0, NAN, 1.0],
                            [1e38, 1e38, -1e38, 3.0, 1e-30, 1e-30]])
    for d in range(2):
        for dt, tag in [(torch.float32, "f32"), (torch.float64, "f64")]:
            add(f"cumsum_special_{tag}_dim{d + 1}", "cumsum", special.to(dt), d)
            add(f"cumprod_special_{tag}_dim{d + 1}", "cumprod", special.to(dt), d)
    add("cumsum_negzero", "cumsum", torch.tensor([-0.0, -0.0]), 0)


def int_cases():
    xi = torch.randint(-9, 10, (3, 4, 5))
    for dt, tag in [(torch.int32, "i32"), (torch.int64, "i64"), (torch.uint8, "u8")]:
        x = xi.abs().to(dt) if dt == torch.uint8 else xi.to(dt)
        for d in range(3):
            add(f"cumsum_{tag}_dim{d + 1}", "cumsum", x, d)
            add(f"cumprod_{tag}_dim{d + 1}", "cumprod", x, d)
    b = torch.rand(3, 4, 5) > 0.4
    for d in range(3):
        add(f"cumsum_bool_dim{d + 1}", "cumsum", b, d)
        add(f"cumprod_bool_dim{d + 1}", "cumprod", b, d)
    # int64 wraps around (two's complement), as PyTorch's
    big = torch.tensor([2 ** 62, 2 ** 62, 2 ** 62, -(2 ** 63), 7])
    add("cumsum_i64_wrap", "cumsum", big, 0)
    add("cumprod_i64_wrap", "cumprod", torch.tensor([2 ** 40, 2 ** 30, 3, -5]), 0)
    # the dtype option: cast first, then scan in that dtype (wrapping, truncating)
    add("cumsum_f32_as_f64", "cumsum", torch.randn(4, 5), 1, dtype=torch.float64)
    add("cumsum_f64_as_f32", "cumsum", torch.randn(4, 5, dtype=torch.float64), 0, dtype=torch.float32)
    add("cumsum_i32_as_i32", "cumsum", torch.tensor([2 ** 31 - 1, 1, 5], dtype=torch.int32), 0, dtype=torch.int32)
    add("cumprod_i32_as_i32", "cumprod", torch.tensor([65536, 65536, 3], dtype=torch.int32), 0, dtype=torch.int32)
    add("cumsum_u8_as_u8", "cumsum", torch.tensor([200, 100, 3], dtype=torch.uint8), 0, dtype=torch.uint8)
    add("cumsum_f32_as_i32", "cumsum", torch.tensor([1.7, -2.9, 3.5, 0.2]), 0, dtype=torch.int32)
    add("cumprod_f32_as_i64", "cumprod", torch.tensor([1.7, -2.9, 3.5, 2.2]), 0, dtype=torch.int64)
    add("cumsum_bool_as_f32", "cumsum", torch.tensor([True, False, True, True]), 0, dtype=torch.float32)
    add("cumsum_i64_as_f64", "cumsum", torch.tensor([3, -1, 4, 1, -5]), 0, dtype=torch.float64)


def grad_cases():
    rows = torch.tensor([
        [1.5, -0.7, 2.0, 0.9, -1.2, 0.8],   # no zero
        [1.5, 0.0, 2.0, 0.9, -1.2, 0.8],    # one zero
        [1.5, 0.0, 0.0, 0.9, -1.2, 0.8],    # two zeros in a row
        [0.0, -0.7, 2.0, 0.9, -1.2, 0.0],   # zeros at both ends
        [1.5, 0.0, 2.0, 0.0, -1.2, 0.0],    # three zeros apart
        [0.0, 0.0, 0.0, 0.0, 0.0, 0.0],     # only zeros
    ])
    for d in range(2):
        add_grad(f"grad_cumprod_zeros_dim{d + 1}", "cumprod", rows, d)
        add_grad(f"grad_cumsum_dim{d + 1}", "cumsum", rows, d)
    add_grad("grad_cumprod_3d_dim2", "cumprod", torch.randn(2, 5, 3), 1)


def main():
    torch.manual_seed(0)
    float_cases()
    int_cases()
    grad_cases()
    g.write("tensor_scan.safetensors", tensors, cases)


if __name__ == "__main__":
    main()
