#!/usr/bin/python3
"""Writes spec/fixtures/nn_utils.safetensors with PyTorch, for
spec/nn_utils_spec.lua: F.one_hot (labels stored 1-based as lunet takes them;
the output is torch's, whose column k-1 is lunet's column k: the same
matrix), F.bilinear's outputs and float64 gradients for x1, x2, weight and
bias (2-d, 1-d, 3-d and empty batches, with and without bias),
nn.utils.clip_grad_value_ results (NaN and inf grads included) and
nn.utils.parameters_to_vector.

Same layout as tools/gen_nn_fixtures.py (fixture_lib's save/add): for each
case "<name>", the inputs "<name>.<k>", the output "<name>.out" and the
gradients "<name>.d<k>" of sum(out * <name>.dout), computed in float64 from
the same values. The metadata entry "cases" is a JSON list of {name, op, opts}.
Run:  /usr/bin/python3 tools/gen_nn_utils_fixtures.py
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as g  # noqa: E402

f32, add = g.f32, g.add


def one_hot_cases():
    for name, labels, k in [("oh_1d", torch.tensor([0, 2, 1, 4, 2]), None),
                            ("oh_2d_k", torch.tensor([[0, 5, 1], [3, 3, 0]]), 7),
                            ("oh_0d", torch.tensor(2), 4),
                            ("oh_0d_infer", torch.tensor(3), None),
                            ("oh_empty_k", torch.zeros(0, 2, dtype=torch.long), 3),
                            ("oh_one_class", torch.zeros(3, dtype=torch.long), None)]:
        out = F.one_hot(labels) if k is None else F.one_hot(labels, k)
        g.tensors[f"{name}.t"] = labels + 1          # lunet's 1-based labels
        g.tensors[f"{name}.out"] = out
        g.cases.append({"name": name, "op": "one_hot", "opts": {} if k is None else {"num_classes": k}})


def bilinear_cases():
    for name, s1, s2, out, bias in [("bil_2d", (4, 3), (4, 5), 2, True), ("bil_nobias", (4, 3), (4, 5), 2, False),
                                    ("bil_1d", (3,), (5,), 4, True), ("bil_3d", (2, 3, 4), (2, 3, 5), 6, True),
                                    ("bil_4d", (2, 1, 2, 3), (2, 1, 2, 2), 3, False),
                                    ("bil_empty", (0, 3), (0, 5), 2, True), ("bil_square", (5, 4), (5, 4), 1, True)]:
        inputs = {"x1": f32(*s1), "x2": f32(*s2), "w": f32(out, s1[-1], s2[-1])}
        grads = ["x1", "x2", "w"]
        if bias:
            inputs["b"] = f32(out)
            grads.append("b")
            fn = lambda x1, x2, w, b: F.bilinear(x1, x2, w, b)   # noqa: E731
        else:
            fn = lambda x1, x2, w: F.bilinear(x1, x2, w)          # noqa: E731
        add(name, "bilinear", {}, fn, inputs, grads)


def clip_value_cases():
    for name, shapes, c, dtype, specials in [("cv_basic", [(3, 4), (5,)], 0.5, torch.float32, False),
                                            ("cv_zero", [(2, 3)], 0.0, torch.float32, False),
                                            ("cv_big", [(4,), (2, 2)], 100.0, torch.float64, False),
                                            ("cv_specials", [(6,)], 1.0, torch.float32, True)]:
        ps = []
        for i, s in enumerate(shapes):
            p = torch.zeros(s, dtype=dtype, requires_grad=True)
            p.grad = (torch.randn(s) * 2).to(dtype)
            if specials:
                p.grad[0], p.grad[1], p.grad[2] = float("inf"), float("-inf"), float("nan")
            g.tensors[f"{name}.g{i + 1}"] = p.grad.clone()
            ps.append(p)
        ps.append(torch.zeros(2, requires_grad=True))   # no grad: skipped
        torch.nn.utils.clip_grad_value_(ps, c)
        for i in range(len(shapes)):
            g.tensors[f"{name}.r{i + 1}"] = ps[i].grad
        g.cases.append({"name": name, "op": "clip_grad_value_", "opts": {"clip_value": c, "n": len(shapes)}})


def p2v_cases():
    ps = [f32(2, 3), f32(4), f32(1, 2, 2), torch.tensor(1.5)]
    for i, p in enumerate(ps):
        g.tensors[f"p2v.p{i + 1}"] = p
    g.tensors["p2v.out"] = torch.nn.utils.parameters_to_vector(ps)
    g.cases.append({"name": "p2v", "op": "parameters_to_vector", "opts": {"n": len(ps)}})


def main():
    torch.manual_seed(0)
    one_hot_cases()
    bilinear_cases()
    clip_value_cases()
    p2v_cases()
    g.write("nn_utils.safetensors", g.tensors, g.cases)


if __name__ == "__main__":
    main()
