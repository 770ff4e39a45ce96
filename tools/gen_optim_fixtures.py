#!/usr/bin/python3
"""Reference trajectories for spec/optim_spec.lua, from PyTorch (Debian's
python3-torch 1.13): run with /usr/bin/python3 tools/gen_optim_fixtures.py.

Writes Lua tables (the specs need no Python):
  spec/fixtures/optim_steps.lua   optimizer cases: initial params and the params
                                  after each of 20 steps
  spec/fixtures/optim_sched.lua   lr (and momentum) sequences of the schedulers
  spec/fixtures/optim_clip.lua    clip_grad_norm totals and clipped grads

Gradients are a deterministic function of the current params, the same in the
spec: for param k (1-based) element i (1-based) at step s (1-based),
  g = p * a + b,  a = 0.5 + 0.1 * ((i + k) % 5),  b = 0.3 * sin(1.3 * s + 0.7 * i + k)
computed as tensors in the param's dtype (a and b are rounded to it first).
"""
import math
import os
import warnings

import torch

warnings.filterwarnings("ignore")
HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "spec", "fixtures")
STEPS = 20
SHAPES = [(2, 3), (4,)]


def lua_num(x, dtype):
    if x != x:
        return "0/0"
    if x in (math.inf, -math.inf):
        return "math.huge" if x > 0 else "-math.huge"
    return ("%.9g" if dtype == torch.float32 else "%.17g") % x


def lua_list(xs, dtype=torch.float64):
    return "{" + ", ".join(lua_num(float(x), dtype) for x in xs) + "}"


def lua_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(float(v)) if isinstance(v, float) else str(v)
    if isinstance(v, (tuple, list)):
        return "{" + ", ".join(lua_value(x) for x in v) + "}"
    if isinstance(v, str):
        return "'" + v + "'"
    raise TypeError(v)


def lua_opts(d):
    return "{" + ", ".join("%s = %s" % (k, lua_value(v)) for k, v in sorted(d.items())) + "}"


def initial_params(dtype):
    out = []
    for k, shape in enumerate(SHAPES, start=1):
        n = 1
        for s in shape:
            n *= s
        vals = [math.cos(0.9 * i + 2.1 * k) * 1.5 for i in range(1, n + 1)]
        out.append(torch.tensor(vals, dtype=dtype).reshape(shape))
    return out


def grad_of(p, k, step):
    n = p.numel()
    a = torch.tensor([0.5 + 0.1 * ((i + k) % 5) for i in range(1, n + 1)], dtype=p.dtype)
    b = torch.tensor([0.3 * math.sin(1.3 * step + 0.7 * i + k) for i in range(1, n + 1)], dtype=p.dtype)
    return p.detach().reshape(-1) * a + b


