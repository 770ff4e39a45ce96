#!/usr/bin/python3
"""Writes spec/fixtures/nn_losses_more.safetensors with PyTorch, for
spec/nn_losses_more_spec.lua: outputs and gradients of ctc_loss (several T
and S, repeated labels, target lengths 0, unequal input lengths, an
impossible alignment with and without zero_infinity, each reduction, padded
and concatenated targets, unbatched, another blank), hinge_embedding_loss,
multilabel_margin_loss, triplet_margin_with_distance_loss, conv_transpose1d
and lp_pool1d / lp_pool2d.

Same layout as tools/gen_nn_fixtures.py (fixture_lib's save/add): for each
case "<name>", the inputs "<name>.<k>" (float32, or int64 labels and lengths
stored as lunet takes them: labels 1-based, blank 1-based, multilabel
targets terminated by 0 where torch's are by -1), the output "<name>.out"
and the gradients "<name>.d<k>" of sum(out * <name>.dout), computed in
float64 from the same values. CTC's input "x" is the logits: the loss is of
log_softmax(x) (torch's gradient of log_probs adds exp(log_probs), which
cancels through log_softmax, so the logits' gradients compare). The
metadata entry "cases" is a JSON list of {name, op, opts}, opts in lunet's
terms.
Run:  /usr/bin/python3 tools/gen_nn_losses_more_fixtures.py
"""
import os
import sys
import warnings

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as g  # noqa: E402

warnings.filterwarnings("ignore")
f32, add = g.f32, g.add
I64 = torch.int64


def ctc(name, T, N, C, tl, il=None, reduction="mean", zero_infinity=False, blank=1, layout="padded",
        labels=None, S=None, unbatched=False, grads=True):
    """blank and labels 1-based (lunet's); tl, il: lists of lengths"""
    il = il or [T] * N
    S = S or max(tl + [1])
    if labels is None:
        choices = [c for c in range(1, C + 1) if c != blank]
        labels = [[choices[int(torch.randint(len(choices), ()))] for _ in range(S)] for _ in range(N)]
    tg = torch.zeros(N, S, dtype=I64)   # (padding 0: not a label, lunet ignores it as torch does)
    for n in range(N):
        tg[n, :len(labels[n])] = torch.tensor(labels[n][:S], dtype=I64)
    if layout == "concat":
        tg = torch.cat([tg[n, :tl[n]] for n in range(N)])
    x = f32(T, C) if unbatched else f32(T, N, C)
    if unbatched:
        tg = tg[0]
    ilt, tlt = torch.tensor(il, dtype=I64), torch.tensor(tl, dtype=I64)
    if unbatched:
        ilt, tlt = ilt[0], tlt[0]

    def fn(x, targets, input_lengths, target_lengths):
        t = targets - 1
        t = t.clamp_min(0)
        return F.ctc_loss(x.log_softmax(-1), t, input_lengths, target_lengths, blank=blank - 1,
                          reduction=reduction, zero_infinity=zero_infinity)
    add(name, "ctc_loss", dict(blank=blank, reduction=reduction, zero_infinity=zero_infinity), fn,
        {"x": x, "targets": tg, "input_lengths": ilt, "target_lengths": tlt}, ["x"] if grads else [])


