#!/usr/bin/python3
"""The bench models (bench/models.lua) in PyTorch, driven by bench/cpu.lua --torch.

Server mode (what bench/compare_torch uses):
  torch_models.py serve REPLY_PATH THREADS
reads commands on stdin, one a line, and writes one reply line per command to
REPLY_PATH (a FIFO the Lua side made and reads):
  setup KEY MODEL MODE BATCH TARGET_S  build, warm up, pick the steps of a window
                                       of about TARGET_S seconds -> "ok STEPS"
  run KEY                              one timed window -> "STEPS SECONDS"
  conv KEY C O H STRIDE BATCH TARGET_S setup of one 3x3 conv layer, forward +
                                       both gradients, as a window -> "ok STEPS"
  quit
MODE is train (SGD momentum 0.9 steps) or infer (eval, no_grad forward).
Other modes:
  torch_models.py rss MODEL BATCH STEPS   trains, prints peak RSS (KiB, VmHWM)
  torch_models.py import                  prints the seconds of `import torch`
"""
import sys
import time

if len(sys.argv) > 1 and sys.argv[1] == "import":
    t0 = time.perf_counter()
    import torch  # noqa: F401
    print("%.6f" % (time.perf_counter() - t0))
    sys.exit(0)

import torch
import torch.nn as nn

POOL = 1024  # images per model and case
INPUT = {"seed28": (1, 28, 28), "seed32": (3, 32, 32), "lenet5": (1, 28, 28), "resnet8": (3, 32, 32)}


class BasicBlock(nn.Module):
    def __init__(self, inp, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(inp, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = None
        if stride != 1 or inp != planes:
            self.shortcut = nn.Sequential(nn.Conv2d(inp, planes, 1, stride=stride, bias=False),
                                          nn.BatchNorm2d(planes))

    def forward(self, x):
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        res = self.shortcut(x) if self.shortcut is not None else x
        return torch.relu(out + res)


def build(name):
    if name == "seed28":
        return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                             nn.Linear(16 * 14 * 14, 10))
    if name == "seed32":
        return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                             nn.Linear(16 * 16 * 16, 10))
    if name == "lenet5":
        return nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                             nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))
    if name == "resnet8":
        return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                             BasicBlock(16, 16, 1), BasicBlock(16, 32, 2), BasicBlock(32, 64, 2),
                             nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))
    raise ValueError("unknown model " + name)


def make_step(name, mode, batch):
    torch.manual_seed(0)
    model = build(name)
    k = (POOL + batch - 1) // batch   # a pool of images taken in turn, as bench/cpu.lua
    xs = [torch.randn(batch, *INPUT[name]) for _ in range(k)]
    ys = [torch.randint(0, 10, (batch,)) for _ in range(k)]
    it = [0]
    if mode == "infer":
        model.eval()

        def step():
            with torch.no_grad():
                model(xs[it[0]])
            it[0] = (it[0] + 1) % k
        return step
    crit = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.001, momentum=0.9)  # as bench/cpu.lua

    def step():
        opt.zero_grad()
        loss = crit(model(xs[it[0]]), ys[it[0]])
        loss.backward()
        opt.step()
        it[0] = (it[0] + 1) % k
    return step


def make_conv(c, o, h, stride, batch):
    torch.manual_seed(0)
    conv = nn.Conv2d(c, o, 3, stride=stride, padding=1, bias=False)
    x = torch.randn(batch, c, h, h, requires_grad=True)
    oh = (h - 1) // stride + 1
    g = torch.randn(batch, o, oh, oh)

    def step():
        conv.weight.grad = None
        x.grad = None
        conv(x).backward(g)
    return step


def calibrate(step, target):
    for _ in range(3):
        step()
    t0 = time.perf_counter()
    n = 0
    while n < 2 or time.perf_counter() - t0 < target / 2:
        step()
        n += 1
    per = (time.perf_counter() - t0) / n
    return max(2, int(round(target / per)))


def serve(reply_path, threads):
    torch.set_num_threads(threads)
    out = open(reply_path, "w", buffering=1)
    steps = {}
    for line in sys.stdin:
        w = line.split()
        if not w:
            continue
        if w[0] == "quit":
            break
        if w[0] == "setup":
            key, name, mode, batch, target = w[1], w[2], w[3], int(w[4]), float(w[5])
            step = make_step(name, mode, batch)
            steps[key] = (step, calibrate(step, target))
            out.write("ok %d\n" % steps[key][1])
        elif w[0] == "conv":
            key = w[1]
            c, o, h, stride, batch, target = int(w[2]), int(w[3]), int(w[4]), int(w[5]), int(w[6]), float(w[7])
            step = make_conv(c, o, h, stride, batch)
            steps[key] = (step, calibrate(step, target))
            out.write("ok %d\n" % steps[key][1])
        elif w[0] == "run":
            step, n = steps[w[1]]
            t0 = time.perf_counter()
            for _ in range(n):
                step()
            out.write("%d %.9f\n" % (n, time.perf_counter() - t0))
        elif w[0] == "drop":
            steps.pop(w[1], None)
            out.write("ok\n")
        else:
            out.write("error unknown command %s\n" % w[0])


def rss(name, batch, nsteps, threads):
    torch.set_num_threads(threads)
    step = make_step(name, "train", batch)
    for _ in range(nsteps):
        step()
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                print(line.split()[1])


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1] == "rss":
        rss(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]) if len(sys.argv) > 5 else 2)
