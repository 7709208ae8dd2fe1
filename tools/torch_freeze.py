#!/usr/bin/python3
"""torch_freeze.py -- the reference for dtnn train --freeze: the same training in PyTorch.

    /usr/bin/python3 tools/torch_freeze.py MODEL INIT.safetensors DATA_DIR BATCH LR MOMENTUM \
        PATTERNS FREEZE_BN DTNN_RESULT.safetensors

Loads INIT into the zoo model (gen_reference's LeNet5 / ResNet20), sets requires_grad=False on
the parameters whose names match one of PATTERNS (comma-separated fnmatch globs, as --freeze),
puts the batch norms whose weight and bias are both frozen in eval mode when FREEZE_BN is 1 (as
torchvision's fine-tuning recipes do), and trains one epoch over DATA_DIR/train_x.npy in file
order (dtnn's --no-shuffle) with torch.optim.SGD over the trainable parameters and the mean
cross-entropy of each batch of BATCH. Then compares with dtnn's result:
  - every frozen parameter is bitwise its INIT value in dtnn's file (and in PyTorch's);
  - with FREEZE_BN, the running statistics of the frozen batch norms too;
  - every other tensor matches PyTorch's within 1e-4 of its largest magnitude (fp32 sums in
    another order, over a few steps of SGD);
  - dtnn saved no optimizer state for frozen parameters.
Exits 0 on success, 1 on a mismatch, 77 when Debian's python3-torch is missing.
"""
import fnmatch
import os
import sys

try:
    import numpy as np
    import torch
except ImportError:
    print("torch_freeze: python3-torch is not installed; skipping")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_interop import make_model, read_safetensors  # noqa: E402


def main():
    (model_name, init_path, data_dir, batch, lr, momentum, patterns, freeze_bn,
     result_path) = sys.argv[1:10]
    batch, lr, momentum = int(batch), float(lr), float(momentum)
    patterns = [p for p in patterns.split(",") if p]
    torch.manual_seed(0)
    model = make_model(model_name)
    init = {k: v for k, v in read_safetensors(init_path).items()
            if not k.startswith("optimizer.")}
    model.load_state_dict(init)
    # float64, as gen_reference's optimizer references: the reference's own rounding then
    # stays far below the tolerance, which measures dtnn's fp32 arithmetic alone.
    model.double()
    frozen = {n for n, _ in model.named_parameters()
              if any(fnmatch.fnmatchcase(n, p) for p in patterns)}
    for n, p in model.named_parameters():
        p.requires_grad_(n not in frozen)
    model.train()
    eval_bn = []
    if freeze_bn == "1":
        for name, mod in model.named_modules():
            if isinstance(mod, torch.nn.modules.batchnorm._BatchNorm) and \
                    f"{name}.weight" in frozen and f"{name}.bias" in frozen:
                mod.eval()
                eval_bn.append(name)
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=lr,
                          momentum=momentum)
    x = torch.from_numpy(np.load(os.path.join(data_dir, "train_x.npy"))).double()
    y = torch.from_numpy(np.load(os.path.join(data_dir, "train_y.npy")).astype(np.int64))
    loss_fn = torch.nn.CrossEntropyLoss()
    for b in range(0, x.shape[0] - batch + 1, batch):
        opt.zero_grad()
        loss_fn(model(x[b:b + batch]), y[b:b + batch]).backward()
        opt.step()
    want = model.state_dict()
    got = read_safetensors(result_path)
    problems, worst = [], 0.0
    fixed = set(frozen) | {f"{m}.{s}" for m in eval_bn
                           for s in ("running_mean", "running_var", "num_batches_tracked")}
    for name, ref in want.items():
        g = got[name]
        if name in fixed:
            if not torch.equal(g, init[name]):
                problems.append(f"{name} is frozen but changed in dtnn")
            if not torch.equal(ref, init[name].to(ref.dtype)):
                problems.append(f"{name} is frozen but changed in PyTorch (test bug)")
            continue
        if not ref.is_floating_point():
            if not torch.equal(g, ref):
                problems.append(f"{name}: {g.tolist()} vs PyTorch {ref.tolist()}")
            continue
        scale = max(float(ref.abs().max()), 1e-6)
        err = float((g.double() - ref).abs().max()) / scale
        worst = max(worst, err)
        if not err <= 1e-4:
            problems.append(f"{name}: relative difference {err:.3g} from PyTorch")
    stray = [k for k in got if k.startswith("optimizer.") and k.split(".", 2)[2] in frozen]
    if stray:
        problems.append(f"optimizer state saved for frozen {stray[0]}")
    print(f"torch_freeze: {model_name}: {len(frozen)} frozen parameters bitwise fixed, "
          f"{len(eval_bn)} batch norms in eval mode; trainable tensors within {worst:.2g} of "
          f"PyTorch with requires_grad=False (tol 1e-4)")
    for p in problems[:10]:
        print("torch_freeze: FAIL:", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
