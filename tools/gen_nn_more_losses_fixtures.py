#!/usr/bin/python3
"""Writes spec/fixtures/nn_more_losses.safetensors with PyTorch, for
spec/nn_more_losses_spec.lua: outputs and gradients of cosine_similarity,
pairwise_distance and the losses triplet_margin_loss, cosine_embedding_loss,
margin_ranking_loss, soft_margin_loss, multilabel_soft_margin_loss,
multi_margin_loss, poisson_nll_loss, gaussian_nll_loss, each reduction, with
their edge cases: zero vectors and norms below eps, equal inputs, the hinges
at exactly 0, broadcasting where torch allows it, weights, swap, the Stirling
term at targets 0, 1 and above, variances below eps.

Same layout as tools/gen_nn_fixtures.py (fixture_lib's save/add): for each
case "<name>", the inputs "<name>.<k>" (float32, or int64 class labels stored
1-based as lunet takes them), the output "<name>.out" and the gradients
"<name>.d<k>" of sum(out * <name>.dout), computed in float64 from the same
values. The metadata entry "cases" is a JSON list of {name, op, opts}, opts
in lunet's terms (1-based dims).
Run:  /usr/bin/python3 tools/gen_nn_more_losses_fixtures.py
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
REDS = ["mean", "sum", "none"]


def distance_cases():
    # cosine_similarity: dim 1-based in lunet (torch's + 1)
    x1, x2 = f32(4, 5), f32(4, 5)
    add("cos_basic", "cosine_similarity", dict(dim=2), lambda x1, x2: F.cosine_similarity(x1, x2, dim=1),
        {"x1": x1, "x2": x2}, ["x1", "x2"])
    add("cos_dim1", "cosine_similarity", dict(dim=1), lambda x1, x2: F.cosine_similarity(x1, x2, dim=0),
        {"x1": f32(3, 4), "x2": f32(3, 4)}, ["x1", "x2"])
    add("cos_dim_neg", "cosine_similarity", dict(dim=-1), lambda x1, x2: F.cosine_similarity(x1, x2, dim=-1),
        {"x1": f32(2, 3, 4), "x2": f32(2, 3, 4)}, ["x1", "x2"])
    add("cos_1d", "cosine_similarity", dict(dim=1), lambda x1, x2: F.cosine_similarity(x1, x2, dim=0),
        {"x1": f32(6), "x2": f32(6)}, ["x1", "x2"])
    # broadcasting: a row against many, and (3, 1) against (3, 4) (x1's norm is of the broadcast row)
    add("cos_bcast_row", "cosine_similarity", dict(dim=2), lambda x1, x2: F.cosine_similarity(x1, x2, dim=1),
        {"x1": f32(1, 5), "x2": f32(4, 5)}, ["x1", "x2"])
    add("cos_bcast_col", "cosine_similarity", dict(dim=2), lambda x1, x2: F.cosine_similarity(x1, x2, dim=1),
        {"x1": f32(3, 1), "x2": f32(3, 4)}, ["x1", "x2"])
    # zero vectors (a row of x1, a row of x2, a row of both), a norm below eps, equal rows
    x1, x2 = f32(5, 4), f32(5, 4)
    x1[0] = 0
    x2[1] = 0
    x1[2] = 0
    x2[2] = 0
    x1[3] = torch.tensor([3e-9, -2e-9, 1e-9, 4e-9])
    x2[4] = x1[4]
    add("cos_zero", "cosine_similarity", dict(dim=2), lambda x1, x2: F.cosine_similarity(x1, x2, dim=1),
        {"x1": x1, "x2": x2}, ["x1", "x2"])
    x1, x2 = f32(3, 4, scale=0.1), f32(3, 4)
    add("cos_eps_big", "cosine_similarity", dict(dim=2, eps=0.5),
        lambda x1, x2: F.cosine_similarity(x1, x2, dim=1, eps=0.5), {"x1": x1, "x2": x2}, ["x1", "x2"])

    # pairwise_distance: norm(x1 - x2 + eps, p) along the last dim
    for name, p, eps, keepdim in [("pd_basic", 2.0, 1e-6, False), ("pd_p1", 1.0, 1e-6, False),
                                  ("pd_p3", 3.0, 1e-6, False), ("pd_p1_5", 1.5, 1e-6, False),
                                  ("pd_pinf", float("inf"), 1e-6, False), ("pd_keepdim", 2.0, 1e-6, True),
                                  ("pd_eps_big", 2.0, 0.1, False), ("pd_p0", 0.0, 1e-6, False),
                                  ("pd_pneg", -1.0, 1e-6, False)]:
        x1, x2 = f32(4, 5), f32(4, 5)
        o = dict(p=p if p != float("inf") else "inf", eps=eps, keepdim=keepdim)   # (JSON has no inf)
        add(name, "pairwise_distance", o,
            lambda x1, x2, p=p, eps=eps, keepdim=keepdim: F.pairwise_distance(x1, x2, p, eps, keepdim),
            {"x1": x1, "x2": x2}, ["x1", "x2"])
    x1 = f32(4, 5)
    x2 = x1.clone()
    x2[1] = f32(5)
    add("pd_equal", "pairwise_distance", dict(p=2.0, eps=1e-6, keepdim=False),
        lambda x1, x2: F.pairwise_distance(x1, x2), {"x1": x1, "x2": x2}, ["x1", "x2"])
    add("pd_equal_p1", "pairwise_distance", dict(p=1.0, eps=0.0, keepdim=False),
        lambda x1, x2: F.pairwise_distance(x1, x2, 1.0, 0.0), {"x1": x1, "x2": x2}, ["x1", "x2"])
    add("pd_equal_eps0", "pairwise_distance", dict(p=2.0, eps=0.0, keepdim=False),
        lambda x1, x2: F.pairwise_distance(x1, x2, 2.0, 0.0), {"x1": x1, "x2": x2}, ["x1", "x2"])
    add("pd_bcast", "pairwise_distance", dict(p=2.0, eps=1e-6, keepdim=False),
        lambda x1, x2: F.pairwise_distance(x1, x2), {"x1": f32(4, 5), "x2": f32(5)}, ["x1", "x2"])
    add("pd_3d", "pairwise_distance", dict(p=2.0, eps=1e-6, keepdim=True),
        lambda x1, x2: F.pairwise_distance(x1, x2, keepdim=True), {"x1": f32(2, 3, 4), "x2": f32(2, 1, 4)},
        ["x1", "x2"])
    add("pd_1d", "pairwise_distance", dict(p=2.0, eps=1e-6, keepdim=False),
        lambda x1, x2: F.pairwise_distance(x1, x2), {"x1": f32(5), "x2": f32(5)}, ["x1", "x2"])
    add("pd_0d", "pairwise_distance", dict(p=2.0, eps=1e-6, keepdim=True),
        lambda x1, x2: F.pairwise_distance(x1, x2, keepdim=True), {"x1": f32(), "x2": f32()}, ["x1", "x2"])


def triplet_cases():
    for red in REDS:
        add("triplet_" + red, "triplet_margin_loss", dict(reduction=red),
            lambda a, p, n, red=red: F.triplet_margin_loss(a, p, n, reduction=red),
            {"a": f32(6, 4), "p": f32(6, 4), "n": f32(6, 4)}, ["a", "p", "n"])
    # swap: rows where d(p, n) < d(a, n) (the positive near the negative)
    a, p, n = f32(6, 4), f32(6, 4), f32(6, 4)
    p[:3] = n[:3] + 0.1 * f32(3, 4)
    for name, o in [("triplet_swap", dict(swap=True)), ("triplet_noswap", dict(swap=False)),
                    ("triplet_swap_p1_margin2", dict(swap=True, p=1.0, margin=2.0, reduction="none")),
                    ("triplet_p3_eps", dict(p=3.0, eps=1e-3, margin=0.5, reduction="sum"))]:
        add(name, "triplet_margin_loss", o, lambda a, p, n, o=o: F.triplet_margin_loss(a, p, n, **o),
            {"a": a, "p": p, "n": n}, ["a", "p", "n"])
    add("triplet_bcast", "triplet_margin_loss", dict(margin=3.0, reduction="none"),
        lambda a, p, n: F.triplet_margin_loss(a, p, n, margin=3.0, reduction="none"),
        {"a": f32(5, 4), "p": f32(5, 4), "n": f32(1, 4)}, ["a", "p", "n"])
    add("triplet_1d", "triplet_margin_loss", dict(margin=2.0),
        lambda a, p, n: F.triplet_margin_loss(a, p, n, margin=2.0), {"a": f32(4), "p": f32(4), "n": f32(4)},
        ["a", "p", "n"])


def pair_cases():
    y = torch.tensor([1.0, -1.0, 1.0, -1.0, 1.0, -1.0])
    for red, margin in [("mean", 0.0), ("sum", 0.3), ("none", -0.2)]:
        x1, x2 = f32(6, 5), f32(6, 5)
        x2[4] = 0   # a zero vector (the 1e-12 keeps it finite)
        add("cosemb_" + red, "cosine_embedding_loss", dict(reduction=red, margin=margin),
            lambda x1, x2, y, red=red, m=margin: F.cosine_embedding_loss(x1, x2, y, margin=m, reduction=red),
            {"x1": x1, "x2": x2, "y": y}, ["x1", "x2"])
    add("cosemb_1d", "cosine_embedding_loss", dict(reduction="mean", margin=0.0),
        lambda x1, x2, y: F.cosine_embedding_loss(x1, x2, y), {"x1": f32(5), "x2": f32(5), "y": torch.tensor(-1.0)},
        ["x1", "x2"])
    # targets other than 1 and -1 give 0
    x1, x2 = f32(4, 3), f32(4, 3)
    add("cosemb_other_targets", "cosine_embedding_loss", dict(reduction="none", margin=0.1),
        lambda x1, x2, y: F.cosine_embedding_loss(x1, x2, y, margin=0.1, reduction="none"),
        {"x1": x1, "x2": x2, "y": torch.tensor([0.0, 2.0, 1.0, -1.0])}, ["x1", "x2"])

    for red, margin in [("mean", 0.0), ("sum", 0.5), ("none", 1.0)]:
        x1, x2 = f32(7), f32(7)
        y = torch.tensor([1.0, -1.0, 1.0, -1.0, 1.0, -1.0, 1.0])
        x1[0], x2[0] = 0.25, 0.25 - margin   # -y (x1 - x2) + margin == 0 exactly: the hinge (its gradient passes, as clamp_min's)
        add("ranking_" + red, "margin_ranking_loss", dict(reduction=red, margin=margin),
            lambda x1, x2, y, red=red, m=margin: F.margin_ranking_loss(x1, x2, y, margin=m, reduction=red),
            {"x1": x1, "x2": x2, "y": y}, ["x1", "x2", "y"])
    add("ranking_bcast", "margin_ranking_loss", dict(reduction="none", margin=0.2),
        lambda x1, x2, y: F.margin_ranking_loss(x1, x2, y, margin=0.2, reduction="none"),
        {"x1": f32(3, 4), "x2": f32(1, 4), "y": torch.tensor([[1.0], [-1.0], [1.0]])}, ["x1", "x2", "y"])

    for red in REDS:
        y = (torch.rand(4, 5) > 0.5).float() * 2 - 1
        add("softmargin_" + red, "soft_margin_loss", dict(reduction=red),
            lambda x, y, red=red: F.soft_margin_loss(x, y, reduction=red), {"x": f32(4, 5, scale=3), "y": y},
            ["x"])   # (target: not differentiable in PyTorch)

def multilabel_cases():
    for red, wshape, shape in [("mean", None, (4, 5)), ("sum", (5,), (4, 5)), ("none", (4, 5), (4, 5)),
                               ("mean", None, (5,)), ("none", None, (2, 3, 4)), ("none", (1, 5), (3, 5))]:
        x = f32(*shape, scale=3)
        x.view(-1)[:3] = torch.tensor([0.0, 30.0, -30.0])   # logsigmoid's kink-free 0 and its far tails
        y = (torch.rand(*shape) > 0.5).float()
        inputs = {"x": x, "y": y}
        name = "multilabel_%s_%dd%s" % (red, len(shape), "_w" + "x".join(map(str, wshape)) if wshape else "")
        if wshape:
            inputs["w"] = (torch.rand(wshape) + 0.5).float()
            fn = lambda x, y, w, red=red: F.multilabel_soft_margin_loss(x, y, weight=w, reduction=red)
        else:
            fn = lambda x, y, red=red: F.multilabel_soft_margin_loss(x, y, reduction=red)
        add(name, "multilabel_soft_margin_loss", dict(reduction=red), fn, inputs, ["x", "y"])

    # multi_margin_loss: labels stored 1-based; a z == 0 exactly (no gradient, as PyTorch's z > 0)
    for name, o, n, c, weighted in [("multimargin_mean", dict(), 5, 4, False),
                                    ("multimargin_p2_sum", dict(p=2, reduction="sum"), 5, 4, False),
                                    ("multimargin_weight_none", dict(reduction="none", margin=0.5), 6, 3, True),
                                    ("multimargin_p2_weight_mean", dict(p=2, margin=2.0), 4, 5, True)]:
        x = f32(n, c)
        y = torch.randint(0, c, (n,))
        y[0] = 0
        x[0, 0], x[0, 1] = 0.5, 0.5 - o.get("margin", 1.0)
        inputs = {"x": x, "y": y + 1}
        if weighted:
            inputs["w"] = (torch.rand(c) + 0.5).float()
            fn = lambda x, y, w, o=o: F.multi_margin_loss(x, y - 1, weight=w, **o)
        else:
            fn = lambda x, y, o=o: F.multi_margin_loss(x, y - 1, **o)
        add(name, "multi_margin_loss", o, fn, inputs, ["x"])
    add("multimargin_1d", "multi_margin_loss", dict(reduction="none"),
        lambda x, y: F.multi_margin_loss(x, y - 1, reduction="none"), {"x": f32(4), "y": torch.tensor(3)}, ["x"])
    add("multimargin_1d_target1", "multi_margin_loss", dict(reduction="none"),
        lambda x, y: F.multi_margin_loss(x, y - 1, reduction="none"), {"x": f32(4), "y": torch.tensor([2])}, ["x"])


def nll_cases():
    y = torch.tensor([[0.0, 1.0, 2.0, 5.0, 0.5], [3.0, 1.5, 0.0, 7.0, 1.0], [2.0, 4.0, 0.2, 1.0, 9.0]])
    for name, o, positive in [("poisson_mean", dict(), False), ("poisson_full_sum", dict(full=True, reduction="sum"), False),
                              ("poisson_rate_none", dict(log_input=False, reduction="none"), True),
                              ("poisson_rate_full_eps", dict(log_input=False, full=True, eps=0.1), True)]:
        x = f32(3, 5)
        if positive:
            x = x.abs() + 0.05
            x[0, 0] = 0.0   # log(0 + eps)
        add(name, "poisson_nll_loss", o, lambda x, y, o=o: F.poisson_nll_loss(x, y, **o), {"x": x, "y": y},
            ["x", "y"])
    add("poisson_bcast", "poisson_nll_loss", dict(reduction="none"),
        lambda x, y: F.poisson_nll_loss(x, y, reduction="none"), {"x": f32(3, 1), "y": y}, ["x", "y"])

    for name, o, vshape in [("gauss_mean", dict(), (4, 3)), ("gauss_full_sum", dict(full=True, reduction="sum"), (4, 3)),
                            ("gauss_homo_none", dict(reduction="none"), (4,)),
                            ("gauss_homo1_mean", dict(), (4, 1)),
                            ("gauss_eps_none", dict(eps=0.1, reduction="none"), (4, 3))]:
        v = torch.rand(*vshape).float() + 0.05
        v.view(-1)[0] = 0.0       # clamped to eps (its gradient left)
        v.view(-1)[1] = 1e-8
        add(name, "gaussian_nll_loss", o, lambda x, y, v, o=o: F.gaussian_nll_loss(x, y, v, **o),
            {"x": f32(4, 3), "y": f32(4, 3), "v": v}, ["x", "y", "v"])
    add("gauss_1d_scalar_var", "gaussian_nll_loss", dict(),
        lambda x, y, v: F.gaussian_nll_loss(x, y, v), {"x": f32(5), "y": f32(5), "v": torch.tensor(0.7)},
        ["x", "y", "v"])
    add("gauss_target_bcast", "gaussian_nll_loss", dict(reduction="none"),
        lambda x, y, v: F.gaussian_nll_loss(x, y, v, reduction="none"),
        {"x": f32(4, 3), "y": f32(3), "v": torch.rand(4, 3).float() + 0.5}, ["x", "y", "v"])


def main():
    torch.manual_seed(0)
    distance_cases()
    triplet_cases()
    pair_cases()
    multilabel_cases()
    nll_cases()
    g.write("nn_more_losses.safetensors", g.tensors, g.cases)


if __name__ == "__main__":
    main()
