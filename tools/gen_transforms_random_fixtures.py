#!/usr/bin/python3
"""Reference outputs for spec/data_transforms_random_spec.lua: torchvision
0.14's perspective, elastic_transform and center_crop (larger than the
image) on float32 tensors. Run /usr/bin/python3 tools/gen_transforms_random_fixtures.py.

Each case "<name>": input "<name>.x", output "<name>.out"; elastic cases
also "<name>.disp", the (1, H, W, 2) displacement given to elastic_transform.
Nearest cases avoid points that land on a rounding tie (x.5), where float
rounding, not the method, picks the pixel.
"""
import torch
import torchvision.transforms.functional as TF
import torchvision.transforms.functional_tensor as FT
from torchvision.transforms import InterpolationMode

import fixture_lib as fl

torch.manual_seed(0)
tensors, cases = {}, []
MODES = {"nearest": InterpolationMode.NEAREST, "bilinear": InterpolationMode.BILINEAR}


def add(name, op, x, out, **args):
    tensors[name + ".x"] = x.contiguous()
    tensors[name + ".out"] = out.float().contiguous()
    cases.append(dict(name=name, op=op, **args))


n = 0
for shape, sp, ep, mode, fill in [
    ((3, 10, 12), [[0, 0], [11, 0], [11, 9], [0, 9]], [[1, 2], [10, 0], [11, 8], [2, 9]], "bilinear", None),
    ((3, 10, 12), [[0.2, 0.1], [11, 0.3], [10.8, 9], [0.1, 8.7]], [[3.3, 1.2], [9.1, 2.4], [10.2, 7.1], [1.3, 8.2]], "nearest", None),
    ((1, 9, 7), [[0, 0], [6, 0], [6, 8], [0, 8]], [[2, 1], [6, 2], [5, 8], [1, 6]], "bilinear", [0.5]),
    ((3, 16, 16), [[1, 1], [14, 2], [15, 15], [0, 13]], [[0, 0], [15, 0], [15, 15], [0, 15]], "bilinear",
     [0.1, 0.5, 0.9]),
    ((3, 8, 11), [[0.3, 0.2], [10, 0.1], [10.2, 7], [0.1, 6.8]], [[2.2, 2.1], [8.3, 1.4], [10.1, 6.7], [0.4, 5.3]], "nearest", [0.3]),
    ((3, 12, 12), [[0, 0], [11, 0], [11, 11], [0, 11]], [[0, 0], [11, 0], [11, 11], [0, 11]], "bilinear", [0.0]),
]:
    x = torch.rand(shape)
    if mode == "nearest":   # no source point within float error of a rounding tie
        g = FT._perspective_grid(TF._get_perspective_coeffs(sp, ep), shape[2], shape[1], torch.float32, "cpu")
        for d, s in ((0, shape[2]), (1, shape[1])):
            i = ((g[..., d] + 1) * s - 1) / 2
            assert ((i - i.floor() - 0.5).abs() > 1e-4).all(), (sp, ep)
    out = TF.perspective(x, sp, ep, MODES[mode], fill)
    add(f"persp{n}", "perspective", x, out, startpoints=sp, endpoints=ep, interpolation=mode,
        **({"fill": fill} if fill is not None else {}))
    n += 1

n = 0
for shape, scale, mode, fill in [((3, 10, 12), 0.1, "bilinear", None), ((3, 10, 12), 0.3, "nearest", None),
                                 ((1, 9, 7), 0.2, "bilinear", [0.5]), ((3, 16, 16), 0.15, "nearest", [0.2]),
                                 ((3, 8, 11), 0.05, "bilinear", [0.1, 0.2, 0.3])]:
    x = torch.rand(shape)
    disp = (torch.rand(1, shape[1], shape[2], 2) * 2 - 1) * scale
    out = TF.elastic_transform(x, disp, MODES[mode], fill)
    tensors[f"elastic{n}.disp"] = disp.contiguous()
    add(f"elastic{n}", "elastic", x, out, interpolation=mode, **({"fill": fill} if fill is not None else {}))
    n += 1

n = 0
for shape, size in [((3, 5, 6), [8, 9]), ((3, 5, 6), [9, 4]), ((1, 4, 7), [4, 10]), ((3, 6, 6), [7, 7]),
                    ((2, 3, 3), [6, 5]), ((3, 7, 4), [3, 11])]:
    x = torch.rand(shape)
    add(f"ccrop{n}", "center_crop", x, TF.center_crop(x, size), size=size)
    n += 1

fl.write("data_transforms_random.safetensors", tensors, cases)
