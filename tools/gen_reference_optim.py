"""gen_reference_optim.py -- the zoo models rebuilt in PyTorch (LeNet5, ResNet20, with dtnn's
module names) and their optimizer trajectories, tests/ref/optim_*.safetensors, for
tools/gen_reference.py, whose top describes the files and why the trajectories are float64 runs
from searched seeds. Kinks watches the ReLU inputs and max-pool gaps of those runs."""

import torch
import torch.nn as nn
import torch.nn.functional as F

from gen_reference_writer import SafetensorsWriter


class Kinks:
    """The smallest distance of any ReLU input from 0, and of any max-pool winner from the
    runner-up, seen while enabled: how close the reference run came to a point where a rounding
    difference would flip a ReLU mask or a pooling argmax (see optim_file)."""
    enabled = False
    margin = float("inf")


def relu(x):
    if Kinks.enabled:
        Kinks.margin = min(Kinks.margin, float(x.detach().abs().min()))
    return F.relu(x)


def maxpool2(x):
    if Kinks.enabled:
        n, c, h, w = x.shape
        win = x.detach()[:, :, :h - h % 2, :w - w % 2].unfold(2, 2, 2).unfold(3, 2, 2)
        top2 = win.reshape(n, c, h // 2, w // 2, 4).topk(2, dim=-1).values
        # Windows of zeros (after a ReLU) tie harmlessly: every candidate gets gradient 0.
        gap = (top2[..., 0] - top2[..., 1])[top2[..., 0] > 0]
        if gap.numel():
            Kinks.margin = min(Kinks.margin, float(gap.min()))
    return F.max_pool2d(x, 2)


class LeNet5(nn.Module):
    """src/model/zoo.c build_lenet5."""

    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5, padding=2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, classes)

    def forward(self, x):
        x = maxpool2(relu(self.conv1(x)))
        x = maxpool2(relu(self.conv2(x)))
        x = torch.flatten(x, 1)
        return self.fc3(relu(self.fc2(relu(self.fc1(x)))))


class BasicBlock(nn.Module):
    """src/model/zoo.c basic_block: option-A shortcut centred in the wider channel range."""

    def __init__(self, in_planes, planes, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.stride = stride
        self.pad = (planes - in_planes) // 2
        self.extra = planes - in_planes - self.pad
        self.project = stride != 1 or in_planes != planes

    def forward(self, x):
        out = relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        sc = x
        if self.project:
            sc = F.pad(x[:, :, ::self.stride, ::self.stride], (0, 0, 0, 0, self.pad, self.extra))
        return relu(out + sc)


class ResNet20(nn.Module):
    """src/model/zoo.c build_cifar_resnet with 3 blocks per stage (or `blocks`: ResNet-6n+2)."""

    def __init__(self, classes=10, blocks=3):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        in_planes = 16
        for stage in range(3):
            planes = 16 << stage
            layer = []
            for i in range(blocks):
                layer.append(BasicBlock(in_planes, planes, 2 if stage > 0 and i == 0 else 1))
                in_planes = planes
            self.add_module(f"layer{stage + 1}", nn.Sequential(*layer))
        self.fc = nn.Linear(64, classes)

    def forward(self, x):
        x = relu(self.bn1(self.conv1(x)))
        x = self.layer3(self.layer2(self.layer1(x)))
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(x)


# (name, dtnn configuration for the metadata, PyTorch constructor). The adaptive optimizers
# run with eps = ADAPTIVE_EPS rather than their default 1e-8: see "well conditioned" at the top
# of gen_reference.py.
ADAPTIVE_EPS = 1e-4
OPTIMIZERS = [
    ("sgd", "kind=sgd lr=0.05 momentum=0.9 nesterov=1 weight_decay=0.0005",
     lambda m: torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9, nesterov=True,
                               weight_decay=5e-4), None),
    ("adam", f"kind=adam lr=0.001 weight_decay=0.0001 eps={ADAPTIVE_EPS:g}",
     lambda m: torch.optim.Adam(m.parameters(), lr=1e-3, weight_decay=1e-4, eps=ADAPTIVE_EPS),
     None),
    ("adamw", f"kind=adamw lr=0.001 weight_decay=0.01 eps={ADAPTIVE_EPS:g}",
     lambda m: torch.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=0.01, eps=ADAPTIVE_EPS),
     None),
    ("rmsprop", f"kind=rmsprop lr=0.001 momentum=0.9 eps={ADAPTIVE_EPS:g}",
     lambda m: torch.optim.RMSprop(m.parameters(), lr=1e-3, momentum=0.9, eps=ADAPTIVE_EPS),
     None),
]


