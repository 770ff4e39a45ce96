#!/usr/bin/python3
"""Writes spec/fixtures/onnx_more_*.onnx (torch.onnx.export, opset 13, batch
dim dynamic) and spec/fixtures/onnx_more.safetensors with PyTorch 1.13, for
spec/onnx_more_spec.lua: tiny models with the ops torchvision's models
export (tools/check_onnx_torchvision.py runs the real ones):
- seq1d: Conv1d (also depthwise), ReLU6 (Clip), MaxPool1d with ceil_mode,
  padded AvgPool1d (Pad + AveragePool), linear Upsample (Resize), LayerNorm
  (ReduceMean, Pow, Sqrt, ...), GELU (Erf), Hardswish (HardSigmoid, Mul);
- vol3d: Conv3d, Hardsigmoid, MaxPool3d with ceil_mode, AvgPool3d,
  trilinear and nearest Upsample, SiLU, Flatten, Linear;
- acts: depthwise Conv2d + BatchNorm2d, ReLU6, PReLU, Mish (Softplus),
  tanh GELU, bilinear Upsample (half_pixel and align_corners), MaxPool2d with
  ceil_mode, AdaptiveAvgPool2d(3), Dropout (eval), AdaptiveMaxPool2d(1),
  Flatten, Linear, LayerNorm;
- embed: Embedding (Gather) on int64 indices, Flatten, Linear;
- branches (not a Sequential): squeezenet's Fire (Concat of branches),
  a channel shuffle (Reshape, Transpose), squeeze-excitation (Mul),
  x.mean([2, 3]) (ReduceMean), squeeze (Squeeze).
For every case "<name>": the input "<name>.x" and torch's output "<name>.out"
(and "<name>.x3", "<name>.out3": a batch of 3, through the dynamic batch
dim); the Sequentials add their state_dict as "<name>.sd.<key>" (batch norm
statistics randomised). The metadata entry "cases" is a JSON list of
{name, file, seq}.
Run:  /usr/bin/python3 tools/gen_onnx_more_fixtures.py
"""
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as g  # noqa: E402

torch.manual_seed(0)
FIX = os.path.join(g.HERE, "..", "spec", "fixtures")


class Branches(nn.Module):
    def __init__(self):
        super().__init__()
        self.squeeze = nn.Conv2d(3, 4, 1)
        self.e1 = nn.Conv2d(4, 4, 1)
        self.e3 = nn.Conv2d(4, 4, 3, padding=1)
        self.se = nn.Conv2d(8, 8, 1)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        s = torch.relu(self.squeeze(x))
        y = torch.cat([torch.relu(self.e1(s)), torch.relu(self.e3(s))], 1)
        n, c, h, w = y.shape
        y = y.reshape(n, 2, c // 2, h, w).transpose(1, 2).reshape(n, c, h, w)
        y = y * torch.sigmoid(self.se(nn.functional.adaptive_avg_pool2d(y, 1)))
        y = nn.functional.max_pool2d(y, 3, 2, ceil_mode=True)
        return self.fc(y.mean([2, 3])).unsqueeze(2).squeeze(2)


def randomise_bn(m):
    for mod in m.modules():
        if isinstance(mod, nn.modules.batchnorm._BatchNorm):
            mod.running_mean.uniform_(-0.5, 0.5)
            mod.running_var.uniform_(0.5, 2)
            mod.weight.data.uniform_(0.5, 1.5)
            mod.bias.data.uniform_(-0.5, 0.5)
        if isinstance(mod, nn.LayerNorm):
            mod.weight.data.uniform_(0.5, 1.5)
            mod.bias.data.uniform_(-0.5, 0.5)


models = {
    "seq1d": (nn.Sequential(nn.Conv1d(3, 4, 3, padding=1), nn.ReLU6(), nn.MaxPool1d(3, 2, 1, ceil_mode=True),
                            nn.AvgPool1d(3, 2, 1), nn.Upsample(scale_factor=2, mode="linear"), nn.LayerNorm(6),
                            nn.GELU(), nn.Conv1d(4, 4, 3, groups=4),
                            nn.AvgPool1d(2, padding=1, count_include_pad=False), nn.Flatten(), nn.Linear(12, 5),
                            nn.Hardswish()), (3, 9)),
    "vol3d": (nn.Sequential(nn.Conv3d(2, 4, 3, padding=1), nn.Hardsigmoid(), nn.MaxPool3d(2, ceil_mode=True),
                            nn.AvgPool3d(3, 1, 1), nn.Upsample(scale_factor=2, mode="trilinear"),
                            nn.MaxPool3d(2), nn.Upsample(scale_factor=2), nn.SiLU(), nn.MaxPool3d(3, 3),
                            nn.Flatten(), nn.Linear(32, 3)), (2, 5, 5, 5)),
    "acts": (nn.Sequential(nn.Conv2d(3, 6, 3, padding=1, groups=3, bias=False), nn.BatchNorm2d(6), nn.ReLU6(),
                           nn.PReLU(6), nn.Conv2d(6, 4, 1), nn.Mish(), nn.GELU(approximate="tanh"),
                           nn.Upsample(scale_factor=2, mode="bilinear"),
                           nn.Upsample(scale_factor=1.5, mode="bilinear", align_corners=True),
                           nn.MaxPool2d(3, 2, ceil_mode=True), nn.AdaptiveAvgPool2d(3), nn.Dropout(),
                           nn.AdaptiveMaxPool2d(1), nn.Flatten(), nn.Linear(4, 6), nn.LayerNorm(6)), (3, 6, 6)),
    "embed": (nn.Sequential(nn.Embedding(10, 3), nn.Flatten(), nn.Linear(12, 2)), None),
    "branches": (Branches(), (3, 9, 9)),
}

tensors, cases = {}, []
for name, (m, shape) in models.items():
    randomise_bn(m)
    m.eval()
    if shape is None:
        x, x3 = torch.randint(0, 10, (2, 4)), torch.randint(0, 10, (3, 4))
    else:
        x, x3 = torch.randn(2, *shape), torch.randn(3, *shape)
    path = os.path.join(FIX, f"onnx_more_{name}.onnx")
    torch.onnx.export(m, x, path, opset_version=13, input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
    with torch.no_grad():
        tensors[f"{name}.x"], tensors[f"{name}.out"] = x, m(x)
        tensors[f"{name}.x3"], tensors[f"{name}.out3"] = x3, m(x3)
    seq = isinstance(m, nn.Sequential)
    if seq:
        for k, v in m.state_dict().items():
            if not k.endswith("num_batches_tracked"):
                tensors[f"{name}.sd.{k}"] = v.detach().clone()
    cases.append({"name": name, "file": f"onnx_more_{name}.onnx", "seq": seq})
    print(f"wrote {path}: {os.path.getsize(path)} bytes")

g.write("onnx_more.safetensors", tensors, cases)
