#!/usr/bin/python3
"""Writes spec/fixtures/torch_tensors.safetensors with PyTorch, for
spec/serialize_spec.lua: one tensor of every dtype lunet reads, a 0-d and a
zero-size tensor, a transposed view, and metadata with non-ASCII text.

The format is written by hand by tools/fixture_lib.py's save (Debian has
no python3-safetensors), the way the reference implementation lays it out.
Run with Debian's python:  /usr/bin/python3 tools/gen_safetensors_fixture.py
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixture_lib import save  # noqa: E402


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
