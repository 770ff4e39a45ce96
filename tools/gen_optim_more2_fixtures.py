#!/usr/bin/python3
"""Reference values for spec/optim_more2_spec.lua from PyTorch (Debian's
python3-torch 1.13): run with /usr/bin/python3 tools/gen_optim_more2_fixtures.py.

Writes spec/fixtures/optim_more2.safetensors (tools/fixture_lib.py): cases in
the metadata, tensors named "<case>.<what>". Kinds of case:

  steps    Rprop / ASGD trajectories, params and gradients as
           tools/gen_optim_fixtures.py (g = p * a + b, params (2, 3) and (4,)):
           "<case>.init" (both params flattened, concatenated) and
           "<case>.traj" (STEPS, n) after each step; ASGD also "<case>.ax".
  lbfgs    LBFGS on a problem (lsq, logistic, rosenbrock): its data
           "<case>.<name>", initial params "<case>.init", after each step()
           "<case>.traj", the losses step() returned "<case>.loss" and the
           state's func_evals / n_iter "<case>.evals" (float64).
  avg      AveragedModel of an nn.Linear(3, 2): its params at each update
           "<case>.w<i>", "<case>.b<i>"; averaged "<case>.aw<i>", "<case>.ab<i>";
           forward of "<case>.x" after the last update "<case>.out".
  swalr    SWALR lr sequences: "<case>.lr" (steps + 1, groups).
  bn       update_bn: a model's state_dict "<case>.sd.<key>", the batches
           "<case>.x<i>", the state_dict after update_bn "<case>.after.<key>".
"""
import math
import os
import sys
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib  # noqa: E402
from gen_optim_fixtures import grad_of, initial_params  # noqa: E402

warnings.filterwarnings("ignore")
torch.manual_seed(0)
tensors, cases = {}, []
DTYPES = ((torch.float32, "float32"), (torch.float64, "float64"))
STEPS = 20


def flat(ps):
    return torch.cat([p.detach().reshape(-1) for p in ps])


# ---- Rprop and ASGD ----------------------------------------------------------------------

STEP_CASES = [
    ("rprop", "Rprop", [dict()], []),
    ("rprop_etas_sizes", "Rprop", [dict(lr=0.05, etas=(0.3, 1.5), step_sizes=(1e-3, 0.2))], [3, 4]),
    ("rprop_maximize_groups", "Rprop", [dict(lr=0.02, maximize=True), dict(lr=0.1, etas=(0.4, 1.1))], []),
    ("asgd", "ASGD", [dict()], []),
    ("asgd_t0_wd", "ASGD", [dict(lr=0.05, lambd=1e-2, alpha=0.6, t0=5, weight_decay=0.1)], [2, 9]),
    ("asgd_maximize_groups", "ASGD", [dict(lr=0.02, t0=3, maximize=True), dict(lr=0.04, lambd=0.05, t0=0)], []),
]


def run_steps(name, cls_name, groups, skips, dtype, dname):
    params = initial_params(dtype)
    for p in params:
        p.requires_grad_(True)
    cls = getattr(torch.optim, cls_name)
    if len(groups) == 1:
        opt = cls(params, **groups[0])
    else:
        opt = cls([dict(params=[params[i]], **g) for i, g in enumerate(groups)])
    key = f"{name}.{dname}"
    tensors[key + ".init"] = flat(params)
    traj, ax = [], []
    for s in range(1, STEPS + 1):
        for k, p in enumerate(params, start=1):
            if k == 2 and s in skips:
                p.grad = None
            else:
                p.grad = grad_of(p, k, s).reshape(p.shape).detach().clone()
        opt.step()
        traj.append(flat(params))
        if cls_name == "ASGD":
            ax.append(flat([opt.state[p]["ax"] if p in opt.state else torch.zeros_like(p) for p in params]))
    tensors[key + ".traj"] = torch.stack(traj)
    if ax:
        tensors[key + ".ax"] = torch.stack(ax)
    cases.append(dict(kind="steps", name=key, optimizer=cls_name, dtype=dname, groups=groups, skips=skips))


