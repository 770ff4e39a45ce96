"""Writes spec/fixtures/scatter_reduce.safetensors for
spec/tensor_scatter_reduce_spec.lua: scatter_reduce ('sum', 'prod', 'mean',
'amax', 'amin', with and without include_self) and index_reduce ('prod',
'mean', 'amax', 'amin'), with repeated indices, ties (amax/amin), zeros
(prod: one and two per position), NaN, and int64 inputs.

Layout of tools/fixture_lib.py's add: float32 inputs "<name>.<k>" (integer
ones as they are), the output "<name>.out" and the float64 gradients
"<name>.d<k>" of sum(out * "<name>.dout"). Indices are stored 1-based,
lunet's convention; dims in the cases' opts are lunet's (1-based).
"""
import warnings

import torch

from fixture_lib import add, cases, f32, tensors, write

warnings.filterwarnings("ignore")
torch.manual_seed(0)
REDUCES = ["sum", "prod", "mean", "amax", "amin"]


def sr(dim, red, incl):
    return lambda x, src, index: torch.scatter_reduce(x, dim, index - 1, src, red, include_self=incl)


def ir(dim, red, incl):
    return lambda x, src, index: x.index_reduce(dim, index - 1, src, red, include_self=incl)


# dim 1 of a 3x4 self from a 5x3 src (index 5x3 reaching rows 1..3, repeats)
idx = torch.tensor([[0, 1, 2], [0, 0, 1], [2, 1, 1], [0, 2, 0], [1, 1, 2]])
# dim 2 of a 3x5 self from a 2x4 src (index 2x4: self's last row, cols 4, 5 never hit)
idx2 = torch.tensor([[0, 2, 0, 1], [2, 2, 1, 2]])
for red in REDUCES:
    for incl in [True, False]:
        add(f"sr_{red}_{incl}_d1", "scatter_reduce", {"dim": 1, "reduce": red, "include_self": incl},
            sr(0, red, incl), {"x": f32(3, 4), "src": f32(5, 3), "index": idx + 1}, ["x", "src"])
        add(f"sr_{red}_{incl}_d2", "scatter_reduce", {"dim": 2, "reduce": red, "include_self": incl},
            sr(1, red, incl), {"x": f32(3, 5), "src": f32(2, 4), "index": idx2 + 1}, ["x", "src"])
        # ties (small integers as floats) and zeros (prod: single and double per position)
        tx = torch.randint(-2, 3, (3, 4)).float()
        ts = torch.randint(-2, 3, (5, 3)).float()
        add(f"sr_{red}_{incl}_ties", "scatter_reduce", {"dim": 1, "reduce": red, "include_self": incl},
            sr(0, red, incl), {"x": tx, "src": ts, "index": idx + 1}, ["x", "src"])
        # int64
        add(f"sr_{red}_{incl}_int", "scatter_reduce", {"dim": 1, "reduce": red, "include_self": incl},
            sr(0, red, incl), {"x": torch.randint(-9, 10, (3, 4)), "src": torch.randint(-9, 10, (5, 3)),
                               "index": idx + 1}, [])
# NaN: in src and in self (forward only)
for red in ["amax", "amin", "sum", "prod"]:
    x = f32(3, 4)
    x[1, 1] = float("nan")
    s = f32(5, 3)
    s[2, 0] = float("nan")
    add(f"sr_{red}_nan", "scatter_reduce", {"dim": 1, "reduce": red, "include_self": True},
        sr(0, red, True), {"x": x, "src": s, "index": idx + 1}, [])
# 3-d, dim 2; index smaller than src (forward only: torch 1.13's backward
# then gives src a gradient of index's shape, which its engine refuses)
idx3 = torch.randint(0, 4, (2, 3, 2))
for red in REDUCES:
    add(f"sr_{red}_3d", "scatter_reduce", {"dim": 2, "reduce": red, "include_self": True},
        sr(1, red, True), {"x": f32(2, 4, 3), "src": f32(2, 3, 2), "index": idx3 + 1}, ["x", "src"])
    add(f"sr_{red}_small", "scatter_reduce", {"dim": 2, "reduce": red, "include_self": True},
        sr(1, red, True), {"x": f32(2, 4, 3), "src": f32(3, 3, 2), "index": idx3 + 1}, [])

iidx = torch.tensor([0, 2, 0, 3, 2])
for red in ["prod", "mean", "amax", "amin"]:
    for incl in [True, False]:
        add(f"ir_{red}_{incl}_d1", "index_reduce", {"dim": 1, "reduce": red, "include_self": incl},
            ir(0, red, incl), {"x": f32(4, 3), "src": f32(5, 3), "index": iidx + 1}, ["x", "src"])
        add(f"ir_{red}_{incl}_d2", "index_reduce", {"dim": 2, "reduce": red, "include_self": incl},
            ir(1, red, incl), {"x": f32(3, 4), "src": f32(3, 5), "index": iidx + 1}, ["x", "src"])
        add(f"ir_{red}_{incl}_ties", "index_reduce", {"dim": 1, "reduce": red, "include_self": incl},
            ir(0, red, incl), {"x": torch.randint(-2, 3, (4, 3)).float(), "src": torch.randint(-2, 3, (5, 3)).float(),
                               "index": iidx + 1}, ["x", "src"])

write("scatter_reduce.safetensors", tensors, cases)
