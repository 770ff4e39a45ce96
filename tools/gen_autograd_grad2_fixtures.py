#!/usr/bin/python3
"""Writes spec/fixtures/autograd_grad2.safetensors with PyTorch 1.13, for
spec/autograd_grad2_spec.lua: double backward (create_graph=True) through
the layers of a ResNet and friends, float64:

  resblock_gp_train / resblock_gp_eval: a critic made of a ResNet BasicBlock
    (conv 3x3 stride 2 -> bn -> relu -> conv 3x3 -> bn, + a 1x1 strided conv
    -> bn shortcut, relu), global average pool, linear; its input gradient
    gx, the WGAN-GP penalty gp = mean((||gx|| - 1)^2) and gp's gradient wrt
    the weights (batch norms in training mode, or eval on running statistics)
  maml: one inner SGD step through conv -> batch norm (training) -> relu ->
    depthwise conv -> adaptive_avg_pool -> linear -> cross_entropy, the outer
    loss's gradient wrt the initial weights (second order)
  bn_hvp / bn_hvp_2d: Hessian-vector products of sum(tanh(batch_norm(x, w, b)) * c)
    in training mode, (N, C, L) affine and (N, C) without weights
  layers_gg: the gradient of sum(|d sum(f(x) * c) / dx|^2) wrt x for f through
    group_norm, layer_norm, gelu, elu, embedding-free index ops (bilinear
    interpolate, adaptive_max_pool2d), grouped conv_transpose2d

Each case "<name>": inputs "<name>.<k>", results "<name>.<r>"; the metadata
entry "cases" is the JSON list of {name, inputs, results}.
Run:  /usr/bin/python3 tools/gen_autograd_grad2_fixtures.py
"""
import os
import sys

import torch
import torch.nn.functional as F
import torch.autograd.functional as AF

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as fl  # noqa: E402

torch.manual_seed(0)
tensors, cases = {}, []


def rnd(*shape):
    return torch.randn(shape, dtype=torch.float64)


def case(name, inputs, results):
    for k, v in inputs.items():
        tensors[f"{name}.{k}"] = v.detach().contiguous()
    for k, v in results.items():
        tensors[f"{name}.{k}"] = v.detach().contiguous()
    cases.append({"name": name, "inputs": list(inputs), "results": list(results)})


# ---- resblock_gp: nn.BasicBlock(2, 4, stride 2) -> mean over H, W -> linear(4, 1)
BLOCK = ["conv1", "bn1w", "bn1b", "conv2", "bn2w", "bn2b", "sconv", "sbnw", "sbnb", "lw", "lb"]


def critic(x, P, stats):
    def bn(t, i, w, b):
        rm, rv = (stats[2 * i], stats[2 * i + 1]) if stats else (None, None)
        return F.batch_norm(t, rm, rv, w, b, training=stats is None)
    out = F.relu(bn(F.conv2d(x, P["conv1"], stride=2, padding=1), 0, P["bn1w"], P["bn1b"]))
    out = bn(F.conv2d(out, P["conv2"], padding=1), 1, P["bn2w"], P["bn2b"])
    sc = bn(F.conv2d(x, P["sconv"], stride=2), 2, P["sbnw"], P["sbnb"])
    h = F.relu(out + sc).mean((2, 3))
    return F.linear(h, P["lw"], P["lb"])


def resblock(name, training):
    x = rnd(3, 2, 6, 6)
    P = {"conv1": rnd(4, 2, 3, 3) * 0.4, "bn1w": rnd(4) * 0.3 + 1, "bn1b": rnd(4) * 0.2,
         "conv2": rnd(4, 4, 3, 3) * 0.3, "bn2w": rnd(4) * 0.3 + 1, "bn2b": rnd(4) * 0.2,
         "sconv": rnd(4, 2, 1, 1), "sbnw": rnd(4) * 0.3 + 1, "sbnb": rnd(4) * 0.2,
         "lw": rnd(1, 4), "lb": rnd(1)}
    stats = None if training else [t for _ in range(3) for t in (rnd(4) * 0.2, torch.rand(4, dtype=torch.float64) + 0.5)]
    Pr = {k: v.clone().requires_grad_(True) for k, v in P.items()}
    xr = x.clone().requires_grad_(True)
    d = critic(xr, Pr, stats)
    gx, = torch.autograd.grad(d.sum(), [xr], create_graph=True)
    gp = ((gx.reshape(3, -1).norm(2, dim=1) - 1) ** 2).mean()
    ds = torch.autograd.grad(gp, [Pr[k] for k in BLOCK], allow_unused=True)
    inputs = dict(P, x=x)
    if stats:
        for i, t in enumerate(stats):
            inputs[f"stat{i + 1}"] = t
    results = {"d": d, "gx": gx, "gp": gp}
    for k, g in zip(BLOCK, ds):
        results["d" + k] = torch.zeros_like(P[k]) if g is None else g
    case(name, inputs, results)


