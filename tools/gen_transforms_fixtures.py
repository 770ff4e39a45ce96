#!/usr/bin/python3
"""Reference outputs for spec/data_transforms_more_spec.lua: torchvision's
tensor-path transforms with fixed parameters, written out with torch 1.13
(torchvision is not installed): run /usr/bin/python3 tools/gen_transforms_fixtures.py.

resize / resized_crop: F.interpolate(mode='bilinear', align_corners=False,
antialias off) of the (cropped) image; Resize(int) sizes the shorter side as
torchvision's _compute_resized_output_size. brightness / contrast /
saturation: torchvision's _blend with zeros, the grayscale mean (weights
0.2989, 0.587, 0.114; the plain mean for 1 channel), the grayscale pixel.
erase: the box set to the value. Each case "<name>": input "<name>.x"
(uint8 images are scaled by 1/255 first, as lunet's implicit ToTensor),
output "<name>.out"; the case lists the op and its arguments.
"""
import torch
import torch.nn.functional as Fn

import fixture_lib as fl

torch.manual_seed(0)
tensors, cases = {}, []


def out_size(h, w, size):
    if isinstance(size, int):   # torchvision: int(size * long / short)
        short, long = min(h, w), max(h, w)
        new_short, new_long = size, int(size * long / short)
        return (new_long, new_short) if w <= h else (new_short, new_long)
    return tuple(size)


def resize(x, size):
    oh, ow = out_size(x.shape[-2], x.shape[-1], size)
    return Fn.interpolate(x.unsqueeze(0), size=(oh, ow), mode="bilinear", align_corners=False).squeeze(0)


def gray(x):
    return (0.2989 * x[0] + 0.587 * x[1] + 0.114 * x[2]).unsqueeze(0)


def blend(a, b, f):
    return (f * a + (1.0 - f) * b).clamp(0, 1.0)


def add(name, op, x, out, **args):
    tensors[name + ".x"] = x
    tensors[name + ".out"] = out.float().contiguous()
    cases.append(dict(name=name, op=op, **args))


def as_float(x):
    return x.float() / 255 if x.dtype == torch.uint8 else x


for i, (shape, size) in enumerate([((3, 8, 10), [5, 7]), ((3, 8, 10), [13, 17]), ((3, 8, 10), 6),
                                   ((3, 7, 5), 11), ((2, 9, 6), [4, 13]), ((1, 5, 5), [1, 1]),
                                   ((3, 8, 10), [8, 10]), ((3, 31, 17), [10, 7])]):
    x = torch.rand(shape)
    add(f"resize{i}", "resize", x, resize(x, size), size=size)
xu = torch.randint(0, 256, (3, 9, 6), dtype=torch.uint8)
add("resize_u8", "resize", xu, resize(as_float(xu), [4, 13]), size=[4, 13])
xu = torch.randint(0, 256, (3, 9, 6), dtype=torch.uint8)
add("resize_u8_int", "resize", xu, resize(as_float(xu), 5), size=5)

for i, (shape, box, size) in enumerate([((3, 10, 12), (2, 3, 5, 4), [7, 6]), ((3, 10, 12), (0, 0, 10, 12), [4, 4]),
                                        ((1, 9, 9), (4, 1, 5, 8), [11, 3])]):
    x = torch.rand(shape)
    t, l, h, w = box
    add(f"resized_crop{i}", "resized_crop", x, resize(x[:, t:t + h, l:l + w], size), box=list(box), size=size)

for i, f in enumerate([0.0, 0.6, 1.3]):
    x = torch.rand(3, 6, 7)
    add(f"brightness{i}", "brightness", x, blend(x, torch.zeros_like(x), f), factor=f)
for i, (c, f) in enumerate([(3, 0.6), (3, 1.5), (1, 1.8), (3, 0.0)]):
    x = torch.rand(c, 6, 7)
    m = torch.mean(gray(x) if c == 3 else x, dim=(-3, -2, -1), keepdim=True)
    add(f"contrast{i}", "contrast", x, blend(x, m, f), factor=f)
for i, f in enumerate([0.3, 1.7, 0.0]):
    x = torch.rand(3, 6, 7)
    add(f"saturation{i}", "saturation", x, blend(x, gray(x), f), factor=f)
xu = torch.randint(0, 256, (3, 5, 4), dtype=torch.uint8)
add("contrast_u8", "contrast", xu, blend(as_float(xu), torch.mean(gray(as_float(xu))), 1.4), factor=1.4)

for i, (box, v) in enumerate([((1, 2, 3, 4), [0.5, -1, 2]), ((0, 0, 6, 7), [0.25]), ((5, 6, 1, 1), [-3])]):
    x = torch.randn(3, 6, 7)
    out = x.clone()
    t, l, h, w = box
    out[:, t:t + h, l:l + w] = torch.tensor(v).view(-1, 1, 1)
    add(f"erase{i}", "erase", x, out, box=list(box), value=v)

fl.write("data_transforms_more.safetensors", tensors, cases)
