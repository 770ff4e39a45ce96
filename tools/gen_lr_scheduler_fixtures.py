#!/usr/bin/python3
"""Reference lr (and momentum) sequences for spec/lr_scheduler_more_spec.lua,
from PyTorch (Debian's python3-torch 1.13): run with
/usr/bin/python3 tools/gen_lr_scheduler_fixtures.py.

Writes spec/fixtures/lr_scheduler_more.lua, one case per scheduler and option
set: the optimizer and its param groups' lrs, the scheduler (sub-schedulers
for SequentialLR / ChainedScheduler), and after construction and after each
step, every group's lr and momentum. Functions (lr_lambda, scale_fn) are
named; the spec defines the same ones. ReduceLROnPlateau's cases carry the
metric fed at each step; CosineAnnealingWarmRestarts' may carry the epoch
given to step(epoch) (false: step()).
"""
import os
import warnings

import torch
from torch.optim import lr_scheduler as S

warnings.filterwarnings("ignore")
HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "spec", "fixtures", "lr_scheduler_more.lua")

FUNCS = {
    "const95": lambda e: 0.95,
    "inv": lambda e: 1.0 / (1.0 + 0.05 * e),
    "halving": lambda x: 0.5 ** x,
    "recip": lambda x: 1.0 / (1.0 + 0.1 * x),
}


