#!/usr/bin/python3
"""Writes, with PyTorch 1.13:

spec/fixtures/nn_instancenorm_nd.safetensors for spec/nn_instancenorm_nd_spec.lua:
F.instance_norm as nn.InstanceNorm1d / InstanceNorm3d compute it, batched and
unbatched, with and without affine (cases "<name>" as fixture_lib.add: x,
weight, bias float32, out and the float64 gradients dx, dweight, dbias), and
track_running_stats cases (op "running"): a training forward of x (out,
running_mean, running_var after it), then an eval forward of x2 (out_eval).

spec/fixtures/nn_prune.safetensors for spec/nn_prune_spec.lua: l1_unstructured
(a count, then a fraction composed on top), a fraction rounded half to even,
a tie case, ln_structured (n = 2 on dim 0, then n = inf on dim 1 over it),
global_unstructured over two Linears; for each the masks, the forward output
after pruning (x, out), the state_dict keys (in the case), and the weight
after prune.remove.

spec/fixtures/nn_paramlist.safetensors for spec/nn_paramlist_spec.lua: the
state_dict of a module holding a ParameterList and a ParameterDict.
Run:  /usr/bin/python3 tools/gen_nnsmall_fixtures.py
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.nn.utils.prune as prune

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as g  # noqa: E402

torch.manual_seed(0)


def reset():
    g.tensors.clear()
    g.cases.clear()


# ---- instance norm ---------------------------------------------------------------------

def inorm(unbatched):
    def fn(x, weight=None, bias=None):
        y = F.instance_norm(x.unsqueeze(0) if unbatched else x, weight=weight, bias=bias, eps=1e-5)
        return y.squeeze(0) if unbatched else y
    return fn


for k, shape in [(1, (2, 3, 7)), (3, (2, 3, 3, 4, 2))]:
    for unbatched in (False, True):
        for affine in (False, True):
            s = shape[1:] if unbatched else shape
            name = f"in{k}d{'_unbatched' if unbatched else ''}{'_affine' if affine else ''}"
            inputs = {"x": g.f32(*s)}
            if affine:
                inputs["weight"], inputs["bias"] = g.f32(3, scale=0.5) + 1, g.f32(3, scale=0.5)
            g.add(name, f"InstanceNorm{k}d", {"affine": affine, "unbatched": unbatched}, inorm(unbatched),
                  inputs, list(inputs))

for k, shape, cls in [(1, (2, 3, 6), nn.InstanceNorm1d), (3, (2, 3, 2, 3, 2), nn.InstanceNorm3d)]:
    name = f"in{k}d_running"
    m = cls(3, momentum=0.2, affine=True, track_running_stats=True)
    with torch.no_grad():
        m.weight.copy_(g.f32(3, scale=0.5) + 1)
        m.bias.copy_(g.f32(3, scale=0.5))
    x, x2 = g.f32(*shape), g.f32(*shape)
    for key, v in {"x": x, "x2": x2, "weight": m.weight.detach().clone(), "bias": m.bias.detach().clone()}.items():
        g.tensors[f"{name}.{key}"] = v
    m.double()
    out = m(x.double())
    g.tensors[f"{name}.out"] = out.detach()
    g.tensors[f"{name}.running_mean"] = m.running_mean.clone()
    g.tensors[f"{name}.running_var"] = m.running_var.clone()
    m.eval()
    g.tensors[f"{name}.out_eval"] = m(x2.double()).detach()
    g.cases.append({"name": name, "op": "running", "k": k, "momentum": 0.2})

g.write("nn_instancenorm_nd.safetensors", g.tensors, g.cases)
reset()


# ---- prune -------------------------------------------------------------------------------

def record(name, m, x, masks, extra=None):
    """the module's masks after each step, its output on x, its state_dict keys, the weights after remove"""
    for i, mk in enumerate(masks):
        g.tensors[f"{name}.mask{i + 1}"] = mk
    g.tensors[f"{name}.x"] = x
    with torch.no_grad():
        g.tensors[f"{name}.out"] = m(x.double()).float()
    keys = sorted(m.state_dict().keys())
    prune.remove(m, "weight")
    g.tensors[f"{name}.removed"] = m.weight.detach().float()
    case = {"name": name, "keys": keys}
    case.update(extra or {})
    g.cases.append(case)




# l1_unstructured: a count (3), then a fraction (0.3 of the 17 left: round(5.1) = 5) on top
m = nn.Linear(5, 4)
name = "l1"
g.tensors[f"{name}.weight"], g.tensors[f"{name}.bias"] = m.weight.detach().clone(), m.bias.detach().clone()
m.double()
prune.l1_unstructured(m, "weight", amount=3)
m1 = m.weight_mask.float().clone()
prune.l1_unstructured(m, "weight", amount=0.3)
record(name, m, g.f32(2, 5), [m1, m.weight_mask.float().clone()], {"op": "l1", "amounts": [3, 0.3]})

