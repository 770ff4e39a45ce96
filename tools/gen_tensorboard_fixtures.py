"""Event files from torch 1.13's SummaryWriter for spec/tensorboard_spec.lua.

Needs the tensorboard package (not in Debian): make a throwaway venv,
    /usr/bin/python3 -m venv --system-site-packages /tmp/tbvenv
    /tmp/tbvenv/bin/pip install tensorboard==2.11.0 'protobuf<4'
    /tmp/tbvenv/bin/python tools/gen_tensorboard_fixtures.py
time.time is replaced by a constant, so every wall time (the file_version
event's, the default hparams run name) is FIXED_TIME; the spec gives lunet's
writer the same clock. Each case runs its calls on a fresh SummaryWriter in
its own log dir; every file it writes is stored as a uint8 tensor
"<case>|<path>" (the path relative to the log dir, the file name cut after
"events.out.tfevents"), and the decoded pixels of each image as
"<case>.pixels<i>". Arguments: "@name" is the tensor "<case>.name"; a
{"float": "nan"|"inf"|"-inf"} is that number.

    /tmp/tbvenv/bin/python tools/gen_tensorboard_fixtures.py --check LOGDIR
reads the event files lunet wrote under LOGDIR (examples/tensorboard.lua)
with tensorboard's EventAccumulator and prints what it found.
"""
import io
import math
import os
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib  # noqa: E402

FIXED_TIME = 1700000000.25


