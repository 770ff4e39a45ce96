"""Writes spec/fixtures/images/* (small JPEGs and PNGs of every kind
lunet.data.read_image decodes) and spec/fixtures/image_decode.safetensors:
torchvision 0.14's io.read_image(path, mode) of each (where it decodes it)
and PIL's Image.open(p).convert('RGB'), as uint8 (C, H, W). The PNGs are
written by hand (PIL writes neither 2/4-bit gray nor interlaced PNGs).
Also the ImageFolder case: a tree layout, and torchvision's classes,
class_to_idx and samples of it. Run: /usr/bin/python3 tools/gen_image_fixtures.py
"""
import json
import os
import shutil
import struct
import sys
import tempfile
import zlib

import numpy as np
import torch
from PIL import Image
import torchvision
from torchvision.io import read_image, ImageReadMode
from torchvision.datasets import ImageFolder

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib  # noqa: E402

OUT = os.path.join(fixture_lib.HERE, "..", "spec", "fixtures", "images")
rng = np.random.RandomState(7)
H, W = 13, 17


def picture(c, maxv=255):
    y, x = np.mgrid[0:H, 0:W]
    planes = [(x * 15 + y * 3 + 40 * k) % 256 for k in range(c)]
    a = np.stack(planes, -1).astype(np.float64) / 255 * maxv
    a = a + rng.randint(0, max(maxv // 16, 2), a.shape)
    return np.clip(a, 0, maxv).astype(np.int64)


# ---- PNG by hand -----------------------------------------------------------
def chunk(kind, data):
    c = kind + data
    return struct.pack(">I", len(data)) + c + struct.pack(">I", zlib.crc32(c) & 0xffffffff)


def pack_rows(a, depth):
    """a: (h, w, c) ints -> filter-0 rows of bytes."""
    h, w, c = a.shape
    out = b""
    for y in range(h):
        vals = a[y].reshape(-1)
        if depth == 16:
            row = b"".join(struct.pack(">H", int(v)) for v in vals)
        elif depth == 8:
            row = bytes(int(v) for v in vals)
        else:
            bits, per = "", 8 // depth
            for v in vals:
                bits += format(int(v), "0%db" % depth)
            bits += "0" * (-len(bits) % 8)
            row = bytes(int(bits[i:i + 8], 2) for i in range(0, len(bits), 8))
        out += b"\x00" + row
    return out


ADAM7 = [(0, 0, 8, 8), (0, 4, 8, 8), (4, 0, 8, 4), (0, 2, 4, 4), (2, 0, 4, 2), (0, 1, 2, 2), (1, 0, 2, 1)]


def png(name, a, ctype, depth, palette=None, trns=None, interlace=False):
    h, w, _ = a.shape
    ihdr = struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0, 1 if interlace else 0)
    if interlace:
        raw = b""
        for (y0, x0, dy, dx) in ADAM7:
            sub = a[y0::dy, x0::dx]
            if sub.size:
                raw += pack_rows(sub, depth)
    else:
        raw = pack_rows(a, depth)
    data = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr)
    if palette is not None:
        data += chunk(b"PLTE", bytes(int(v) for v in palette.reshape(-1)))
    if trns is not None:
        data += chunk(b"tRNS", trns)
    data += chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)


