#!/usr/bin/python3
"""torch_freeze.py -- the reference for dtnn train --freeze: the same training in PyTorch.

    /usr/bin/python3 tools/torch_freeze.py data MODEL INIT DATA_DIR SHAPE N SETTINGS
    /usr/bin/python3 tools/torch_freeze.py compare MODEL INIT DATA_DIR SETTINGS DTNN_RESULT

SETTINGS is BATCH LR MOMENTUM PATTERNS FREEZE_BN. The training: INIT loaded into the zoo model
(gen_reference's LeNet5 / ResNet20), requires_grad=False on the parameters whose names match
one of PATTERNS (comma-separated globs, as --freeze), the batch norms whose weight and bias are
both frozen in eval mode when FREEZE_BN is 1 (as torchvision's fine-tuning recipes do), one
epoch over DATA_DIR/train_x.npy in file order (dtnn's --no-shuffle), torch.optim.SGD over the
trainable parameters, the mean cross-entropy of each batch of BATCH; in float64, so that the
reference's own rounding is far below the tolerance.

`data` writes DATA_DIR/train_{x,y}.npy: N samples of SHAPE ("3,8,8") from the first seed whose
reference run keeps every ReLU input and max-pool winner at least 3e-6 from its kink (as gen_reference.py)
(gen_reference's Kinks): nearer than that, dtnn's float32 rounding may flip a ReLU mask that
the float64 reference does not, a difference of the data, not of the training (one flipped
element of a 2x2 feature map moves a weight's update by a percent).

`compare` checks dtnn's result against the reference:
  - every frozen parameter is bitwise its INIT value in dtnn's file (and in PyTorch's);
  - with FREEZE_BN, the running statistics of the frozen batch norms too;
  - every other tensor matches within 1e-4 of its largest magnitude;
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
from gen_reference import Kinks  # noqa: E402
from torch_interop import make_model, read_safetensors  # noqa: E402

MIN_MARGIN = 3e-6
SEED_TRIES = 50


def train(model_name, init, x, y, batch, lr, momentum, patterns, freeze_bn):
    """The reference run: (state_dict, frozen names, eval-mode batch norms, kink margin)."""
    torch.manual_seed(0)
    model = make_model(model_name)
    model.load_state_dict(init)
    model.double()
    frozen = {n for n, _ in model.named_parameters()
              if any(fnmatch.fnmatchcase(n, p) for p in patterns)}
    for n, p in model.named_parameters():
        p.requires_grad_(n not in frozen)
    model.train()
    eval_bn = []
    if freeze_bn:
        for name, mod in model.named_modules():
            if isinstance(mod, torch.nn.modules.batchnorm._BatchNorm) and \
                    f"{name}.weight" in frozen and f"{name}.bias" in frozen:
                mod.eval()
                eval_bn.append(name)
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=lr,
                          momentum=momentum)
    loss_fn = torch.nn.CrossEntropyLoss()
    Kinks.enabled, Kinks.margin = True, float("inf")
    for b in range(0, x.shape[0] - batch + 1, batch):
        opt.zero_grad()
        loss_fn(model(x[b:b + batch]), y[b:b + batch]).backward()
        opt.step()
    Kinks.enabled = False
    return model.state_dict(), frozen, eval_bn, Kinks.margin


def settings(args):
    batch, lr, momentum, patterns, freeze_bn = args
    return (int(batch), float(lr), float(momentum), [p for p in patterns.split(",") if p],
            freeze_bn == "1")


def load_init(path):
    return {k: v for k, v in read_safetensors(path).items() if not k.startswith("optimizer.")}


def make_data(model_name, init_path, data_dir, shape, n, args):
    batch, lr, momentum, patterns, freeze_bn = settings(args)
    init = load_init(init_path)
    shape = tuple(int(v) for v in shape.split(","))
    for seed in range(SEED_TRIES):
        rng = np.random.default_rng(seed)
        x = rng.standard_normal((int(n),) + shape).astype(np.float32)
        y = rng.integers(0, 10, int(n)).astype(np.int64)
        _, _, _, margin = train(model_name, init, torch.from_numpy(x).double(),
                                torch.from_numpy(y), batch, lr, momentum, patterns, freeze_bn)
        if margin >= MIN_MARGIN:
            np.save(os.path.join(data_dir, "train_x.npy"), x)
            np.save(os.path.join(data_dir, "train_y.npy"), y)
            print(f"torch_freeze: data seed {seed}, kink margin {margin:.2e}")
            return 0
    print(f"torch_freeze: no data seed in {SEED_TRIES} keeps the kink margin {MIN_MARGIN}")
    return 1


def compare(model_name, init_path, data_dir, args, result_path):
    batch, lr, momentum, patterns, freeze_bn = settings(args)
    init = load_init(init_path)
    x = torch.from_numpy(np.load(os.path.join(data_dir, "train_x.npy"))).double()
    y = torch.from_numpy(np.load(os.path.join(data_dir, "train_y.npy")).astype(np.int64))
    want, frozen, eval_bn, margin = train(model_name, init, x, y, batch, lr, momentum, patterns,
                                          freeze_bn)
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
        err = float((g.double() - ref).abs().max()) / max(float(ref.abs().max()), 1e-6)
        worst = max(worst, err)
        if not err <= 1e-4:
            problems.append(f"{name}: relative difference {err:.3g} from PyTorch")
    stray = [k for k in got if k.startswith("optimizer.") and k.split(".", 2)[2] in frozen]
    if stray:
        problems.append(f"optimizer state saved for frozen {stray[0]}")
    print(f"torch_freeze: {model_name}: {len(frozen)} frozen parameters bitwise fixed, "
          f"{len(eval_bn)} batch norms in eval mode; the rest within {worst:.2g} of PyTorch "
          f"with requires_grad=False (tol 1e-4, kink margin {margin:.1e})")
    for p in problems[:10]:
        print("torch_freeze: FAIL:", p)
    return 1 if problems else 0


def main():
    if len(sys.argv) == 12 and sys.argv[1] == "data":
        return make_data(*sys.argv[2:7], sys.argv[7:12])
    if len(sys.argv) == 11 and sys.argv[1] == "compare":
        return compare(*sys.argv[2:5], sys.argv[5:10], sys.argv[10])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
