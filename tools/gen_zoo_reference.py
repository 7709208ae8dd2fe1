#!/usr/bin/python3
"""gen_zoo_reference.py -- writes tests/ref/zoo.safetensors, against which tests/test_zoo.c
checks every zoo model: its parameter count, its state_dict keys and shapes, and its output on
given weights and input, all taken from the PyTorch twin (torchvision 0.14's own model for the
ImageNet models, the classes of tools/gen_reference.py and bench/torch_models.py for the rest).

Regenerate (from the repository root, with Debian's python3-torch and python3-torchvision):

    /usr/bin/python3 tools/gen_zoo_reference.py            every model
    /usr/bin/python3 tools/gen_zoo_reference.py NAME ...   only these (a new model): the others
                                                           keep their bytes in the file

PyTorch's convolutions round differently on different CPUs, so a full rerun rewrites every
output by a few ulps; adding a model by name leaves the others as they were.

Why the weights are not in the file. VGG-16 alone has 138 million parameters. Instead every
value comes from a formula that C and NumPy evaluate bit for bit alike, so the file holds only
the outputs (2 x classes floats per model) and the test fills dtnn's tensors itself:

    u(name, i)  = murmur3_fmix32(i * 0x9E3779B1 + fnv1a32(name)) >> 8, divided by 2^24
                  (uint32 arithmetic: an exact float32 in [0, 1))
    conv / linear weight (2+ dims)  (2u - 1) * float32(sqrt(6 / fan_in))   He-uniform scale
    bias of a conv / linear         (2u - 1) * 0.1
    batch-norm weight               0.5 + 0.5u
    batch-norm bias, running_mean   (2u - 1) * 0.1
    batch-norm running_var          0.5 + u
    num_batches_tracked             0
    input "input" [2, C, H, W]      2u - 1
(every operation in float32; fan_in = product of the dims after the first). The outputs are of
eval mode (batch norm on its running statistics, dropout off), so they are deterministic.

Input sizes: 3x64x64 for the ImageNet models (the smallest AlexNet takes is 63; every other
model works at it, and it keeps VGG-16's forward under a second), the zoo's own for the rest.

File layout: tensor "<model>.y" float32 [2, classes]; metadata "models" (space-separated),
"<model>.input" ("CxHxW"), "<model>.params" (count of parameters, not buffers),
"<model>.keys" ("name:d0xd1;name:;..." every state_dict entry in order, 0-d as empty).
"""
import json
import math
import os
import sys

import numpy as np
import torch
import torchvision

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from gen_reference import LeNet5, ResNet20, SafetensorsWriter  # noqa: E402
from torch_models import CifarCNN, VGG16_64  # noqa: E402

OUT = os.path.join(ROOT, "tests", "ref", "zoo.safetensors")
M32 = 0xFFFFFFFF


def fnv1a32(text):
    h = 2166136261
    for byte in text.encode():
        h = ((h ^ byte) * 16777619) & M32
    return h


def uniform(name, count):
    h = (np.arange(count, dtype=np.uint64) * 0x9E3779B1 + fnv1a32(name)) & M32
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & M32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & M32
    h ^= h >> 16
    return (h >> 8).astype(np.float32) / np.float32(16777216.0)


def value(name, shape, is_bn):
    count = int(np.prod(shape)) if len(shape) else 1
    u = uniform(name, count)
    one, two, tenth, half = (np.float32(v) for v in (1.0, 2.0, 0.1, 0.5))
    leaf = name.rsplit(".", 1)[-1]
    if leaf == "num_batches_tracked":
        return torch.zeros((), dtype=torch.int64)
    if len(shape) >= 2:
        fan_in = int(np.prod(shape[1:]))
        v = (two * u - one) * np.float32(math.sqrt(6.0 / fan_in))
    elif leaf == "running_var":
        v = half + u
    elif leaf == "weight" and is_bn:
        v = half + half * u
    else:   # bias (conv, linear, batch norm), running_mean
        v = (two * u - one) * tenth
    return torch.from_numpy(v.astype(np.float32).reshape(shape))


class MLP(torch.nn.Module):
    def __init__(self, inputs=784, classes=10):
        super().__init__()
        self.fc1 = torch.nn.Linear(inputs, 512)
        self.fc2 = torch.nn.Linear(512, 512)
        self.fc3 = torch.nn.Linear(512, classes)

    def forward(self, x):
        x = torch.relu(self.fc1(torch.flatten(x, 1)))
        return self.fc3(torch.relu(self.fc2(x)))


