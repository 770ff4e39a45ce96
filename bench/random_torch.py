# The torch 1.13 side of bench/random.lua: best seconds of uniform_, normal_,
# bernoulli_(0.5) on n float32, and of torchvision's vgg16() / resnet50()
# construction, at the given thread count. Prints "name seconds" lines.
#   /usr/bin/python3 bench/random_torch.py N THREADS RUNS
import sys, time
import torch, torchvision

n, threads, runs = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(threads)
torch.manual_seed(0)


def best(f):
    f()
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter(); f(); ts.append(time.perf_counter() - t0)
    return min(ts)


x = torch.empty(n)
print('uniform_', best(lambda: x.uniform_()))
print('normal_', best(lambda: x.normal_()))
print('bernoulli_', best(lambda: x.bernoulli_(0.5)))
del x
print('vgg16', best(lambda: torchvision.models.vgg16()))
print('resnet50', best(lambda: torchvision.models.resnet50()))
sys.stdout.flush()