def lua(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "nil"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "%.17g" % v
    if isinstance(v, (list, tuple)):
        return "{" + ", ".join(lua(x) for x in v) + "}"
    if isinstance(v, str):
        return "'" + v + "'"
    if isinstance(v, dict):
        return "{" + ", ".join("%s = %s" % (k, lua(x)) for k, x in sorted(v.items())) + "}"
    raise TypeError(v)


def plateau_metrics(n):
    # improvements, plateaus and tiny (below-threshold) improvements
    out, v = [], 1.0
    for i in range(n):
        if i % 9 < 3:
            v = v * 0.9
        elif i % 9 == 5:
            v = v * (1 - 1e-5)
        out.append(v)
    return out


def plateau_max_metrics(n):
    out, v = [], 0.1
    for i in range(n):
        if i % 7 in (0, 1):
            v = v + 0.12 if i % 2 == 0 else v + 0.05
        out.append(v)
    return out


# name, optimizer, lrs, extra (optimizer options), scheduler, opts, extras
CASES = [
    ("plateau_patience2", "SGD", [0.1, 0.05], {}, "ReduceLROnPlateau", {"patience": 2}, dict(metrics=plateau_metrics(45))),
    ("plateau_cooldown_min_lr", "SGD", [0.1, 0.05], {}, "ReduceLROnPlateau",
     {"factor": 0.5, "patience": 1, "cooldown": 2, "min_lr": 0.01}, dict(metrics=plateau_metrics(45))),
    ("plateau_max_abs", "SGD", [0.1, 0.05], {}, "ReduceLROnPlateau",
     {"mode": "max", "factor": 0.3, "patience": 0, "threshold": 0.1, "threshold_mode": "abs", "min_lr": [0.001, 0.02]},
     dict(metrics=plateau_max_metrics(40))),
    ("plateau_abs_eps", "Adam", [0.1, 0.3], {}, "ReduceLROnPlateau",
     {"threshold_mode": "abs", "threshold": 0.05, "patience": 3, "eps": 1e-3}, dict(metrics=plateau_metrics(50))),
    ("plateau_default", "SGD", [0.1, 0.05], {}, "ReduceLROnPlateau", {}, dict(metrics=[1.0] * 60)),
    ("seq_warmup_cosine", "SGD", [0.1, 0.05], {"momentum": 0.9}, "SequentialLR", {"milestones": [5]},
     dict(subs=[("LinearLR", {"start_factor": 0.1, "total_iters": 5}), ("CosineAnnealingLR", {"T_max": 30})])),
    ("seq_constant_exp", "SGD", [1.0, 0.5], {}, "SequentialLR", {"milestones": [2]},
     dict(subs=[("ConstantLR", {"factor": 0.1, "total_iters": 2}), ("ExponentialLR", {"gamma": 0.9})])),
    ("seq_three", "Adam", [0.01, 0.002], {}, "SequentialLR", {"milestones": [3, 10]},
     dict(subs=[("LinearLR", {"start_factor": 0.5, "total_iters": 3}), ("StepLR", {"step_size": 4, "gamma": 0.5}),
                ("MultiStepLR", {"milestones": [3, 6], "gamma": 0.3})])),
    ("seq_constant_poly", "SGD", [0.2, 0.1], {}, "SequentialLR", {"milestones": [4]},
     dict(subs=[("ConstantLR", {"factor": 0.25, "total_iters": 4}), ("PolynomialLR", {"total_iters": 10, "power": 2.0})])),
    ("chain_constant_exp", "SGD", [1.0, 0.5], {}, "ChainedScheduler", {},
     dict(subs=[("ConstantLR", {"factor": 0.1, "total_iters": 4}), ("ExponentialLR", {"gamma": 0.9})])),
    ("chain_linear_step", "SGD", [0.1, 0.05], {}, "ChainedScheduler", {},
     dict(subs=[("LinearLR", {"start_factor": 0.2, "total_iters": 5}), ("StepLR", {"step_size": 3, "gamma": 0.5})])),
    ("warm_T10", "SGD", [0.1, 0.05], {}, "CosineAnnealingWarmRestarts", {"T_0": 10}, {}),
    ("warm_Tmult2", "SGD", [0.1, 0.05], {}, "CosineAnnealingWarmRestarts", {"T_0": 3, "T_mult": 2, "eta_min": 0.001}, {}),
    ("warm_fractional_Tmult3", "SGD", [0.1, 0.05], {}, "CosineAnnealingWarmRestarts", {"T_0": 2, "T_mult": 3},
     dict(epochs=[0.25 * k for k in range(1, 60)])),
    ("warm_fractional_mixed", "SGD", [0.1, 0.05], {}, "CosineAnnealingWarmRestarts", {"T_0": 4, "eta_min": 0.01},
     dict(epochs=[(k / 3 if k % 4 else False) for k in range(1, 40)])),
    ("constant_default", "SGD", [0.1, 0.05], {}, "ConstantLR", {}, {}),
    ("constant_half", "SGD", [0.1, 0.05], {}, "ConstantLR", {"factor": 0.5, "total_iters": 4}, {}),
    ("poly_default", "SGD", [0.1, 0.05], {}, "PolynomialLR", {}, {}),
    ("poly_power2", "SGD", [0.1, 0.05], {}, "PolynomialLR", {"total_iters": 20, "power": 2.0}, {}),
    ("poly_sqrt", "Adam", [0.1, 0.05], {}, "PolynomialLR", {"total_iters": 7, "power": 0.5}, {}),
    ("mult_const", "SGD", [0.1, 0.05], {}, "MultiplicativeLR", {"lr_lambda": "const95"}, {}),
    ("mult_per_group", "SGD", [0.1, 0.05], {}, "MultiplicativeLR", {"lr_lambda": ["const95", "inv"]}, {}),
    ("cyclic_triangular", "SGD", [0.1, 0.05], {"momentum": 0.9}, "CyclicLR",
     {"base_lr": 0.01, "max_lr": 0.1, "step_size_up": 5}, {}),
    ("cyclic_triangular2", "SGD", [0.1, 0.05], {"momentum": 0.9}, "CyclicLR",
     {"base_lr": [0.01, 0.001], "max_lr": [0.1, 0.05], "step_size_up": 4, "step_size_down": 6, "mode": "triangular2",
      "base_momentum": 0.85, "max_momentum": 0.95}, {}),
    ("cyclic_exp_range", "SGD", [0.1, 0.05], {}, "CyclicLR",
     {"base_lr": 0.001, "max_lr": 0.01, "step_size_up": 3, "mode": "exp_range", "gamma": 0.97}, {}),
    ("cyclic_scale_fn_cycle", "RMSprop", [0.1, 0.05], {}, "CyclicLR",
     {"base_lr": 0.01, "max_lr": 0.1, "step_size_up": 4, "scale_fn": "halving"}, {}),
    ("cyclic_scale_fn_iterations", "SGD", [0.1, 0.05], {"momentum": 0.5}, "CyclicLR",
     {"base_lr": 0.01, "max_lr": 0.1, "step_size_up": 2, "step_size_down": 5, "scale_fn": "recip",
      "scale_mode": "iterations", "max_momentum": [0.9, 0.8]}, {}),
    ("cyclic_adam_no_momentum", "Adam", [0.1, 0.05], {}, "CyclicLR",
     {"base_lr": 0.001, "max_lr": 0.006, "step_size_up": 6, "cycle_momentum": False}, {}),
]

STEPS = 40


def resolve(opts):
    out = {}
    for k, v in opts.items():
        if k in ("lr_lambda", "scale_fn"):
            v = [FUNCS[x] for x in v] if isinstance(v, list) else FUNCS[v]
        out[k] = v
    return out


def make(case):
    name, oname, lrs, extra, sname, opts, more = case
    groups = [{"params": [torch.zeros(1, requires_grad=True)], "lr": lr} for lr in lrs]
    opt = getattr(torch.optim, oname)(groups, lr=lrs[0], **extra)
    if "subs" in more:
        subs = [getattr(S, n)(opt, **resolve(o)) for n, o in more["subs"]]
        sched = S.ChainedScheduler(subs) if sname == "ChainedScheduler" else getattr(S, sname)(opt, subs, **opts)
    else:
        sched = getattr(S, sname)(opt, **resolve(opts))
    return opt, sched


def momentum(g):
    return g["betas"][0] if "betas" in g else g.get("momentum", 0.0)


def main():
    out = ["-- generated by tools/gen_lr_scheduler_fixtures.py (PyTorch %s): do not edit" % torch.__version__, "return {"]
    # PyTorch 1.13's CyclicLR refuses an optimizer without a 'momentum' default when cycle_momentum is on
    try:
        opt = torch.optim.Adam([torch.zeros(1, requires_grad=True)], lr=0.1)
        S.CyclicLR(opt, base_lr=0.01, max_lr=0.1)
        raise SystemExit("expected CyclicLR(Adam) to fail")
    except ValueError as e:
        assert "momentum" in str(e)
    for case in CASES:
        name, oname, lrs, extra, sname, opts, more = case
        opt, sched = make(case)
        n = len(more.get("metrics", [])) or len(more.get("epochs", [])) or STEPS
        lr, mom = [], []

        def record():
            lr.append([g["lr"] for g in opt.param_groups])
            mom.append([momentum(g) for g in opt.param_groups])
        record()
        for i in range(n):
            opt.step()
            if "metrics" in more:
                sched.step(more["metrics"][i])
            elif "epochs" in more and more["epochs"][i] is not False:
                sched.step(more["epochs"][i])
            else:
                sched.step()
            record()
        fields = dict(name=name, optimizer=oname, lrs=lrs, extra=extra, scheduler=sname, opts=opts)
        for k in ("metrics", "epochs"):
            if k in more:
                fields[k] = more[k]
        if "subs" in more:
            fields["subs"] = [{"name": n, "opts": o} for n, o in more["subs"]]
        out.append("  " + lua(dict(fields, lr=lr, momentum=mom)) + ",")
    out.append("}")
    with open(OUT, "w") as f:
        f.write("\n".join(out) + "\n")
    print("wrote", OUT, len(CASES), "cases")


if __name__ == "__main__":
    main()
