#!/usr/bin/python3
"""Writes spec/fixtures/nn_rnn.safetensors with PyTorch 1.13, for
spec/nn_rnn_spec.lua: nn.RNNCell (tanh, relu), nn.LSTMCell, nn.GRUCell
(batched, unbatched, without bias, without a state) and nn.RNN, nn.LSTM,
nn.GRU (num_layers 1 and 2, bidirectional, batch_first, unbatched, without
bias, without h0, relu RNN).

For every case "<name>": the module's state_dict "<name>.sd.<key>" (float32,
torch's random init), the float32 input "<name>.x" and states "<name>.h0"
("<name>.c0" for LSTMs) when the case passes them; torch's output
"<name>.out" and final states "<name>.hn" ("<name>.cn"), and the gradients
"<name>.dx", "<name>.dh0", "<name>.dc0" and "<name>.d.<key>" of
sum(out * dout) + sum(hn * dhn) + sum(cn * dcn) (weights "<name>.dout",
"<name>.dhn", "<name>.dcn"), all computed in float64 from the same values.
Cells have no out: their new state is hn (and cn). The metadata entry
"cases" is a JSON list of {name, kind, input_size, hidden_size, opts
(lunet's option names), h0 (whether states are passed)}.
Run:  /usr/bin/python3 tools/gen_nn_rnn_fixtures.py
"""
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as g  # noqa: E402

torch.manual_seed(0)
tensors, cases = {}, []


def add(name, kind, isz, hsz, opts, xshape, hshape, with_h0):
    """hshape: the state's shape (None: the state is not passed)"""
    m = getattr(nn, kind)(isz, hsz, **opts)
    for k, v in m.state_dict().items():
        tensors[f"{name}.sd.{k}"] = v.detach().float().clone()
    m = m.double()
    lstm = kind.startswith("LSTM")
    x = g.f32(*xshape)
    tensors[f"{name}.x"] = x
    xd = x.double().requires_grad_(True)
    leaves = [xd]
    hx = None
    if with_h0:
        h0, c0 = g.f32(*hshape), g.f32(*hshape)
        tensors[f"{name}.h0"] = h0
        hd = h0.double().requires_grad_(True)
        leaves.append(hd)
        hx = hd
        if lstm:
            tensors[f"{name}.c0"] = c0
            cd = c0.double().requires_grad_(True)
            leaves.append(cd)
            hx = (hd, cd)
    r = m(xd, hx)
    if kind.endswith("Cell"):
        out, state = None, r
    else:
        out, state = r
    hn, cn = state if lstm else (state, None)
    loss = 0
    for key, t in (("out", out), ("hn", hn), ("cn", cn)):
        if t is None:
            continue
        w = g.f32(*t.shape)
        tensors[f"{name}.{key}"] = t.detach()
        tensors[f"{name}.d{key}"] = w
        loss = loss + (t * w.double()).sum()
    names = [k for k, _ in m.named_parameters()]
    params = [p for _, p in m.named_parameters()]
    grads = torch.autograd.grad(loss, leaves + params)
    for k, gr in zip(["dx", "dh0", "dc0"][:len(leaves)], grads):
        tensors[f"{name}.{k}"] = gr
    for k, gr in zip(names, grads[len(leaves):]):
        tensors[f"{name}.d.{k}"] = gr
    cases.append({"name": name, "kind": kind, "input_size": isz, "hidden_size": hsz, "opts": opts,
                  "h0": with_h0, "keys": list(m.state_dict().keys())})


def cells():
    for name, kind, opts, xs, hs, with_h0 in [
        ("rnncell_tanh", "RNNCell", {}, (3, 5), (3, 4), True),
        ("rnncell_relu", "RNNCell", {"nonlinearity": "relu"}, (3, 5), (3, 4), True),
        ("rnncell_unbatched", "RNNCell", {}, (5,), (4,), True),
        ("rnncell_nobias_noh", "RNNCell", {"bias": False}, (2, 5), None, False),
        ("lstmcell", "LSTMCell", {}, (3, 5), (3, 4), True),
        ("lstmcell_unbatched", "LSTMCell", {}, (5,), (4,), True),
        ("lstmcell_nobias_noh", "LSTMCell", {"bias": False}, (2, 5), None, False),
        ("grucell", "GRUCell", {}, (3, 5), (3, 4), True),
        ("grucell_unbatched", "GRUCell", {}, (5,), (4,), True),
        ("grucell_nobias_noh", "GRUCell", {"bias": False}, (2, 5), None, False),
    ]:
        add(name, kind, 5, 4, opts, xs, hs, with_h0)


def layers():
    L, N, I, H = 6, 3, 5, 4
    for kind in ("RNN", "LSTM", "GRU"):
        k = kind.lower()
        for name, opts, xs, with_h0 in [
            ("l1", {}, (L, N, I), True),
            ("l2", {"num_layers": 2}, (L, N, I), True),
            ("l1_bi", {"bidirectional": True}, (L, N, I), True),
            ("l2_bi", {"num_layers": 2, "bidirectional": True}, (L, N, I), True),
            ("l2_bf_noh", {"num_layers": 2, "batch_first": True}, (N, L, I), False),
            ("l2_bi_bf", {"num_layers": 2, "bidirectional": True, "batch_first": True}, (N, L, I), True),
            ("l2_bi_unbatched", {"num_layers": 2, "bidirectional": True}, (L, I), True),
            ("l1_bf_unbatched_noh", {"batch_first": True}, (L, I), False),
            ("l2_nobias", {"num_layers": 2, "bias": False}, (L, N, I), True),
        ]:
            D = 2 if opts.get("bidirectional") else 1
            LD = opts.get("num_layers", 1) * D
            hs = (LD, H) if len(xs) == 2 else (LD, N, H)
            add(f"{k}_{name}", kind, I, H, opts, xs, hs, with_h0)
    add("rnn_relu_l2_bi", "RNN", 5, 4, {"num_layers": 2, "bidirectional": True, "nonlinearity": "relu"},
        (L, N, 5), (4, N, 4), True)
    add("rnn_l1_len1", "RNN", 5, 4, {}, (1, N, 5), (1, N, 4), True)


cells()
layers()
g.write("nn_rnn.safetensors", tensors, cases)
