#!/usr/bin/python3
"""Writes spec/fixtures/nn_rnn_packed.safetensors with PyTorch 1.13, for
spec/nn_rnn_packed_spec.lua: nn.RNN, nn.LSTM, nn.GRU over PackedSequences
(1-2 layers, bidirectional, batch_first, enforce_sorted false with unsorted
lengths, with and without h0) and nn.LSTM with proj_size (tensor and packed
input, bidirectional, 2 layers); and pack_padded_sequence followed by
pad_packed_sequence (batch_first, padding_value, total_length).

For every module case "<name>": its state_dict "<name>.sd.<key>" (float32,
torch's random init), the float32 padded input "<name>.x" (its lengths in
the case), "<name>.h0" ("<name>.c0") when passed; torch's output "<name>.out"
(the PackedSequence's data for packed input, else the tensor), its padded
form "<name>.outpad" and lengths "<name>.lengths" (pad_packed_sequence,
batch_first as the case), "<name>.batch_sizes", "<name>.sorted_indices"
(1-based, when unsorted), final states "<name>.hn" ("<name>.cn"), and the
float64 gradients "<name>.dx", "<name>.dh0", "<name>.dc0", "<name>.d.<key>"
of sum(out * dout) + sum(hn * dhn) + sum(cn * dcn).
A "pack" case: "<name>.out" = pad_packed_sequence(pack_padded_sequence(x,
lengths, enforce_sorted), batch_first, padding_value, total_length), its
packed "<name>.data", and "<name>.dx" of sum(out * dout).
Run:  /usr/bin/python3 tools/gen_rnn_packed_fixtures.py
"""
import os
import sys

import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as g  # noqa: E402

torch.manual_seed(0)
tensors, cases = {}, []
I, H = 3, 4


def grads(name, loss, leaves, leaf_names, m):
    names = [k for k, _ in m.named_parameters()] if m else []
    params = [p for _, p in m.named_parameters()] if m else []
    gs = torch.autograd.grad(loss, leaves + params)
    for k, gr in zip(leaf_names, gs):
        tensors[f"{name}.{k}"] = gr
    for k, gr in zip(names, gs[len(leaves):]):
        tensors[f"{name}.d.{k}"] = gr


def module_case(name, kind, opts, lengths, enforce_sorted=True, with_h0=True, packed=True):
    m = getattr(nn, kind)(I, H, **opts)
    for k, v in m.state_dict().items():
        tensors[f"{name}.sd.{k}"] = v.detach().float().clone()
    m = m.double()
    bf = opts.get("batch_first", False)
    T, B = max(lengths), len(lengths)
    x = g.f32(*((B, T, I) if bf else (T, B, I)))
    tensors[f"{name}.x"] = x
    xd = x.double().requires_grad_(True)
    leaves, leaf_names, hx = [xd], ["dx"], None
    D = 2 if opts.get("bidirectional") else 1
    LD, P = opts.get("num_layers", 1) * D, opts.get("proj_size", 0) or H
    lstm = kind == "LSTM"
    if with_h0:
        h0 = g.f32(LD, B, P)
        tensors[f"{name}.h0"] = h0
        hd = h0.double().requires_grad_(True)
        leaves.append(hd)
        leaf_names.append("dh0")
        hx = hd
        if lstm:
            c0 = g.f32(LD, B, H)
            tensors[f"{name}.c0"] = c0
            cd = c0.double().requires_grad_(True)
            leaves.append(cd)
            leaf_names.append("dc0")
            hx = (hd, cd)
    inp = pack_padded_sequence(xd, lengths, batch_first=bf, enforce_sorted=enforce_sorted) if packed else xd
    out, state = m(inp, hx)
    hn, cn = state if lstm else (state, None)
    if packed:
        tensors[f"{name}.batch_sizes"] = out.batch_sizes
        if out.sorted_indices is not None:
            tensors[f"{name}.sorted_indices"] = out.sorted_indices + 1
        outpad, lens = pad_packed_sequence(out, batch_first=bf)
        tensors[f"{name}.outpad"] = outpad.detach()
        tensors[f"{name}.lengths"] = lens
        out = out.data
    loss = 0
    for key, t in (("out", out), ("hn", hn), ("cn", cn)):
        if t is None:
            continue
        w = g.f32(*t.shape)
        tensors[f"{name}.{key}"] = t.detach()
        tensors[f"{name}.d{key}"] = w
        loss = loss + (t * w.double()).sum()
    grads(name, loss, leaves, leaf_names, m)
    cases.append({"name": name, "kind": kind, "input_size": I, "hidden_size": H, "opts": opts,
                  "lengths": lengths, "enforce_sorted": enforce_sorted, "h0": with_h0, "packed": packed,
                  "keys": list(m.state_dict().keys())})


