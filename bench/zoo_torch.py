#!/usr/bin/python3
"""The torch 1.13 / torchvision 0.14 side of bench/zoo.lua: a server fed on
stdin, one command a line, one reply line each to REPLY_PATH (a FIFO the Lua
side made and reads):
  bench MODEL MODE BATCH SIZE THREADS WARMUP RUNS  -> "ok BEST_SECONDS"
  quit
  /usr/bin/python3 bench/zoo_torch.py profile MODEL MODE THREADS
prints torch.profiler's ops of 3 steps (after 2), by self CPU time (the
counterpart of bench/zoo_profile.lua).
MODE is train (forward, cross-entropy, backward, SGD momentum 0.9 step, in
train mode) or eval (eval mode, forward under no_grad). num_classes 10;
googlenet without its aux heads (lunet's bench builds it the same way).
  /usr/bin/python3 bench/zoo_torch.py serve REPLY_PATH
"""
import sys
import time

import torch
import torchvision

EXTRA = {"googlenet": {"aux_logits": False, "init_weights": True},
         "inception_v3": {"aux_logits": False, "init_weights": True}}


def make_step(name, mode, batch, size):
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(num_classes=10, **EXTRA.get(name, {}))
    x = torch.randn(batch, 3, size, size)
    if mode == "eval":
        model.eval()

        def step():
            with torch.no_grad():
                model(x)
        return step
    model.train()
    y = torch.randint(0, 10, (batch,))
    crit = torch.nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.001, momentum=0.9)

    def step():
        opt.zero_grad()
        crit(model(x), y).backward()
        opt.step()
    return step


def bench(step, warmup, runs):
    for _ in range(warmup):
        step()
    best = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        step()
        best = min(best, time.perf_counter() - t0)
    return best


def serve(reply_path):
    out = open(reply_path, "w", buffering=1)
    for line in sys.stdin:
        w = line.split()
        if not w:
            continue
        if w[0] == "quit":
            break
        try:
            if w[0] != "bench":
                raise ValueError("unknown command " + w[0])
            name, mode, batch, size, threads, warmup, runs = w[1], w[2], int(w[3]), int(w[4]), int(w[5]), int(w[6]), int(w[7])
            torch.set_num_threads(threads)
            step = make_step(name, mode, batch, size)
            out.write("ok %.9f\n" % bench(step, warmup, runs))
            del step
        except Exception as e:  # the Lua side reports it and goes on
            out.write("error %s\n" % str(e).replace("\n", " "))


def profile(name, mode, threads):
    torch.set_num_threads(threads)
    batch, size = (32, 64) if mode == "train" else (8, 224)
    step = make_step(name, mode, batch, size)
    step(); step()
    with torch.profiler.profile() as prof:
        for _ in range(3):
            step()
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))


if __name__ == "__main__":
    if sys.argv[1] == "profile":
        profile(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        serve(sys.argv[2])
