# The torch 1.13 side of bench/imagefolder.lua: torchvision 0.14's
# ImageFolder (PIL loader) through RandomResizedCrop(224),
# RandomHorizontalFlip, ToTensor, Normalize in a DataLoader at batch 64, for
# each worker count: seconds to make the loader and run one epoch (at most
# BATCHES batches). Prints "workers seconds images" lines.
#   /usr/bin/python3 bench/imagefolder_torch.py ROOT WORKERS,... BATCHES
import sys, time
import torch, torchvision
import torchvision.transforms as T

root, workers, batches = sys.argv[1], [int(w) for w in sys.argv[2].split(',')], int(sys.argv[3])
torch.set_num_threads(1)   # (one thread a worker, as lunet's; workers 0: the main process alone)
tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
                T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
ds = torchvision.datasets.ImageFolder(root, transform=tf)
for w in workers:
    t0 = time.perf_counter()
    loader = torch.utils.data.DataLoader(ds, batch_size=64, shuffle=True, num_workers=w)
    n = 0
    for b, (x, y) in enumerate(loader):
        n += x.shape[0]
        if b + 1 >= batches:
            break
    dt = time.perf_counter() - t0
    del loader
    print(w, dt, n)
    sys.stdout.flush()
