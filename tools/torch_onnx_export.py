#!/usr/bin/env python3
"""Writes a torchvision model as ONNX with torch.onnx.export, for tests/cli_onnx_import.sh.

Usage: torch_onnx_export.py MODEL OUTDIR [SIZE]
Writes OUTDIR/model.onnx (opset 13, eval mode, batch 2, 3 x SIZE x SIZE input), OUTDIR/x.npy
(the input) and OUTDIR/torch.npy (torchvision's logits in float64 and float32 agree well
within the test's 1e-4; float32 is what is compared). The weights are random (no download),
and the batch-norm running statistics and affine parameters are randomised too, so that the
import of every tensor matters.
"""
import sys

import numpy as np
import torch
import torchvision

name, out = sys.argv[1], sys.argv[2]
size = int(sys.argv[3]) if len(sys.argv) > 3 else 64
torch.manual_seed(0)
model = getattr(torchvision.models, name)(weights=None, num_classes=10)
with torch.no_grad():
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
            m.weight.uniform_(0.5, 1.5)
            m.bias.uniform_(-0.5, 0.5)
model.eval()
x = torch.randn(2, 3, size, size)
with torch.no_grad():
    y = model(x)
torch.onnx.export(model, x, f"{out}/model.onnx", opset_version=13, input_names=["input"],
                  output_names=["output"])
np.save(f"{out}/x.npy", x.numpy())
np.save(f"{out}/torch.npy", y.numpy())