resblock("resblock_gp_train", True)
resblock("resblock_gp_eval", False)


# ---- maml: one inner step, the outer loss's gradient wrt the initial weights
def net(x, p):
    h = F.conv2d(x, p[0], p[1], padding=1)
    h = F.relu(F.batch_norm(h, None, None, p[2], p[3], training=True))
    h = F.conv2d(h, p[4], None, padding=1, groups=4)
    h = F.adaptive_avg_pool2d(h, 1).flatten(1)
    return F.linear(h, p[5], p[6])


P = [rnd(4, 2, 3, 3) * 0.5, rnd(4) * 0.1, rnd(4) * 0.2 + 1, rnd(4) * 0.1, rnd(4, 1, 3, 3) * 0.5, rnd(3, 4), rnd(3)]
xa, ya, xb, yb = rnd(4, 2, 5, 5), torch.tensor([0, 2, 1, 2]), rnd(4, 2, 5, 5), torch.tensor([1, 0, 2, 2])
Pr = [p.clone().requires_grad_(True) for p in P]
inner = F.cross_entropy(net(xa, Pr), ya)
gs = torch.autograd.grad(inner, Pr, create_graph=True)
fast = [p - 0.5 * g for p, g in zip(Pr, gs)]
outer = F.cross_entropy(net(xb, fast), yb)
ds = torch.autograd.grad(outer, Pr)
inputs = {"xa": xa, "ya": ya + 1, "xb": xb, "yb": yb + 1}
results = {"outer": outer}
for i in range(len(P)):
    inputs[f"p{i + 1}"] = P[i]
    results[f"g{i + 1}"] = gs[i]
    results[f"d{i + 1}"] = ds[i]
case("maml", inputs, results)


# ---- bn_hvp: Hessian-vector products through batch norm in training mode
x, w, b, c = rnd(4, 3, 5), rnd(3), rnd(3), rnd(4, 3, 5)
v = (rnd(4, 3, 5), rnd(3), rnd(3))
f = lambda x, w, b: (torch.tanh(F.batch_norm(x, None, None, w, b, training=True)) * c).sum()
_, hv = AF.hvp(f, (x, w, b), v)
case("bn_hvp", {"x": x, "w": w, "b": b, "c": c, "v1": v[0], "v2": v[1], "v3": v[2]},
     {"hv1": hv[0], "hv2": hv[1], "hv3": hv[2]})
x, c, v = rnd(5, 3), rnd(5, 3), rnd(5, 3)
f = lambda x: (torch.tanh(F.batch_norm(x, None, None, None, None, training=True, eps=1e-3)) * c).sum()
_, hv = AF.hvp(f, x, v)
case("bn_hvp_2d", {"x": x, "c": c, "v": v}, {"hv": hv})


# ---- layers_gg: d/dx sum(|d sum(f(x) * c) / dx|^2) for a few layers
LAYERS = {
    "group_norm": lambda x: F.group_norm(x, 2, torch.linspace(0.5, 1.5, 4, dtype=torch.float64)),
    "layer_norm": lambda x: F.layer_norm(x, [3, 3]),
    "gelu_tanh_elu": lambda x: F.gelu(x, approximate="tanh") + F.elu(x * 2) + F.gelu(x),
    "interpolate_bilinear": lambda x: F.interpolate(x * x, size=(4, 5), mode="bilinear", align_corners=False),
    "adaptive_max_pool2d": lambda x: F.adaptive_max_pool2d(x * x * x, (2, 2)) ** 2,
    "conv_transpose2d_groups": lambda x: torch.tanh(F.conv_transpose2d(
        x, torch.linspace(-1, 1, 4 * 1 * 2 * 2, dtype=torch.float64).reshape(4, 1, 2, 2), stride=2, groups=2)),
    "instance_norm": lambda x: F.instance_norm(x * x),
}
x = rnd(2, 4, 3, 3)
inputs, results = {"x": x}, {}
for name, f in LAYERS.items():
    xr = x.clone().requires_grad_(True)
    y = f(xr)
    c = torch.linspace(-1, 1, y.numel(), dtype=torch.float64).reshape(y.shape)
    g, = torch.autograd.grad((y * c).sum(), [xr], create_graph=True)
    d, = torch.autograd.grad((g * g).sum(), [xr])
    results[name + ".g"], results[name + ".d"] = g, d
case("layers_gg", inputs, results)

fl.write("autograd_grad2.safetensors", tensors, cases)
