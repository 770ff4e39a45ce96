"""bench/dwconv_torch.py -- the PyTorch 1.13 twin of bench/dwconv.lua (which
runs it): forward (no grad), input-gradient and weight-gradient times (the backward,
retain_graph, of an output whose input or weight alone requires grad) of F.conv2d, float32 NCHW, no bias.
Usage: python3 bench/dwconv_torch.py THREADS RUNS BATCH JSON
JSON: [[name, C, H, k, stride, padding, groups], ...]; prints name pass\tms."""
import json, sys, time

import torch
import torch.nn.functional as F

threads, runs, N = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(threads)


def med(f):   # the best of runs (after a warm-up): the machine may be shared
    f()
    t = []
    for _ in range(runs):
        t0 = time.perf_counter()
        f()
        t.append((time.perf_counter() - t0) * 1e3)
    return min(t)


def run(report):
    for name, C, H, k, s, p, g in json.loads(sys.argv[4]):
        x = torch.randn(N, C, H, H)
        w = torch.randn(C, C // g, k, k)
        o = dict(stride=s, padding=p, groups=g)
        xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()
        gd = torch.randn(F.conv2d(x, w, **o).shape)
        ox, ow = F.conv2d(xg, w, **o), F.conv2d(x, wg, **o)

        def fwd():
            with torch.no_grad():
                F.conv2d(x, w, **o)

        def dx():
            xg.grad = None
            ox.backward(gd, retain_graph=True)

        def dw():
            wg.grad = None
            ow.backward(gd, retain_graph=True)

        for pass_, f in (('fwd', fwd), ('dx', dx), ('dw', dw)):
            t = med(f)
            if report:
                print('%s %s\t%.4f' % (name, pass_, t))
        sys.stdout.flush()


run(False)   # the first pass over the cases warms up (its first calls ran 10-20x slower)
run(True)
