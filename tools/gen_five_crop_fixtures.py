"""Writes spec/fixtures/five_crop.safetensors: torchvision 0.14's
transforms.functional.five_crop / ten_crop (and FiveCrop / TenCrop) on float
and uint8 tensors of several shapes, sizes whose center offsets round half
to even, a crop as large as the image, 2-d and batched inputs.
Run: /usr/bin/python3 tools/gen_five_crop_fixtures.py
"""
import os
import sys

import torch
import torchvision.transforms as T
import torchvision.transforms.functional as TF

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib  # noqa: E402
from fixture_lib import tensors, cases  # noqa: E402

torch.manual_seed(0)


def case(name, op, shape, size, vertical_flip=None, uint8=False):
    x = torch.randint(0, 256, shape, dtype=torch.uint8) if uint8 else torch.rand(shape)
    if op == "five_crop":
        out = TF.five_crop(x, size)
        assert all(torch.equal(a, b) for a, b in zip(out, T.FiveCrop(size)(x)))
    else:
        out = TF.ten_crop(x, size, vertical_flip=bool(vertical_flip))
        assert all(torch.equal(a, b) for a, b in zip(out, T.TenCrop(size, bool(vertical_flip))(x)))
    tensors[f"{name}.x"] = x.contiguous()
    for k, o in enumerate(out, 1):
        tensors[f"{name}.out{k}"] = o.contiguous()
    cases.append({"name": name, "op": op, "size": size, "vertical_flip": vertical_flip, "n": len(out),
                  "uint8": uint8})


case("odd_half", "five_crop", (3, 5, 7), 2)              # offsets 1.5 -> 2, 2.5 -> 2
case("rect", "five_crop", (3, 9, 12), [4, 5])            # 2.5 -> 2, 3.5 -> 4
case("one", "five_crop", (1, 6, 6), [3])                 # {s}
case("whole", "five_crop", (3, 4, 5), [4, 5])            # the image itself, five times
case("plane", "five_crop", (7, 8), 3)                    # (H, W)
case("batch", "five_crop", (2, 3, 8, 9), 5)
case("u8", "five_crop", (3, 6, 9), 4, uint8=True)
case("ten_h", "ten_crop", (3, 7, 10), [3, 4])
case("ten_v", "ten_crop", (3, 7, 10), [3, 4], vertical_flip=True)
case("ten_batch", "ten_crop", (2, 3, 6, 6), 3, vertical_flip=False)
case("ten_u8", "ten_crop", (3, 11, 8), [5, 3], vertical_flip=True, uint8=True)

fixture_lib.write("five_crop.safetensors", tensors, cases)
