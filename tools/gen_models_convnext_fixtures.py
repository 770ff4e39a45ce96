#!/usr/bin/python3
"""Writes spec/fixtures/models_convnext.safetensors with PyTorch 1.13 and
torchvision 0.14, for spec/models_convnext_spec.lua: lunet.models'
ConvNeXts against torchvision's, in the scheme of
tools/gen_models_fixtures.py through tools/gen_models_regnet_fixtures.py's
run() (read their docstrings). convnext_tiny's train mode (layer norms: the
same as eval, but with autograd) runs with stochastic_depth_prob = 0 (no
random drops); the others store keys and parameter counts only.
Run:  /usr/bin/python3 tools/gen_models_convnext_fixtures.py
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_models_regnet_fixtures import run  # noqa: E402

MODELS = [
    ("convnext_tiny", 32, "model", ["features.0.0.weight", "features.0.1.bias", "features.1.0.layer_scale",
                                    "features.1.0.block.3.weight", "features.7.2.block.5.bias",
                                    "classifier.0.weight", "classifier.2.weight"], {"stochastic_depth_prob": 0.0}),
] + [(n, None, None, None) for n in ["convnext_small", "convnext_base", "convnext_large"]]

if __name__ == "__main__":
    run(MODELS, "models_convnext.safetensors")
