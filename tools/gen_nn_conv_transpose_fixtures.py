#!/usr/bin/python3
"""Writes spec/fixtures/nn_conv_transpose.safetensors with PyTorch, for
spec/nn_conv_transpose_spec.lua: forward outputs and gradients of
torch.nn.functional.conv_transpose2d over several geometries (stride,
padding, output_padding, non-square kernels, groups, dilation, no bias,
batch 1 and 3).

As tools/gen_nn_fixtures.py: for every case "<name>", the inputs
"<name>.x", "<name>.w", "<name>.b" are float32 values; the output
"<name>.out" and the gradients "<name>.dx", "<name>.dw", "<name>.db" of
sum(out * <name>.dout) are computed in float64 from those same values. The
metadata entry "cases" is a JSON list of {name, op, opts}. Written with
tools/fixture_lib.py (its add and save).
Run:  /usr/bin/python3 tools/gen_nn_conv_transpose_fixtures.py
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as g  # noqa: E402

f32, add = g.f32, g.add


def conv_transpose_cases():
    # N, C (in_channels), H, W, O (out_channels), k; then the options
    specs = [
        ("ct_basic", dict(N=2, C=3, H=5, W=4, O=4, k=(3, 3)), dict()),
        ("ct_stride2_pad_outpad", dict(N=3, C=4, H=4, W=5, O=2, k=(3, 3)),
         dict(stride=2, padding=1, output_padding=1)),
        ("ct_nonsquare", dict(N=1, C=2, H=5, W=6, O=3, k=(2, 4)),
         dict(stride=[2, 1], padding=[0, 1], output_padding=[1, 0])),
        ("ct_groups2", dict(N=2, C=4, H=4, W=4, O=6, k=(3, 3)), dict(stride=2, padding=1, groups=2)),
        ("ct_dilation2_nobias", dict(N=1, C=3, H=5, W=5, O=2, k=(3, 3)), dict(padding=2, dilation=2, bias=False)),
        # output_padding >= stride, allowed below the dilation: rows/columns the input never reaches
        ("ct_outpad_dilation", dict(N=2, C=2, H=4, W=3, O=3, k=(2, 3)),
         dict(stride=[1, 2], dilation=[3, 2], output_padding=[2, 1])),
        ("ct_all", dict(N=3, C=4, H=3, W=4, O=2, k=(3, 2)),
         dict(stride=[2, 3], padding=[1, 2], output_padding=[1, 2], groups=2, dilation=[2, 1])),
        ("ct_1x1_stride", dict(N=2, C=5, H=3, W=4, O=3, k=(1, 1)), dict(stride=2, output_padding=1)),
        ("ct_16ch", dict(N=2, C=16, H=6, W=5, O=16, k=(3, 3)), dict(stride=2, padding=1, output_padding=1)),
        ("ct_depthwise_nobias", dict(N=1, C=3, H=4, W=4, O=3, k=(4, 4)),
         dict(stride=2, padding=1, groups=3, bias=False)),
    ]
    for name, s, o in specs:
        g = o.get("groups", 1)
        inputs = {"x": f32(s["N"], s["C"], s["H"], s["W"]), "w": f32(s["C"], s["O"] // g, *s["k"], scale=0.3)}
        if o.get("bias", True):
            inputs["b"] = f32(s["O"])

        def fn(x, w, b=None, o=o):
            return F.conv_transpose2d(x, w, b, stride=o.get("stride", 1), padding=o.get("padding", 0),
                                      output_padding=o.get("output_padding", 0), groups=o.get("groups", 1),
                                      dilation=o.get("dilation", 1))
        opts = dict(o)
        opts.update(cin=s["C"], cout=s["O"], k=list(s["k"]))
        add(name, "conv_transpose2d", opts, fn, inputs, list(inputs))


def main():
    torch.manual_seed(0)
    conv_transpose_cases()
    g.write("nn_conv_transpose.safetensors", g.tensors, g.cases)


if __name__ == "__main__":
    main()
