#!/usr/bin/python3
"""PyTorch 1.13 beside bench/bf16.lua: one training step's time.

  bf16_torch.py MODEL THREADS MODE WINDOW_S
MODEL: resnet8 (bench/torch_models.py's, batch 64) or linear (Linear(2048,
2048), batch 256, loss = mean of squares); MODE: highest, medium
(torch.set_float32_matmul_precision('medium')) or autocast (forward under
torch.autocast('cpu', dtype=torch.bfloat16)). Prints the median seconds per
step of 3 windows of about WINDOW_S seconds, after warm-up.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
from torch_models import build, calibrate  # noqa: E402


def make(name, mode):
    torch.manual_seed(0)
    if name == "resnet8":
        model, crit = build("resnet8"), nn.CrossEntropyLoss()
        xs = [torch.randn(64, 3, 32, 32) for _ in range(4)]
        ys = [torch.randint(0, 10, (64,)) for _ in range(4)]
    else:
        model = nn.Linear(2048, 2048)
        crit = None
        xs = [torch.randn(256, 2048) for _ in range(4)]
        ys = [None] * 4
    opt = torch.optim.SGD(model.parameters(), lr=0.001, momentum=0.9)
    it = [0]

    def loss_of(x, y):
        out = model(x)
        return crit(out, y) if crit else out.float().square().mean()

    def step():
        opt.zero_grad()
        x, y = xs[it[0]], ys[it[0]]
        if mode == "autocast":
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = loss_of(x, y)
        else:
            loss = loss_of(x, y)
        loss.backward()
        opt.step()
        it[0] = (it[0] + 1) % 4
    return step


def main():
    name, threads, mode, window = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
    torch.set_num_threads(threads)
    torch.set_float32_matmul_precision("medium" if mode == "medium" else "highest")
    step = make(name, mode)
    n = calibrate(step, window)
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(n):
            step()
        times.append((time.perf_counter() - t0) / n)
    print("%.6f" % sorted(times)[1])


main()
