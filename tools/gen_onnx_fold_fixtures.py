"""Writes spec/fixtures/onnx_fold.safetensors: a small conv net (a conv
without bias then BatchNorm2d(eps=1e-3), a depthwise conv with a bias then
BatchNorm2d, a 1x1 conv then BatchNorm2d(eps=1e-3, momentum=0.01,
affine=False)) trained a few SGD steps at lr 0.1 in train mode, so its
running statistics are a trained model's, some variances then made tiny (a
channel that barely varies); its state_dict, torch 1.13's ONNX export of it
read back (the folded Conv weights and biases, in node order: "conv<i>.w",
"conv<i>.b"), an input and the eval outputs in float32 and float64.
spec/onnx_fold_spec.lua checks lunet.onnx.export folds to the same bits.
Run: /usr/bin/python3 tools/gen_onnx_fold_fixtures.py (needs python3-onnx).
"""
import os
import sys
import tempfile

import onnx
import torch
from onnx import numpy_helper
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as g  # noqa: E402

torch.manual_seed(0)
m = nn.Sequential(
    nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16, eps=1e-3), nn.SiLU(),
    nn.Conv2d(16, 16, 3, padding=1, groups=16), nn.BatchNorm2d(16), nn.ReLU(),
    nn.Conv2d(16, 8, 1, bias=False), nn.BatchNorm2d(8, eps=1e-3, momentum=0.01, affine=False),
    nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 3))
opt = torch.optim.SGD(m.parameters(), lr=0.1)
m.train()
for _ in range(5):
    opt.zero_grad()
    nn.functional.cross_entropy(m(torch.randn(8, 3, 12, 12)), torch.randint(0, 3, (8,))).backward()
    opt.step()
with torch.no_grad():
    m[1].running_var[:4] = torch.tensor([1e-6, 3e-5, 2e-4, 1e-3])
    m[4].running_var[::3] *= 1e-4
m.eval()

tensors = {}
for k, v in m.state_dict().items():
    if not k.endswith("num_batches_tracked"):
        tensors[f"sd.{k}"] = v.detach().clone()
x = torch.randn(2, 3, 12, 12)
with torch.no_grad():
    tensors["x"], tensors["out"] = x, m(x)
    tensors["out64"] = m.double()(x.double()).float()
    m.float()
with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "fold.onnx")
    torch.onnx.export(m, x, path, opset_version=13, input_names=["input"], output_names=["output"])
    model = onnx.load(path)
inits = {i.name: torch.from_numpy(numpy_helper.to_array(i).copy()) for i in model.graph.initializer}
convs = [n for n in model.graph.node if n.op_type == "Conv"]
assert len(convs) == 3 and not any(n.op_type == "BatchNormalization" for n in model.graph.node)
for i, n in enumerate(convs, 1):
    tensors[f"conv{i}.w"], tensors[f"conv{i}.b"] = inits[n.input[1]], inits[n.input[2]]
g.write("onnx_fold.safetensors", tensors, [{"name": "fold", "convs": len(convs)}])
