# bench/activations_torch.py: PyTorch 1.13's side of bench/activations.lua
# (run by it): argv threads, runs, JSON list of [name, numel]; prints a JSON
# object {"name numel fwd": ms, "name numel bwd": ms} of medians.
import sys, time, json, torch, torch.nn.functional as F
threads, runs = int(sys.argv[1]), int(sys.argv[2])
torch.set_num_threads(threads)
torch.manual_seed(0)
ACTS = {
    'exp': torch.exp, 'sigmoid': torch.sigmoid, 'tanh': torch.tanh, 'silu': F.silu,
    'gelu': F.gelu, 'gelu_tanh': lambda x: F.gelu(x, approximate='tanh'), 'mish': F.mish,
    'softplus': F.softplus, 'elu': F.elu, 'hardswish': F.hardswish, 'hardsigmoid': F.hardsigmoid,
}
def med(f):
    f(); t = []
    for _ in range(runs):
        t0 = time.perf_counter(); f(); t.append((time.perf_counter() - t0) * 1e3)
    t.sort(); n = len(t)
    return t[n // 2] if n % 2 else (t[n // 2 - 1] + t[n // 2]) / 2
r = {}
for name, n in json.loads(sys.argv[3]):
    f = ACTS[name]
    x = torch.randn(n) * 3
    xg = x.clone().requires_grad_()
    g = torch.randn(n)
    def fwd():
        with torch.no_grad(): f(x)
    def both():
        xg.grad = None
        f(xg).backward(g)
    k = '%s %d ' % (name, n)
    r[k + 'fwd'] = med(fwd); r[k + 'fwd+bwd'] = med(both)
print(json.dumps(r))
