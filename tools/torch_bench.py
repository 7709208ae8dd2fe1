#!/usr/bin/env python3
"""torch_bench.py — PyTorch's training images/s for scripts/gpu-check.sh's table: ResNet-50
(torchvision's architecture, stride on the 3x3, written out here so torchvision is not needed)
at 224x224 batch 256 in fp32 and in bf16 (autocast), and the CIFAR ResNet-20 (option A
shortcuts, as dtnn's zoo) at batch 512 in fp32; eager mode, channels_last, cudnn.benchmark on
(algorithms chosen by measurement, as dtnn's), SGD with momentum, synthetic data. fp32 runs
without TF32 (PyTorch enables it for convolutions by default), as dtnn's fp32 backend runs.
Prints one JSON line {"resnet50-fp32": images/s, ...}; a configuration that fails is left out
and its error printed to stderr."""
import json
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Bottleneck(nn.Module):
    def __init__(self, cin, width, stride):
        super().__init__()
        cout = width * 4
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                      nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return F.relu(y + (self.down(x) if self.down is not None else x))


def resnet50(classes=1000):
    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
              nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for b in range(blocks):
            layers.append(Bottleneck(cin, width, stride if b == 0 else 1))
            cin = width * 4
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes)]
    return nn.Sequential(*layers)


class BasicA(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.stride, self.pad = stride, (cout - cin) // 2

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        s = x
        if self.stride != 1 or self.pad:
            s = F.pad(x[:, :, ::self.stride, ::self.stride], (0, 0, 0, 0, self.pad, self.pad))
        return F.relu(y + s)


def resnet20(classes=10):
    layers = [nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU(inplace=True)]
    cin = 16
    for cout, stride in ((16, 1), (32, 2), (64, 2)):
        for b in range(3):
            layers.append(BasicA(cin, cout, stride if b == 0 else 1))
            cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes)]
    return nn.Sequential(*layers)


def images_per_sec(make, classes, size, batch, bf16, steps=10, warmup=5):
    dev = torch.device("cuda")
    model = make(classes).to(dev).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(batch, 3, size, size, device=dev).to(memory_format=torch.channels_last)
    y = torch.randint(0, classes, (batch,), device=dev)
    loss_fn = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()

    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
    return batch * steps / (time.perf_counter() - t0)


def main():
    if not torch.cuda.is_available():
        print("torch_bench: no CUDA device visible to PyTorch", file=sys.stderr)
        return 1
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    print("torch %s, cuDNN %s, %s" % (torch.__version__, torch.backends.cudnn.version(),
                                      torch.cuda.get_device_name()), file=sys.stderr)
    runs = {"resnet50-fp32": (resnet50, 1000, 224, 256, False),
            "resnet50-bf16": (resnet50, 1000, 224, 256, True),
            "resnet20-fp32": (resnet20, 10, 32, 512, False)}
    result, failures = {}, 0
    for name, (make, classes, size, batch, bf16) in runs.items():
        try:
            result[name] = round(images_per_sec(make, classes, size, batch, bf16), 1)
            # the numbers so far, each time: a run cut short by its time limit keeps them
            print(json.dumps(result), flush=True)
            print("%s: %.1f images/s" % (name, result[name]), file=sys.stderr)
        except Exception as e:  # report and go on: the table shows the others
            print("%s: failed: %s" % (name, e), file=sys.stderr)
            failures += 1
        torch.cuda.empty_cache()
    print(json.dumps(result), flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
