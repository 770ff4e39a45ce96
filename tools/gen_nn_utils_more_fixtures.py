#!/usr/bin/python3
"""Writes spec/fixtures/nn_utils_more.safetensors with PyTorch 1.13, for
spec/nn_utils_more_spec.lua, all in float64:

weight_norm: a module's weight ("<name>.w"), bias ("b"), input ("x") and
gradient seed ("dout"); after torch.nn.utils.weight_norm(m, dim=...): its
weight_g, weight_v, the output of m(x) and the gradients of sum(out * dout)
for weight_g ("dg"), weight_v ("dv"), bias ("db") and x ("dx").

spectral_norm: the module's weight, bias and torch's initial weight_u,
weight_v ("u0", "v0": lunet copies them in); then for each forward k (the
case's "modes": training or eval) its input "x<k>", output "out<k>",
weight_u / weight_v after it ("u<k>", "v<k>"), and the gradients of
sum(out<k> * dout<k>) for weight_orig ("dw<k>") and x ("dx<k>").

pad_sequence: sequences "s1".."sn", the output "out", and the gradient of
each sequence ("ds<k>") of sum(out * dout).

The metadata entry "cases" is a JSON list of {name, op, opts}.
Run:  /usr/bin/python3 tools/gen_nn_utils_more_fixtures.py
"""
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as g  # noqa: E402

torch.manual_seed(0)
T = g.tensors


def r(*shape):
    return torch.randn(*shape, dtype=torch.float64)


def weight_norm_cases():
    # (name, module, input shape, torch dim, lunet dim: false for None)
    for name, m, xs, dim, ldim in [
            ("wn_linear", nn.Linear(3, 4), (5, 3), 0, 1),
            ("wn_linear_d1", nn.Linear(3, 4), (5, 3), 1, 2),
            ("wn_conv", nn.Conv2d(2, 3, 3), (2, 2, 5, 5), 0, 1),
            ("wn_conv_d2", nn.Conv2d(2, 3, 3), (2, 2, 5, 5), 2, 3),
            ("wn_conv_none", nn.Conv2d(2, 3, 3), (2, 2, 5, 5), None, False)]:
        m = m.double()
        T[f"{name}.w"], T[f"{name}.b"] = m.weight.detach().clone(), m.bias.detach().clone()
        nn.utils.weight_norm(m, dim=dim)
        x = r(*xs).requires_grad_()
        out = m(x)
        dout = r(*out.shape)
        dg, dv, db, dx = torch.autograd.grad(out, [m.weight_g, m.weight_v, m.bias, x], dout)
        for k, v in dict(g=m.weight_g, v=m.weight_v, x=x, out=out, dout=dout, dg=dg, dv=dv, db=db, dx=dx).items():
            T[f"{name}.{k}"] = v.detach().clone()
        g.cases.append({"name": name, "op": "weight_norm", "opts": {"dim": ldim, "kind": type(m).__name__}})


def spectral_norm_cases():
    # (name, module, input shape, options (lunet's names; dim 1-based), modes)
    for name, m, xs, opts, modes in [
            ("sn_linear", nn.Linear(5, 4), (3, 5), {}, ["train", "train", "eval", "train"]),
            ("sn_conv_it2", nn.Conv2d(2, 3, 3), (2, 2, 5, 5), {"n_power_iterations": 2, "eps": 1e-6},
             ["train", "eval", "train"]),
            ("sn_convt", nn.ConvTranspose2d(2, 3, 3), (2, 2, 4, 4), {}, ["train", "eval"]),
            ("sn_conv_dim2", nn.Conv2d(2, 3, 3), (2, 2, 5, 5), {"dim": 2}, ["train", "train"])]:
        m = m.double()
        T[f"{name}.w"], T[f"{name}.b"] = m.weight.detach().clone(), m.bias.detach().clone()
        topts = {k: v for k, v in opts.items() if k != "dim"}
        if "dim" in opts:
            topts["dim"] = opts["dim"] - 1
        nn.utils.spectral_norm(m, **topts)
        T[f"{name}.u0"], T[f"{name}.v0"] = m.weight_u.clone(), m.weight_v.clone()
        for k, mode in enumerate(modes, 1):
            m.train(mode == "train")
            x = r(*xs).requires_grad_()
            out = m(x)
            dout = r(*out.shape)
            dw, dx = torch.autograd.grad(out, [m.weight_orig, x], dout)
            for key, v in {"x": x, "out": out, "dout": dout, "u": m.weight_u, "v": m.weight_v, "dw": dw, "dx": dx}.items():
                T[f"{name}.{key}{k}"] = v.detach().clone()
        g.cases.append({"name": name, "op": "spectral_norm", "opts": opts, "modes": modes,
                        "kind": type(m).__name__})


def pad_sequence_cases():
    for name, shapes, opts in [("pad_1d", [(3,), (5,), (1,)], {}),
                               ("pad_2d_bf", [(2, 3), (4, 3), (4, 3)], {"batch_first": True, "padding_value": -1.5}),
                               ("pad_3d", [(1, 2, 2), (3, 2, 2)], {"padding_value": 2})]:
        seqs = [r(*s).requires_grad_() for s in shapes]
        out = nn.utils.rnn.pad_sequence(seqs, **opts)
        dout = r(*out.shape)
        gs = torch.autograd.grad(out, seqs, dout)
        for k, (s, gk) in enumerate(zip(seqs, gs), 1):
            T[f"{name}.s{k}"], T[f"{name}.ds{k}"] = s.detach().clone(), gk
        T[f"{name}.out"], T[f"{name}.dout"] = out.detach().clone(), dout
        g.cases.append({"name": name, "op": "pad_sequence", "opts": opts, "n": len(shapes)})


weight_norm_cases()
spectral_norm_cases()
pad_sequence_cases()
g.write("nn_utils_more.safetensors", g.tensors, g.cases)