def ctc_cases():
    ctc("ctc_basic", 6, 3, 5, [3, 2, 1])
    ctc("ctc_sum", 7, 2, 4, [3, 4], reduction="sum")
    ctc("ctc_none", 5, 3, 6, [2, 1, 2], reduction="none")
    ctc("ctc_repeat", 9, 3, 4, [4, 3, 2], labels=[[2, 2, 3, 3], [4, 4, 4], [2, 3]], reduction="none")
    ctc("ctc_concat", 8, 3, 5, [2, 3, 1], layout="concat", reduction="sum")
    ctc("ctc_concat_mean", 8, 3, 5, [3, 0, 2], layout="concat")
    ctc("ctc_zero_len", 5, 3, 4, [0, 2, 0], reduction="none")
    ctc("ctc_zero_mean", 5, 2, 4, [0, 2])
    ctc("ctc_in_len", 10, 3, 5, [3, 2, 1], il=[10, 6, 1], reduction="none")
    ctc("ctc_long", 30, 2, 7, [8, 11], S=12)
    ctc("ctc_t1", 1, 2, 3, [1, 0], reduction="none")
    ctc("ctc_blank_last", 7, 2, 5, [3, 2], blank=5)
    ctc("ctc_blank_mid", 7, 2, 5, [3, 2], blank=3, reduction="sum")
    ctc("ctc_unbatched", 6, 1, 4, [3], unbatched=True, reduction="none")
    ctc("ctc_unbatched_mean", 6, 1, 4, [3], unbatched=True)
    # impossible: 3 repeated labels need 5 steps; torch's gradient there is NaN (not compared)
    for r in ["none", "mean", "sum"]:
        ctc("ctc_imposs_" + r, 4, 2, 4, [3, 2], labels=[[2, 2, 2], [3, 4]], reduction=r, grads=False)
        ctc("ctc_imposs_zi_" + r, 4, 2, 4, [3, 2], labels=[[2, 2, 2], [3, 4]], reduction=r, zero_infinity=True)
    ctc("ctc_short_input", 6, 2, 4, [3, 2], il=[2, 6], reduction="none", zero_infinity=True)


def loss_cases():
    for r in ["mean", "sum", "none"]:
        y = torch.randint(2, (4, 5)).float() * 2 - 1
        add("hinge_" + r, "hinge_embedding_loss", dict(reduction=r),
            lambda x, y, r=r: F.hinge_embedding_loss(x, y, reduction=r), {"x": f32(4, 5), "y": y}, ["x"])
    y = torch.tensor([1.0, -1.0, 1.0, -1.0, -1.0, 1.0])
    x = torch.tensor([0.5, 0.5, -2.0, 2.0, 1.0, 0.0])   # a hinge at exactly 0 (margin 1 - 1)
    add("hinge_margin", "hinge_embedding_loss", dict(margin=2.0), lambda x, y: F.hinge_embedding_loss(x, y, margin=2.0),
        {"x": x, "y": y}, ["x"])
    add("hinge_edge", "hinge_embedding_loss", dict(reduction="none"),
        lambda x, y: F.hinge_embedding_loss(x, y, reduction="none"), {"x": x, "y": y}, ["x"])
    add("hinge_bcast", "hinge_embedding_loss", dict(), lambda x, y: F.hinge_embedding_loss(x, y),
        {"x": f32(3, 4), "y": torch.tensor([1.0, -1.0, -1.0, 1.0])}, ["x"])

    # multilabel_margin: lunet's targets are torch's + 1 (torch's -1 terminator -> 0)
    tg = torch.tensor([[3, 0, -1, 1, 2], [4, 4, 1, -1, -1], [-1, 2, 3, 0, 0], [0, 1, 2, 3, 4], [1, 2, -1, 0, 0]])
    for r in ["mean", "sum", "none"]:
        add("mlm_" + r, "multilabel_margin_loss", dict(reduction=r),
            lambda x, y, r=r: F.multilabel_margin_loss(x, y - 1, reduction=r), {"x": f32(5, 5), "y": tg + 1}, ["x"])
    add("mlm_1d", "multilabel_margin_loss", dict(reduction="none"),
        lambda x, y: F.multilabel_margin_loss(x, y - 1, reduction="none"),
        {"x": f32(4), "y": torch.tensor([2, 0, -1, 1]) + 1}, ["x"])
    add("mlm_1d_mean", "multilabel_margin_loss", dict(),
        lambda x, y: F.multilabel_margin_loss(x, y - 1), {"x": f32(4), "y": torch.tensor([3, -1, 0, 0]) + 1}, ["x"])
    x = torch.tensor([[0.0, 1.0, 0.5, 2.0]])   # hinges at exactly 0: 1 - (x[1] - x[0]) = 0
    add("mlm_edge", "multilabel_margin_loss", dict(reduction="none"),
        lambda x, y: F.multilabel_margin_loss(x, y - 1, reduction="none"),
        {"x": x, "y": torch.tensor([[1, -1, 0, 0]]) + 1}, ["x"])

    def cosd(a, b):
        return 1 - F.cosine_similarity(a, b)
    dists = {None: None, "cosine": cosd, "l1": lambda a, b: (a - b).abs().sum(-1)}
    for name, dist, kw in [("tmd_default", None, {}), ("tmd_cos", "cosine", {"margin": 0.5}),
                           ("tmd_swap", "l1", {"swap": True, "margin": 2.0}),
                           ("tmd_sum", None, {"reduction": "sum", "swap": True}),
                           ("tmd_none", "cosine", {"reduction": "none"})]:
        opts = dict(kw)
        if dist:
            opts["distance"] = dist
        add(name, "triplet_margin_with_distance_loss", opts,
            lambda a, p, n, dist=dist, kw=kw: F.triplet_margin_with_distance_loss(a, p, n, distance_function=dists[dist], **kw),
            {"a": f32(4, 5), "p": f32(4, 5), "n": f32(4, 5)}, ["a", "p", "n"])


