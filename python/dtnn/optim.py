"""Optimizers and learning-rate schedules, as `dtnn train`'s options define them.

Each optimizer only fills libdtnn's dtnn_opt_params: the update itself is the library's
(the same backend operation the CLI runs), so a value left as None takes the library's
default for that optimizer, exactly as an option left out of `dtnn train` does.
"""
from ._lib import check, ffi, lib, new_error


class Optimizer:
    """Base: kind is the library's name ("sgd", "adam", ...); options are dtnn_opt_params
    fields (None: the optimizer's default)."""

    kind = None

    def __init__(self, lr, **options):
        if not lr > 0:
            raise ValueError(f"lr must be positive, got {lr}")
        self.lr = float(lr)
        self.options = {k: v for k, v in options.items() if v is not None}

    def params(self):
        """A filled dtnn_opt_params (cffi)."""
        err = new_error()
        kind = ffi.new("dtnn_opt_kind *")
        check(lib.dtnn_opt_parse(self.kind.encode(), kind, err), err)
        p = ffi.new("dtnn_opt_params *")
        lib.dtnn_opt_params_default(p, kind[0])
        for key, value in self.options.items():
            if key == "no_decay":
                groups = ffi.new("unsigned *")
                spec = value if isinstance(value, str) else ",".join(value) or "none"
                check(lib.dtnn_opt_parse_groups(spec.encode(), groups, err), err, "no_decay")
                p.no_decay = groups[0]
            elif key == "betas":
                p.beta1, p.beta2 = (float(b) for b in value)
            else:
                setattr(p, key, value)
        return p

    def __repr__(self):
        opts = "".join(f", {k}={v!r}" for k, v in self.options.items())
        return f"{type(self).__name__}(lr={self.lr}{opts})"


class SGD(Optimizer):
    """torch.optim.SGD."""
    kind = "sgd"

    def __init__(self, lr=0.01, momentum=None, nesterov=False, weight_decay=None,
                 dampening=None, no_decay=None, clip_grad_norm=None):
        super().__init__(lr, momentum=momentum, nesterov=int(nesterov),
                         weight_decay=weight_decay, dampening=dampening, no_decay=no_decay,
                         clip_grad_norm=clip_grad_norm)


class Adam(Optimizer):
    """torch.optim.Adam."""
    kind = "adam"

    def __init__(self, lr=0.001, betas=None, eps=None, weight_decay=None, no_decay=None,
                 clip_grad_norm=None):
        super().__init__(lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         no_decay=no_decay, clip_grad_norm=clip_grad_norm)


class AdamW(Adam):
    """torch.optim.AdamW (decoupled weight decay, 0.01 by default)."""
    kind = "adamw"


class NAdam(Optimizer):
    """torch.optim.NAdam (PyTorch 2's)."""
    kind = "nadam"

    def __init__(self, lr=0.002, betas=None, eps=None, weight_decay=None, momentum_decay=None,
                 no_decay=None, clip_grad_norm=None):
        super().__init__(lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         momentum_decay=momentum_decay, no_decay=no_decay,
                         clip_grad_norm=clip_grad_norm)


class RMSprop(Optimizer):
    """torch.optim.RMSprop."""
    kind = "rmsprop"

    def __init__(self, lr=0.01, alpha=None, eps=None, momentum=None, centered=False,
                 weight_decay=None, no_decay=None, clip_grad_norm=None):
        super().__init__(lr, alpha=alpha, eps=eps, momentum=momentum, centered=int(centered),
                         weight_decay=weight_decay, no_decay=no_decay,
                         clip_grad_norm=clip_grad_norm)


class LARS(Optimizer):
    """LARS as the MLPerf ResNet-50 reference (momentum 0.9, trust coefficient 0.001; norm
    layers and biases outside adaptation and decay unless no_decay says otherwise)."""
    kind = "lars"

    def __init__(self, lr, momentum=None, nesterov=False, weight_decay=None,
                 trust_coefficient=None, eps=None, no_decay=None, clip_grad_norm=None):
        super().__init__(lr, momentum=momentum, nesterov=int(nesterov),
                         weight_decay=weight_decay, trust_coefficient=trust_coefficient,
                         eps=eps, no_decay=no_decay, clip_grad_norm=clip_grad_norm)


class LAMB(Optimizer):
    """LAMB as timm's Lamb (eps 1e-6, weight decay 0.01)."""
    kind = "lamb"

    def __init__(self, lr=0.001, betas=None, eps=None, weight_decay=None, no_decay=None,
                 clip_grad_norm=None):
        super().__init__(lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         no_decay=no_decay, clip_grad_norm=clip_grad_norm)


def schedule_params(schedule, lr, warmup_epochs=0.0):
    """dtnn_sched_params for a schedule: None (constant), the CLI's --lr-schedule text
    ("cosine", "step:30:0.1", "multistep:30,60:0.1", "poly:2", "plateau:5:0.1"), or one of
    the classes below."""
    spec = "constant" if schedule is None else str(schedule)
    err = new_error()
    p = ffi.new("dtnn_sched_params *")
    lib.dtnn_sched_params_default(p)
    check(lib.dtnn_sched_parse(spec.encode(), p, err), err, "schedule")
    p.base_lr = lr
    p.warmup_epochs = float(getattr(schedule, "warmup_epochs", warmup_epochs) or 0.0)
    if p.warmup_epochs < 0:
        raise ValueError("warmup_epochs must be >= 0")
    return p


class Schedule:
    """A learning-rate schedule; str() is its --lr-schedule text. warmup_epochs: a linear
    warm-up before it (Goyal et al.)."""

    def __init__(self, spec, warmup_epochs=0.0):
        self.spec = spec
        self.warmup_epochs = warmup_epochs

    def __str__(self):
        return self.spec

    def __repr__(self):
        return f"{type(self).__name__}({self.spec!r}, warmup_epochs={self.warmup_epochs})"


def _num(x):
    return repr(float(x)) if not float(x).is_integer() else str(int(x))


class Cosine(Schedule):
    """CosineAnnealingLR over t_max epochs (0: the run's) down to eta_min."""

    def __init__(self, t_max=0, eta_min=0.0, warmup_epochs=0.0):
        super().__init__(f"cosine:{int(t_max)}:{_num(eta_min)}", warmup_epochs)


class StepLR(Schedule):
    """StepLR: lr x gamma every step_size epochs."""

    def __init__(self, step_size, gamma=0.1, warmup_epochs=0.0):
        super().__init__(f"step:{int(step_size)}:{_num(gamma)}", warmup_epochs)


class MultiStepLR(Schedule):
    """MultiStepLR: lr x gamma at each milestone epoch."""

    def __init__(self, milestones, gamma=0.1, warmup_epochs=0.0):
        ms = ",".join(str(int(m)) for m in milestones)
        super().__init__(f"multistep:{ms}:{_num(gamma)}", warmup_epochs)


class PolynomialLR(Schedule):
    """PolynomialLR: lr (1 - epoch / total)^power over total epochs (0: the run's)."""

    def __init__(self, power=1.0, total=0, warmup_epochs=0.0):
        super().__init__(f"poly:{_num(power)}:{int(total)}", warmup_epochs)


class ReduceLROnPlateau(Schedule):
    """ReduceLROnPlateau on the validation loss (else the training loss)."""

    def __init__(self, patience=10, factor=0.1, warmup_epochs=0.0):
        super().__init__(f"plateau:{int(patience)}:{_num(factor)}", warmup_epochs)