# ---- LBFGS -------------------------------------------------------------------------------


def problem(kind, dtype):
    """data (dict), initial params (list), loss(params, data)"""
    g = torch.Generator().manual_seed(7)
    if kind == "lsq":
        data = dict(A=torch.randn(8, 3, generator=g), b=torch.randn(8, generator=g))
        init = [torch.tensor([0.3, -0.2, 0.5]), torch.tensor([0.1])]

        def loss(ps, d):
            r = d["A"] @ ps[0] + ps[1] - d["b"]
            return (r * r).mean()
    elif kind == "logistic":
        data = dict(X=torch.randn(12, 3, generator=g), y=(torch.rand(12, generator=g) > 0.5).double())
        init = [torch.tensor([0.2, -0.1, 0.4]), torch.tensor([0.0])]

        def loss(ps, d):
            z = d["X"] @ ps[0] + ps[1]
            return (torch.log1p(torch.exp(z)) - d["y"] * z).mean() + 0.05 * (ps[0] * ps[0]).sum()
    else:
        data = {}
        init = [torch.tensor([-1.5, 2.0])]

        def loss(ps, d):
            x = ps[0]
            return (1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2
    data = {k: v.to(dtype) for k, v in data.items()}
    return data, [p.to(dtype) for p in init], loss


LBFGS_CASES = [
    ("lbfgs_lsq", "lsq", dict(), 2),
    ("lbfgs_lsq_wolfe", "lsq", dict(line_search_fn="strong_wolfe"), 2),
    ("lbfgs_logistic", "logistic", dict(lr=0.5, max_iter=4, history_size=3), 4),
    ("lbfgs_logistic_wolfe", "logistic", dict(max_iter=5, history_size=2, line_search_fn="strong_wolfe"), 3),
    ("lbfgs_rosenbrock", "rosenbrock", dict(lr=0.2, max_iter=10, history_size=5), 4),
    ("lbfgs_rosenbrock_wolfe", "rosenbrock", dict(max_iter=8, line_search_fn="strong_wolfe"), 4),
    ("lbfgs_rosenbrock_eval", "rosenbrock", dict(max_iter=12, max_eval=7, tolerance_change=1e-5,
                                                 line_search_fn="strong_wolfe"), 3),
]


def run_lbfgs(name, kind, opts, nsteps, dtype, dname):
    data, ps, loss_fn = problem(kind, dtype)
    for p in ps:
        p.requires_grad_(True)
    opt = torch.optim.LBFGS(ps, **opts)
    key = f"{name}.{dname}"
    for k, v in data.items():
        tensors[f"{key}.{k}"] = v
    tensors[key + ".init"] = flat(ps)
    traj, losses, evals = [], [], []

    def closure():
        opt.zero_grad()
        l = loss_fn(ps, data)
        l.backward()
        return l

    for _ in range(nsteps):
        losses.append(float(opt.step(closure)))
        traj.append(flat(ps))
        st = opt.state[ps[0]]
        evals.append([st["func_evals"], st["n_iter"]])
    tensors[key + ".traj"] = torch.stack(traj)
    tensors[key + ".loss"] = torch.tensor(losses, dtype=torch.float64)
    tensors[key + ".evals"] = torch.tensor(evals, dtype=torch.float64)
    cases.append(dict(kind="lbfgs", name=key, problem=kind, dtype=dname, opts=opts, steps=nsteps,
                      shapes=[list(p.shape) for p in ps], data=sorted(data)))


# ---- swa_utils ---------------------------------------------------------------------------


def run_avg(name, ema):
    model = torch.nn.Linear(3, 2).double()
    fn = (lambda a, p, n: 0.9 * a + 0.1 * p) if ema else None
    swa = torch.optim.swa_utils.AveragedModel(model, avg_fn=fn)
    for i in range(1, 4):
        with torch.no_grad():
            model.weight.copy_(torch.randn(2, 3, dtype=torch.float64))
            model.bias.copy_(torch.randn(2, dtype=torch.float64))
        tensors[f"{name}.w{i}"] = model.weight.detach().clone()
        tensors[f"{name}.b{i}"] = model.bias.detach().clone()
        swa.update_parameters(model)
        tensors[f"{name}.aw{i}"] = swa.module.weight.detach().clone()
        tensors[f"{name}.ab{i}"] = swa.module.bias.detach().clone()
    x = torch.randn(4, 3, dtype=torch.float64)
    tensors[name + ".x"] = x
    tensors[name + ".out"] = swa(x).detach()
    cases.append(dict(kind="avg", name=name, ema=ema, n_averaged=int(swa.n_averaged)))


SWALR_CASES = [
    ("swalr_cos", [0.1, 0.05], dict(swa_lr=0.01, anneal_epochs=3), 8),
    ("swalr_linear_list", [0.1, 0.05], dict(swa_lr=[0.02, 0.01], anneal_epochs=5, anneal_strategy="linear"), 8),
    ("swalr_zero_epochs", [0.2], dict(swa_lr=0.05, anneal_epochs=0), 4),
    ("swalr_default", [0.3], dict(swa_lr=0.03), 14),
]


def run_swalr(name, lrs, kw, nsteps):
    params = [torch.zeros(1, requires_grad=True) for _ in lrs]
    opt = torch.optim.SGD([dict(params=[p], lr=lr) for p, lr in zip(params, lrs)])
    sched = torch.optim.swa_utils.SWALR(opt, **kw)
    seq = [sched.get_last_lr()]
    for _ in range(nsteps):
        opt.step()
        sched.step()
        seq.append(sched.get_last_lr())
    tensors[name + ".lr"] = torch.tensor(seq, dtype=torch.float64)
    cases.append(dict(kind="swalr", name=name, lrs=lrs, opts=kw, steps=nsteps,
                      swa_lr=[g["swa_lr"] for g in opt.param_groups]))


def run_bn(name, conv):
    if conv:
        model = torch.nn.Sequential(torch.nn.Conv2d(2, 3, 3), torch.nn.BatchNorm2d(3), torch.nn.ReLU())
        shape = (2, 2, 5, 5)
    else:
        model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.ReLU(),
                                    torch.nn.Linear(4, 5), torch.nn.BatchNorm1d(5, momentum=0.3))
        shape = (6, 3)
    model = model.double()
    # (stats that update_bn must reset first)
    model.train()
    model(torch.randn(*shape, dtype=torch.float64) * 3 + 1)
    model.eval()
    for k, v in model.state_dict().items():
        tensors[f"{name}.sd.{k}"] = v.clone()
    xs = [torch.randn(*shape, dtype=torch.float64) * 2 + 0.5 for _ in range(3)]
    for i, x in enumerate(xs, start=1):
        tensors[f"{name}.x{i}"] = x
    loader = [xs[0], (xs[1], torch.zeros(1)), xs[2]]
    torch.optim.swa_utils.update_bn(loader, model)
    for k, v in model.state_dict().items():
        tensors[f"{name}.after.{k}"] = v.clone()
    cases.append(dict(kind="bn", name=name, conv=conv, training=model.training,
                      momenta=[m.momentum for m in model.modules() if isinstance(m, torch.nn.BatchNorm1d)
                               or isinstance(m, torch.nn.BatchNorm2d)]))


if __name__ == "__main__":
    for dtype, dname in DTYPES:
        for c in STEP_CASES:
            run_steps(*c, dtype, dname)
        for c in LBFGS_CASES:
            run_lbfgs(*c, dtype, dname)
    run_avg("avg_mean", False)
    run_avg("avg_ema", True)
    for c in SWALR_CASES:
        run_swalr(*c)
    run_bn("bn_mlp", False)
    run_bn("bn_conv", True)
    fixture_lib.write("optim_more2.safetensors", tensors, cases)
