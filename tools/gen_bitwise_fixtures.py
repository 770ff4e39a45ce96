#!/usr/bin/python3
"""Writes spec/fixtures/tensor_bitwise.safetensors with PyTorch 1.13, for
spec/tensor_bitwise_spec.lua: bitwise_and/or/xor, bitwise_left_shift,
bitwise_right_shift, gcd and lcm of uint8, int32 and int64 tensors (two
tensors broadcasting, a tensor and a Lua number on either side, a transposed
view, empty and 0-d tensors), shift counts 0, 1, width - 1, width, width + 1,
100 and negative ones (torch 1.13's CPU results: counts modulo the width, 32
for uint8), gcd and lcm with zeros, negatives and the minimum, bitwise_not,
bool tensors, mixed dtypes (promotion) and the in-place forms.

For every case "<name>": the inputs "<name>.a" and (tensor operands)
"<name>.b", torch's result "<name>.out". The metadata entry "cases" is a
JSON list of {name, op, kind ("tt": a op b, "ts": a op scalar, "st": scalar
op a, "un": op(a)), scalar, inplace (a:op_(b) on a clone), view ("t": a is
used as a:t() on both sides)}. Same writer as tools/gen_nn_fixtures.py
(fixture_lib's save).
Run:  /usr/bin/python3 tools/gen_bitwise_fixtures.py
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as g  # noqa: E402

tensors, cases = {}, []
BINARY = ["bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift", "gcd", "lcm"]
SHIFTS = ["bitwise_left_shift", "bitwise_right_shift"]
DTYPES = {"uint8": torch.uint8, "int32": torch.int32, "int64": torch.int64}
torch.manual_seed(0)


def values(dt, n):
    """n values of dt: the type's extremes, 0, +-1 and random ones"""
    info = torch.iinfo(dt)
    special = [info.min, info.max, 0, 1, info.max // 3]
    if info.min < 0:
        special += [-1, info.min + 2, -12]
    rnd = torch.randint(max(info.min, -1000), min(info.max, 1000), (n,), dtype=torch.int64).tolist()
    return torch.tensor((special + rnd)[:n], dtype=dt)


def counts(dt, n):
    """shift counts: 0, 1, width - 1, width, width + 1, 100 and negative ones"""
    w = torch.iinfo(dt).bits
    c = [0, 1, w - 1, w, w + 1, 100, 31, 33, 3]
    if dt != torch.uint8:
        c += [-1, -5, -w]
    else:
        c += [255, 251, 7]
    return torch.tensor((c * n)[:n], dtype=dt)


def no_min(t):
    return t if t.dtype in (torch.uint8, torch.bool) else t.masked_fill(t == torch.iinfo(t.dtype).min, 7)


def add(name, op, a, b=None, kind="tt", scalar=None, inplace=False, view=None):
    if op == "lcm":   # torch 1.13's lcm(min, odd) can die of SIGFPE (min / -1): no minimum there
        a = no_min(a)
        b = None if b is None else no_min(b)
    x = a.t() if view == "t" else a
    f = getattr(torch, op)
    if kind == "un":
        out = x.clone().__getattribute__(op + "_")() if inplace else f(x)
    elif kind == "ts":
        # (torch.gcd and lcm take no number: there a 0-d tensor, which does
        # not promote, as a number would not)
        sc = torch.tensor(scalar) if op in ("gcd", "lcm") else scalar
        out = getattr(x.clone(), op + "_")(sc) if inplace else f(x, sc)
    elif kind == "st":
        out = f(torch.tensor(scalar), x) if op in ("gcd", "lcm") else f(scalar, x)
    else:
        out = getattr(x.clone(), op + "_")(b) if inplace else f(x, b)
    tensors[name + ".a"] = a.contiguous()
    if b is not None:
        tensors[name + ".b"] = b.contiguous()
    tensors[name + ".out"] = out.contiguous()
    cases.append({"name": name, "op": op, "kind": kind, "scalar": scalar, "inplace": inplace, "view": view})


for dn, dt in DTYPES.items():
    w = torch.iinfo(dt).bits
    for op in BINARY:
        shift = op in SHIFTS
        a = values(dt, 12).reshape(3, 4)
        b = counts(dt, 4) if shift else values(dt, 4)[torch.randperm(4)]
        add(f"{op}.{dn}.bcast", op, a, b)                       # (3, 4) with (4,)
        bb = counts(dt, 12).reshape(3, 4) if shift else values(dt, 12).flip(0).reshape(3, 4)
        add(f"{op}.{dn}.same", op, a, bb)
        add(f"{op}.{dn}.col", op, a, bb[:, :1].contiguous())    # (3, 4) with (3, 1)
        add(f"{op}.{dn}.view", op, a.reshape(4, 3), bb, view="t")
        add(f"{op}.{dn}.empty", op, torch.zeros(0, 4, dtype=dt), b)
        add(f"{op}.{dn}.zerod", op, a[1, 2].clone(), bb[2, 1].clone())
        add(f"{op}.{dn}.zerod_b", op, a, bb[0, 1].clone())      # a 0-d operand of the same dtype
        scalars = [0, 1, w - 1, w, w + 1, 100, -1, -5] if shift else [0, 1, -1, 6, -4, 12, 255]
        for i, s in enumerate(scalars):
            add(f"{op}.{dn}.s{i}", op, a, kind="ts", scalar=s)
        for i, s in enumerate([1, 6, -3] if not shift else [1, -2, 3]):
            add(f"{op}.{dn}.r{i}", op, bb if shift else a, kind="st", scalar=s)
        add(f"{op}.{dn}.inplace", op, a, bb, inplace=True)
        add(f"{op}.{dn}.inplace_s", op, a, kind="ts", scalar=(3 if shift else -6), inplace=True)
    add(f"bitwise_not.{dn}", "bitwise_not", values(dt, 12).reshape(3, 4), kind="un")
    add(f"bitwise_not.{dn}.view", "bitwise_not", values(dt, 12).reshape(4, 3), kind="un", view="t")
    add(f"bitwise_not.{dn}.inplace", "bitwise_not", values(dt, 12).reshape(3, 4), kind="un", inplace=True)
    add(f"bitwise_not.{dn}.zerod", "bitwise_not", values(dt, 2)[0].clone(), kind="un")
    add(f"bitwise_not.{dn}.empty", "bitwise_not", torch.zeros(2, 0, dtype=dt), kind="un")

# bool tensors, and promotion across dtypes
p = torch.tensor([[True, False, True, False], [True, True, False, False]])
q = torch.tensor([True, False, False, True])
for op in BINARY[:3]:
    add(f"{op}.bool", op, p, q)
    add(f"{op}.bool.inplace", op, p, q, inplace=True)
    add(f"{op}.bool_int", op, p, values(torch.int32, 4))               # -> int32
    add(f"{op}.int_bool", op, values(torch.int64, 8).reshape(2, 4), q)  # -> int64
    add(f"{op}.bool.s", op, p, kind="ts", scalar=3)                     # a number: int64
add("bitwise_not.bool", "bitwise_not", p, kind="un")
add("bitwise_not.bool.inplace", "bitwise_not", p, kind="un", inplace=True)
i32, i64, u8 = values(torch.int32, 8).reshape(2, 4), values(torch.int64, 4), values(torch.uint8, 8).reshape(2, 4)
for op in BINARY:
    add(f"{op}.i32_i64", op, i32, i64 if op not in SHIFTS else counts(torch.int64, 4))   # -> int64
    add(f"{op}.u8_i32", op, u8, i32 if op not in SHIFTS else counts(torch.int32, 8).reshape(2, 4))
    # in place into the narrower dtype: computed in the wider one, then cast
    add(f"{op}.u8_i64.inplace", op, u8, torch.tensor([100, 300, -3, 7]) if op not in SHIFTS
        else torch.tensor([100, 36, 256, 9]), inplace=True)

g.write("tensor_bitwise.safetensors", tensors, cases)
