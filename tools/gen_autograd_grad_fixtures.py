#!/usr/bin/python3
"""Writes spec/fixtures/autograd_grad.safetensors with PyTorch 1.13, for
spec/autograd_grad_spec.lua: first and second derivatives
(torch.autograd.grad with create_graph=True) and torch.autograd.functional
(vjp, jvp, jacobian, hessian, hvp, vhp) of small float64 functions, each
written the same way in the spec (the case's name picks it there).

For every case "<name>": its float64 inputs "<name>.<k>" and the expected
results "<name>.<result>" (see each case). The metadata entry "cases" is the
JSON list of {name, inputs: [k...], results: [result...]}.
Run:  /usr/bin/python3 tools/gen_autograd_grad_fixtures.py
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
        tensors[f"{name}.{k}"] = v.detach()
    for k, v in results.items():
        tensors[f"{name}.{k}"] = v.detach().contiguous()
    cases.append({"name": name, "inputs": list(inputs), "results": list(results)})


def req(*ts):
    return [t.clone().requires_grad_(True) for t in ts]


# poly: f = sum(x^3 + 2 x^2 y + y^2 / x2), x2 = x*x + 1: grad, grad of sum(grad^2)
def poly(x, y):
    return (x.pow(3) + 2 * x * x * y + y * y / (x * x + 1)).sum()


x, y = rnd(4), rnd(4)
xr, yr = req(x, y)
gx, gy = torch.autograd.grad(poly(xr, yr), [xr, yr], create_graph=True)
p = (gx * gx).sum() + (gx * gy).sum()
hx, hy = torch.autograd.grad(p, [xr, yr])
H = AF.hessian(poly, (x, y))
v1, v2 = rnd(4), rnd(4)
_, hvp = AF.hvp(poly, (x, y), (v1, v2))
_, vhp = AF.vhp(poly, (x, y), (v1, v2))
case("poly", {"x": x, "y": y, "v1": v1, "v2": v2},
     {"gx": gx, "gy": gy, "hx": hx, "hy": hy, "Hxx": H[0][0], "Hxy": H[0][1], "Hyx": H[1][0], "Hyy": H[1][1],
      "hvp1": hvp[0], "hvp2": hvp[1], "vhp1": vhp[0], "vhp2": vhp[1]})


# chain: tanh/sigmoid/exp/log: hessian of a single input
def chain(x):
    return (torch.tanh(torch.sigmoid(x) * torch.exp(x * 0.5)) * torch.log(x * x + 1)).sum()


x = rnd(2, 3)
case("chain", {"x": x}, {"H": AF.hessian(chain, x)})


# vecfn: two inputs, two outputs: jacobian, vjp, jvp
def vecfn(a, b):
    return (a * b.sin(), (a.exp() * b).sum(0))


a, b = rnd(2, 3), rnd(2, 3)
J = AF.jacobian(vecfn, (a, b))
u1, u2 = rnd(2, 3), rnd(3)
_, vjp = AF.vjp(vecfn, (a, b), (u1, u2))
w1, w2 = rnd(2, 3), rnd(2, 3)
_, jvp = AF.jvp(vecfn, (a, b), (w1, w2))
case("vecfn", {"a": a, "b": b, "u1": u1, "u2": u2, "w1": w1, "w2": w2},
     {"J11": J[0][0], "J12": J[0][1], "J21": J[1][0], "J22": J[1][1], "vjp1": vjp[0], "vjp2": vjp[1],
      "jvp1": jvp[0], "jvp2": jvp[1]})


# mse_linear: loss = mse(linear(x, W, b), t); penalty ||dloss/dW||^2 + ||dloss/dx||^2, its gradient wrt W, b, x
x, W, bb, t = rnd(5, 4), rnd(3, 4), rnd(3), rnd(5, 3)
xr, Wr, br = req(x, W, bb)
loss = F.mse_loss(F.linear(xr, Wr, br), t)
gW, gx = torch.autograd.grad(loss, [Wr, xr], create_graph=True)
pen = (gW * gW).sum() + (gx * gx).sum()
dW, db, dx = torch.autograd.grad(pen, [Wr, br, xr])
case("mse_linear", {"x": x, "W": W, "b": bb, "t": t}, {"gW": gW, "gx": gx, "dW": dW, "db": db, "dx": dx})

# cross_entropy: hessian wrt W of cross_entropy(x @ W, target); log_softmax and softmax penalties
x, W = rnd(4, 3), rnd(3, 5)
tgt = torch.tensor([0, 4, 2, 1])
H = AF.hessian(lambda W: F.cross_entropy(x @ W, tgt), W)
xr, Wr = req(x, W)
s = (F.softmax(xr @ Wr, 1) * torch.arange(5.0, dtype=torch.float64)).sum()
g, = torch.autograd.grad(s, [Wr], create_graph=True)
dW, dx = torch.autograd.grad((g * g).sum(), [Wr, xr])
case("cross_entropy", {"x": x, "W": W, "target": tgt + 1}, {"H": H, "sm_g": g, "sm_dW": dW, "sm_dx": dx})


# wgan_gp: conv2d -> relu -> linear critic; gp = mean((||dD/dx|| - 1)^2) per sample, its gradient wrt the weights
def critic(x, cw, cb, lw, lb):
    h = F.relu(F.conv2d(x, cw, cb, padding=1))
    return F.linear(h.reshape(x.shape[0], -1), lw, lb)


x, cw, cb, lw, lb = rnd(3, 1, 4, 4), rnd(2, 1, 3, 3), rnd(2), rnd(1, 32), rnd(1)
xr, cwr, cbr, lwr, lbr = req(x, cw, cb, lw, lb)
d = critic(xr, cwr, cbr, lwr, lbr)
gx, = torch.autograd.grad(d.sum(), [xr], create_graph=True)
gp = ((gx.reshape(3, -1).norm(2, dim=1) - 1) ** 2).mean()
dcw, dcb, dlw, dlb = torch.autograd.grad(gp, [cwr, cbr, lwr, lbr], allow_unused=True)
case("wgan_gp", {"x": x, "cw": cw, "cb": cb, "lw": lw, "lb": lb},
     {"gx": gx, "gp": gp, "dcw": dcw, "dlw": dlw})

# conv_strided: loss = sum(tanh(conv2d(x, w, stride 2, padding 1, dilation 1))^2); ||dloss/dx||^2's gradient wrt w, x
x, w = rnd(2, 2, 6, 5), rnd(3, 2, 3, 2)
xr, wr = req(x, w)
loss = torch.tanh(F.conv2d(xr, wr, stride=2, padding=1)).pow(2).sum()
gx, gw = torch.autograd.grad(loss, [xr, wr], create_graph=True)
dw, dx = torch.autograd.grad((gx * gx).sum() + (gw * gw).sum(), [wr, xr])
case("conv_strided", {"x": x, "w": w}, {"gx": gx, "gw": gw, "dw": dw, "dx": dx})

fl.write("autograd_grad.safetensors", tensors, cases)
