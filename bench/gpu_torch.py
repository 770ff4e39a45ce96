"""bench/gpu_torch.py -- the PyTorch twin of bench/gpu.lua: the same figures
(launch, add_gbs, sgemm_tflops, h2d_gbs, d2h_gbs, mlp_b*_ips and peak memory)
measured the same way (best of N timed rounds after a warm-up, synchronized).
Usage: python3 bench/gpu_torch.py [--json FILE] [--device D] [--quick]"""
import argparse, json, math, sys, time

import torch

p = argparse.ArgumentParser()
p.add_argument('--json')
p.add_argument('--device', default='cuda:0')
p.add_argument('--quick', action='store_true')
a = p.parse_args()
dev, quick = torch.device(a.device), a.quick
res = {'device': a.device, 'torch': torch.__version__}


def write_json():
    if a.json:
        with open(a.json, 'w') as f:
            json.dump(res, f)
            f.write('\n')


if dev.type == 'cuda' and not torch.cuda.is_available():
    res.update(gpu=False, reason='torch.cuda.is_available() is False')
    print('bench/gpu_torch.py: no GPU')
    write_json()
    sys.exit(2)
torch.backends.cuda.matmul.allow_tf32 = False   # exact FP32, as lunet's default


def sync():
    if dev.type == 'cuda':
        torch.cuda.synchronize(dev)


def best(rounds, f):
    f(); sync()
    b = math.inf
    for _ in range(rounds):
        t0 = time.perf_counter()
        f(); sync()
        b = min(b, time.perf_counter() - t0)
    return b


x = torch.zeros(1, device=dev)
n = 200 if quick else 2000
def launches():
    for _ in range(n):
        x.add_(1)
res['launch_us'] = best(5, launches) / n * 1e6

n = 2 ** 20 if quick else 2 ** 26
A, B = torch.ones(n, device=dev), torch.ones(n, device=dev)
res['add_gbs'] = 3 * 4 * n / best(5, lambda: A + B) / 1e9
del A, B

n = 512 if quick else 4096
A, B = torch.randn(n, n, device=dev), torch.randn(n, n, device=dev)
res['sgemm_tflops'] = 2 * n ** 3 / best(2 if quick else 5, lambda: A @ B) / 1e12
del A, B

n = 2 ** 20 if quick else 2 ** 26
H = torch.ones(n)
D = H.to(dev)
res['h2d_gbs'] = 4 * n / best(3, lambda: H.to(dev)) / 1e9
res['d2h_gbs'] = 4 * n / best(3, lambda: D.to('cpu')) / 1e9


def mlp_ips(batch):
    torch.manual_seed(1)
    def param(r, c):
        return (torch.randn(r, c) / math.sqrt(r)).to(dev).requires_grad_()
    w1, b1 = param(784, 1024), torch.zeros(1024, device=dev, requires_grad=True)
    w2, b2 = param(1024, 1024), torch.zeros(1024, device=dev, requires_grad=True)
    w3, b3 = param(1024, 10), torch.zeros(10, device=dev, requires_grad=True)
    opt = torch.optim.SGD([w1, b1, w2, b2, w3, b3], lr=0.01, momentum=0.9)
    xb, yb = torch.randn(batch, 784).to(dev), torch.randn(batch, 10).to(dev)
    def step():
        opt.zero_grad()
        h = torch.tanh(xb @ w1 + b1)
        h = torch.tanh(h @ w2 + b2)
        loss = ((h @ w3 + b3 - yb) ** 2).mean()
        loss.backward()
        opt.step()
    steps = 3 if quick else 20
    def run():
        for _ in range(steps):
            step()
    return batch * steps / best(3, run)


for b in ([64] if quick else [64, 256, 1024]):
    if dev.type == 'cuda':
        torch.cuda.reset_peak_memory_stats(dev)
    res['mlp_b%d_ips' % b] = mlp_ips(b)
    if dev.type == 'cuda':
        res['mlp_b%d_peak_mb' % b] = torch.cuda.max_memory_allocated(dev) / 2 ** 20

import os
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_models  # noqa: E402  (the same models as bench/models.lua)


def cnn_ips(name, batch):
    torch.manual_seed(1)
    model = torch_models.build(name).to(dev)
    shape = {'seed32': (3, 32, 32), 'lenet5': (1, 28, 28)}[name]
    xb, yb = torch.randn(batch, *shape, device=dev), torch.randint(0, 10, (batch,), device=dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.001, momentum=0.9)
    crit = torch.nn.CrossEntropyLoss()
    def step():
        opt.zero_grad()
        crit(model(xb), yb).backward()
        opt.step()
    steps = 2 if quick else 10
    def run():
        for _ in range(steps):
            step()
    return batch * steps / best(3, run)


for name in ('seed32', 'lenet5'):
    for b in ([64] if quick else [1, 64, 256, 1024]):
        res['%s_b%d_ips' % (name, b)] = cnn_ips(name, b)

for k in sorted(res):
    v = res[k]
    print('%-22s %s' % (k, ('%.4g' % v) if isinstance(v, float) else v))
write_json()
