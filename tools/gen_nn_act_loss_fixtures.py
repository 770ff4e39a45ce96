#!/usr/bin/python3
"""Writes spec/fixtures/nn_act_loss.safetensors with PyTorch, for
spec/nn_act_loss_spec.lua: forward outputs and gradients of the activations
silu, hardswish, hardsigmoid, relu6, softplus, mish, prelu and the losses
l1_loss, smooth_l1_loss, huber_loss, binary_cross_entropy, kl_div, each
reduction, with the values at their kinks and clamps (relu6 at 0 and 6,
hardswish at -3 and 3, |input - target| == beta or delta, input == target,
BCE at probabilities 0 and 1, a KL target of 0).

Same layout as tools/gen_nn_fixtures.py (fixture_lib's save/add): for each
case "<name>", float32 inputs "<name>.x", "<name>.y" (target), "<name>.w"
(weight), the output "<name>.out" and the gradients "<name>.dx", ... of
sum(out * <name>.dout), computed in float64 from the same values. The
metadata entry "cases" is a JSON list of {name, op, opts}.
Run:  /usr/bin/python3 tools/gen_nn_act_loss_fixtures.py
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

# the kinks of the activations: hardswish/hardsigmoid at -3 and 3, relu6 at 0
# and 6, softplus's threshold (beta 2, threshold 6: x = 3), mish far out
KINKS = [-3.0, 0.0, 3.0, 6.0, -6.0, 10.0, 25.0, -25.0]


def act_x(*shape, scale=4.0):
    x = f32(*shape, scale=scale)
    flat = x.view(-1)
    k = min(len(KINKS), flat.numel())
    flat[:k] = torch.tensor(KINKS[:k])
    return x


def hardswish_scalar(x):
    """F.hardswish one element at a time: at x = 3 exactly, PyTorch 1.13's
    CPU backward gives 1.5 g in its scalar loop (small tensors, the tail of a
    large one) and on CUDA, but g in its vectorized loop (self >= 3): lunet
    takes the scalar loop's (and CUDA's) x <= 3 -> g (x / 3 + 1/2)"""
    return torch.stack([F.hardswish(v.reshape(1)) for v in x.reshape(-1)]).reshape(x.shape)


def activation_cases():
    for name, fn, o in [
        ("silu", lambda x: F.silu(x), {}),
        ("hardswish", hardswish_scalar, {}),
        ("hardsigmoid", lambda x: F.hardsigmoid(x), {}),
        ("relu6", lambda x: F.relu6(x), {}),
        ("mish", lambda x: F.mish(x), {}),
        ("softplus", lambda x: F.softplus(x), {}),
        ("softplus_beta2_thr6", lambda x: F.softplus(x, 2, 6), dict(beta=2, threshold=6)),
        ("softplus_beta_half", lambda x: F.softplus(x, 0.5, 20), dict(beta=0.5, threshold=20)),
    ]:
        add(name, name.split("_")[0], o, fn, {"x": act_x(4, 8)}, ["x"])
    # prelu: one weight, or one per channel (dim 1 in PyTorch, 2 in lunet)
    for name, xs, n in [("prelu_1", (3, 5), 1), ("prelu_channels_2d", (4, 3), 3),
                        ("prelu_channels_4d", (2, 3, 4, 5), 3), ("prelu_1_4d", (2, 3, 2, 2), 1),
                        ("prelu_1d", (7,), 1)]:
        x = act_x(*xs)
        add(name, "prelu", {}, lambda x, w: F.prelu(x, w), {"x": x, "w": f32(n, scale=0.5)}, ["x", "w"])


def pair(*shape):
    """input and target with, first, d = input - target = 0, 1, -1, 0, 0.5, -0.7"""
    x, y = f32(*shape), f32(*shape)
    xf, yf = x.view(-1), y.view(-1)
    xf[:6] = torch.tensor([0.5, 1.5, -1.0, 2.0, 0.25, -0.5])
    yf[:6] = torch.tensor([0.5, 0.5, 0.0, 2.0, -0.25, 0.2])
    return x, y


def loss_cases():
    for red in ["mean", "sum", "none"]:
        x, y = pair(3, 5)
        add("l1_" + red, "l1_loss", dict(reduction=red), lambda x, y, red=red: F.l1_loss(x, y, reduction=red),
            {"x": x, "y": y}, ["x", "y"])
    for name, red, beta in [("smooth_l1_mean", "mean", 1.0), ("smooth_l1_sum_beta_half", "sum", 0.5),
                            ("smooth_l1_none_beta0", "none", 0.0), ("smooth_l1_mean_beta0", "mean", 0.0),
                            ("smooth_l1_none_beta07", "none", 0.7)]:
        x, y = pair(3, 5)
        add(name, "smooth_l1_loss", dict(reduction=red, beta=beta),
            lambda x, y, red=red, beta=beta: F.smooth_l1_loss(x, y, reduction=red, beta=beta),
            {"x": x, "y": y}, ["x", "y"])
    for name, red, delta in [("huber_mean", "mean", 1.0), ("huber_none_delta07", "none", 0.7),
                             ("huber_sum_delta2", "sum", 2.0), ("huber_none_delta_half", "none", 0.5)]:
        x, y = pair(2, 3, 4)
        add(name, "huber_loss", dict(reduction=red, delta=delta),
            lambda x, y, red=red, delta=delta: F.huber_loss(x, y, reduction=red, delta=delta),
            {"x": x, "y": y}, ["x", "y"])
    # BCE: probabilities, with 0 and 1 exactly (the clamped logs; PyTorch's
    # input gradient divides by max(x (1 - x), 1e-12)), targets 0, 1 and between
    for name, red, wshape in [("bce_mean", "mean", None), ("bce_sum_weight_row", "sum", (5,)),
                              ("bce_none_weight", "none", (3, 5)), ("bce_mean_weight_col", "mean", (3, 1))]:
        x = torch.rand(3, 5).float() * 0.98 + 0.01
        y = torch.rand(3, 5).float()
        x.view(-1)[:6] = torch.tensor([0.0, 1.0, 0.0, 1.0, 0.0, 1.0])
        y.view(-1)[:6] = torch.tensor([0.0, 1.0, 1.0, 0.0, 0.25, 0.75])
        y.view(-1)[6:8] = torch.tensor([0.0, 1.0])
        inputs = {"x": x, "y": y}
        if wshape:
            inputs["w"] = (torch.rand(wshape) + 0.5).float()
            fn = lambda x, y, w, red=red: F.binary_cross_entropy(x, y, weight=w, reduction=red)
        else:
            fn = lambda x, y, red=red: F.binary_cross_entropy(x, y, reduction=red)
        add(name, "binary_cross_entropy", dict(reduction=red, weight=wshape is not None), fn, inputs, ["x", "y"])
    # KL: log-probabilities against probabilities (one 0: the target's
    # gradient is NaN there, as PyTorch's) or log-probabilities
    for name, red, log_target, shape in [("kl_mean", "mean", False, (3, 5)), ("kl_batchmean", "batchmean", False, (3, 5)),
                                         ("kl_sum", "sum", False, (4, 3)), ("kl_none", "none", False, (3, 5)),
                                         ("kl_batchmean_3d", "batchmean", False, (2, 3, 4)),
                                         ("kl_log_batchmean", "batchmean", True, (3, 5)),
                                         ("kl_log_none", "none", True, (2, 6)), ("kl_log_mean", "mean", True, (3, 4))]:
        x = F.log_softmax(f32(*shape, scale=2), -1).float()
        y = F.softmax(f32(*shape, scale=2), -1).float()
        if log_target:
            y = y.log()
        else:
            y.view(-1)[1] = 0.0
        add(name, "kl_div", dict(reduction=red, log_target=log_target),
            lambda x, y, red=red, lt=log_target: F.kl_div(x, y, reduction=red, log_target=lt),
            {"x": x, "y": y}, ["x", "y"])


def main():
    torch.manual_seed(0)
    activation_cases()
    loss_cases()
    g.write("nn_act_loss.safetensors", g.tensors, g.cases)


if __name__ == "__main__":
    main()
