#!/usr/bin/python3
"""Writes spec/fixtures/torch_tensors.safetensors with PyTorch, for
spec/serialize_spec.lua: one tensor of every dtype lunet reads, a 0-d and a
zero-size tensor, a transposed view, and metadata with non-ASCII text.

The format is written by hand here (Debian has no python3-safetensors), the
way the reference implementation lays it out: 8-byte little-endian header
length, JSON header (json.dumps escapes non-ASCII as \\uXXXX), header padded
with spaces to a multiple of 8, then the raw little-endian bytes, widest
dtype first. Run with Debian's python:  /usr/bin/python3 tools/gen_safetensors_fixture.py
"""
import json
import os
import struct

import torch

DTYPES = {
    torch.float32: "F32", torch.float64: "F64", torch.int32: "I32", torch.int64: "I64",
    torch.uint8: "U8", torch.bool: "BOOL", torch.float16: "F16", torch.bfloat16: "BF16",
}


def tensor_bytes(t):
    t = t.contiguous()
    if t.dtype in (torch.float16, torch.bfloat16):
        return t.view(torch.int16).numpy().tobytes()
    return t.numpy().tobytes()


def save(path, tensors, metadata):
    order = sorted(tensors, key=lambda k: (-tensors[k].element_size(), k))
    header, blobs, off = {"__metadata__": metadata}, [], 0
    for name in order:
        t = tensors[name]
        b = tensor_bytes(t)
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def main():
    torch.manual_seed(0)
    base = torch.arange(12, dtype=torch.float64).reshape(3, 4)
    tensors = {
        "f32": (base * 0.25 - 1.0).float(),                     # -1 + 0.25*i
        "f64": torch.sqrt(base + 1.0),                           # sqrt(i + 1), full precision
        "i32": (torch.arange(6, dtype=torch.int32) - 3) * 1000,  # -3000 .. 2000
        "i64": torch.tensor([2**40 + 1, -(2**35), 7, 0], dtype=torch.int64),
        "u8": torch.tensor([[0, 1, 127], [128, 254, 255]], dtype=torch.uint8),
        "bool": torch.tensor([True, False, False, True, True]),
        "f16": torch.tensor([0.5, -2.0, 65504.0, 1.0 / 1024], dtype=torch.float16),
        "bf16": torch.tensor([1.0, -3.0, 256.0, 0.0078125], dtype=torch.bfloat16),
        "scalar": torch.tensor(3.5, dtype=torch.float32),        # 0-d
        "empty": torch.zeros(0, 3, dtype=torch.float32),         # zero-size
        "transposed": (base.float() + 1.0).t(),                  # a non-contiguous view (4x3)
        "conv.weight": torch.randn(2, 1, 2, 2),                  # values listed in the spec
    }
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "..", "spec", "fixtures", "torch_tensors.safetensors")
    save(path, tensors, {"format": "pt", "note": "caf\u00e9 \u2713", "epoch": "7"})
    print("wrote", os.path.normpath(path))
    print("conv.weight", tensors["conv.weight"].flatten().tolist())


if __name__ == "__main__":
    main()
