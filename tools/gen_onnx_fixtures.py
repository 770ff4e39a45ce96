#!/usr/bin/python3
"""Writes spec/fixtures/onnx_*.onnx (torch.onnx.export, opset 13, batch dim
dynamic) and spec/fixtures/onnx.safetensors with PyTorch 1.13, for
spec/onnx_spec.lua:
- lenet: LeNet-5 (conv 5x5, relu, max pool, twice; 120-84-10 linear) on
  1x16x16 inputs;
- resnet: a small ResNet (stem conv + batch norm + relu, two BasicBlocks
  with batch norms, the second strided with a 1x1 conv shortcut, global
  average pool, linear);
- mixed: two conv branches joined by Concat, LeakyReLU, nearest Upsample,
  AvgPool (padded), a residual Add, x.view(x.size(0), -1) (Shape, Gather,
  Unsqueeze, Concat, Reshape), linear and Softmax.
For every case "<name>": the input "<name>.x" and torch's output
"<name>.out" (and "<name>.x3", "<name>.out3": a batch of 3, through the
dynamic batch dim); lenet and resnet add their state_dict as
"<name>.sd.<key>" (batch norm statistics randomised), so that the spec can
build the same lunet model and compare lunet's export with torch's. The
metadata entry "cases" is a JSON list of {name, file}.
Run:  /usr/bin/python3 tools/gen_onnx_fixtures.py
"""
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as g  # noqa: E402

torch.manual_seed(0)
FIX = os.path.join(g.HERE, "..", "spec", "fixtures")


class BasicBlock(nn.Module):
    """lunet's nn.BasicBlock (same child names)"""

    def __init__(self, cin, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = None
        if stride != 1 or cin != planes:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x):
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + (self.shortcut(x) if self.shortcut is not None else x))


class Mixed(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(3, 4, 1)
        self.b = nn.Conv2d(3, 4, 3, padding=1)
        self.act = nn.LeakyReLU(0.2)
        self.up = nn.Upsample(scale_factor=2)
        self.pool = nn.AvgPool2d(3, 2, 1)
        self.fc = nn.Linear(8 * 4 * 4, 5)

    def forward(self, x):
        y = torch.cat([self.a(x), self.act(self.b(x))], 1)
        y = self.pool(self.up(y)) + y
        y = nn.functional.max_pool2d(y, 2, ceil_mode=True)
        y = y.view(y.size(0), -1)
        return torch.softmax(self.fc(y), 1)


def randomise_bn(m):
    for mod in m.modules():
        if isinstance(mod, nn.BatchNorm2d):
            mod.running_mean.uniform_(-0.5, 0.5)
            mod.running_var.uniform_(0.5, 2)
            mod.weight.data.uniform_(0.5, 1.5)
            mod.bias.data.uniform_(-0.5, 0.5)


models = {
    "lenet": (nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 16, 5), nn.ReLU(),
                            nn.MaxPool2d(2), nn.Flatten(), nn.Linear(16 * 2 * 2, 120), nn.ReLU(), nn.Linear(120, 84),
                            nn.ReLU(), nn.Linear(84, 10)), (1, 16, 16)),
    "resnet": (nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                             BasicBlock(8, 8), BasicBlock(8, 16, 2), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                             nn.Linear(16, 10)), (3, 16, 16)),
    "mixed": (Mixed(), (3, 8, 8)),
}

tensors, cases = {}, []
for name, (m, shape) in models.items():
    randomise_bn(m)
    m.eval()
    x, x3 = torch.randn(2, *shape), torch.randn(3, *shape)
    path = os.path.join(FIX, f"onnx_{name}.onnx")
    torch.onnx.export(m, x, path, opset_version=13, input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
    with torch.no_grad():
        tensors[f"{name}.x"], tensors[f"{name}.out"] = x, m(x)
        tensors[f"{name}.x3"], tensors[f"{name}.out3"] = x3, m(x3)
    if name != "mixed":
        for k, v in m.state_dict().items():
            if k.endswith("num_batches_tracked"):
                continue
            tensors[f"{name}.sd.{k}"] = v.detach().clone()
    cases.append({"name": name, "file": f"onnx_{name}.onnx"})
    print(f"wrote {path}: {os.path.getsize(path)} bytes")

g.write("onnx.safetensors", tensors, cases)