def check(logdir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    runs = sorted({os.path.relpath(d, logdir) for d, _, fs in os.walk(logdir)
                   if any(f.startswith("events.out.tfevents") for f in fs)})
    for run in runs:
        ea = EventAccumulator(os.path.join(logdir, run), size_guidance={"images": 0, "histograms": 0, "tensors": 0})
        ea.Reload()
        tags = ea.Tags()
        print(f"run {run}:")
        for t in tags["scalars"]:
            print(f"  scalar {t}: {[(e.step, round(e.value, 6)) for e in ea.Scalars(t)]}")
        for t in tags["histograms"]:
            h = ea.Histograms(t)[-1].histogram_value
            print(f"  histogram {t}: {len(ea.Histograms(t))} steps, last num {h.num} min {h.min:.4f} max {h.max:.4f}")
        for t in tags["images"]:
            from PIL import Image
            im = ea.Images(t)[-1]
            pil = Image.open(io.BytesIO(im.encoded_image_string))
            pil.load()
            print(f"  image {t}: {im.width}x{im.height}, PIL decodes {pil.mode} {pil.size}")
        for t in tags["tensors"]:
            ev = ea.Tensors(t)[-1]
            print(f"  tensor {t}: step {ev.step} {ev.tensor_proto.string_val or ev.tensor_proto.float_val}")
        for tag, meta in ea.summary_metadata.items():
            if meta.plugin_data.plugin_name == "hparams":
                from tensorboard.plugins.hparams import plugin_data_pb2
                d = plugin_data_pb2.HParamsPluginData.FromString(meta.plugin_data.content)
                print(f"  hparams {tag}: {str(d).strip()[:200]!r}")


def patch_numpy():
    """torch 1.13's make_histogram calls np.greater(counts, 0, dtype=np.int32),
    which numpy >= 1.24 refuses (no such loop); give its module a numpy whose
    greater casts afterwards: the same counts 1.13 computed with older numpy."""
    import numpy as np
    from torch.utils.tensorboard import summary

    class NP:
        def __getattr__(self, k):
            return getattr(np, k)

        @staticmethod
        def greater(a, b, dtype=None):
            r = np.greater(a, b)
            return r.astype(dtype) if dtype is not None else r
    summary.np = NP()


def main():
    time.time = lambda: FIXED_TIME
    from torch.utils.tensorboard import SummaryWriter
    patch_numpy()
    torch.manual_seed(0)
    tensors, cases = {}, []
    g = torch.Generator().manual_seed(1)

    def arg(name, a):
        if isinstance(a, str) and a.startswith("@"):
            return tensors[f"{name}.{a[1:]}"]
        if isinstance(a, dict) and "float" in a:
            return float(a["float"])
        return a

    def case(name, calls, writer=None, **inputs):
        for k, v in inputs.items():
            tensors[f"{name}.{k}"] = v
        with tempfile.TemporaryDirectory() as d:
            w = SummaryWriter(log_dir=d, **(writer or {}))
            nimg = 0
            for method, args, kwargs in calls:
                getattr(w, method)(*[arg(name, a) for a in args], **{k: arg(name, v) for k, v in kwargs.items()})
                if method == "add_image":   # the pixels PIL encoded: the spec decodes lunet's PNG to these
                    from torch.utils.tensorboard.summary import image
                    from PIL import Image
                    s = image("x", arg(name, args[1]), dataformats=kwargs.get("dataformats", "CHW"))
                    pil = Image.open(io.BytesIO(s.value[0].image.encoded_image_string))
                    tensors[f"{name}.pixels{nimg}"] = torch.frombuffer(bytearray(pil.tobytes()), dtype=torch.uint8)
                    nimg += 1
            w.close()
            files = []
            for root, _, fs in os.walk(d):
                for f in fs:
                    rel = os.path.relpath(os.path.join(root, f), d)
                    head, tail = os.path.split(rel)
                    assert tail.startswith("events.out.tfevents.")
                    key = os.path.join(head, "events.out.tfevents")
                    data = open(os.path.join(root, f), "rb").read()
                    tensors[f"{name}|{key}"] = torch.frombuffer(bytearray(data), dtype=torch.uint8)
                    files.append(key)
        cases.append({"name": name, "calls": calls, "writer": writer or {}, "files": sorted(files)})

    nan, inf = {"float": "nan"}, {"float": "inf"}
    case("scalars", [
        ("add_scalar", ["loss", 0.5, 1], {}),
        ("add_scalar", ["loss", 0.0, 2], {}),          # 0 is written (simple_value is in a oneof)
        ("add_scalar", ["loss", -3.25, 0], {}),        # step 0 is left out
        ("add_scalar", ["loss/nan", nan, 3], {}),
        ("add_scalar", ["loss/inf", inf, 4], {}),
        ("add_scalar", ["loss/neg_step", 1, -5], {}),  # a negative step: a 10-byte varint
        ("add_scalar", ["big", 1e30, 2 ** 40], {}),
        ("add_scalar", ["nostep", 7], {}),
        ("add_scalar", ["tensor", "@v"], {"global_step": 9, "walltime": 1234.5}),
        ("add_scalar", ["walltime0", 2.0, 3], {"walltime": 0}),
    ], v=torch.tensor([[2.5]]))
    case("scalars_dict", [
        ("add_scalars", ["run/loss", {"train": 1.0, "val": 2.5}, 3], {}),
        ("add_scalars", ["run/loss", {"train": 0.5, "val": 2.0}, 4], {"walltime": 99.0}),
    ])
    case("text", [
        ("add_text", ["note", "hello **world** \u00fc", 5], {}),
        ("add_text", ["empty", ""], {}),
    ])
    x = torch.randn(200, generator=g)
    case("histo_tf", [
        ("add_histogram", ["w", "@x", 7], {}),
        ("add_histogram", ["pos", "@p", 8], {}),
        ("add_histogram", ["zeros", "@z", 9], {}),
    ], x=x, p=torch.rand(5, 7, generator=g) * 1000, z=torch.zeros(3))
    case("histo_bins", [
        ("add_histogram", ["w10", "@x", 1], {"bins": 10}),
        ("add_histogram", ["const", "@c", 2], {"bins": 4}),
        ("add_histogram", ["maxb", "@x", 3], {"bins": 10, "max_bins": 3}),
        ("add_histogram", ["tfmax", "@x", 4], {"max_bins": 50}),
        ("add_histogram", ["f64", "@d", 5], {"bins": 7}),
    ], x=x.view(10, 20), c=torch.full((6,), 2.0), d=torch.randn(50, dtype=torch.float64, generator=g))
    case("image", [
        ("add_image", ["rgb", "@rgb", 1], {}),
        ("add_image", ["u8", "@u8", 2], {}),
        ("add_image", ["gray", "@gray", 3], {}),
        ("add_image", ["hwc", "@hwc", 4], {"dataformats": "HWC"}),
        ("add_image", ["hw", "@hw", 5], {"dataformats": "HW"}),
        ("add_image", ["rgba", "@rgba", 6], {}),
    ], rgb=torch.rand(3, 5, 7, generator=g), u8=torch.randint(0, 256, (3, 4, 6), generator=g, dtype=torch.uint8),
         gray=torch.rand(1, 6, 4, generator=g), hwc=torch.rand(5, 3, 3, generator=g), hw=torch.rand(4, 9, generator=g),
         rgba=torch.rand(4, 3, 3, generator=g))
    case("hparams", [
        ("add_hparams", [{"a_lr": 0.1, "b_bs": 32, "c_opt": "sgd", "d_flag": True, "e_zero": 0, "f_empty": ""},
                         {"hp/acc": 0.9, "hp/loss": 0.0}], {"run_name": "run1"}),
        ("add_hparams", [{"lr": 0.5}, {"m": 1.0}], {}),     # the run is named after time.time()
        ("add_hparams", [{"lr": 0.5, "opt": "adam"}, {"m": 2.0}],
         {"hparam_domain_discrete": {"lr": [0.5, 0.1], "opt": ["adam", "sgd"]}, "run_name": "dd"}),
    ])
    case("purge", [("add_scalar", ["x", 1.0, 6], {})], writer={"purge_step": 5})
    case("suffix", [("add_scalar", ["x", 1.0, 1], {})], writer={"filename_suffix": ".v2"})
    fixture_lib.write("tensorboard.safetensors", tensors, cases)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        check(sys.argv[2])
    else:
        main()
