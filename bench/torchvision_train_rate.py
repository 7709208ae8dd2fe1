"""Training images/s of a torchvision model in PyTorch on this CPU, the other side of
`dtnn bench --model F.onnx` for a model exported from torchvision (docs/perf-notes.md, the
convnext_tiny / efficientnet_v2_s rows): SGD with momentum, cross-entropy, random data,
batch 32, 3x32x32, best of 2 x 3 steps after one warm-up step.

    VENV/bin/python bench/torchvision_train_rate.py MODEL nchw|cl [--threads 2]
"""
import argparse
import time

import torch
import torchvision


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("layout", choices=["nchw", "cl"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--size", type=int, default=32)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    m = getattr(torchvision.models, a.model)(num_classes=10)
    x = torch.randn(a.batch, 3, a.size, a.size)
    y = torch.randint(0, 10, (a.batch,))
    if a.layout == "cl":
        m = m.to(memory_format=torch.channels_last)
        x = x.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad()
        loss_fn(m(x), y).backward()
        opt.step()

    step()
    best = 0.0
    for _ in range(2):
        t = time.perf_counter()
        for _ in range(3):
            step()
        best = max(best, 3 * a.batch / (time.perf_counter() - t))
    print(f"{a.model} {a.layout} {best:.1f} img/s (torch {torch.__version__}, "
          f"{a.threads} threads)")


if __name__ == "__main__":
    main()