# name, class, group options (list: one per param group, params split as below),
# steps at which param 2 has no grad
CASES = [
    ("sgd", "SGD", [dict(lr=0.1)], []),
    ("sgd_momentum", "SGD", [dict(lr=0.05, momentum=0.9)], []),
    ("sgd_dampening_wd", "SGD", [dict(lr=0.05, momentum=0.8, dampening=0.1, weight_decay=0.01)], []),
    ("sgd_nesterov", "SGD", [dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3)], []),
    ("sgd_maximize", "SGD", [dict(lr=0.02, momentum=0.5, maximize=True)], []),
    ("sgd_groups_skip", "SGD", [dict(lr=0.1, momentum=0.9), dict(lr=0.03)], [3, 7, 8]),
    ("adam", "Adam", [dict(lr=0.01)], []),
    ("adam_amsgrad_wd", "Adam", [dict(lr=0.02, amsgrad=True, weight_decay=0.1)], []),
    ("adam_betas_maximize", "Adam", [dict(lr=0.01, betas=(0.8, 0.95), eps=1e-6, maximize=True)], []),
    ("adam_skip", "Adam", [dict(lr=0.05)], [2, 5, 6]),
    ("adamw", "AdamW", [dict(lr=0.01)], []),
    ("adamw_amsgrad", "AdamW", [dict(lr=0.02, amsgrad=True, weight_decay=0.1)], []),
    ("rmsprop", "RMSprop", [dict(lr=0.01)], []),
    ("rmsprop_centered_momentum_wd", "RMSprop", [dict(lr=0.005, centered=True, momentum=0.9, weight_decay=0.01)], []),
    ("rmsprop_alpha_momentum_maximize", "RMSprop", [dict(lr=0.01, alpha=0.9, momentum=0.5, eps=1e-6, maximize=True)], []),
    ("rmsprop_centered", "RMSprop", [dict(lr=0.01, centered=True)], []),
    ("adagrad", "Adagrad", [dict(lr=0.1)], []),
    ("adagrad_lr_decay_init_wd", "Adagrad",
     [dict(lr=0.1, lr_decay=0.05, initial_accumulator_value=0.5, weight_decay=0.1)], []),
    ("adagrad_eps_maximize_skip", "Adagrad", [dict(lr=0.05, eps=1e-3, maximize=True)], [3, 4]),
    ("adamax", "Adamax", [dict(lr=0.01)], []),
    ("adamax_betas_wd_maximize", "Adamax",
     [dict(lr=0.02, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1, maximize=True)], []),
    ("adamax_groups_skip", "Adamax", [dict(lr=0.01), dict(lr=0.03, eps=1e-4)], [3, 7, 8]),
    ("nadam", "NAdam", [dict(lr=0.01)], []),
    ("nadam_momentum_decay_wd", "NAdam",
     [dict(lr=0.02, betas=(0.85, 0.99), eps=1e-6, momentum_decay=0.01, weight_decay=0.05)], []),
    ("nadam_skip", "NAdam", [dict(lr=0.05)], [2, 5, 6]),
    ("radam", "RAdam", [dict(lr=0.01)], []),
    ("radam_betas_wd", "RAdam", [dict(lr=0.02, betas=(0.8, 0.9), eps=1e-6, weight_decay=0.1)], []),
    ("radam_groups_skip", "RAdam", [dict(lr=0.01), dict(lr=0.05, betas=(0.9, 0.99))], [3, 7, 8]),
    ("adadelta", "Adadelta", [dict()], []),
    ("adadelta_rho_wd_maximize", "Adadelta",
     [dict(lr=0.5, rho=0.8, eps=1e-5, weight_decay=0.1, maximize=True)], [2, 5]),
]


def run_case(cls_name, groups, skips, dtype):
    params = initial_params(dtype)
    for p in params:
        p.requires_grad_(True)
    cls = getattr(torch.optim, cls_name)
    if len(groups) == 1:
        opt = cls(params, **groups[0])
    else:
        opt = cls([dict(params=[params[i]], **g) for i, g in enumerate(groups)])
    traj = []
    for s in range(1, STEPS + 1):
        for k, p in enumerate(params, start=1):
            if k == 2 and s in skips:
                p.grad = None
            else:
                p.grad = grad_of(p, k, s).reshape(p.shape).detach().clone()
        opt.step()
        traj.append([p.detach().reshape(-1).tolist() for p in params])
    return traj


def write_steps():
    lines = ["-- generated by tools/gen_optim_fixtures.py (PyTorch %s): do not edit" % torch.__version__,
             "return {", "  shapes = {%s}," % ", ".join("{%s}" % ", ".join(map(str, s)) for s in SHAPES),
             "  steps = %d," % STEPS, "  cases = {"]
    for name, cls_name, groups, skips in CASES:
        for dtype, dname in ((torch.float32, "float32"), (torch.float64, "float64")):
            init = [p.reshape(-1).tolist() for p in initial_params(dtype)]
            traj = run_case(cls_name, groups, skips, dtype)
            lines.append("    {name = '%s', optimizer = '%s', dtype = '%s', groups = {%s}, skips = %s," % (
                name, cls_name, dname, ", ".join(lua_opts(g) for g in groups), lua_list(skips)))
            lines.append("     init = {%s}," % ", ".join(lua_list(x, dtype) for x in init))
            lines.append("     expected = {")
            for step in traj:
                lines.append("       {%s}," % ", ".join(lua_list(x, dtype) for x in step))
            lines.append("     }},")
    lines += ["  },", "}", ""]
    with open(os.path.join(OUT, "optim_steps.lua"), "w") as f:
        f.write("\n".join(lines))


