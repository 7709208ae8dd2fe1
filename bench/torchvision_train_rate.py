"""Training images/s of a torchvision model in PyTorch on this CPU, the other side of
`dtnn bench --model F.onnx` (or a zoo model) for the same network (docs/perf-models.md, the
convnext_tiny / efficientnet_v2_s rows): SGD with momentum, cross-entropy, random data,
batch 32, best of 2 x 3 steps after one warm-up step.

    VENV/bin/python bench/torchvision_train_rate.py MODEL nchw|cl [--threads 2]
        [--channels 3] [--size 32] [--pad 0] [--export F.onnx]

--channels 1 --size 28 is Fashion-MNIST's shape: the stem convolution then takes one channel,
and --pad 2 puts a zero padding to 32x32 in front (ConvNeXt's four stride-2 stages after its
stride-4 stem need 32 pixels). Stochastic depth: torchvision's own for EfficientNetV2 (0.2,
as dtnn's zoo model), off for ConvNeXt (its ONNX export, which dtnn runs, has none), so both
sides run the same network. --export writes that network (10 classes) as ONNX, opset
17, for `dtnn bench --model` and `dtnn train --model`; then no rate is measured.
"""
import argparse
import time

import torch
import torchvision


def build(name, channels, pad):
    kwargs = {"num_classes": 10}
    if name.startswith("convnext"):
        kwargs["stochastic_depth_prob"] = 0.0
    m = getattr(torchvision.models, name)(**kwargs)
    if channels != 3:
        # the first convolution of the stem, whatever the model calls it
        parent, key = next((mod, k) for mod in m.modules() for k, c in mod.named_children()
                           if isinstance(c, torch.nn.Conv2d))
        old = getattr(parent, key)
        setattr(parent, key, torch.nn.Conv2d(channels, old.out_channels, old.kernel_size,
                                             old.stride, old.padding, bias=old.bias is not None))
    if pad:
        m = torch.nn.Sequential(torch.nn.ZeroPad2d(pad), m)
    return m


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("layout", choices=["nchw", "cl"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--size", type=int, default=32)
    ap.add_argument("--channels", type=int, default=3)
    ap.add_argument("--pad", type=int, default=0)
    ap.add_argument("--export", metavar="F.onnx")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    m = build(a.model, a.channels, a.pad)
    x = torch.randn(a.batch, a.channels, a.size, a.size)
    y = torch.randint(0, 10, (a.batch,))
    if a.export:
        m.eval()
        torch.onnx.export(m, x[:1], a.export, opset_version=17, input_names=["input"],
                          output_names=["logits"], dynamic_axes={"input": {0: "N"},
                                                                 "logits": {0: "N"}},
                          dynamo=False)
        print(f"wrote {a.export}")
        return
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
    print(f"{a.model} {a.layout} {a.channels}x{a.size}x{a.size} pad {a.pad}: {best:.1f} img/s "
          f"(torch {torch.__version__}, {a.threads} threads)")


if __name__ == "__main__":
    main()
