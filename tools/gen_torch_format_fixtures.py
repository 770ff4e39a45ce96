"""Writes spec/fixtures/torch_*.pt with torch 1.13's torch.save, for
spec/torch_format_spec.lua (lunet reading PyTorch's own checkpoints), and
spec/fixtures/torch_format.safetensors: the tensors they must load as
("<file>.<key>", contiguous copies) and, in its "cases", what else to expect.

Files: a small conv net's state_dict; views sharing one storage (rows,
columns, a transpose, a narrow, offsets); every lunet dtype, 0-d and empty;
a nested checkpoint (ints, floats, strings, lists, tuples, None, an
optimizer state_dict); protocol 4 (MEMOIZE, FRAME); and the bad ones: a
forbidden global (os.system), the legacy format, int8, a DEFLATE-compressed
entry, a storage entry of the wrong size.
"""
import collections
import io
import os
import zipfile

import torch

import fixture_lib

OUT = os.path.join(fixture_lib.HERE, "..", "spec", "fixtures")
torch.manual_seed(0)
expect, cases = {}, []


def save(name, obj, **kw):
    path = os.path.join(OUT, name + ".pt")
    torch.save(obj, path, **kw)
    print(f"wrote {path}: {os.path.getsize(path)} bytes")
    return path


def keep(prefix, sd):
    for k, v in sd.items():
        expect[f"{prefix}.{k}"] = v.detach().clone().contiguous()


# a small conv net (Conv2d, BatchNorm2d with num_batches_tracked, Linear)
net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
                          torch.nn.Flatten(), torch.nn.Linear(4 * 2 * 2, 5))
net(torch.randn(2, 3, 4, 4))   # running stats move
save("torch_convnet", net.state_dict())
keep("convnet", net.state_dict())
cases.append({"file": "torch_convnet", "keys": sorted(net.state_dict())})

# views of one storage, and a non-contiguous tensor saved alone
base = torch.arange(24, dtype=torch.float32).view(4, 6)
views = {"base": base, "row": base[1], "col": base[:, 2], "t": base.t(), "narrow": base[1:3, 2:5],
         "step": base.view(-1)[1::5], "alone": torch.randn(3, 4).t()}
save("torch_views", views)
keep("views", views)
cases.append({"file": "torch_views", "keys": sorted(views), "shared": ["base", "row", "col", "t", "narrow", "step"]})

# every lunet dtype, 0-d and empty
dtypes = {"f32": torch.randn(2, 3), "f64": torch.randn(3, dtype=torch.float64),
          "f16": torch.randn(2, 2).half(), "bf16": torch.randn(2, 2).bfloat16(),
          "i64": torch.tensor([-(2 ** 40), 7]), "i32": torch.tensor([-5, 2 ** 31 - 1], dtype=torch.int32),
          "u8": torch.tensor([0, 200, 255], dtype=torch.uint8), "bool": torch.tensor([True, False, True]),
          "scalar": torch.tensor(2.5), "empty": torch.zeros(0, 3)}
save("torch_dtypes", dtypes)
keep("dtypes", dtypes)
cases.append({"file": "torch_dtypes", "keys": sorted(dtypes)})

# a nested checkpoint: model, epoch, optimizer state
lin = torch.nn.Linear(2, 3)
opt = torch.optim.Adam(lin.parameters(), lr=0.1)
lin(torch.randn(4, 2)).sum().backward()
opt.step()
ckpt = {"model": lin.state_dict(), "epoch": 3, "lr": 0.125, "name": "run-1", "flags": [True, False],
        "sizes": (1, 2, 3), "none": None, "big": 2 ** 40, "neg": -5, "huge": -(2 ** 62),
        "optimizer": opt.state_dict()}
save("torch_nested", ckpt)
keep("nested.model", lin.state_dict())
expect["nested.exp_avg"] = opt.state_dict()["state"][0]["exp_avg"].clone()
cases.append({"file": "torch_nested"})

# pickle protocol 4 (MEMOIZE, FRAME, SHORT_BINUNICODE)
p4 = {"a": torch.arange(5), "b": torch.ones(2, 2), "name": "p4"}
save("torch_proto4", p4, pickle_protocol=4)
keep("proto4", {"a": p4["a"], "b": p4["b"]})
cases.append({"file": "torch_proto4"})


class Evil:
    def __reduce__(self):
        return (os.system, ("true",))


save("torch_evil", {"w": torch.ones(1), "x": Evil()})
save("torch_legacy", {"w": torch.ones(2)}, _use_new_zipfile_serialization=False)
save("torch_int8", {"w": torch.tensor([1, -2], dtype=torch.int8)})


def rezip(src, dst, fn):
    """dst: src's entries through fn(info, bytes) -> (bytes, compress_type)"""
    with zipfile.ZipFile(src) as zi, zipfile.ZipFile(dst, "w") as zo:
        for info in zi.infolist():
            data, ct = fn(info, zi.read(info.filename))
            zo.writestr(info.filename, data, compress_type=ct)
    print(f"wrote {dst}: {os.path.getsize(dst)} bytes")


small = save("torch_small", {"w": torch.arange(6.0)})
rezip(small, os.path.join(OUT, "torch_deflate.pt"), lambda i, d: (d, zipfile.ZIP_DEFLATED))
rezip(small, os.path.join(OUT, "torch_badsize.pt"),
      lambda i, d: (d[:-4] if i.filename.endswith("data/0") else d, zipfile.ZIP_STORED))
assert torch.load(os.path.join(OUT, "torch_deflate.pt"))["w"].sum() == 15  # torch reads it


def zip64ify(src, dst):
    """dst: src with a ZIP64 central directory (every size and offset in the
    zip64 extra field, a zip64 end record): as a file over 4 GiB has them"""
    import struct
    raw = open(src, "rb").read()
    with zipfile.ZipFile(src) as z:
        infos = z.infolist()
    cd_off = min(raw.find(b"PK\1\2"), len(raw))
    cd = b""
    for i in infos:
        name = i.filename.encode()
        extra = struct.pack("<HHQQQ", 1, 24, i.file_size, i.compress_size, i.header_offset)
        cd += struct.pack("<4sHHHHHHIIIHHHHHII", b"PK\1\2", 45, 45, 0, 0, 0, 0x21, i.CRC,
                          0xFFFFFFFF, 0xFFFFFFFF, len(name), len(extra), 0, 0, 0, 0, 0xFFFFFFFF) + name + extra
    z64 = cd_off + len(cd)
    tail = struct.pack("<4sQHHIIQQQQ", b"PK\6\6", 44, 45, 45, 0, 0, len(infos), len(infos), len(cd), cd_off)
    tail += struct.pack("<4sIQI", b"PK\6\7", 0, z64, 1)
    tail += struct.pack("<4sHHHHIIH", b"PK\5\6", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    open(dst, "wb").write(raw[:cd_off] + cd + tail)
    print(f"wrote {dst}: {os.path.getsize(dst)} bytes")


zip64ify(small, os.path.join(OUT, "torch_zip64.pt"))
assert torch.load(os.path.join(OUT, "torch_zip64.pt"))["w"].sum() == 15  # torch reads it

fixture_lib.write("torch_format.safetensors", expect, cases)