SCHED_STEPS = 30
SCHEDS = [
    # name, optimizer (class, group lrs, extra), scheduler class, kwargs, lua options
    ("step", ("SGD", [0.1, 0.02], {}), "StepLR", dict(step_size=3, gamma=0.5)),
    ("multistep", ("SGD", [0.1], {}), "MultiStepLR", dict(milestones=[2, 5, 5, 9], gamma=0.3)),
    ("cosine", ("SGD", [0.1, 0.05], {}), "CosineAnnealingLR", dict(T_max=10, eta_min=0.001)),
    ("linear_default", ("SGD", [0.1], {}), "LinearLR", dict()),
    ("linear_warmup", ("Adam", [0.01], {}), "LinearLR", dict(start_factor=0.25, end_factor=1.0, total_iters=8)),
    ("exponential", ("RMSprop", [0.01, 0.1], {}), "ExponentialLR", dict(gamma=0.9)),
    ("onecycle_sgd", ("SGD", [0.1, 0.05], dict(momentum=0.9)), "OneCycleLR", dict(max_lr=0.5, total_steps=30)),
    ("onecycle_adam_three_phase_linear", ("Adam", [0.01], {}), "OneCycleLR",
     dict(max_lr=[0.02], epochs=3, steps_per_epoch=10, pct_start=0.25, anneal_strategy="linear", three_phase=True,
          div_factor=10.0, final_div_factor=100.0)),
]


def write_sched():
    lines = ["-- generated by tools/gen_optim_fixtures.py (PyTorch %s): do not edit" % torch.__version__,
             "return {"]
    for name, (cls_name, lrs, extra), sched_name, kw in SCHEDS:
        params = [torch.zeros(1, requires_grad=True) for _ in lrs]
        cls = getattr(torch.optim, cls_name)
        opt = cls([dict(params=[p], lr=lr) for p, lr in zip(params, lrs)], **extra)
        sched = getattr(torch.optim.lr_scheduler, sched_name)(opt, **kw)
        lr_seq, mom_seq = [sched.get_last_lr()], []

        def momentum():
            g = opt.param_groups
            return [x["betas"][0] if "betas" in x else x["momentum"] for x in g]

        mom_seq.append(momentum())
        steps = SCHED_STEPS - 1 if sched_name == "OneCycleLR" else SCHED_STEPS
        for _ in range(steps):
            opt.step()
            sched.step()
            lr_seq.append(sched.get_last_lr())
            mom_seq.append(momentum())
        lines.append("  {name = '%s', optimizer = '%s', lrs = %s, extra = %s, scheduler = '%s', opts = %s," % (
            name, cls_name, lua_list(lrs), lua_opts(extra), sched_name, lua_opts(kw)))
        lines.append("   lr = {%s}," % ", ".join(lua_list(x) for x in lr_seq))
        lines.append("   momentum = {%s}}," % ", ".join(lua_list(x) for x in mom_seq))
    lines += ["}", ""]
    with open(os.path.join(OUT, "optim_sched.lua"), "w") as f:
        f.write("\n".join(lines))


CLIPS = [(1.0, 2.0), (0.5, 1.0), (0.2, math.inf), (0.7, 3.0), (100.0, 2.0)]


def write_clip():
    lines = ["-- generated by tools/gen_optim_fixtures.py (PyTorch %s): do not edit" % torch.__version__,
             "return {"]
    for dtype, dname in ((torch.float32, "float32"), (torch.float64, "float64")):
        for max_norm, norm_type in CLIPS:
            params = initial_params(dtype)
            for k, p in enumerate(params, start=1):
                p.grad = grad_of(p, k, 1).reshape(p.shape)
            grads0 = [p.grad.reshape(-1).tolist() for p in params]
            total = float(torch.nn.utils.clip_grad_norm_(params, max_norm, norm_type))
            lines.append("  {dtype = '%s', max_norm = %s, norm_type = %s, total = %s," % (
                dname, lua_num(max_norm, torch.float64), lua_num(norm_type, torch.float64),
                lua_num(total, torch.float64)))
            lines.append("   grads = {%s}," % ", ".join(lua_list(x, dtype) for x in grads0))
            lines.append("   clipped = {%s}}," % ", ".join(lua_list(p.grad.reshape(-1).tolist(), dtype)
                                                     for p in params))
    lines += ["}", ""]
    with open(os.path.join(OUT, "optim_clip.lua"), "w") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    write_steps()
    write_sched()
    write_clip()
