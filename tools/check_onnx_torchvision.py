#!/usr/bin/python3
"""Checks lunet.onnx.load on what torch 1.13 exports for torchvision's models
(random weights, batch norm statistics randomised, eval mode, opset 13):
each model is exported to a temporary directory with its input and torch's
output (a safetensors file), then tools/check_onnx_torchvision.lua loads the
.onnx with lunet, runs it and compares (relative error: largest |diff| over
largest |torch|, must be under 1e-4). The files are large: they are never
committed. Needs torchvision; uses the worktree's build/liblunet.so unless
LUNET_LIB is set.
Run:  /usr/bin/python3 tools/check_onnx_torchvision.py [model ...]
"""
import os
import subprocess
import sys
import tempfile

import torch
import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as g  # noqa: E402

MODELS = ["resnet18", "mobilenet_v2", "squeezenet1_1", "densenet121", "vgg11_bn", "alexnet", "googlenet",
          "mobilenet_v3_small", "mobilenet_v3_large", "inception_v3", "shufflenet_v2_x0_5", "efficientnet_b0",
          "regnet_x_400mf"]


def build(name):
    kw = {"aux_logits": False, "init_weights": True} if name in ("googlenet", "inception_v3") else {}
    m = getattr(torchvision.models, name)(weights=None, **kw)
    for mod in m.modules():
        if isinstance(mod, torch.nn.modules.batchnorm._BatchNorm):
            mod.running_mean.uniform_(-0.2, 0.2)
            mod.running_var.uniform_(0.5, 2)
            mod.weight.data.uniform_(0.5, 1.5)
            mod.bias.data.uniform_(-0.2, 0.2)
    return m.eval()


def main():
    torch.manual_seed(0)
    names = sys.argv[1:] or MODELS
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    with tempfile.TemporaryDirectory() as d:
        for name in names:
            m = build(name)
            side = 299 if name == "inception_v3" else 224
            x = torch.randn(2, 3, side, side)
            torch.onnx.export(m, x, os.path.join(d, name + ".onnx"), opset_version=13,
                              input_names=["input"], output_names=["output"])
            with torch.no_grad():
                g.save(os.path.join(d, name + ".safetensors"), {"x": x, "out": m(x)}, {})
        env = dict(os.environ)
        env["LUA_PATH"] = f"{root}/lua/?.lua;{root}/lua/?/init.lua;" + env.get("LUA_PATH", ";")
        env.setdefault("LUNET_LIB", os.path.join(root, "build", "liblunet.so"))
        return subprocess.call(["luajit", os.path.join(root, "tools", "check_onnx_torchvision.lua"), d] + names,
                               env=env)


if __name__ == "__main__":
    sys.exit(main())
