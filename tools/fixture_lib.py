"""Shared by the tools/gen_*.py that write spec/fixtures/*.safetensors.

save: the safetensors format written by hand (Debian has no
python3-safetensors), the way the reference implementation lays it out:
8-byte little-endian header length, JSON header (json.dumps escapes
non-ASCII as \\uXXXX), header padded with spaces to a multiple of 8, then
the raw little-endian bytes, widest dtype first.

write: a fixture file "spec/fixtures/<filename>" whose metadata entry
"cases" is the JSON list of the cases and "torch" PyTorch's version.

add (with f32, tensors and cases): the layout of tools/gen_nn_fixtures.py:
for a case "<name>", float32 inputs "<name>.<k>", the output "<name>.out"
and the gradients "<name>.d<k>" of sum(out * <name>.dout), computed in
float64 from the same values; the case {name, op, opts} goes to cases.
"""
import json
import os
import struct

import torch

DTYPES = {
    torch.float32: "F32", torch.float64: "F64", torch.int32: "I32", torch.int64: "I64",
    torch.uint8: "U8", torch.bool: "BOOL", torch.float16: "F16", torch.bfloat16: "BF16",
}
HERE = os.path.dirname(os.path.abspath(__file__))


def tensor_bytes(t):
    t = t.contiguous()
    if t.dtype in (torch.float16, torch.bfloat16):
        return t.view(torch.int16).numpy().tobytes()
    return t.numpy().tobytes()


def save(path, tensors, metadata):
    order = sorted(tensors, key=lambda k: (-tensors[k].element_size(), k))
    header, blobs, off = {"__metadata__": metadata}, [], 0
    for name in order:
        t = tensors[name]
        b = tensor_bytes(t)
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def write(filename, tensors, cases):
    out = os.path.join(HERE, "..", "spec", "fixtures", filename)
    save(out, tensors, {"cases": json.dumps(cases), "torch": torch.__version__})
    print(f"wrote {out}: {len(cases)} cases, {len(tensors)} tensors, {os.path.getsize(out)} bytes")


tensors, cases = {}, []


def f32(*shape, scale=1.0):
    return (torch.randn(tuple(shape)) * scale).float()


def add(name, op, opts, fn, inputs, grads, extra=None):
    """inputs: dict of float32 tensors (those in grads get gradients);
    fn(**float64 inputs) -> output tensor."""
    for k, v in inputs.items():
        tensors[f"{name}.{k}"] = v
    d = {k: (v.double().requires_grad_(k in grads) if v.dtype == torch.float32 else v)
         for k, v in inputs.items()}
    out = fn(**d)
    dout = f32(*out.shape)
    tensors[f"{name}.out"] = out.detach()
    tensors[f"{name}.dout"] = dout
    if grads:
        gs = torch.autograd.grad(out, [d[k] for k in grads], dout.double(), allow_unused=True)
        for k, g in zip(grads, gs):
            tensors[f"{name}.d{k}"] = g if g is not None else torch.zeros_like(d[k])
    for k, v in (extra or {}).items():
        tensors[f"{name}.{k}"] = v
    cases.append({"name": name, "op": op, "opts": opts})
