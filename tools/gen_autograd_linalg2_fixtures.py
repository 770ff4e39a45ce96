#!/usr/bin/python3
"""Writes spec/fixtures/autograd_linalg2.safetensors with PyTorch 1.13, for
spec/autograd_linalg2_spec.lua: second derivatives through torch.linalg,
float64, well-conditioned matrices with distinct eigen/singular values:
torch.autograd.functional.hessian of a scalar function of one or a few
inputs (3x3 and batched 2x3x3, some rectangular):

  logdet, det (also singular), inv, solve (a quadratic form, batched, broadcast), cholesky
  (a Gaussian log-likelihood, upper), MultivariateNormal.log_prob, qr
  (square, tall, wide), eigh / eigvalsh, svd / svdvals (square, tall),
  matrix norms (nuclear, spectral, -2, frobenius), vector_norm, pinv,
  matrix_power (negative), multi_dot

Each case "<name>": inputs "<name>.in<i>" (differentiated), constants
"<name>.c<i>", the Hessian blocks "<name>.H<i>.<j>" (d^2 f / d in_i d in_j,
in_i's shape then in_j's). The metadata entry "cases" is the JSON list of
{name, n_in, n_c}; the spec writes the same functions by name.
Run:  /usr/bin/python3 tools/gen_autograd_linalg2_fixtures.py
"""
import math
import os
import sys

import torch
import torch.autograd.functional as AF
from torch.distributions import MultivariateNormal

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as fl  # noqa: E402

torch.manual_seed(0)
LA = torch.linalg
tensors, cases = {}, []
D = torch.float64


def rnd(*shape):
    return torch.randn(shape, dtype=D)


def wellcond(*shape):
    # a random matrix plus 3 I: well away from singular, distinct singular values
    n = shape[-1]
    return rnd(*shape) + 3 * torch.eye(n, dtype=D)


def spd(*shape):
    a = rnd(*shape)
    n = shape[-1]
    return a @ a.transpose(-1, -2) + torch.diag(torch.arange(1, n + 1, dtype=D))


def sym(a):
    return (a + a.transpose(-1, -2)) / 2


def case(name, f, ins, cs=()):
    ins, cs = list(ins), list(cs)
    for i, v in enumerate(ins, 1):
        tensors[f"{name}.in{i}"] = v.contiguous()
    for i, v in enumerate(cs, 1):
        tensors[f"{name}.c{i}"] = v.contiguous()
    H = AF.hessian(lambda *a: f(*a, *cs), tuple(ins))
    for i in range(len(ins)):
        for j in range(len(ins)):
            tensors[f"{name}.H{i + 1}.{j + 1}"] = H[i][j].detach().contiguous()
    cases.append({"name": name, "n_in": len(ins), "n_c": len(cs)})


def gauss(mu, A, X):
    # the log-likelihood of the rows of X under N(mu, A A^T + I), via cholesky
    n = mu.shape[-1]
    L = LA.cholesky(A @ A.transpose(-1, -2) + torch.eye(n, dtype=D))
    z = LA.solve(L, (X - mu).transpose(-1, -2))
    return (-0.5 * (z * z).sum() - X.shape[-2] * (L.diagonal(0, -2, -1).log().sum()
                                                 + 0.5 * n * math.log(2 * math.pi)))


case("logdet", lambda A: LA.slogdet(A)[1], [wellcond(3, 3)])
case("logdet_batched", lambda A: LA.slogdet(A)[1].sum(), [wellcond(2, 3, 3)])
case("det", lambda A: LA.det(A), [wellcond(3, 3)])
# rank 2: det's gradient is the cofactors (through the SVD), still differentiable
case("det_singular", lambda A: LA.det(A), [torch.tensor([[1.0, 2, 3], [2, 4, 6], [1, 0, 1]], dtype=D)])
case("det_batched", lambda A, c: (LA.det(A) * c).sum(), [wellcond(2, 3, 3)], [torch.tensor([1.0, -0.5], dtype=D)])
case("inv", lambda A, C: (LA.inv(A) * C).sum(), [wellcond(3, 3)], [rnd(3, 3)])
case("solve_quad", lambda A, b: (b * LA.solve(A, b)).sum(), [wellcond(3, 3), rnd(3)])
case("solve_batched", lambda A, B: (B * LA.solve(A, B)).sum(), [wellcond(2, 3, 3), rnd(2, 3, 2)])
case("solve_broadcast", lambda A, B, C: (LA.solve(A, B) ** 2 * C).sum(), [wellcond(3, 3), rnd(2, 3, 2)], [rnd(2, 3, 2)])
case("gauss_cholesky", gauss, [rnd(3), rnd(3, 3)], [rnd(4, 3)])
case("mvn_log_prob", lambda mu, A, X: MultivariateNormal(mu, covariance_matrix=A @ A.transpose(-1, -2)
                                                        + torch.eye(3, dtype=D)).log_prob(X).sum(),
     [rnd(3), rnd(3, 3)], [rnd(4, 3)])