def decay_groups(model, weight_decay, **extra):
    """The large-batch recipes' parameter groups: batch-norm parameters and every bias apart,
    without weight decay (timm's param_groups_weight_decay; MLPerf LARS's skip list). extra
    marks the first (decayed) group, e.g. for LARS's adaptation."""
    norm = {id(p) for mod in model.modules() if isinstance(mod, nn.modules.batchnorm._BatchNorm)
            for p in mod.parameters(recurse=False)}
    decayed = [p for n, p in model.named_parameters()
               if id(p) not in norm and not n.endswith(".bias")]
    plain = [p for n, p in model.named_parameters() if id(p) in norm or n.endswith(".bias")]
    return [dict(params=decayed, weight_decay=weight_decay, adapt=True, **extra),
            dict(params=plain, weight_decay=0.0, adapt=False)]


class LarsReference(torch.optim.Optimizer):
    """LARS as the MLPerf ResNet-50 reference defines it, written here from its rule: for a
    tensor of an adapted group, trust = eta |w| / (|g| + wd |w| + eps) where both norms are
    positive (else 1), the step lr * trust, g += wd w; excluded tensors step with lr and no
    decay; v = momentum v + step g; w -= v. PyTorch has no LARS."""

    def __init__(self, groups, lr, momentum, eta, eps):
        super().__init__(groups, dict(lr=lr, momentum=momentum, eta=eta, eps=eps,
                                      weight_decay=0.0, adapt=False))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                g, wd, step = p.grad, group["weight_decay"], group["lr"]
                if group["adapt"]:
                    wn, gn = float(p.norm()), float(g.norm())
                    if wn > 0 and gn > 0:
                        step = step * group["eta"] * wn / (gn + wd * wn + group["eps"])
                    g = g + wd * p
                v = self.state[p].setdefault("momentum_buffer", torch.zeros_like(p))
                v.mul_(group["momentum"]).add_(g, alpha=step)
                p.sub_(v)


def optimizers_torch2():
    """NAdam (torch.optim.NAdam of PyTorch 2: 1.13's multiplies mu twice into mu_product_next),
    LARS, LAMB (timm.optim.Lamb), and SGD with clip_grad_norm_ and parameter groups. Each
    entry: (name, dtnn configuration, constructor from the model, clip_grad_norm_ bound)."""
    if int(torch.__version__.split(".")[0]) < 2:
        raise RuntimeError(f"optim_torch2_* need PyTorch 2 (this is {torch.__version__}): run "
                           "with a virtualenv's python, see the top of tools/gen_reference.py")
    import timm.optim  # pylint: disable=import-outside-toplevel
    return [
        ("nadam", f"kind=nadam lr=0.002 weight_decay=0.0001 eps={ADAPTIVE_EPS:g}",
         lambda m: torch.optim.NAdam(m.parameters(), lr=2e-3, weight_decay=1e-4,
                                     eps=ADAPTIVE_EPS), None),
        ("lars", "kind=lars lr=2 momentum=0.9 weight_decay=0.0005",
         lambda m: LarsReference(decay_groups(m, 5e-4), lr=2.0, momentum=0.9, eta=0.001,
                                 eps=0.0), None),
        ("lamb", f"kind=lamb lr=0.01 weight_decay=0.01 eps={ADAPTIVE_EPS:g} clip_grad_norm=1",
         lambda m: timm.optim.Lamb(decay_groups(m, 0.01), lr=0.01, eps=ADAPTIVE_EPS,
                                   max_grad_norm=1.0), None),
        ("sgd_clip", "kind=sgd lr=0.05 momentum=0.9 weight_decay=0.0005 no_decay=norm,bias "
         "clip_grad_norm=0.5",
         lambda m: torch.optim.SGD(decay_groups(m, 5e-4), lr=0.05, momentum=0.9), 0.5),
    ]
STEPS = 5
REF_DTYPE = torch.float64
MIN_MARGIN = 3e-6
MAX_SEED_TRIES = 1000