def pack_case(name, shape, lengths, enforce_sorted, batch_first, padding_value, total_length):
    x = g.f32(*shape)
    tensors[f"{name}.x"] = x
    xd = x.double().requires_grad_(True)
    p = pack_padded_sequence(xd, lengths, batch_first=batch_first, enforce_sorted=enforce_sorted)
    tensors[f"{name}.data"] = p.data.detach()
    tensors[f"{name}.batch_sizes"] = p.batch_sizes
    out, lens = pad_packed_sequence(p, batch_first=batch_first, padding_value=padding_value,
                                    total_length=total_length)
    tensors[f"{name}.out"] = out.detach()
    tensors[f"{name}.lengths"] = lens
    w = g.f32(*out.shape)
    tensors[f"{name}.dout"] = w
    grads(name, (out * w.double()).sum(), [xd], ["dx"], None)
    cases.append({"name": name, "kind": "pack", "lengths": lengths, "enforce_sorted": enforce_sorted,
                  "batch_first": batch_first, "padding_value": padding_value, "total_length": total_length})


module_case("lstm_l1", "LSTM", {}, [5, 3, 2])
module_case("gru_l2_noh", "GRU", {"num_layers": 2}, [5, 5, 2], with_h0=False)
module_case("rnn_l1_bi_unsorted", "RNN", {"bidirectional": True}, [3, 6, 1], enforce_sorted=False)
module_case("rnn_relu_l2", "RNN", {"num_layers": 2, "nonlinearity": "relu"}, [4, 2], with_h0=True)
module_case("gru_l2_bi_bf_unsorted", "GRU", {"num_layers": 2, "bidirectional": True, "batch_first": True},
            [2, 5, 3, 4], enforce_sorted=False)
module_case("lstm_l2_bi_unsorted", "LSTM", {"num_layers": 2, "bidirectional": True}, [3, 6, 2, 5],
            enforce_sorted=False)
module_case("lstm_l2_bi_bf_noh", "LSTM", {"num_layers": 2, "bidirectional": True, "batch_first": True},
            [4, 4, 1], with_h0=False)
module_case("lstm_proj_l1", "LSTM", {"proj_size": 2}, [5, 5, 5], packed=False)
module_case("lstm_proj_l2_bi", "LSTM", {"proj_size": 3, "num_layers": 2, "bidirectional": True}, [4, 4],
            packed=False)
module_case("lstm_proj_l2_bi_bf_noh", "LSTM",
            {"proj_size": 2, "num_layers": 2, "bidirectional": True, "batch_first": True}, [4, 4],
            with_h0=False, packed=False)
module_case("lstm_proj_l2_bi_packed", "LSTM", {"proj_size": 2, "num_layers": 2, "bidirectional": True},
            [2, 5, 4], enforce_sorted=False)
pack_case("pack_sorted", (5, 3, 2), [5, 3, 1], True, False, 0.0, None)
pack_case("pack_unsorted_bf", (3, 4, 2), [2, 4, 1], False, True, -1.0, 6)
g.write("nn_rnn_packed.safetensors", tensors, cases)
