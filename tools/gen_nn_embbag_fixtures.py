#!/usr/bin/python3
"""Writes spec/fixtures/nn_embbag.safetensors with PyTorch 1.13, for
spec/nn_embbag_summary_spec.lua: F.embedding_bag in modes sum, mean and max
on 2-d input and on 1-d input with offsets (empty bags first, inside and
last; include_last_offset, its last offset the input's length as the docs
say: torch 1.13 reads past its buffers when it is less), per_sample_weights,
padding_idx (bags of padding only), max_norm (the rows renormalised in place),
scale_grad_by_freq; F.embedding with max_norm and scale_grad_by_freq.

For every case "<name>": "<name>.input" (int64, stored 1-based, lunet's
convention), "<name>.offsets" (1-based), the float32 "<name>.weight" (and
"<name>.psw", the per_sample_weights); the output "<name>.out", the
gradients "<name>.dweight" ("<name>.dpsw") of sum(out * "<name>.dout"),
computed in float64 from the same values; with max_norm "<name>.weight_after"
(the weight once renormalised). The metadata entry "cases" is a JSON list
of {name, op, args (lunet's option names, padding_idx 1-based)}.

scale_grad_by_freq with embedding_bag: the gradient is the documented one
(each row's divided by its index's count), computed here from F.embedding's;
torch 1.13's CPU embedding_bag divides by a wrong count when the counts
differ (pytorch/pytorch#190063, fixed much later; CUDA was right).
Run:  /usr/bin/python3 tools/gen_nn_embbag_fixtures.py
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as g  # noqa: E402

tensors, cases = {}, []
torch.manual_seed(0)


def bag_ids(inp, offsets):
    """the 0-based bag of each entry of a 1-d input"""
    n = inp.numel()
    marks = torch.zeros(n + 1, dtype=torch.long).index_add_(0, offsets, torch.ones_like(offsets))
    return marks.cumsum(0)[:n] - 1


def add(name, op, inp, num, dim, offsets=None, psw=False, **args):
    w32 = torch.randn(num, dim)
    if args.get("max_norm") is not None:
        w32 = w32 * 2
    tensors[f"{name}.input"] = inp + 1
    tensors[f"{name}.weight"] = w32
    w = w32.double().requires_grad_(True)
    ins = [w]
    p = None
    if psw:
        p32 = torch.randn(inp.shape)
        tensors[f"{name}.psw"] = p32
        p = p32.double().requires_grad_(True)
        ins.append(p)
    if offsets is not None:
        tensors[f"{name}.offsets"] = offsets + 1
    pi = args.get("padding_idx")
    targs = dict(max_norm=args.get("max_norm"), norm_type=args.get("norm_type", 2.0),
                 scale_grad_by_freq=args.get("scale_grad_by_freq", False), padding_idx=pi)
    if op == "embedding":
        out = F.embedding(inp, w, **targs)
    else:
        mode = args.get("mode", "mean")
        out = F.embedding_bag(inp, w, offsets, mode=mode, per_sample_weights=p,
                              include_last_offset=args.get("include_last_offset", False), **targs)
        if targs["scale_grad_by_freq"]:
            # the documented gradient, from F.embedding's (see the docstring)
            flat = inp.reshape(-1)
            rows = F.embedding(flat, w, scale_grad_by_freq=True)
            if pi is not None:
                rows = rows * (flat != pi).double().unsqueeze(1)
            if offsets is None:
                bag = torch.arange(inp.shape[0]).repeat_interleave(inp.shape[1])
            else:
                bag = bag_ids(flat, offsets)
            nb = out.shape[0]
            keep = bag < nb
            s = torch.zeros(nb, dim, dtype=torch.double).index_add(0, bag[keep], rows[keep])
            if mode == "mean":
                cnt = torch.zeros(nb, dtype=torch.double).index_add(
                    0, bag[keep], (flat[keep] != (pi if pi is not None else -1)).double())
                s = s / cnt.clamp_min(1).unsqueeze(1)
            assert (s - out).abs().max() < 1e-12
            out = s
    dout = torch.randn(out.shape)
    grads = torch.autograd.grad(out, ins, dout.double())
    tensors[f"{name}.out"], tensors[f"{name}.dout"] = out.detach(), dout
    tensors[f"{name}.dweight"] = grads[0]
    if psw:
        tensors[f"{name}.dpsw"] = grads[1]
    if args.get("max_norm") is not None:
        tensors[f"{name}.weight_after"] = w.detach().clone()
    a = {k: v for k, v in args.items() if v is not None}
    if pi is not None:
        a["padding_idx"] = pi + 1
    cases.append({"name": name, "op": op, "args": a})


L = torch.tensor
i64 = dict(dtype=torch.long)
x1 = L([2, 0, 5, 5, 3, 7, 1, 2, 6, 4], **i64)
for mode in ("sum", "mean", "max"):
    add(f"{mode}_2d", "embedding_bag", torch.randint(0, 8, (3, 4)), 8, 5, mode=mode)
    add(f"{mode}_off", "embedding_bag", x1, 8, 4, L([0, 3, 3, 7], **i64), mode=mode)
    add(f"{mode}_empty", "embedding_bag", x1, 8, 4, L([0, 0, 4, 4, 10], **i64), mode=mode)
    add(f"{mode}_last", "embedding_bag", x1, 8, 4, L([0, 2, 2, 10], **i64), mode=mode, include_last_offset=True)
    add(f"{mode}_lastfull", "embedding_bag", x1, 8, 4, L([0, 5, 10, 10], **i64), mode=mode, include_last_offset=True)
    add(f"{mode}_pad", "embedding_bag", L([2, 2, 5, 2, 3, 1, 2], **i64), 8, 3, L([0, 2, 4, 5], **i64), mode=mode,
        padding_idx=2)
    add(f"{mode}_pad2d", "embedding_bag", L([[1, 3, 1], [1, 1, 1]], **i64), 6, 3, mode=mode, padding_idx=1)
    add(f"{mode}_maxnorm", "embedding_bag", x1, 8, 4, L([0, 4, 6], **i64), mode=mode, max_norm=1.5)
    add(f"{mode}_maxnorm1", "embedding_bag", x1, 8, 4, L([0, 4, 6], **i64), mode=mode, max_norm=2.0, norm_type=1.0)
add("sum_psw", "embedding_bag", x1, 8, 4, L([0, 3, 3, 7], **i64), psw=True, mode="sum")
add("sum_psw2d", "embedding_bag", torch.randint(0, 8, (3, 4)), 8, 5, psw=True, mode="sum")
add("sum_pswpad", "embedding_bag", L([2, 2, 5, 2, 3, 1, 2], **i64), 8, 3, L([0, 2, 4], **i64), psw=True, mode="sum",
    padding_idx=2)
add("sum_psw_last", "embedding_bag", x1, 8, 4, L([0, 0, 2, 10], **i64), psw=True, mode="sum", include_last_offset=True)
xf = L([1, 1, 2, 1, 4, 4, 0], **i64)
for mode in ("sum", "mean"):
    add(f"{mode}_freq", "embedding_bag", xf, 6, 3, L([0, 2, 5], **i64), mode=mode, scale_grad_by_freq=True)
    add(f"{mode}_freqpad", "embedding_bag", xf, 6, 3, L([0, 2, 5], **i64), mode=mode, scale_grad_by_freq=True,
        padding_idx=4)
add("emb_maxnorm", "embedding", L([[1, 3, 3], [6, 0, 1]], **i64), 8, 4, max_norm=1.0)
add("emb_maxnorm3", "embedding", L([1, 3, 3, 6], **i64), 8, 4, max_norm=0.5, norm_type=3.0)
add("emb_freq", "embedding", L([[1, 3, 3], [3, 0, 1]], **i64), 5, 2, scale_grad_by_freq=True)
add("emb_freqpad", "embedding", L([[1, 3, 3], [3, 0, 1]], **i64), 5, 2, scale_grad_by_freq=True, padding_idx=3)

g.write("nn_embbag.safetensors", tensors, cases)
