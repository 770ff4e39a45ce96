#!/usr/bin/python3
"""Writes spec/fixtures/distributions.safetensors with PyTorch 1.13, for
spec/distributions_spec.lua: torch.distributions' values and float64
gradients.

Cases (the metadata entry "cases", a JSON list), by kind:
  dist  {name, kind, dist, params, methods}: float64 parameters
        "<name>.<param>", a value "<name>.value" inside the support (for
        Categorical 1-based, as lunet's; for the icdf "<name>.q" in (0, 1)),
        and for each method m (log_prob, entropy, mean, variance, stddev, cdf,
        icdf) the result "<name>.<m>" and the gradients "<name>.<m>.d<param>"
        of its sum with respect to each parameter.
  kl    {name, kind, dist, params}: parameters "<name>.p.<param>" and
        "<name>.q.<param>", kl_divergence(p, q) "<name>.out" and its sum's
        gradients "<name>.dp.<param>", "<name>.dq.<param>".
Run:  /usr/bin/python3 tools/gen_distributions_fixtures.py
"""
import os
import sys

import torch
import torch.distributions as D

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as g  # noqa: E402

torch.manual_seed(0)
tensors, cases = g.tensors, g.cases
f64 = torch.float64


def pos(*shape):
    return torch.rand(shape, dtype=f64) * 2 + 0.3


def real(*shape):
    return torch.randn(shape, dtype=f64)


def spd(n, batch=()):
    a = torch.randn(batch + (n, n), dtype=f64)
    return a @ a.transpose(-1, -2) + n * torch.eye(n, dtype=f64)


def build(dist, p):
    if dist == "MultivariateNormal_cov":
        return D.MultivariateNormal(p["loc"], covariance_matrix=p["covariance_matrix"])
    if dist == "MultivariateNormal_prec":
        return D.MultivariateNormal(p["loc"], precision_matrix=p["precision_matrix"])
    if dist == "MultivariateNormal_tril":
        return D.MultivariateNormal(p["loc"], scale_tril=p["scale_tril"])
    if dist == "IndependentNormal":
        return D.Independent(D.Normal(p["loc"], p["scale"]), 1)
    return getattr(D, dist)(**p)


def add_dist(name, dist, params, value, methods, q=None):
    p = {k: v.clone().requires_grad_(True) for k, v in params.items()}
    d = build(dist, p)
    for k, v in params.items():
        tensors[f"{name}.{k}"] = v
    tensors[f"{name}.value"] = value if dist != "Categorical" else value + 1
    if q is not None:
        tensors[f"{name}.q"] = q
    for m in methods:
        if m in ("log_prob", "cdf"):
            out = getattr(d, m)(value)
        elif m == "icdf":
            out = d.icdf(q)
        elif m == "entropy":
            out = d.entropy()
        else:
            out = getattr(d, m)
        tensors[f"{name}.{m}"] = out.detach().clone()
        grads = torch.autograd.grad(out.sum(), list(p.values()), allow_unused=True, retain_graph=True)
        for k, gr in zip(p, grads):
            if gr is not None:
                tensors[f"{name}.{m}.d{k}"] = gr
    cases.append({"name": name, "kind": "dist", "dist": dist, "params": list(params), "methods": methods})


MOM = ["log_prob", "entropy", "mean", "variance", "stddev"]
add_dist("normal", "Normal", {"loc": real(2, 3), "scale": pos(3)}, real(4, 2, 3), MOM + ["cdf", "icdf"],
         torch.rand(2, 3, dtype=f64) * 0.98 + 0.01)
add_dist("uniform", "Uniform", {"low": -pos(3), "high": pos(2, 3)}, torch.rand(2, 3, dtype=f64) * 0.5 - 0.25,
         MOM + ["cdf", "icdf"], torch.rand(2, 3, dtype=f64))
add_dist("bernoulli_p", "Bernoulli", {"probs": torch.rand(2, 3, dtype=f64) * 0.9 + 0.05},
         torch.bernoulli(torch.full((2, 3), 0.5, dtype=f64)), MOM)
add_dist("bernoulli_l", "Bernoulli", {"logits": real(2, 3) * 2}, torch.bernoulli(torch.full((4, 2, 3), 0.5, dtype=f64)), MOM)
add_dist("categorical_p", "Categorical", {"probs": torch.rand(2, 4, dtype=f64) + 0.1},
         torch.randint(0, 4, (3, 2)).double(), ["log_prob", "entropy"])