case("mvn_log_prob_batched", lambda mu, A, X: MultivariateNormal(mu, covariance_matrix=A @ A.transpose(-1, -2)
                                                                + torch.eye(3, dtype=D)).log_prob(X).sum(),
     [rnd(2, 3), rnd(2, 3, 3)], [rnd(4, 2, 3)])
case("cholesky_upper", lambda A, C: (LA.cholesky(sym(A), upper=True) * C).sum(), [spd(2, 3, 3)], [rnd(2, 3, 3)])
case("qr", lambda A, C1, C2: (LA.qr(A)[0] ** 2 * C1).sum() + (LA.qr(A)[1] ** 2 * C2).sum(),
     [wellcond(3, 3)], [rnd(3, 3), rnd(3, 3)])
case("qr_tall", lambda A, C1, C2: (LA.qr(A)[0] ** 2 * C1).sum() + (LA.qr(A)[1] ** 2 * C2).sum(),
     [rnd(4, 3)], [rnd(4, 3), rnd(3, 3)])
case("qr_wide", lambda A, C1, C2: (LA.qr(A)[0] ** 2 * C1).sum() + (LA.qr(A)[1] ** 2 * C2).sum(),
     [rnd(2, 3)], [rnd(2, 2), rnd(2, 3)])
case("eigvalsh", lambda A, c: (LA.eigvalsh(sym(A)) * c).sum(), [rnd(3, 3)], [torch.tensor([1.0, -2.0, 0.5], dtype=D)])
case("eigh_batched", lambda A, c, C: (LA.eigh(sym(A))[0] * c).sum() + (LA.eigh(sym(A))[1] ** 2 * C).sum(),
     [rnd(2, 3, 3)], [rnd(2, 3), rnd(2, 3, 3)])
case("svdvals", lambda A, c: (LA.svdvals(A) * c).sum(), [rnd(3, 3)], [torch.tensor([1.0, -2.0, 0.5], dtype=D)])
case("svdvals_batched_tall", lambda A, c: (LA.svdvals(A) * c).sum(), [rnd(2, 4, 3)], [rnd(2, 3)])
case("svd_uv", lambda A, c, C1, C2: (LA.svd(A, full_matrices=False)[1] * c).sum()
     + (LA.svd(A, full_matrices=False)[0] ** 2 * C1).sum() + (LA.svd(A, full_matrices=False)[2] ** 2 * C2).sum(),
     [rnd(4, 3)], [rnd(3), rnd(4, 3), rnd(3, 3)])
case("norm_nuc", lambda A: LA.matrix_norm(A, "nuc").sum(), [rnd(2, 3, 3)])
case("norm_spectral", lambda A, c: (LA.matrix_norm(A, 2) * c).sum() + LA.matrix_norm(A, -2).sum(), [rnd(2, 3, 3)],
     [torch.tensor([1.0, -0.5], dtype=D)])
case("norm_fro", lambda A, c: (LA.matrix_norm(A) * c).sum() + LA.norm(A[0]), [rnd(2, 3, 3)],
     [torch.tensor([1.0, -0.5], dtype=D)])
case("vector_norm", lambda x: LA.vector_norm(x, 3, dim=1).sum() + LA.vector_norm(x, 1.5), [rnd(2, 3)])
case("pinv", lambda A, C: (LA.pinv(A) * C).sum(), [rnd(3, 2)], [rnd(2, 3)])
case("matrix_power_neg", lambda A, C: (LA.matrix_power(A, -2) * C).sum(), [wellcond(3, 3)], [rnd(3, 3)])
case("multi_dot", lambda A, B, C: (LA.multi_dot([A, B, C]) ** 2).sum(), [rnd(2, 3), rnd(3, 3), rnd(3, 2)])

fl.write("autograd_linalg2.safetensors", tensors, cases)
