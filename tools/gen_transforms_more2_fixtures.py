#!/usr/bin/python3
"""Reference outputs for spec/data_transforms_more2_spec.lua: torchvision
0.14's tensor-path functional transforms with fixed parameters (float32
images): adjust_hue, rgb_to_grayscale, rotate, affine, gaussian_blur, pad.
Run /usr/bin/python3 tools/gen_transforms_more2_fixtures.py.

Each case "<name>": input "<name>.x", output "<name>.out"; the case lists
the op and its arguments as lunet's functional form takes them (rotate and
affine: interpolation 'nearest'/'bilinear', fill a list or absent for
torchvision's None, which skips the fill mask).
"""
import torch
import torchvision.transforms.functional as TF
from torchvision.transforms import InterpolationMode

import fixture_lib as fl

torch.manual_seed(0)
tensors, cases = {}, []
MODES = {"nearest": InterpolationMode.NEAREST, "bilinear": InterpolationMode.BILINEAR}


def add(name, op, x, out, **args):
    tensors[name + ".x"] = x.contiguous()
    tensors[name + ".out"] = out.float().contiguous()
    cases.append(dict(name=name, op=op, **args))


for i, (c, f) in enumerate([(3, 0.1), (3, -0.35), (3, 0.5), (3, -0.5), (1, 0.2), (3, 0.0)]):
    x = torch.rand(c, 6, 7)
    if i == 0:   # greys and saturated primaries: the max == min and tie branches
        x[:, 0, :] = 0.5
        x[:, 1, 0] = torch.tensor([1.0, 0, 0])[:c]
        x[:, 1, 1] = torch.tensor([0, 1.0, 0])[:c]
        x[:, 1, 2] = torch.tensor([1.0, 1.0, 0])[:c]
        x[:, 1, 3] = 0
    add(f"hue{i}", "hue", x, TF.adjust_hue(x, f), factor=f)

for i, (c, n) in enumerate([(3, 1), (3, 3), (1, 1), (1, 3)]):
    x = torch.rand(c, 5, 4)
    add(f"gray{i}", "gray", x, TF.rgb_to_grayscale(x, n), n=n)

rot = [((3, 8, 10), 30.0, "nearest", False, None, None), ((3, 8, 10), -47.5, "bilinear", False, None, None),
       ((3, 8, 10), 30.0, "bilinear", False, None, [0.5, -1.0, 2.0]),
       ((2, 9, 6), 60.0, "bilinear", True, None, [0.25]), ((2, 9, 6), 23.0, "nearest", True, None, None),
       ((3, 7, 7), 90.0, "bilinear", False, None, None), ((1, 8, 10), 15.0, "bilinear", False, [2, 3], [1.0]),
       ((3, 11, 5), 133.0, "bilinear", True, [1, 7], None), ((1, 6, 6), 0.0, "bilinear", False, None, None)]
for i, (shape, angle, mode, expand, center, fill) in enumerate(rot):
    x = torch.rand(shape)
    out = TF.rotate(x, angle, MODES[mode], expand, center, fill)
    add(f"rotate{i}", "rotate", x, out, angle=angle, interpolation=mode, expand=expand,
        **({"center": center} if center else {}), **({"fill": fill} if fill else {}))

aff = [((3, 8, 10), 20.0, [1, -2], 1.0, [0.0, 0.0], "bilinear", None, None),
       ((3, 8, 10), -35.0, [0, 0], 0.8, [10.0, 0.0], "bilinear", [0.0], None),
       ((3, 8, 10), 10.0, [2, 1], 1.3, [5.0, -8.0], "nearest", [0.3, 0.6, 0.9], None),
       ((2, 9, 7), 0.0, [3, 0], 1.0, [0.0, 0.0], "nearest", None, None),
       ((1, 9, 7), 45.0, [-1, 2], 1.1, [0.0, 20.0], "bilinear", [0.5], [2, 6]),
       ((3, 6, 12), 0.0, [0, 0], 0.5, [0.0, 0.0], "bilinear", None, None)]
for i, (shape, angle, tr, sc, sh, mode, fill, center) in enumerate(aff):
    x = torch.rand(shape)
    out = TF.affine(x, angle, tr, sc, sh, MODES[mode], fill, center)
    add(f"affine{i}", "affine", x, out, angle=angle, translate=tr, scale=sc, shear=sh, interpolation=mode,
        **({"fill": fill} if fill else {}), **({"center": center} if center else {}))

for i, (shape, k, s) in enumerate([((3, 8, 10), [3, 3], [1.0, 1.0]), ((3, 8, 10), [5, 3], [0.7, 1.6]),
                                    ((1, 6, 9), [7, 5], None), ((2, 5, 5), [9, 9], [2.0, 0.3]),
                                    ((3, 4, 3), [1, 3], [0.5, 0.5])]):
    x = torch.rand(shape)
    out = TF.gaussian_blur(x, k, s)
    add(f"blur{i}", "blur", x, out, kernel_size=k, **({"sigma": s} if s else {}))

for i, (shape, p, fill, mode) in enumerate([((3, 5, 6), [2], 0.0, "constant"), ((3, 5, 6), [1, 3], 0.7, "constant"),
                                            ((2, 5, 6), [1, 2, 3, 4], 0, "edge"),
                                            ((2, 5, 6), [4, 2, 5, 1], 0, "reflect"),
                                            ((2, 5, 6), [6, 5, 1, 0], 0, "symmetric"),
                                            ((1, 3, 3), [0], 0, "reflect")]):
    x = torch.rand(shape)
    out = TF.pad(x, p, fill, mode)
    add(f"pad{i}", "pad", x, out, padding=p, fill=fill, padding_mode=mode)

fl.write("data_transforms_more2.safetensors", tensors, cases)
