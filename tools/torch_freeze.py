#!/usr/bin/python3
"""torch_freeze.py -- the reference for dtnn train --freeze: the same training in PyTorch.

    /usr/bin/python3 tools/torch_freeze.py data MODEL INIT DATA_DIR SHAPE N SETTINGS
    /usr/bin/python3 tools/torch_freeze.py compare MODEL INIT DATA_DIR SETTINGS DTNN_RESULT [SIZE]
    /usr/bin/python3 tools/torch_freeze.py checkpoint MODEL CLASSES OUT
    /usr/bin/python3 tools/torch_freeze.py images MODEL INIT DATA_DIR SIZE CLASSES PER_CLASS \
        SETTINGS
    /usr/bin/python3 tools/torch_freeze.py init OUT CHECKPOINT EXCLUDE FRESH...

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
With SIZE, DATA_DIR is an image folder (DATA_DIR/train/<class>/<image>, as
--dataset imagefolder --image-size SIZE --augment none reads it), read with torchvision's
ImageFolder, Resize(SIZE * 256 / 224) and CenterCrop(SIZE) and ImageNet's normalisation. A
torchvision model has as many classes as INIT's fc.weight has rows.

The fine-tuning case (tests/finetune_resnet18.sh), for a torchvision model:
  - `checkpoint` writes a CLASSES-class state_dict (random weights: no download) as safetensors,
    with the batch norms' affine parameters and running statistics randomised too, so that
    every tensor of it matters (and --freeze-bn's eval mode is not the identity);
  - `images` writes DATA_DIR/train/classK/imgNN.png, PER_CLASS random RGB images per class of
    exactly the Resize side, so the centre crop is the only transform (PNG: lossless, so dtnn
    and PyTorch see the same pixels), from the first seed that keeps the kink margin above
    with INIT (INIT "none": seed 0, unchecked, for the run that makes INIT);
  - `init` writes OUT: CHECKPOINT's tensors except those matching EXCLUDE (comma-separated
    globs, as --init-exclude), which come from FRESH (dtnn checkpoints of runs' starts: their
    fresh head), after checking that every other parameter of each FRESH is CHECKPOINT's
    bitwise (that --init loaded them) and that the fresh tensors are the same in each.
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
from gen_reference import SafetensorsWriter  # noqa: E402
from torch_interop import make_model, read_safetensors  # noqa: E402

MIN_MARGIN = 3e-6
SEED_TRIES = 50
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
STATS = ("running_mean", "running_var", "num_batches_tracked")


def watch_kinks(model):
    """Kinks for modules (torchvision's nn.ReLU and nn.MaxPool2d; the zoo models of
    gen_reference call its functional relu / maxpool2, which watch themselves)."""
    def relu_hook(_, inp):
        if Kinks.enabled:
            Kinks.margin = min(Kinks.margin, float(inp[0].detach().abs().min()))

    def pool_hook(mod, inp):
        if not Kinks.enabled:
            return
        k, s, p = mod.kernel_size, mod.stride, mod.padding
        x = torch.nn.functional.pad(inp[0].detach(), (p, p, p, p), value=float("-inf"))
        win = x.unfold(2, k, s).unfold(3, k, s)
        top2 = win.reshape(*win.shape[:4], k * k).topk(2, dim=-1).values
        # As maxpool2: windows of zeros (after a ReLU) tie harmlessly.
        gap = (top2[..., 0] - top2[..., 1])[top2[..., 0] > 0]
        if gap.numel():
            Kinks.margin = min(Kinks.margin, float(gap.min()))

    for mod in model.modules():
        if isinstance(mod, torch.nn.ReLU):
            mod.register_forward_pre_hook(relu_hook)
        elif isinstance(mod, torch.nn.MaxPool2d):
            mod.register_forward_pre_hook(pool_hook)


def train(model_name, init, x, y, batch, lr, momentum, patterns, freeze_bn):
    """The reference run: (state_dict, frozen names, eval-mode batch norms, kink margin)."""
    torch.manual_seed(0)
    model = make_model(model_name, init["fc.weight"].shape[0] if "fc.weight" in init else 10)
    model.load_state_dict(init)
    watch_kinks(model)
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


def resize_side(size):
    """dtnn's (and the torchvision recipes') Resize side for a SIZE crop: SIZE * 256 / 224."""
    return (size * 256 + 112) // 224


def read_images(data_dir, size):
    """The image folder as torchvision reads it, float32 (N,3,SIZE,SIZE) and labels; checked
    against the same transforms written out in NumPy, the float32 operations of dtnn's
    loader ((q / 255 - mean) / std), so that both sides see the same tensors."""
    import torchvision
    from torchvision import transforms as T
    tf = T.Compose([T.Resize(resize_side(size)), T.CenterCrop(size), T.ToTensor(),
                    T.Normalize(IMAGENET_MEAN, IMAGENET_STD)])
    ds = torchvision.datasets.ImageFolder(os.path.join(data_dir, "train"), transform=tf)
    x = torch.stack([ds[i][0] for i in range(len(ds))])
    y = torch.tensor([ds[i][1] for i in range(len(ds))], dtype=torch.int64)
    from PIL import Image
    r = resize_side(size)
    top = int(round((r - size) / 2.0))
    mean = np.array(IMAGENET_MEAN, np.float32)[:, None, None]
    std = np.array(IMAGENET_STD, np.float32)[:, None, None]
    for i, (path, _) in enumerate(ds.samples):
        px = np.asarray(Image.open(path).convert("RGB"))
        assert px.shape[:2] == (r, r), f"{path}: {px.shape}, not {r}x{r}"
        q = px[top:top + size, top:top + size].transpose(2, 0, 1).astype(np.float32)
        want = (q / np.float32(255) - mean) / std
        assert np.array_equal(x[i].numpy(), want), f"{path}: transforms differ from dtnn's"
    return x, y


def load_xy(data_dir, size):
    if size:
        x, y = read_images(data_dir, size)
        return x.double(), y
    x = torch.from_numpy(np.load(os.path.join(data_dir, "train_x.npy"))).double()
    y = torch.from_numpy(np.load(os.path.join(data_dir, "train_y.npy")).astype(np.int64))
    return x, y


def compare(model_name, init_path, data_dir, args, result_path, size=0):
    batch, lr, momentum, patterns, freeze_bn = settings(args)
    init = load_init(init_path)
    x, y = load_xy(data_dir, int(size))
    want, frozen, eval_bn, margin = train(model_name, init, x, y, batch, lr, momentum, patterns,
                                          freeze_bn)
    got = read_safetensors(result_path)
    problems, worst = [], 0.0
    fixed = set(frozen) | {f"{m}.{s}" for m in eval_bn for s in STATS}
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


def write_checkpoint(model_name, classes, out):
    try:
        import torchvision  # noqa: F401  (what the image-folder commands need besides torch)
        import PIL  # noqa: F401
    except ImportError:
        print("torch_freeze: python3-torchvision or python3-pil is not installed; skipping")
        return 77
    torch.manual_seed(0)
    model = make_model(model_name, int(classes))
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)
    w = SafetensorsWriter()
    for k, v in model.state_dict().items():
        w.add(k, v)
    w.write(out)
    print(f"torch_freeze: {out}: torchvision {model_name}, {classes} classes, "
          f"{sum(p.numel() for p in model.parameters())} parameters")
    return 0


def make_images(model_name, init_path, data_dir, size, classes, per_class, args):
    from PIL import Image
    size, classes, per_class = int(size), int(classes), int(per_class)
    batch, lr, momentum, patterns, freeze_bn = settings(args)
    init = None if init_path == "none" else load_init(init_path)
    r = resize_side(size)
    for seed in range(SEED_TRIES if init else 1):
        rng = np.random.default_rng(seed)
        for c in range(classes):
            d = os.path.join(data_dir, "train", f"class{c}")
            os.makedirs(d, exist_ok=True)
            for i in range(per_class):
                px = rng.integers(0, 256, (r, r, 3), dtype=np.uint8)
                Image.fromarray(px, "RGB").save(os.path.join(d, f"img{i:02d}.png"))
        if not init:
            return 0
        x, y = load_xy(data_dir, size)
        _, _, _, margin = train(model_name, init, x, y, batch, lr, momentum, patterns,
                                freeze_bn)
        if margin >= MIN_MARGIN:
            print(f"torch_freeze: images seed {seed}, kink margin {margin:.2e}")
            return 0
    print(f"torch_freeze: no image seed in {SEED_TRIES} keeps the kink margin {MIN_MARGIN}")
    return 1


def make_init(out, ck_path, exclude, fresh_paths):
    pats = [p for p in exclude.split(",") if p]
    ck = load_init(ck_path)
    fresh = [load_init(f) for f in fresh_paths]
    names = [n for n in ck if any(fnmatch.fnmatchcase(n, p) for p in pats)]
    bad = [f"{path}: {name} is not the checkpoint's" for path, f in zip(fresh_paths, fresh)
           for name, t in ck.items()
           if name not in names and not name.endswith(STATS) and not torch.equal(f[name], t)]
    bad += [f"{path}: fresh {name} differs from {fresh_paths[0]}'s"
            for path, f in zip(fresh_paths[1:], fresh[1:]) for name in names
            if not torch.equal(f[name], fresh[0][name])]
    if bad or not names:
        print(f"torch_freeze: FAIL: {len(bad)} mismatches (first: {bad[:1]}), "
              f"{len(names)} tensors excluded")
        return 1
    w = SafetensorsWriter()
    for k, v in ck.items():
        w.add(k, fresh[0][k] if k in names else v)
    w.write(out)
    print(f"torch_freeze: --init loaded {len(ck) - len(names)} tensors (every parameter bitwise, "
          f"in {len(fresh)} runs), {len(names)} fresh: {', '.join(names)} (the same in each)")
    return 0


def main():
    a = sys.argv
    if len(a) == 12 and a[1] == "data":
        return make_data(*a[2:7], a[7:12])
    if len(a) in (11, 12) and a[1] == "compare":
        return compare(*a[2:5], a[5:10], a[10], *a[11:])
    if len(a) == 5 and a[1] == "checkpoint":
        return write_checkpoint(*a[2:5])
    if len(a) == 13 and a[1] == "images":
        return make_images(*a[2:8], a[8:13])
    if len(a) >= 6 and a[1] == "init":
        return make_init(*a[2:5], a[5:])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
