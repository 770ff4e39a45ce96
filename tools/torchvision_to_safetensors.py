#!/usr/bin/python3
"""Converts a torchvision model's weights to a safetensors file that
lunet.models' model of the same name loads strictly:
    model:load_state_dict(lunet.load('resnet18.safetensors'))

  /usr/bin/python3 tools/torchvision_to_safetensors.py resnet18 out.safetensors --pth resnet18-f37072fd.pth
  /usr/bin/python3 tools/torchvision_to_safetensors.py resnet18 out.safetensors --weights DEFAULT
  /usr/bin/python3 tools/torchvision_to_safetensors.py resnet18 out.safetensors --num-classes 10   (untrained)

--pth: a state_dict saved by torch.save (the files torchvision downloads to
~/.cache/torch/hub/checkpoints); --weights: torchvision's weights enum name
(downloads unless cached); neither: the model as torchvision initialises it.
The state_dict goes through torchvision's model first, so a file for another
architecture fails here (strict), not later in lunet.
"""
import argparse
import os
import sys

import torch
import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="torchvision.models constructor name (resnet18, vgg16_bn, ...)")
    ap.add_argument("out", help="the .safetensors file to write")
    ap.add_argument("--pth", help="a saved state_dict to convert")
    ap.add_argument("--weights", help="torchvision weights name (e.g. DEFAULT, IMAGENET1K_V1)")
    ap.add_argument("--num-classes", type=int, help="num_classes of the model (with --pth of a fine-tuned one)")
    a = ap.parse_args()
    ctor = getattr(torchvision.models, a.model)
    kw = {"num_classes": a.num_classes} if a.num_classes else {}
    model = ctor(weights=a.weights, **kw) if a.weights else ctor(**kw)
    if a.pth:
        sd = torch.load(a.pth, map_location="cpu")
        model.load_state_dict(sd.get("state_dict", sd) if isinstance(sd, dict) else sd)
    tensors = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    # (no metadata: lunet.load returns it second, and load_state_dict would take it for options)
    fixture_lib.save(a.out, tensors, {})
    print(f"wrote {a.out}: {len(tensors)} tensors")


if __name__ == "__main__":
    main()