# a fraction rounded half to even: 0.5 of 5 = 2.5 -> 2 (and 0.5 of 7 = 3.5 -> 4)
for name, n in [("l1_half_even5", 5), ("l1_half_even7", 7)]:
    m = nn.Linear(n, 1)
    g.tensors[f"{name}.weight"], g.tensors[f"{name}.bias"] = m.weight.detach().clone(), m.bias.detach().clone()
    m.double()
    prune.l1_unstructured(m, "weight", amount=0.5)
    record(name, m, g.f32(2, n), [m.weight_mask.float().clone()], {"op": "l1", "amounts": [0.5]})

# ties: |w| equal at several places; torch's topk picks some of them
name = "l1_ties"
m = nn.Linear(4, 3)
with torch.no_grad():
    m.weight.copy_(torch.tensor([[1., -2., 1., 1.], [3., 1., 0.5, -1.], [1., 1., 4., 1.]]))
g.tensors[f"{name}.weight"], g.tensors[f"{name}.bias"] = m.weight.detach().clone(), m.bias.detach().clone()
m.double()
prune.l1_unstructured(m, "weight", amount=4)
record(name, m, g.f32(2, 4), [m.weight_mask.float().clone()], {"op": "l1", "amounts": [4]})

# ln_structured: L2 over output channels (dim 0: lunet 1), 0.4 of 6 -> 2; then L-inf over input channels (dim 1: lunet 2), 1
name = "ln"
m = nn.Conv2d(3, 6, 3)
g.tensors[f"{name}.weight"], g.tensors[f"{name}.bias"] = m.weight.detach().clone(), m.bias.detach().clone()
m.double()
prune.ln_structured(m, "weight", amount=0.4, n=2, dim=0)
m1 = m.weight_mask.float().clone()
prune.ln_structured(m, "weight", amount=1, n=float("inf"), dim=1)
record(name, m, g.f32(1, 3, 5, 5), [m1, m.weight_mask.float().clone()],
       {"op": "ln", "steps": [[0.4, 2, 1], [1, "inf", 2]]})

# ln_structured with n = 1 on the last dim (-1), 2 of 3 columns
name = "ln_last"
m = nn.Linear(3, 4)
g.tensors[f"{name}.weight"], g.tensors[f"{name}.bias"] = m.weight.detach().clone(), m.bias.detach().clone()
m.double()
prune.ln_structured(m, "weight", amount=2, n=1, dim=-1)
record(name, m, g.f32(2, 3), [m.weight_mask.float().clone()], {"op": "ln", "steps": [[2, 1, -1]]})

# global_unstructured over two Linears: 0.4 of 12 + 6 = 18 -> round(7.2) = 7
name = "global"
a, b = nn.Linear(4, 3), nn.Linear(3, 2)
for key, v in {"a_weight": a.weight, "a_bias": a.bias, "b_weight": b.weight, "b_bias": b.bias}.items():
    g.tensors[f"{name}.{key}"] = v.detach().clone()
a.double()
b.double()
prune.global_unstructured([(a, "weight"), (b, "weight")], pruning_method=prune.L1Unstructured, amount=0.4)
g.tensors[f"{name}.a_mask"] = a.weight_mask.float().clone()
g.tensors[f"{name}.b_mask"] = b.weight_mask.float().clone()
x = g.f32(2, 4)
g.tensors[f"{name}.x"] = x
with torch.no_grad():
    g.tensors[f"{name}.out"] = b(a(x.double())).float()
g.cases.append({"name": name, "op": "global", "amount": 0.4})

g.write("nn_prune.safetensors", g.tensors, g.cases)
reset()


# ---- ParameterList / ParameterDict state_dict ------------------------------------------------

class Holder(nn.Module):
    def __init__(self):
        super().__init__()
        self.pl = nn.ParameterList([nn.Parameter(torch.randn(2, 3)), nn.Parameter(torch.randn(4))])
        self.pd = nn.ParameterDict({"beta": nn.Parameter(torch.randn(3)), "alpha": nn.Parameter(torch.randn(2, 2))})


h = Holder()
for k, v in h.state_dict().items():
    g.tensors[k] = v.clone()
g.cases.append({"name": "holder", "keys": list(h.state_dict().keys()),
                "named_parameters": [k for k, _ in h.named_parameters()]})
g.write("nn_paramlist.safetensors", g.tensors, g.cases)
