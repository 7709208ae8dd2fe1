#!/usr/bin/env python3
"""Writes a torchvision model as ONNX with torch.onnx.export, for tests/cli_onnx_import.sh.

Usage: torch_onnx_export.py MODEL OUTDIR [SIZE [OPSET]] [--classes N] [--keep-bn]
MODEL "ops" is a small net of the operators torchvision's models do not use (F.pad before a
convolution, a dynamic x.view(x.size(0), -1), x @ W + b, clamp(0, 6), sigmoid, tanh, leaky
ReLU, average pooling without padded counts, ceil_mode pooling where it changes nothing,
a spatial mean as squeeze-and-excitation's gate (ReduceMean), a channel Split and channel
Slices, a channel mean and a spatial sum (ReduceSum), nearest and (from opset 11) bilinear
upsampling both ways of align_corners, pooled back, ConvNeXt's LayerNorm2d (Transpose,
LayerNormalization, Transpose at opset 17; below it the norm written out as ReduceMean, Sub,
Pow, ReduceMean, Add, Sqrt, Div, Mul, Add), dropout, softmax), exported with a dynamic batch so
the Reshape target is a Shape subgraph. MODEL "vit" is MobileViT's block as timm writes it
(patches unfolded by Reshape and Transpose with the batch folded into the tokens' axis, a
pre-norm transformer layer whose q, k and v are indexed out of a Transpose that puts them
before the batch, SiLU MLP, folded back), at opset 17 (its LayerNormalization). MODEL
"meta3d" is EfficientFormer's attention stage: the map flattened to tokens (Reshape,
Transpose), LayerNorm, q, k and v split off the last axis at unequal sizes, a bias gathered
from a parameter by a constant index table added to the scores, the mean over the tokens.
Writes OUTDIR/model.onnx (opset OPSET, default 13, eval mode, batch 2, 3 x SIZE x SIZE input),
OUTDIR/x.npy (the input) and OUTDIR/torch.npy (PyTorch's float32 logits, which the test
compares with dtnn's at 1e-4). The weights are random (no download),
and the batch-norm running statistics and affine parameters are randomised too, so that the
import of every tensor matters. --classes sets the torchvision model's outputs (default 10).

torch.onnx.export in eval mode folds each batch norm into the convolution before it, and the
folded weights are named onnx::Conv_NNN, not after the module. --keep-bn skips that fold
(torch 1.13's eval peephole pass, the only step that does it), so the file keeps PyTorch's
state_dict names (layer1.0.conv1.weight, layer1.0.bn1.running_mean, ...), as fine-tuning with
--freeze PATTERN over those names needs (tests/finetune_resnet18.sh).
"""
import os
import sys

import numpy as np
import torch
import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_interop import randomise_batch_norms  # noqa: E402

args = sys.argv[1:]
classes = 10
if "--classes" in args:
    i = args.index("--classes")
    classes = int(args[i + 1])
    del args[i:i + 2]
keep_bn = "--keep-bn" in args
if keep_bn:
    args.remove("--keep-bn")
    torch._C._jit_pass_onnx_eval_peephole = lambda graph, params: params
name, out = args[0], args[1]
size = int(args[2]) if len(args) > 2 else 64
opset = int(args[3]) if len(args) > 3 else 13
F = torch.nn.functional


class Ops(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3)
        self.bn1 = torch.nn.BatchNorm2d(8)
        self.conv2 = torch.nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=2, bias=False)
        self.w = torch.nn.Parameter(torch.randn(8 * 4 * 4, 12) * 0.1)
        self.b = torch.nn.Parameter(torch.randn(12))
        self.fc = torch.nn.Linear(12, 10)
        self.drop = torch.nn.Dropout(0.3)
        self.ln_w = torch.nn.Parameter(torch.rand(8) + 0.5)
        self.ln_b = torch.nn.Parameter(torch.randn(8) * 0.1)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(F.pad(x, (1, 1, 1, 1)))))
        x = torch.clamp(self.conv2(x), 0, 6)
        x = torch.sigmoid(x) + torch.tanh(x)
        x = F.leaky_relu(x, 0.2)
        x = F.avg_pool2d(x, 3, stride=1, padding=1, count_include_pad=False)
        x = F.max_pool2d(x, 2, stride=2, ceil_mode=True)
        x = x * torch.sigmoid(x.mean((2, 3), keepdim=True))    # squeeze-and-excitation's gate
        a, b = torch.split(x, [3, 5], dim=1)                   # CSPNet's partial split
        x = torch.cat([torch.tanh(b), a], dim=1)
        x = torch.cat([x[:, 5:], x[:, :5]], dim=1)             # GhostNet's channel slices
        x = x * torch.sigmoid(x.mean(1, keepdim=True))         # CBAM's channel mean
        x = x + 0.01 * x.sum((2, 3), keepdim=True)             # ReduceSum over H and W
        up = F.interpolate(x, scale_factor=2, mode="nearest")  # Resize (Upsample at 9)
        if opset >= 11:                                         # bilinear: Resize from 11
            up = up + F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)
            up = up + F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=True)
        x = F.avg_pool2d(up, 2)
        # ConvNeXt's LayerNorm2d
        x = F.layer_norm(x.permute(0, 2, 3, 1), (8,), self.ln_w, self.ln_b, 1e-6)
        x = x.permute(0, 3, 1, 2).contiguous()
        x = x.view(x.size(0), -1)
        x = self.drop(x @ self.w + self.b)
        return F.softmax(self.fc(x), dim=1)