def main():
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        os.remove(os.path.join(OUT, f))
    rgb8 = picture(3)
    png("gray8.png", picture(1), 0, 8)
    png("gray1.png", picture(1, 1), 0, 1)
    png("gray2.png", picture(1, 3), 0, 2)
    png("gray4.png", picture(1, 15), 0, 4)
    png("gray16.png", picture(1, 65535), 0, 16)
    png("gray_alpha.png", picture(2), 4, 8)
    png("gray_alpha16.png", picture(2, 65535), 4, 16)
    png("rgb.png", rgb8, 2, 8)
    png("rgb16.png", picture(3, 65535), 2, 16)
    png("rgba.png", picture(4), 6, 8)
    png("rgba16.png", picture(4, 65535), 6, 16)
    png("rgb_interlaced.png", rgb8, 2, 8, interlace=True)
    png("gray2_interlaced.png", picture(1, 3), 0, 2, interlace=True)
    pal = rng.randint(0, 256, (16, 3))
    png("palette4.png", picture(1, 15), 3, 4, palette=pal)
    png("palette8_trns.png", picture(1, 15), 3, 8, palette=pal, trns=bytes(range(0, 256, 32)))
    img = Image.fromarray(rgb8.astype(np.uint8))
    img.save(os.path.join(OUT, "baseline.jpg"), quality=90)
    img.save(os.path.join(OUT, "baseline444.jpg"), quality=90, subsampling=0)
    img.save(os.path.join(OUT, "progressive.jpg"), quality=85, progressive=True)
    img.convert("L").save(os.path.join(OUT, "gray.jpg"), quality=90)
    img.convert("CMYK").save(os.path.join(OUT, "cmyk.jpg"), quality=90)
    big = Image.fromarray(picture(3).astype(np.uint8)).resize((40, 30))
    big.save(os.path.join(OUT, "wide.JPEG"), quality=90)   # (an upper-case extension)
    Image.fromarray(picture(3).astype(np.uint8)).resize((11, 21)).save(os.path.join(OUT, "tall.png"))

    tensors, cases = {}, []
    modes = {"UNCHANGED": ImageReadMode.UNCHANGED, "GRAY": ImageReadMode.GRAY,
             "GRAY_ALPHA": ImageReadMode.GRAY_ALPHA, "RGB": ImageReadMode.RGB,
             "RGB_ALPHA": ImageReadMode.RGB_ALPHA}
    for fname in sorted(os.listdir(OUT)):
        path = os.path.join(OUT, fname)
        for mname, m in modes.items():
            key = f"{fname}.{mname}"
            try:
                t = read_image(path, m)
            except Exception as e:  # torchvision refuses it: the spec checks lunet's own rule
                cases.append({"file": fname, "mode": mname, "torchvision_error": str(e)})
                continue
            tensors[key] = t.contiguous()
            cases.append({"file": fname, "mode": mname, "ref": key})
        if "16" in fname:   # 16 bits: the high byte (lunet's rule; torchvision refuses them)
            hi = torch.from_numpy(np.array(Image.open(path)).astype(np.int64) >> 8) if fname == "gray16.png" else None
            if hi is not None:
                tensors[f"{fname}.HIGH"] = hi.to(torch.uint8).unsqueeze(0).contiguous()
                cases.append({"file": fname, "mode": "UNCHANGED", "ref": f"{fname}.HIGH"})
        try:
            if fname == "gray16.png":
                raise ValueError("PIL clips 16-bit gray at 255 instead of scaling it")
            p = torch.from_numpy(np.array(Image.open(path).convert("RGB"))).permute(2, 0, 1).contiguous()
            tensors[f"{fname}.PIL"] = p
            cases.append({"file": fname, "mode": "RGB", "ref": f"{fname}.PIL", "pil": True})
        except Exception as e:
            cases.append({"file": fname, "pil_error": str(e)})

    # ImageFolder: a tree (file -> fixture image it copies; a trailing / is a folder,
    # "->" a symlink) and torchvision's view of it
    tree = ["cat/b.png=rgb.png", "cat/a.JPG=baseline.jpg", "cat/notes.txt=rgb.png",
            "cat/sub/z.png=tall.png", "cat/sub-x/y.jpeg=gray.jpg", "cat/sub/deeper/q.png=gray2.png", "cat/.hidden.png=rgba.png",
            "Dog/1.png=gray8.png", "Dog/10.png=palette4.png", "Dog/2.PNG=rgba.png",
            "bird/w.jpg=wide.JPEG", "bird/x.bmp=rgb.png", "emptyish/",
            "link->cat"]
    tmp = tempfile.mkdtemp()
    try:
        for entry in tree:
            if "->" in entry:
                a, b = entry.split("->")
                os.symlink(b, os.path.join(tmp, a))
                continue
            if entry.endswith("/"):
                os.makedirs(os.path.join(tmp, entry), exist_ok=True)
                continue
            rel, src = entry.split("=")
            os.makedirs(os.path.dirname(os.path.join(tmp, rel)), exist_ok=True)
            shutil.copy(os.path.join(OUT, src), os.path.join(tmp, rel))
        try:
            ImageFolder(tmp)
            raise SystemExit("expected the empty class error")
        except FileNotFoundError as e:
            empty_error = str(e)
        os.rmdir(os.path.join(tmp, "emptyish"))
        ds = ImageFolder(tmp)
        folder = {"tree": [t for t in tree if t != "emptyish/"], "empty_error": empty_error,
                  "classes": ds.classes, "class_to_idx": ds.class_to_idx,
                  "samples": [[os.path.relpath(p, tmp), t] for p, t in ds.samples]}
        # a batch through Resize(12) + CenterCrop(10) + Normalize on torchvision's
        # tensor path (antialias off for tensors in 0.14, as lunet's Resize)
        import torchvision.transforms as T
        tf = T.Compose([T.ConvertImageDtype(torch.float32), T.Resize(12), T.CenterCrop(10),
                        T.Normalize([0.5, 0.4, 0.3], [0.2, 0.25, 0.3])])
        ds = ImageFolder(tmp, loader=lambda p: read_image(p, ImageReadMode.RGB), transform=tf)
        xs = torch.stack([ds[i][0] for i in range(len(ds))])
        tensors["folder.batch"] = xs
    finally:
        shutil.rmtree(tmp)
    fixture_lib.save(os.path.join(fixture_lib.HERE, "..", "spec", "fixtures", "image_decode.safetensors"),
                     tensors, {"cases": json.dumps(cases), "folder": json.dumps(folder),
                               "torch": torch.__version__, "torchvision": torchvision.__version__})
    total = sum(os.path.getsize(os.path.join(OUT, f)) for f in os.listdir(OUT))
    print(f"wrote {len(os.listdir(OUT))} images ({total} bytes), {len(cases)} cases, {len(tensors)} tensors")


if __name__ == "__main__":
    main()
