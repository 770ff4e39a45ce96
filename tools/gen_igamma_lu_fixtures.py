#!/usr/bin/python3
"""Writes spec/fixtures/igamma.safetensors (for spec/igamma_spec.lua) and
spec/fixtures/linalg_lu.safetensors (spec/linalg_lu_spec.lua) with PyTorch 1.13.

igamma: a grid of (a, x) in float64, a in [1e-3, 1e4], x in [0, 1e4] (and
x near a, a + 1, a + sqrt(a)): "a", "x", torch's "igamma", "igammac", and
"ref_p", "ref_q" from mpmath at 30 digits (torch 1.13 itself is off by up to
~2e-9 relative for a of 20 to 100 near x ~ a, its asymptotic expansion's
region: the spec holds lunet to 1e-12 of mpmath and to torch within torch's
own error); "a32", "x32" with torch's float32 "igamma32", "igammac32"; the
edge cases "ea", "ex" with "eigamma", "eigammac"; "ga", "gx" with the x
gradients "gp", "gq" of sum(igamma(a, x)), sum(igammac(a, x)).
linalg_lu: see lu_fixtures.
Run:  /usr/bin/python3 tools/gen_igamma_lu_fixtures.py
"""
import os
import sys

import mpmath
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as g  # noqa: E402

mpmath.mp.dps = 30


def igamma_fixtures():
    a = np.concatenate([np.logspace(-3, 4, 36), [0.5, 1, 9.99, 10, 20.5, 21.17, 35, 100, 999.5]])
    x = np.concatenate([[0.0, 1e-300, 1e-6], np.logspace(-3, 4, 28)])
    A, X = np.meshgrid(a, x, indexing="ij")
    A, X = A.ravel(), X.ravel()
    A = np.concatenate([A, a, a, a * 1.01, a * 0.99, a + np.sqrt(a)])
    X = np.concatenate([X, a, a + 1, a, a, a])
    tA, tX = torch.tensor(A), torch.tensor(X)
    t = {"a": tA, "x": tX, "igamma": torch.igamma(tA, tX), "igammac": torch.igammac(tA, tX)}
    t["ref_p"] = torch.tensor([float(mpmath.gammainc(p, 0, q, regularized=True)) for p, q in zip(A, X)],
                              dtype=torch.float64)
    t["ref_q"] = torch.tensor([float(mpmath.gammainc(p, q, mpmath.inf, regularized=True)) for p, q in zip(A, X)],
                              dtype=torch.float64)
    a32, x32 = tA.float(), tX.float()
    t.update({"a32": a32, "x32": x32, "igamma32": torch.igamma(a32, x32), "igammac32": torch.igammac(a32, x32)})
    inf, nan = float("inf"), float("nan")
    ea = torch.tensor([0., 0, 0, 1, 1, -1, 1, inf, inf, 2, nan, 1, 0, inf, 2, 1e-10, 3, 5], dtype=torch.float64)
    ex = torch.tensor([0., 1, inf, 0, inf, 1, -1, 1, inf, nan, 1, -0., -1, 0, 1e300, 1, 1e-300, 1e308],
                      dtype=torch.float64)
    t.update({"ea": ea, "ex": ex, "eigamma": torch.igamma(ea, ex), "eigammac": torch.igammac(ea, ex)})
    ga = torch.tensor([0.5, 1, 2.5, 7, 30], dtype=torch.float64)
    gx = torch.tensor([0.3, 2, 1.5, 9, 28], dtype=torch.float64)
    for name, f in (("gp", torch.igamma), ("gq", torch.igammac)):
        xx = gx.clone().requires_grad_(True)
        f(ga, xx).sum().backward()
        t[name] = xx.grad
    t.update({"ga": ga, "gx": gx})
    g.write("igamma.safetensors", t, [])


def lu_fixtures():
    """linalg_lu: for each matrix "<n>.A" (float64 unless named f32): torch's
    "<n>.LU", "<n>.piv", "<n>.info" (lu_factor_ex), "<n>.P", "<n>.L", "<n>.U"
    (lu), and the A gradients "<n>.dA_lu" of sum(L * wL) + sum(U * wU) and
    "<n>.dA_factor" of sum(LU * wLU) (weights stored); the lu_solve case "s"
    with B, its solutions (plain, adjoint, left = false on B^T) and the LU and
    B gradients of sum(X * wX)."""
    torch.manual_seed(7)
    t = {}
    mats = {"sq": torch.randn(3, 3), "wide": torch.randn(2, 4), "tall": torch.randn(4, 2),
            "batch": torch.randn(2, 3, 3), "sing": torch.tensor([[1., 2, 3], [2, 4, 6], [1, 0, 1]]),
            "f32": torch.randn(4, 4)}
    for n, A in mats.items():
        A = A.float() if n == "f32" else A.double()
        t[f"{n}.A"] = A
        LU, piv, info = torch.linalg.lu_factor_ex(A)
        P, L, U = torch.linalg.lu(A)
        t.update({f"{n}.LU": LU, f"{n}.piv": piv, f"{n}.info": info, f"{n}.P": P, f"{n}.L": L, f"{n}.U": U})
        if n in ("sing", "f32"):
            continue
        wL, wU, wLU = torch.randn(L.shape).double(), torch.randn(U.shape).double(), torch.randn(LU.shape).double()
        a = A.clone().requires_grad_(True)
        _, L2, U2 = torch.linalg.lu(a)
        ((L2 * wL).sum() + (U2 * wU).sum()).backward()
        t.update({f"{n}.wL": wL, f"{n}.wU": wU, f"{n}.dA_lu": a.grad})
        a = A.clone().requires_grad_(True)
        (torch.linalg.lu_factor(a)[0] * wLU).sum().backward()
        t.update({f"{n}.wLU": wLU, f"{n}.dA_factor": a.grad})
    A = torch.randn(3, 3).double() + 2 * torch.eye(3).double()
    B = torch.randn(3, 2).double()
    LU, piv = torch.linalg.lu_factor(A)
    wX = torch.randn(3, 2).double()
    t.update({"s.A": A, "s.B": B, "s.LU": LU, "s.piv": piv, "s.wX": wX,
              "s.X": torch.linalg.lu_solve(LU, piv, B), "s.Xadj": torch.linalg.lu_solve(LU, piv, B, adjoint=True),
              "s.Xright": torch.linalg.lu_solve(LU, piv, B.T.contiguous(), left=False)})
    for tag, kw in (("", {}), ("adj", {"adjoint": True})):
        lu, b = LU.clone().requires_grad_(True), B.clone().requires_grad_(True)
        (torch.linalg.lu_solve(lu, piv, b, **kw) * wX).sum().backward()
        t[f"s.dLU{tag}"], t[f"s.dB{tag}"] = lu.grad, b.grad
    g.write("linalg_lu.safetensors", t, [])


if __name__ == "__main__":
    igamma_fixtures()
    lu_fixtures()
