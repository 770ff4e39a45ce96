"""Writes spec/fixtures/image_write.safetensors: torchvision 0.14's
io.encode_png / encode_jpeg bytes of small uint8 images (and decode_jpeg of
its JPEGs), utils.make_grid outputs for each option, and the pixels of
utils.save_image's PNG and JPEG files (read back by PIL, uint8 (C, H, W)).
Run: /usr/bin/python3 tools/gen_image_write_fixtures.py
"""
import os
import sys
import tempfile

import numpy as np
import torch
from PIL import Image
import torchvision
from torchvision.io import encode_png, encode_jpeg, decode_jpeg
from torchvision.utils import make_grid, save_image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib  # noqa: E402
from fixture_lib import tensors, cases  # noqa: E402

torch.manual_seed(0)
rng = np.random.RandomState(3)


def picture(c, h, w):
    """a smooth picture with some noise (JPEG's usual input)"""
    y, x = np.mgrid[0:h, 0:w]
    planes = [(x * 11 + y * 5 + 70 * k) % 256 for k in range(c)]
    a = np.stack(planes, 0).astype(np.int64) + rng.randint(0, 24, (c, h, w))
    return torch.from_numpy(np.clip(a, 0, 255).astype(np.uint8))


# ---- encode_png / encode_jpeg ---------------------------------------------
for name, (c, h, w) in {"rgb": (3, 13, 17), "gray": (1, 8, 8), "dot": (3, 1, 1), "tall": (3, 33, 20),
                        "gray_odd": (1, 19, 5)}.items():
    img = picture(c, h, w)
    tensors[f"{name}.img"] = img
    for level in (0, 1, 6, 9):
        tensors[f"{name}.png{level}"] = encode_png(img, level)
    for q in (1, 50, 75, 95, 100):
        b = encode_jpeg(img, q)
        tensors[f"{name}.jpeg{q}"] = b
        tensors[f"{name}.jpeg{q}.decoded"] = decode_jpeg(b)
    cases.append({"name": name, "op": "encode", "opts": {"levels": [0, 1, 6, 9], "qualities": [1, 50, 75, 95, 100]}})

# ---- make_grid ---------------------------------------------------------------
GRIDS = [
    ("batch_pad1", (5, 3, 4, 6), {"nrow": 2, "padding": 1, "pad_value": 0.25}),
    ("gray_batch", (4, 1, 5, 5), {}),
    ("list_norm", (3, 3, 4, 4), {"normalize": True, "list": True}),
    ("range", (6, 3, 3, 3), {"normalize": True, "value_range": [-0.5, 0.5]}),
    ("scale_each", (3, 3, 4, 4), {"normalize": True, "scale_each": True}),
    ("scale_each_range", (3, 2, 4, 4), {"normalize": True, "scale_each": True, "value_range": [-1, 2]}),
    ("single_gray", (1, 4, 5), {}),
    ("hw", (4, 5), {"padding": 3}),
    ("one_of_batch", (1, 3, 4, 4), {"normalize": True}),
    ("pad0", (7, 3, 2, 3), {"nrow": 3, "padding": 0}),
    ("nrow_big", (3, 3, 2, 2), {"nrow": 10, "pad_value": 1}),
]
for name, shape, opts in GRIDS:
    x = torch.randn(shape).float()
    kw = {k: v for k, v in opts.items() if k != "list"}
    if "value_range" in kw:
        kw["value_range"] = tuple(kw["value_range"])
    arg = list(x) if opts.get("list") else x
    tensors[f"{name}.x"] = x
    tensors[f"{name}.out"] = make_grid(arg, **kw)
    cases.append({"name": name, "op": "make_grid", "opts": opts})

# ---- save_image: the pixels PIL reads back -------------------------------------
tmp = tempfile.mkdtemp()
for name, shape, opts, ext in [("save_png", (5, 3, 6, 7), {"nrow": 3}, "png"),
                               ("save_png_norm", (4, 1, 5, 5), {"normalize": True, "padding": 1}, "png"),
                               ("save_jpg", (4, 3, 16, 16), {"nrow": 2}, "jpg"),
                               ("save_jpg_gray", (2, 1, 9, 11), {"normalize": True}, "jpg")]:
    x = torch.rand(shape).float() * 1.2 - 0.1   # (some values outside [0, 1]: clamped)
    path = os.path.join(tmp, name + "." + ext)
    save_image(x, path, **opts)
    px = np.array(Image.open(path).convert("RGB"))
    tensors[f"{name}.x"] = x
    tensors[f"{name}.out"] = torch.from_numpy(px).permute(2, 0, 1).contiguous()
    cases.append({"name": name, "op": "save_image", "opts": opts, "ext": ext})

fixture_lib.write("image_write.safetensors", tensors, cases)
