"""Writes the JPEG folder bench/imagefolder.lua reads (not committed): N
images of about 500x375 (sizes vary a little, as a photo set), 10 classes,
smooth colour fields plus noise so they compress as photos do (quality 90).
Usage: /usr/bin/python3 bench/imagefolder_gen.py ROOT [N]"""
import os
import sys

import numpy as np
from PIL import Image

root = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
rng = np.random.default_rng(0)
for i in range(n):
    d = os.path.join(root, "class%02d" % (i % 10))
    os.makedirs(d, exist_ok=True)
    w, h = 500 + int(rng.integers(-20, 21)), 375 + int(rng.integers(-15, 16))
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    base = [np.sin(xx / rng.uniform(20, 80) + rng.uniform(0, 6)) * np.cos(yy / rng.uniform(20, 80)) for _ in range(3)]
    img = np.stack(base, -1) * 90 + 128 + rng.normal(0, 12, (h, w, 3))
    Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(os.path.join(d, "img%05d.jpg" % i), quality=90)
