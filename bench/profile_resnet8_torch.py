"""bench/profile_resnet8_torch.py MODE BATCH [THREADS]: PyTorch's per-op
breakdown of ResNet-8 (torch.autograd.profiler over 10 steps after 5 warm-up
steps), the counterpart of bench/profile_resnet8.lua. MODE: train | infer.
Run from the repository root: /usr/bin/python3 bench/profile_resnet8_torch.py train 64 1"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_models as tm  # noqa: E402

mode, batch = sys.argv[1], int(sys.argv[2])
torch.set_num_threads(int(sys.argv[3]) if len(sys.argv) > 3 else 1)
step = tm.make_step("resnet8", mode, batch)
for _ in range(5):
    step()
with torch.autograd.profiler.profile() as prof:
    for _ in range(10):
        step()
print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=18))