class AlexNetCifar(torch.nn.Module):
    """src/model/zoo.c build_alexnet_cifar."""

    def __init__(self, classes=10):
        super().__init__()
        nn = torch.nn
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, 11, stride=4, padding=5), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(64, 192, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(192, 384, 3, padding=1), nn.ReLU(),
            nn.Conv2d(384, 256, 3, padding=1), nn.ReLU(),
            nn.Conv2d(256, 256, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.classifier = nn.Linear(256, classes)

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


class VGG16Cifar(torch.nn.Module):
    """src/model/zoo.c build_vgg16_cifar: torchvision's vgg16_bn features, one linear layer."""

    def __init__(self, classes=10):
        super().__init__()
        self.features = torchvision.models.vgg16_bn().features
        self.classifier = torch.nn.Linear(512, classes)

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


TV = torchvision.models
# name -> (constructor, C, H, W)
MODELS = {
    "lenet5": (LeNet5, (1, 28, 28)),
    "cifarcnn": (CifarCNN, (3, 32, 32)),
    "resnet20": (lambda: ResNet20(blocks=3), (3, 32, 32)),
    "resnet32": (lambda: ResNet20(blocks=5), (3, 32, 32)),
    "resnet44": (lambda: ResNet20(blocks=7), (3, 32, 32)),
    "resnet56": (lambda: ResNet20(blocks=9), (3, 32, 32)),
    "resnet110": (lambda: ResNet20(blocks=18), (3, 32, 32)),
    "alexnet_cifar": (AlexNetCifar, (3, 32, 32)),
    "vgg16_cifar": (VGG16Cifar, (3, 32, 32)),
    "vgg16-64": (VGG16_64, (3, 64, 64)),
    "mlp": (MLP, (1, 28, 28)),
    "alexnet": (TV.alexnet, (3, 64, 64)),
    "vgg11": (TV.vgg11, (3, 64, 64)),
    "vgg16": (TV.vgg16, (3, 64, 64)),
    "vgg11_bn": (TV.vgg11_bn, (3, 64, 64)),
    "vgg16_bn": (TV.vgg16_bn, (3, 64, 64)),
    "resnet18": (TV.resnet18, (3, 64, 64)),
    "resnet34": (TV.resnet34, (3, 64, 64)),
    "resnet50": (TV.resnet50, (3, 64, 64)),
    "mobilenet_v2": (TV.mobilenet_v2, (3, 64, 64)),
    "densenet121": (TV.densenet121, (3, 64, 64)),
    "mobilenet_v3_large": (TV.mobilenet_v3_large, (3, 64, 64)),
    "regnet_y_400mf": (TV.regnet_y_400mf, (3, 64, 64)),
    "efficientnet_v2_s": (TV.efficientnet_v2_s, (3, 64, 64)),
    "convnext_tiny": (TV.convnext_tiny, (3, 64, 64)),
}


def kept_entries(w, only):
    """Copies into w every model of the existing file not named in `only`, byte for byte.
    Returns their names in the file's order."""
    with open(OUT, "rb") as f:
        raw = f.read()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    data, meta = raw[8 + n:], header.pop("__metadata__")
    kept = [m for m in meta["models"].split() if m not in only]
    for m in kept:
        entry = header[f"{m}.y"]
        begin, end = entry["data_offsets"]
        w.tensors.append((f"{m}.y", entry["dtype"], entry["shape"], data[begin:end]))
        w.names.add(f"{m}.y")
        for key in ("input", "params", "keys"):
            w.meta[f"{m}.{key}"] = meta[f"{m}.{key}"]
    return kept


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    w = SafetensorsWriter()
    only = sys.argv[1:]
    unknown = [m for m in only if m not in MODELS]
    if unknown:
        sys.exit(f"gen_zoo_reference.py: unknown model(s) {' '.join(unknown)}")
    names = kept_entries(w, only) if only else []
    for name, (make, (c, h, wd)) in MODELS.items():
        if only and name not in only:
            continue
        model = make().eval()
        sd = model.state_dict()
        bn_prefixes = {k[: -len(".running_mean")] for k in sd if k.endswith(".running_mean")}
        new_sd = {}
        for key, t in sd.items():
            prefix = key.rsplit(".", 1)[0]
            new_sd[key] = value(key, list(t.shape), prefix in bn_prefixes)
        model.load_state_dict(new_sd, strict=True)
        x = torch.from_numpy((np.float32(2.0) * uniform("input", 2 * c * h * wd)
                              - np.float32(1.0)).reshape(2, c, h, wd))
        with torch.no_grad():
            y = model(x)
        params = sum(p.numel() for p in model.parameters())
        w.add(f"{name}.y", y)
        w.meta[f"{name}.input"] = f"{c}x{h}x{wd}"
        w.meta[f"{name}.params"] = str(params)
        w.meta[f"{name}.keys"] = ";".join(
            f"{k}:{'x'.join(str(d) for d in t.shape)}" for k, t in sd.items())
        names.append(name)
        print(f"{name:<14} {params:>11,} parameters, {len(sd):4d} tensors, input {c}x{h}x{wd}, "
              f"|y| max {y.abs().max().item():.4g}")
    w.meta["models"] = " ".join(m for m in MODELS if m in names)
    size = w.write(OUT)
    print(f"{OUT}: {size} bytes")


if __name__ == "__main__":
    main()