def to_dtype(state, dtype):
    return {k: (v.to(dtype) if v.is_floating_point() else v.clone()) for k, v in state.items()}


def train(model_cls, init_state, x, labels, make, clip, dtype):
    """STEPS training steps in dtype from init_state; returns (state_dict, losses)."""
    model = model_cls().to(dtype)
    model.load_state_dict(to_dtype(init_state, dtype))
    model.train()
    opt = make(model)
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = F.cross_entropy(model(x.to(dtype)), labels)
        loss.backward()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        losses.append(loss.item())
    return model.state_dict(), losses


def deviation(a, b):
    """Max |a - b| over the floating tensors of two state_dicts."""
    return max(float((a[k].double() - b[k].double()).abs().max()) for k in a
               if a[k].is_floating_point())


def mean_deviation(a, b):
    """Mean |a - b| over all values of the floating tensors of two state_dicts."""
    total, count = 0.0, 0
    for k in a:
        if a[k].is_floating_point():
            total += float((a[k].double() - b[k].double()).abs().sum())
            count += a[k].numel()
    return total / count


def optim_file(model_cls, name, batch, first_seed, optimizers=None):
    """The reference of one zoo model: the first seed from first_seed whose float64 runs keep
    every ReLU input and max-pool winner at least MIN_MARGIN away from its kink (see the top of
    gen_reference.py), and the STEPS-step trajectories of every optimizer from it."""
    optimizers = optimizers or OPTIMIZERS
    for seed in range(first_seed, first_seed + MAX_SEED_TRIES):
        torch.manual_seed(seed)
        init_state = {k: v.clone() for k, v in model_cls().state_dict().items()}
        x = torch.randn(batch)
        labels = torch.randint(0, 10, (batch[0],), dtype=torch.int64)
        runs = []
        Kinks.enabled = True
        for _, _, make, clip in optimizers:
            Kinks.margin = float("inf")
            runs.append(train(model_cls, init_state, x, labels, make, clip, REF_DTYPE) +
                        (Kinks.margin,))
            if Kinks.margin < MIN_MARGIN:
                break
        Kinks.enabled = False
        if len(runs) == len(optimizers) and runs[-1][2] >= MIN_MARGIN:
            break
        print(f"  {name} seed {seed}: a kink margin of {Kinks.margin:.2e}, trying the next")
    else:
        raise RuntimeError(f"{name}: no seed in {MAX_SEED_TRIES} tries keeps the margin")

    w = SafetensorsWriter()
    for k, v in init_state.items():
        w.add(f"init.{k}", v)
    w.add("x", x)
    w.add("labels", labels)
    for (opt_name, config, make, clip), (state, losses, margin) in zip(optimizers, runs):
        for k, v in to_dtype(state, torch.float32).items():
            w.add(f"{opt_name}.{k}", v)
        w.add(f"{opt_name}.losses", torch.tensor(losses, dtype=torch.float32))
        # PyTorch's own float32 run, for the record: how well conditioned the trajectory is.
        state32, losses32 = train(model_cls, init_state, x, labels, make, clip, torch.float32)
        dev = deviation(state32, state)
        mean_dev = mean_deviation(state32, state)
        loss_dev = max(abs(a - b) / abs(b) for a, b in zip(losses32, losses))
        w.meta[f"opt.{opt_name}"] = config
        w.meta[f"margin.{opt_name}"] = f"{margin:.3g}"
        w.meta[f"float32_deviation.{opt_name}"] = f"{dev:.3g}"
        w.meta[f"float32_mean_deviation.{opt_name}"] = f"{mean_dev:.3g}"
        w.meta[f"float32_loss_deviation.{opt_name}"] = f"{loss_dev:.3g}"
        print(f"  {name} {opt_name}: losses " + " ".join(f"{v:.5f}" for v in losses) +
              f"; kink margin {margin:.2e}; PyTorch float32 ends {dev:.2e} from float64")
    w.meta["model"] = name
    w.meta["seed"] = str(seed)
    w.meta["steps"] = str(STEPS)
    w.meta["optimizers"] = " ".join(o[0] for o in optimizers)
    w.meta["reference_dtype"] = str(REF_DTYPE).replace("torch.", "")
    w.meta["generator"] = f"tools/gen_reference.py, torch {torch.__version__}"
    return w