add_dist("categorical_l", "Categorical", {"logits": real(2, 4) * 2}, torch.randint(0, 4, (2,)).double(), ["log_prob", "entropy"])
add_dist("onehot", "OneHotCategorical", {"probs": torch.rand(2, 4, dtype=f64) + 0.1},
         torch.nn.functional.one_hot(torch.randint(0, 4, (3, 2)), 4).double(), ["log_prob", "entropy", "mean", "variance"])
add_dist("beta", "Beta", {"concentration1": pos(2, 3), "concentration0": pos(3) * 3},
         torch.rand(2, 3, dtype=f64) * 0.9 + 0.05, MOM)
add_dist("gamma", "Gamma", {"concentration": pos(2, 3) * 3, "rate": pos(3)}, pos(4, 2, 3), MOM)
add_dist("exponential", "Exponential", {"rate": pos(2, 3)}, pos(2, 3), MOM + ["cdf", "icdf"], torch.rand(2, 3, dtype=f64))
add_dist("laplace", "Laplace", {"loc": real(3), "scale": pos(2, 3)}, real(2, 3), MOM + ["cdf", "icdf"],
         torch.rand(2, 3, dtype=f64) * 0.98 + 0.01)
add_dist("mvn_cov", "MultivariateNormal_cov", {"loc": real(2, 3), "covariance_matrix": spd(3)}, real(4, 2, 3),
         ["log_prob", "entropy", "mean", "variance"])
add_dist("mvn_prec", "MultivariateNormal_prec", {"loc": real(3), "precision_matrix": spd(3, (2,))}, real(2, 3),
         ["log_prob", "entropy", "variance"])
add_dist("mvn_tril", "MultivariateNormal_tril", {"loc": real(3), "scale_tril": torch.linalg.cholesky(spd(3))},
         real(3), ["log_prob", "entropy", "variance"])
add_dist("independent", "IndependentNormal", {"loc": real(2, 3), "scale": pos(3)}, real(2, 3), ["log_prob", "entropy"])


def add_kl(name, dist, pp, qp):
    p = {k: v.clone().requires_grad_(True) for k, v in pp.items()}
    q = {k: v.clone().requires_grad_(True) for k, v in qp.items()}
    out = D.kl_divergence(build(dist, p), build(dist, q))
    for k in pp:
        tensors[f"{name}.p.{k}"], tensors[f"{name}.q.{k}"] = pp[k], qp[k]
    tensors[f"{name}.out"] = out.detach().clone()
    grads = torch.autograd.grad(out.sum(), list(p.values()) + list(q.values()))
    for k, gr in zip([f"dp.{k}" for k in p] + [f"dq.{k}" for k in q], grads):
        tensors[f"{name}.{k}"] = gr
    cases.append({"name": name, "kind": "kl", "dist": dist, "params": list(pp)})


add_kl("kl_normal", "Normal", {"loc": real(3), "scale": pos(3)}, {"loc": real(3), "scale": pos(3)})
add_kl("kl_bernoulli", "Bernoulli", {"probs": torch.rand(3, dtype=f64) * 0.9 + 0.05}, {"probs": torch.rand(3, dtype=f64) * 0.9 + 0.05})
add_kl("kl_categorical", "Categorical", {"probs": torch.rand(2, 4, dtype=f64) + 0.1}, {"probs": torch.rand(2, 4, dtype=f64) + 0.1})
add_kl("kl_uniform", "Uniform", {"low": torch.tensor([0.2, 0.1], dtype=f64), "high": torch.tensor([0.5, 0.9], dtype=f64)},
       {"low": torch.tensor([0.1, 0.0], dtype=f64), "high": torch.tensor([0.7, 1.5], dtype=f64)})
add_kl("kl_beta", "Beta", {"concentration1": pos(3), "concentration0": pos(3)}, {"concentration1": pos(3), "concentration0": pos(3)})
add_kl("kl_gamma", "Gamma", {"concentration": pos(3), "rate": pos(3)}, {"concentration": pos(3), "rate": pos(3)})
add_kl("kl_exponential", "Exponential", {"rate": pos(3)}, {"rate": pos(3)})
add_kl("kl_laplace", "Laplace", {"loc": real(3), "scale": pos(3)}, {"loc": real(3), "scale": pos(3)})
add_kl("kl_mvn", "MultivariateNormal_cov", {"loc": real(2, 3), "covariance_matrix": spd(3)},
       {"loc": real(3), "covariance_matrix": spd(3, (2,))})
add_kl("kl_independent", "IndependentNormal", {"loc": real(2, 3), "scale": pos(3)}, {"loc": real(2, 3), "scale": pos(2, 3)})

g.write("distributions.safetensors", tensors, cases)
