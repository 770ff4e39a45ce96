#!/usr/bin/python3
"""Writes spec/fixtures/nn_layers.safetensors with PyTorch, for spec/nn_*_spec.lua:
forward outputs and gradients of each lunet.nn layer over several shapes
(stride, padding, dilation, groups, batch 1, odd sizes, ceil mode, ...).

For every case "<name>": inputs "<name>.x", "<name>.w", ... are float32
values; the output "<name>.out" and the gradients "<name>.dx", "<name>.dw",
... of sum(out * <name>.dout) are computed in float64 from those same values,
so a float32 implementation is compared with the exact answer. The metadata
entry "cases" is a JSON list of {name, op, opts}. Class targets are stored
1-based (lunet's convention). The safetensors writer, add and f32 are
tools/fixture_lib.py's.  Run:  /usr/bin/python3 tools/gen_nn_fixtures.py

Its float64 conv results vary in the last bits with OMP_NUM_THREADS (the
order PyTorch's CPU kernels sum in), so a rerun need not reproduce the
committed file byte for byte; compare two runs under the same setting, e.g.
OMP_NUM_THREADS=1.
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixture_lib import add, cases, f32, tensors, write  # noqa: E402


def conv_cases():
    specs = [
        ("conv_basic", dict(N=2, C=3, H=7, W=6, O=4, k=(3, 3)), dict(stride=1, padding=1)),
        ("conv_stride_groups", dict(N=1, C=4, H=9, W=8, O=6, k=(3, 2)), dict(stride=2, padding=[1, 0], groups=2)),
        ("conv_dilation_nobias", dict(N=2, C=2, H=10, W=9, O=4, k=(3, 3)),
         dict(stride=[2, 1], padding=2, dilation=2, bias=False)),
        ("conv_same_even", dict(N=1, C=2, H=5, W=6, O=3, k=(4, 4)), dict(padding="same")),
        ("conv_depthwise", dict(N=3, C=4, H=5, W=5, O=4, k=(3, 3)), dict(padding=1, groups=4)),
        ("conv_1x1_stride", dict(N=2, C=5, H=6, W=7, O=3, k=(1, 1)), dict(stride=2)),
    ]
    for name, s, o in specs:
        g = o.get("groups", 1)
        inputs = {"x": f32(s["N"], s["C"], s["H"], s["W"]), "w": f32(s["O"], s["C"] // g, *s["k"], scale=0.3)}
        if o.get("bias", True):
            inputs["b"] = f32(s["O"])

        def fn(x, w, b=None, o=o):
            return F.conv2d(x, w, b, stride=o.get("stride", 1), padding=o.get("padding", 0),
                            dilation=o.get("dilation", 1), groups=o.get("groups", 1))
        opts = dict(o)
        opts.update(cin=s["C"], cout=s["O"], k=list(s["k"]))
        add(name, "conv2d", opts, fn, inputs, list(inputs))


def pool_cases():
    for name, shape, k, o in [
        ("maxpool_2", (2, 3, 6, 6), 2, {}),
        ("maxpool_3s2p1", (1, 2, 7, 9), 3, dict(stride=2, padding=1)),
        ("maxpool_ceil", (2, 2, 7, 7), 2, dict(ceil_mode=True)),
        ("maxpool_dilation", (1, 3, 9, 8), [2, 3], dict(stride=[1, 2], dilation=2)),
    ]:
        add(name, "max_pool2d", dict(o, kernel_size=k), lambda x, k=k, o=o: F.max_pool2d(x, k, **o),
            {"x": f32(*shape)}, ["x"])
    for name, shape, k, o in [
        ("avgpool_2", (2, 3, 6, 6), 2, {}),
        ("avgpool_3s2p1_excl", (1, 2, 7, 9), 3, dict(stride=2, padding=1, count_include_pad=False)),
        ("avgpool_3s2p1_incl", (1, 2, 7, 9), 3, dict(stride=2, padding=1)),
        ("avgpool_ceil", (2, 2, 7, 7), [3, 2], dict(stride=2, ceil_mode=True)),
    ]:
        add(name, "avg_pool2d", dict(o, kernel_size=k), lambda x, k=k, o=o: F.avg_pool2d(x, k, **o),
            {"x": f32(*shape)}, ["x"])
    for name, shape, size in [("adaptive_1", (2, 3, 5, 5), 1), ("adaptive_3x2", (1, 2, 7, 5), [3, 2]),
                              ("adaptive_up", (1, 1, 3, 4), [5, 6])]:
        add(name, "adaptive_avg_pool2d", dict(output_size=size),
            lambda x, size=size: F.adaptive_avg_pool2d(x, size), {"x": f32(*shape)}, ["x"])


def bn_cases():
    for name, shape, o in [("bn2d_train", (4, 3, 5, 5), dict(training=True, momentum=0.1)),
                           ("bn2d_eval", (2, 3, 4, 3), dict(training=False)),
                           ("bn1d_train", (6, 4), dict(training=True, momentum=0.3)),
                           ("bn1d_train_3d", (3, 2, 5), dict(training=True, momentum=0.1))]:
        C = shape[1]
        rm, rv = f32(C, scale=0.5), (torch.rand(C) + 0.5).float()
        inputs = {"x": f32(*shape, scale=2.0) + 1.0, "w": f32(C), "b": f32(C)}
        rm64, rv64 = rm.double(), rv.double()

        def fn(x, w, b, o=o, rm64=rm64, rv64=rv64):
            return F.batch_norm(x, rm64, rv64, w, b, training=o["training"],
                                momentum=o.get("momentum", 0.1), eps=1e-5)
        add(name, "batch_norm", o, fn, inputs, ["x", "w", "b"],
            extra={"running_mean": rm, "running_var": rv})
        tensors[f"{name}.running_mean_after"] = rm64.clone()
        tensors[f"{name}.running_var_after"] = rv64.clone()


def misc_cases():
    add("linear", "linear", {}, lambda x, w, b: F.linear(x, w, b),
        {"x": f32(5, 7), "w": f32(3, 7, scale=0.4), "b": f32(3)}, ["x", "w", "b"])
    add("linear_3d", "linear", {}, lambda x, w, b: F.linear(x, w, b),
        {"x": f32(2, 3, 4), "w": f32(5, 4, scale=0.4), "b": f32(5)}, ["x", "w", "b"])
    add("softmax", "softmax", dict(dim=2), lambda x: F.softmax(x, 1), {"x": f32(4, 5, scale=2)}, ["x"])
    add("log_softmax", "log_softmax", dict(dim=2), lambda x: F.log_softmax(x, 1), {"x": f32(4, 5, scale=2)}, ["x"])
    add("log_softmax_dim1", "log_softmax", dict(dim=1), lambda x: F.log_softmax(x, 0), {"x": f32(3, 2, 4)}, ["x"])
    for name, fn, o in [("leaky_relu", lambda x: F.leaky_relu(x, 0.2), dict(slope=0.2)),
                        ("elu", lambda x: F.elu(x, 1.5), dict(alpha=1.5)),
                        ("gelu", lambda x: F.gelu(x), {}),
                        ("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"), dict(approximate="tanh")),
                        ("sigmoid", torch.sigmoid, {}), ("tanh", torch.tanh, {}), ("relu", torch.relu, {})]:
        add(name, name.split("_tanh")[0] if name != "gelu_tanh" else "gelu", o, fn, {"x": f32(3, 7, scale=2)}, ["x"])
    N, C = 6, 5
    target = torch.tensor([0, 4, 2, 2, 1, 3])
    weight = (torch.rand(C) + 0.5).float()
    for name, o in [("ce_mean", {}), ("ce_sum", dict(reduction="sum")), ("ce_none", dict(reduction="none")),
                    ("ce_weight", dict(weight=True)), ("ce_smooth", dict(label_smoothing=0.1)),
                    ("ce_smooth_weight", dict(label_smoothing=0.2, weight=True)),
                    ("ce_ignore", dict(ignore_index=3)), ("ce_smooth_ignore_sum", dict(label_smoothing=0.1, ignore_index=3, reduction="sum")),
                    ("ce_smooth_ignore_mean", dict(label_smoothing=0.3, ignore_index=3)),
                    ("ce_smooth_weight_ignore", dict(label_smoothing=0.2, weight=True, ignore_index=2)),
                    ("nll_weight", dict(weight=True, nll=True))]:
        w = weight.double() if o.get("weight") else None
        tgt = target.clone()
        ign = o.get("ignore_index", -100)
        if ign != -100:
            tgt[1] = ign - 1  # torch index of lunet class `ign`
        kw = dict(weight=w, reduction=o.get("reduction", "mean"), ignore_index=ign - 1 if ign != -100 else -100)
        if o.get("nll"):
            fn = lambda x, kw=kw, tgt=tgt: F.nll_loss(F.log_softmax(x, 1), tgt, **kw)
        else:
            fn = lambda x, kw=kw, tgt=tgt, o=o: F.cross_entropy(x, tgt, label_smoothing=o.get("label_smoothing", 0.0), **kw)
        add(name, "cross_entropy", o, fn, {"x": f32(N, C, scale=2)}, ["x"],
            extra={"target": tgt + 1, "weight": weight})
    st = torch.randint(0, 4, (2, 3, 5))
    st[0, 1, 2] = 1
    for name, o in [("ce_spatial", dict(label_smoothing=0.1)), ("ce_spatial_none", dict(reduction="none", ignore_index=2))]:
        ign = o.get("ignore_index", -100)
        kw = dict(reduction=o.get("reduction", "mean"), ignore_index=ign - 1 if ign != -100 else -100,
                  label_smoothing=o.get("label_smoothing", 0.0))
        add(name, "cross_entropy", o, lambda x, kw=kw: F.cross_entropy(x, st, **kw), {"x": f32(2, 4, 3, 5)}, ["x"],
            extra={"target": st + 1, "weight": weight})
    add("mse", "mse_loss", {}, lambda x, y: F.mse_loss(x, y), {"x": f32(3, 4), "y": f32(3, 4)}, ["x", "y"])
    add("mse_sum", "mse_loss", dict(reduction="sum"), lambda x, y: F.mse_loss(x, y, reduction="sum"),
        {"x": f32(5), "y": f32(5)}, ["x", "y"])
    pw = (torch.rand(4) + 0.5).float()
    add("bce", "bce_with_logits", {}, lambda x, y: F.binary_cross_entropy_with_logits(x, y),
        {"x": f32(3, 4, scale=3), "y": torch.rand(3, 4).float()}, ["x", "y"])
    bw = (torch.rand(3, 4) + 0.5).float()
    add("bce_weight", "bce_with_logits", dict(weight=True, reduction="none"),
        lambda x, y: F.binary_cross_entropy_with_logits(x, y, weight=bw.double(), reduction="none"),
        {"x": f32(3, 4, scale=3), "y": torch.rand(3, 4).float()}, ["x", "y"], extra={"weight": bw})
    add("bce_pos_weight", "bce_with_logits", dict(pos_weight=True, reduction="sum"),
        lambda x, y: F.binary_cross_entropy_with_logits(x, y, pos_weight=pw.double(), reduction="sum"),
        {"x": f32(3, 4, scale=3), "y": torch.rand(3, 4).float()}, ["x", "y"], extra={"pos_weight": pw})


class BasicBlock(torch.nn.Module):
    """torchvision's BasicBlock with the shortcut named as lunet.nn.BasicBlock's"""

    def __init__(self, cin, planes, stride):
        super().__init__()
        nn = torch.nn
        self.conv1 = nn.Conv2d(cin, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = nn.Sequential(nn.Conv2d(cin, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x):
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + self.shortcut(x))


def block_case():
    """a whole module: PyTorch's state_dict loaded into lunet.nn.BasicBlock"""
    m = BasicBlock(4, 8, 2)
    with torch.no_grad():
        for name, b in m.named_buffers():
            if name.endswith("running_mean"):
                b.copy_(torch.randn(b.shape) * 0.1)
            elif name.endswith("running_var"):
                b.copy_(torch.rand(b.shape) + 0.5)
            else:
                b.fill_(3)
        for p in m.parameters():
            if p.dim() == 1:
                p.copy_(torch.randn(p.shape) * 0.2 + (1 if p is not None else 0))
    for k, v in m.state_dict().items():
        tensors[f"block.sd.{k}"] = v.clone()
    x = f32(2, 4, 7, 6)
    md = m.double()
    xd = x.double().requires_grad_()
    out = md(xd)
    dout = f32(*out.shape)
    out.backward(dout.double())
    tensors["block.x"], tensors["block.out"], tensors["block.dout"], tensors["block.dx"] = x, out.detach(), dout, xd.grad
    for k, p in md.named_parameters():
        tensors[f"block.grad.{k}"] = p.grad
    for k, b in md.named_buffers():
        tensors[f"block.after.{k}"] = b.clone()


def main():
    torch.manual_seed(0)
    conv_cases()
    pool_cases()
    bn_cases()
    misc_cases()
    block_case()
    write("nn_layers.safetensors", tensors, cases)


if __name__ == "__main__":
    main()