def layer_cases():
    for name, xs, cin, cout, k, kw, bias in [
        ("convt_plain", (2, 3, 7), 3, 4, 3, {}, True),
        ("convt_stride", (2, 3, 6), 3, 2, 4, {"stride": 2, "padding": 1, "output_padding": 1}, True),
        ("convt_dil_groups", (1, 4, 5), 4, 6, 3, {"dilation": 2, "groups": 2}, False),
        ("convt_unbatched", (3, 5), 3, 2, 2, {"stride": 3}, True),
    ]:
        inputs = {"x": f32(*xs), "weight": f32(cin, cout // kw.get("groups", 1), k)}
        if bias:
            inputs["bias"] = f32(cout)
        add(name, "conv_transpose1d", dict(kw),
            lambda x, weight, bias=None, kw=kw: F.conv_transpose1d(x, weight, bias, **kw), inputs, list(inputs))
    for name, xs, p, k, kw in [("lp1_p2", (2, 3, 9), 2.0, 3, {}), ("lp1_p3_stride", (2, 3, 10), 3.0, 3, {"stride": 2}),
                               ("lp1_ceil", (1, 2, 8), 1.5, 3, {"stride": 2, "ceil_mode": True})]:
        x = f32(*xs).abs() + 0.1 if p != 2 else f32(*xs)
        add(name, "lp_pool1d", dict(norm_type=p, kernel_size=k, **kw),
            lambda x, p=p, k=k, kw=kw: F.lp_pool1d(x, p, k, **kw), {"x": x}, ["x"])
    for name, xs, p, k, kw in [("lp2_p2", (2, 3, 6, 6), 2.0, 2, {}),
                               ("lp2_rect", (1, 2, 7, 6), 3.0, [3, 2], {"stride": [2, 1]}),
                               ("lp2_ceil", (2, 2, 5, 5), 2.0, 2, {"ceil_mode": True})]:
        x = f32(*xs).abs() + 0.1 if p != 2 else f32(*xs)
        add(name, "lp_pool2d", dict(norm_type=p, kernel_size=k, **kw),
            lambda x, p=p, k=k, kw=kw: F.lp_pool2d(x, p, k, **kw), {"x": x}, ["x"])


if __name__ == "__main__":
    torch.manual_seed(0)
    ctc_cases()
    loss_cases()
    layer_cases()
    g.write("nn_losses_more.safetensors", g.tensors, g.cases)
