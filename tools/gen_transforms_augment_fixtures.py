#!/usr/bin/python3
"""Reference outputs for spec/data_transforms_augment_spec.lua: torchvision
0.14's AutoAugment family on tensors. Run
/usr/bin/python3 tools/gen_transforms_augment_fixtures.py.

Each case "<name>": input "<name>.x", output "<name>.out". "u8" cases ran
torchvision on the uint8 image "<name>.x" (posterize and equalize need it;
in _apply_op also Solarize, whose policy thresholds are 0..255): lunet gets
the same uint8 tensor (scaled to [0,1]) and must give torchvision's uint8
output / 255. The others ran on the float32 image in [0,1].
Metadata "spaces": torchvision's magnitude tables (_augmentation_space) of
RandAugment and TrivialAugmentWide for some bins and image sizes, and the
AutoAugment policies as (op, p, magnitude) with their magnitudes at bins 10.
"""
import torch
import torchvision.transforms.functional as TF
from torchvision.transforms import InterpolationMode, autoaugment as A

import fixture_lib as fl

torch.manual_seed(0)
tensors, cases = {}, []
MODES = {"nearest": InterpolationMode.NEAREST, "bilinear": InterpolationMode.BILINEAR}


def add(name, op, x, out, u8=False, **args):
    tensors[name + ".x"] = x.contiguous()
    tensors[name + ".out"] = (out.float() / 255 if u8 else out.float()).contiguous()
    cases.append(dict(name=name, op=op, u8=u8, **args))


def u8img(*shape):
    return torch.randint(0, 256, shape, dtype=torch.uint8)


for i, (shape, bits) in enumerate([((3, 6, 7), 0), ((3, 6, 7), 1), ((1, 5, 5), 4), ((3, 4, 9), 7), ((3, 4, 4), 8)]):
    x = u8img(*shape)
    add(f"posterize{i}", "posterize", x, TF.posterize(x, bits), u8=True, bits=bits)
for i, (shape, t) in enumerate([((3, 6, 7), 0.5), ((1, 5, 5), 0.0), ((3, 4, 9), 1.0), ((3, 4, 4), -0.2), ((3, 5, 5), 0.25)]):
    x = torch.rand(shape)
    if i == 4:
        x[0, 0, :] = 0.25   # ties: >= inverts them
    add(f"solarize{i}", "solarize", x, TF.solarize(x, t), threshold=t)
for i, shape in enumerate([(3, 6, 7), (1, 5, 5), (3, 4, 9)]):
    x = torch.rand(shape) * 0.6 + 0.2
    if i == 2:
        x[1] = 0.4   # a flat channel stays as it is
    add(f"autocontrast{i}", "autocontrast", x, TF.autocontrast(x))
for i, shape in enumerate([(3, 20, 30), (1, 16, 17), (3, 40, 40), (3, 5, 5), (1, 30, 30)]):
    x = u8img(*shape)
    if i == 2:
        x = (x // 4 + 60)   # a narrow histogram
    if i == 4:
        x[:, :20] = 7   # one bin holds most pixels
    add(f"equalize{i}", "equalize", x, TF.equalize(x), u8=True)
for i, (shape, f) in enumerate([((3, 6, 7), 0.0), ((3, 6, 7), 2.0), ((1, 5, 5), 0.5), ((3, 2, 9), 3.0), ((3, 8, 3), 1.7)]):
    x = torch.rand(shape)
    add(f"sharpness{i}", "sharpness", x, TF.adjust_sharpness(x, f), factor=f)
for i, shape in enumerate([(3, 4, 5), (1, 3, 3)]):
    x = torch.rand(shape)
    add(f"invert{i}", "invert", x, TF.invert(x))

# torchvision's _apply_op at fixed magnitudes (float images; uint8 for the uint8 ops)
U8 = {"Posterize", "Solarize", "Equalize"}
apply = [("Identity", 0.0), ("ShearX", 0.3), ("ShearX", -0.99), ("ShearY", 0.17), ("ShearY", -0.5),
         ("TranslateX", 5.9), ("TranslateX", -3.2), ("TranslateY", 4.0), ("TranslateY", -7.99), ("Rotate", 30.0),
         ("Rotate", -135.0), ("Rotate", 12.5), ("Brightness", 0.9), ("Brightness", -0.5), ("Color", 0.6),
         ("Color", -0.99), ("Contrast", 0.3), ("Contrast", -0.9), ("Sharpness", 0.9), ("Sharpness", -0.7),
         ("Posterize", 4.0), ("Posterize", 2.0), ("Solarize", 128.0), ("Solarize", 246.5), ("Solarize", 0.0),
         ("AutoContrast", 0.0), ("Equalize", 0.0), ("Invert", 0.0)]
n = 0
for op, mag in apply:
    for shape, mode, fill in [((3, 12, 14), "nearest", None), ((1, 11, 9), "bilinear", [0.5]),
                              ((3, 10, 10), "bilinear", [0.2, 0.4, 0.6])]:
        x = u8img(*shape) if op in U8 else torch.rand(shape)
        f = fill
        if op in U8 and f is not None:
            f = [v * 255 for v in f]
        out = A._apply_op(x, op, mag, MODES[mode], f)
        add(f"op{n}", "apply_op", x, out, u8=op in U8, name_=op, magnitude=mag, interpolation=mode,
            **({"fill": fill} if fill else {}))
        n += 1

spaces = {"rand": [], "wide": [], "auto": {}}
for bins, h, w in [(31, 32, 32), (10, 24, 40), (2, 7, 5), (16, 100, 3)]:
    sp = A.RandAugment(num_magnitude_bins=bins)._augmentation_space(bins, (h, w))
    spaces["rand"].append(dict(bins=bins, h=h, w=w, ops={k: [float(v) for v in m.reshape(-1)] if m.ndim else []
                                                          for k, (m, s) in sp.items()},
                               signed={k: s for k, (m, s) in sp.items()}))
for bins in [31, 10, 2, 7]:
    sp = A.TrivialAugmentWide(num_magnitude_bins=bins)._augmentation_space(bins)
    spaces["wide"].append(dict(bins=bins, ops={k: [float(v) for v in m.reshape(-1)] if m.ndim else []
                                               for k, (m, s) in sp.items()}))
for pol in ["imagenet", "cifar10", "svhn"]:
    aa = A.AutoAugment(A.AutoAugmentPolicy(pol))
    sp = aa._augmentation_space(10, (32, 32))
    spaces["auto"][pol] = [[[op, p, float(sp[op][0][m]) if m is not None else 0.0, sp[op][1]] for op, p, m in sub]
                           for sub in aa.policies]
tensors["spaces.dummy"] = torch.zeros(1)
cases.append(dict(name="spaces", op="spaces", spaces=spaces))
fl.write("data_transforms_augment.safetensors", tensors, cases)