class Vit(torch.nn.Module):
    def __init__(self, dim=8, heads=2, patch=2):
        super().__init__()
        self.dim, self.heads, self.patch = dim, heads, patch
        self.conv_in = torch.nn.Conv2d(3, dim, 3, padding=1)
        self.norm1 = torch.nn.LayerNorm(dim)
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)
        self.norm2 = torch.nn.LayerNorm(dim)
        self.fc1 = torch.nn.Linear(dim, 2 * dim)
        self.fc2 = torch.nn.Linear(2 * dim, dim)
        self.conv_out = torch.nn.Conv2d(dim, dim, 1)
        self.fc = torch.nn.Linear(dim, 10)

    def forward(self, x):
        x = self.conv_in(x)
        b, c, h, w = x.shape
        p, nh, nw = self.patch, h // self.patch, w // self.patch
        t = x.reshape(b * c * nh, p, nw, p).transpose(1, 2)
        t = t.reshape(b, c, nh * nw, p * p).transpose(1, 3).reshape(b * p * p, nh * nw, c)
        n, hd = nh * nw, self.dim // self.heads
        qkv = self.qkv(self.norm1(t)).reshape(b * p * p, n, 3, self.heads, hd)
        qkv = qkv.permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        a = ((q * hd ** -0.5) @ k.transpose(-2, -1)).softmax(dim=-1)
        t = t + self.proj((a @ v).transpose(1, 2).reshape(b * p * p, n, c))
        t = t + self.fc2(F.silu(self.fc1(self.norm2(t))))
        x = t.contiguous().view(b, p * p, n, -1).transpose(1, 3).reshape(b * c * nh, nw, p, p)
        x = x.transpose(1, 2).reshape(b, c, nh * p, nw * p)
        return self.fc(self.conv_out(x).mean((2, 3)))


class Meta3d(torch.nn.Module):
    def __init__(self, dim=8, heads=2, key_dim=2, tokens=16):
        super().__init__()
        self.heads, self.kd, self.vd = heads, key_dim, dim // heads
        self.conv = torch.nn.Conv2d(3, dim, 3, stride=2, padding=1)
        self.norm = torch.nn.LayerNorm(dim)
        self.qkv = torch.nn.Linear(dim, heads * (2 * key_dim + self.vd))
        self.proj = torch.nn.Linear(dim, dim)
        side = int(tokens ** 0.5)
        pos = torch.stack(torch.meshgrid(torch.arange(side), torch.arange(side),
                                         indexing="ij")).flatten(1)
        rel = (pos[..., :, None] - pos[..., None, :]).abs()
        self.register_buffer("idxs", rel[0] * side + rel[1], persistent=False)
        self.biases = torch.nn.Parameter(torch.randn(heads, tokens))
        self.head = torch.nn.Linear(dim, 10)

    def forward(self, x):
        t = self.conv(x).flatten(2).transpose(1, 2)
        b, n, _ = t.shape
        q, k, v = self.qkv(self.norm(t)).reshape(b, n, self.heads, -1).permute(0, 2, 1, 3) \
            .split([self.kd, self.kd, self.vd], dim=3)
        a = (q @ k.transpose(-2, -1)) * self.kd ** -0.5 + self.biases[:, self.idxs]
        o = (a.softmax(dim=-1) @ v).transpose(1, 2).reshape(b, n, -1)
        return self.head((t + self.proj(o)).mean(1))


torch.manual_seed(0)
if name == "ops":
    model = Ops()
elif name == "vit":
    model = Vit()
elif name == "meta3d":
    model = Meta3d()
else:
    model = getattr(torchvision.models, name)(weights=None, num_classes=classes)
randomise_batch_norms(model)
model.eval()
x = torch.randn(2, 3, size, size)
with torch.no_grad():
    y = model(x)
dynamic = {"input": {0: "N"}, "output": {0: "N"}} if name in ("ops", "vit", "meta3d") else None
torch.onnx.export(model, x, f"{out}/model.onnx", opset_version=opset, input_names=["input"],
                  output_names=["output"], dynamic_axes=dynamic)
np.save(f"{out}/x.npy", x.numpy())
np.save(f"{out}/torch.npy", y.numpy())
