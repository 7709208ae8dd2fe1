"""gen_reference_layers.py -- the layer and loss cases of tests/ref/layers.safetensors, for
tools/gen_reference.py, whose top describes the file (tensor names, the recipe in each case's
metadata, the selection convolutions of multi-input layers). Each group of cases added after the
first runs from its own seed, after all older cases, so the older cases keep their bytes."""

import torch
import torch.nn as nn
import torch.nn.functional as F

from gen_reference_writer import SafetensorsWriter


class Lambda(nn.Module):
    """A parameter-free module from a function, so every case is recorded the same way."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


def selection_conv(in_channels, first, count):
    """1x1 conv without bias whose output channel i is input channel first + i, exactly."""
    conv = nn.Conv2d(in_channels, count, 1, bias=False)
    with torch.no_grad():
        conv.weight.zero_()
        for i in range(count):
            conv.weight[i, first + i, 0, 0] = 1.0
    return conv


class AddOfSlices(nn.Module):
    """y = sum of the outputs of selection convs sel1, sel2, ... (each a channel block of x)."""

    def __init__(self, in_channels, blocks):
        super().__init__()
        for i, (first, count) in enumerate(blocks):
            self.add_module(f"sel{i + 1}", selection_conv(in_channels, first, count))
        self.n = len(blocks)

    def forward(self, x):
        parts = [getattr(self, f"sel{i + 1}")(x) for i in range(self.n)]
        y = parts[0]
        for p in parts[1:]:
            y = y + p
        return y


class SubOfSlices(AddOfSlices):
    def forward(self, x):
        return self.sel1(x) - self.sel2(x)


class ScaleByConv(nn.Module):
    """A per-sample scalar s = conv1x1(mean over H x W of x) (1 channel), then fn(s, x)."""

    def __init__(self, c, fn):
        super().__init__()
        self.s = nn.Conv2d(c, 1, 1)
        self.fn = fn

    def forward(self, x):
        return self.fn(self.s(x.mean((2, 3), keepdim=True)), x)


class PlaneByConv(nn.Module):
    """A 1 x H x W map s = conv3x3(x), then fn(x, s): broadcast over the channels."""

    def __init__(self, c, fn):
        super().__init__()
        self.s = nn.Conv2d(c, 1, 3, padding=1)
        self.fn = fn

    def forward(self, x):
        return self.fn(x, self.s(x))


class CatOfSlices(AddOfSlices):
    def forward(self, x):
        return torch.cat([getattr(self, f"sel{i + 1}")(x) for i in range(self.n)], dim=1)


def shape_str(x):
    """Per-sample shape of an input batch as dtnn sees it: CxHxW, flat [N, F] is Fx1x1."""
    s = list(x.shape[1:]) + [1] * (4 - x.dim())
    return "x".join(str(v) for v in s)


def record(w, cases, name, layers, module, x):
    """Runs module on x in training mode, backpropagates a random dy, stores everything."""
    module.train()
    buffers_before = {k: v.clone() for k, v in module.named_buffers()}
    x = x.clone().requires_grad_(True)
    y = module(x)
    dy = torch.randn_like(y)
    y.backward(dy)
    w.add(f"{name}.x", x)
    for k, p in module.named_parameters():
        w.add(f"{name}.{k}", p)
    for k, v in buffers_before.items():
        w.add(f"{name}.{k}", v)
    w.add(f"{name}.dy", dy)
    w.add(f"{name}.y", y)
    w.add(f"{name}.dx", x.grad)
    for k, p in module.named_parameters():
        w.add(f"{name}.grad.{k}", p.grad)
    for k, v in module.named_buffers():
        w.add(f"{name}.out.{k}", v)
    w.meta[name] = " ; ".join([f"input={shape_str(x)}"] + layers)
    cases.append(name)


def record_loss(w, cases, name, loss_spec, logits, labels, fn):
    z = logits.clone().requires_grad_(True)
    loss = fn(z, labels)
    loss.backward()
    w.add(f"{name}.x", z)
    w.add(f"{name}.labels", labels)
    w.add(f"{name}.loss", loss)
    w.add(f"{name}.dx", z.grad)
    w.meta[name] = f"input={shape_str(z)} ; type=flatten ; {loss_spec}"
    cases.append(name)


def conv_case(w, cases, name, n, c, h, wd, k, kernel, stride=1, padding=0, dilation=1, groups=1,
              bias=True):
    conv = nn.Conv2d(c, k, kernel, stride=stride, padding=padding, dilation=dilation,
                     groups=groups, bias=bias)

    def pair(v):
        return f"{v[0]}x{v[1]}" if isinstance(v, tuple) else str(v)

    opts = (f"type=conv2d filters={k} kernel={pair(kernel)} stride={pair(stride)} "
            f"padding={pair(padding)} dilation={pair(dilation)} groups={groups} "
            f"bias={int(bias)}")
    record(w, cases, name, [opts], conv, torch.randn(n, c, h, wd))


def layer_cases():
    torch.manual_seed(1234)
    w = SafetensorsWriter()
    cases = []

    # Convolutions: every kernel size, stride, padding, dilation and grouping the issue names,
    # odd channel counts and non-square inputs so a swapped H/W or C/K shows up.
    conv_case(w, cases, "conv_k3_s2_p1", 3, 3, 11, 9, 5, 3, stride=2, padding=1)
    conv_case(w, cases, "conv_k1", 1, 5, 6, 7, 7, 1)
    conv_case(w, cases, "conv_k5_p2", 3, 7, 9, 8, 4, 5, padding=2)
    conv_case(w, cases, "conv_k7_s2_p0_nobias", 1, 3, 13, 12, 5, 7, stride=2, bias=False)
    conv_case(w, cases, "conv_k3_dil2_p2", 3, 5, 10, 9, 3, 3, padding=2, dilation=2)
    conv_case(w, cases, "conv_groups3", 3, 6, 7, 8, 9, 3, padding=1, groups=3)
    # Depthwise, as MobileNetV2's: one group per channel, stride 2, no bias.
    conv_case(w, cases, "conv_depthwise_s2", 2, 6, 9, 8, 6, 3, stride=2, padding=1, groups=6,
              bias=False)
    conv_case(w, cases, "conv_k3_p0_nobias", 3, 7, 8, 10, 6, 3, bias=False)
    conv_case(w, cases, "conv_rect", 3, 3, 9, 11, 5, (3, 5), stride=(2, 1), padding=(1, 2))

    # Linear on a flat input (dtnn: F x 1 x 1).
    record(w, cases, "linear", ["type=linear outputs=7"], nn.Linear(13, 7), torch.randn(3, 13))
    record(w, cases, "linear_nobias", ["type=linear outputs=5 bias=0"],
           nn.Linear(9, 5, bias=False), torch.randn(1, 9))

    # Pooling.
    record(w, cases, "maxpool_k3_s2_p1", ["type=maxpool kernel=3 stride=2 padding=1"],
           nn.MaxPool2d(3, stride=2, padding=1), torch.randn(2, 4, 9, 11))
    record(w, cases, "maxpool_k2", ["type=maxpool kernel=2"], nn.MaxPool2d(2),
           torch.randn(3, 3, 9, 7))
    record(w, cases, "avgpool_k3_s2_p1_incl",
           ["type=avgpool kernel=3 stride=2 padding=1 count_include_pad=1"],
           nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=True), torch.randn(2, 4, 9, 11))
    record(w, cases, "avgpool_k3_s2_p1_excl",
           ["type=avgpool kernel=3 stride=2 padding=1 count_include_pad=0"],
           nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False),
           torch.randn(2, 4, 9, 11))
    record(w, cases, "avgpool_k2", ["type=avgpool kernel=2"], nn.AvgPool2d(2),
           torch.randn(3, 3, 9, 7))
    record(w, cases, "global_avgpool", ["type=global_avgpool"], nn.AdaptiveAvgPool2d(1),
           torch.randn(3, 5, 7, 6))
    # Overlapping windows (7 -> 3) and repeated ones (2 -> 5); the identity size (6 -> 6).
    record(w, cases, "adaptive_avgpool_3x5", ["type=adaptive_avgpool output=3x5"],
           nn.AdaptiveAvgPool2d((3, 5)), torch.randn(2, 3, 7, 2))
    record(w, cases, "adaptive_avgpool_6x4", ["type=adaptive_avgpool output=6x4"],
           nn.AdaptiveAvgPool2d((6, 4)), torch.randn(2, 2, 6, 9))

    # Batch norm in training mode; non-trivial affine parameters and running statistics so the
    # momentum update and the unbiased running variance are visible.
    def batchnorm(module, c):
        with torch.no_grad():
            module.weight.copy_(1.0 + 0.5 * torch.randn(c))
            module.bias.copy_(0.5 * torch.randn(c))
            module.running_mean.copy_(0.3 * torch.randn(c))
            module.running_var.copy_(0.5 + torch.rand(c))
        return module

    record(w, cases, "batchnorm2d", ["type=batchnorm"], batchnorm(nn.BatchNorm2d(4), 4),
           1.5 * torch.randn(3, 4, 5, 6) + 0.7)
    record(w, cases, "batchnorm2d_opts", ["type=batchnorm momentum=0.25 eps=0.001"],
           batchnorm(nn.BatchNorm2d(3, eps=1e-3, momentum=0.25), 3),
           torch.randn(2, 3, 3, 5) - 0.4)
    record(w, cases, "batchnorm1d", ["type=batchnorm"], batchnorm(nn.BatchNorm1d(7), 7),
           2.0 * torch.randn(5, 7) + 1.0)

    # Element-wise activations.
    act_x = torch.randn(2, 3, 5, 4) * 2.0
    record(w, cases, "relu", ["type=relu"], nn.ReLU(), act_x)
    record(w, cases, "leaky_relu", ["type=leaky_relu"], nn.LeakyReLU(0.01), act_x)
    record(w, cases, "leaky_relu_0.2", ["type=leaky_relu slope=0.2"], nn.LeakyReLU(0.2), act_x)
    record(w, cases, "sigmoid", ["type=sigmoid"], nn.Sigmoid(), act_x)
    record(w, cases, "tanh", ["type=tanh"], nn.Tanh(), act_x)
    record(w, cases, "relu6", ["type=relu6"], nn.ReLU6(), act_x * 3.0)
    record(w, cases, "softmax", ["type=softmax"], nn.Softmax(dim=1), 3.0 * torch.randn(4, 9))

    # Multi-input layers on channel slices of one input (see the top of gen_reference.py).
    sel = "type=conv2d filters={} kernel=1 bias=0 name={} inputs=input"
    record(w, cases, "add2",
           [sel.format(3, "sel1"), sel.format(3, "sel2"), "type=add inputs=sel1,sel2"],
           AddOfSlices(6, [(0, 3), (3, 3)]), torch.randn(2, 6, 5, 7))
    record(w, cases, "add3",
           [sel.format(2, "sel1"), sel.format(2, "sel2"), sel.format(2, "sel3"),
            "type=add inputs=sel1,sel2,sel3"],
           AddOfSlices(6, [(4, 2), (0, 2), (2, 2)]), torch.randn(3, 6, 4, 3))
    # The residual case: both inputs are the same producer, so dx = 2 dy by accumulation.
    record(w, cases, "add_same", ["type=add inputs=input,input"], Lambda(lambda x: x + x),
           torch.randn(2, 3, 4, 5))
    # Channel blocks in swapped order and of unequal size, so concat is not an identity.
    record(w, cases, "concat",
           [sel.format(3, "sel1"), sel.format(2, "sel2"), "type=concat inputs=sel1,sel2"],
           CatOfSlices(5, [(2, 3), (0, 2)]), torch.randn(2, 5, 4, 6))
    record(w, cases, "concat_same", ["type=concat inputs=input,input"],
           Lambda(lambda x: torch.cat([x, x], dim=1)), torch.randn(2, 2, 3, 3))

    # Option-A shortcut: subsample and zero-pad channels, default offset (K - C) / 2.
    def shortcut(k, c, stride):
        lo = (k - c) // 2
        return Lambda(lambda x: F.pad(x[:, :, ::stride, ::stride], (0, 0, 0, 0, lo, k - c - lo)))

    record(w, cases, "shortcut_a", ["type=shortcut_a stride=2 filters=8"], shortcut(8, 4, 2),
           torch.randn(2, 4, 8, 8))
    record(w, cases, "shortcut_a_odd", ["type=shortcut_a stride=2 filters=6"], shortcut(6, 3, 2),
           torch.randn(3, 3, 7, 9))

    # Losses on [N, K] logits; BCE and MSE against one-hot targets, mean over all elements.
    n, k = 6, 10
    labels = torch.randint(0, k, (n,), dtype=torch.int64)
    logits = 2.0 * torch.randn(n, k)
    onehot = F.one_hot(labels, k).float()
    record_loss(w, cases, "loss_ce", "loss=ce", logits, labels, F.cross_entropy)
    record_loss(w, cases, "loss_ce_smooth", "loss=ce label_smoothing=0.1", logits, labels,
                lambda z, y: F.cross_entropy(z, y, label_smoothing=0.1))
    record_loss(w, cases, "loss_ce_large", "loss=ce", 40.0 * logits, labels, F.cross_entropy)
    record_loss(w, cases, "loss_bce", "loss=bce", logits, labels,
                lambda z, y: F.binary_cross_entropy_with_logits(z, onehot))
    record_loss(w, cases, "loss_mse", "loss=mse", logits, labels,
                lambda z, y: F.mse_loss(z, onehot))

    new_layer_cases(w, cases, sel)
    constant_cases(w, cases)
    gelu_cases(w, cases)
    div_cases(w, cases)
    erf_cases(w, cases)
    silu_cases(w, cases)
    group_cases(w, cases)
    attention_cases(w, cases)
    w.meta["cases"] = " ".join(cases)
    w.meta["generator"] = f"tools/gen_reference.py, torch {torch.__version__}"
    return w


def new_layer_cases(w, cases, sel):
    """The layers of issue 20 (ONNX's semantics). Recorded after all older cases, from their
    own seed, so the older cases keep their bytes."""
    torch.manual_seed(2020)
    # Inputs up to ~6 in size, so both joins at -3 and 3 and the saturated sides are reached.
    hard_x = torch.randn(2, 3, 5, 4) * 3.0
    record(w, cases, "hardsigmoid", ["type=hardsigmoid"], nn.Hardsigmoid(), hard_x)
    record(w, cases, "hardswish", ["type=hardswish"], nn.Hardswish(), hard_x)
    record(w, cases, "clamp", ["type=clamp min=-0.7 max=1.3"],
           Lambda(lambda x: torch.clamp(x, -0.7, 1.3)), hard_x / 3.0)
    record(w, cases, "clamp_min", ["type=clamp min=0.25"],
           Lambda(lambda x: torch.clamp(x, min=0.25)), hard_x / 3.0)
    record(w, cases, "hardtanh", ["type=hardtanh"], nn.Hardtanh(), hard_x / 3.0)
    record(w, cases, "hardtanh_opts", ["type=hardtanh min_val=-2.5 max_val=0.5"],
           nn.Hardtanh(-2.5, 0.5), hard_x / 3.0)

    # Broadcasting mul / sub / add: squeeze-and-excitation's per-channel scale (the mean over
    # H x W of the input itself, so the gradient reaches x along both paths), a per-sample
    # scalar from a 1x1 conv, a 1 x H x W map over the channels, the same producer twice, and
    # equal shapes through selection convs (see the top of this file).
    gap = "type=global_avgpool name=g inputs=input"
    record(w, cases, "mul_channel", [gap, "type=mul inputs=input,g"],
           Lambda(lambda x: x * x.mean((2, 3), keepdim=True)), torch.randn(2, 5, 4, 6))
    record(w, cases, "mul_sample",
           [gap, "type=conv2d filters=1 kernel=1 name=s inputs=g", "type=mul inputs=s,input"],
           ScaleByConv(4, lambda s, x: s * x), torch.randn(3, 4, 5, 3))
    record(w, cases, "mul_same", ["type=mul inputs=input,input"], Lambda(lambda x: x * x),
           torch.randn(2, 3, 4, 5))
    record(w, cases, "sub_plane",
           ["type=conv2d filters=1 kernel=3 padding=1 name=s inputs=input",
            "type=sub inputs=input,s"], PlaneByConv(3, lambda x, s: x - s),
           torch.randn(2, 3, 5, 4))
    record(w, cases, "sub_sample",
           [gap, "type=conv2d filters=1 kernel=1 name=s inputs=g", "type=sub inputs=s,input"],
           ScaleByConv(3, lambda s, x: s - x), torch.randn(2, 3, 4, 4))
    record(w, cases, "sub_same_shape",
           [sel.format(3, "sel1"), sel.format(3, "sel2"), "type=sub inputs=sel1,sel2"],
           SubOfSlices(6, [(3, 3), (0, 3)]), torch.randn(2, 6, 3, 5))
    record(w, cases, "add_channel", [gap, "type=add inputs=g,input"],
           Lambda(lambda x: x.mean((2, 3), keepdim=True) + x), torch.randn(2, 4, 5, 3))

    record(w, cases, "global_maxpool", ["type=global_maxpool"], nn.AdaptiveMaxPool2d(1),
           torch.randn(3, 5, 7, 6))

    # Pooling: ceil mode (a last window hanging over the input; with kernel 3, stride 3,
    # padding 1 on 5 rows the window that would start in the bottom padding is dropped, while
    # 7 columns keep theirs), dilated max pooling, and what PyTorch cannot say in its pooling
    # modules, written with F.pad: asymmetric padding and padding up to kernel - 1 (-inf pads
    # for max, zeros for count_include_pad=1, and for count_include_pad=0 the sum over the
    # count of input values in each window).
    record(w, cases, "maxpool_ceil", ["type=maxpool kernel=3 stride=2 ceil_mode=1"],
           nn.MaxPool2d(3, stride=2, ceil_mode=True), torch.randn(2, 3, 8, 10))
    record(w, cases, "maxpool_ceil_drop",
           ["type=maxpool kernel=3 stride=3 padding=1 ceil_mode=1"],
           nn.MaxPool2d(3, stride=3, padding=1, ceil_mode=True), torch.randn(2, 3, 5, 7))
    record(w, cases, "maxpool_dil2", ["type=maxpool kernel=3 stride=1 padding=1 dilation=2"],
           nn.MaxPool2d(3, stride=1, padding=1, dilation=2), torch.randn(2, 3, 7, 8))
    record(w, cases, "maxpool_dil_ceil",
           ["type=maxpool kernel=2 stride=2 dilation=2x1 ceil_mode=1"],
           nn.MaxPool2d(2, stride=2, dilation=(2, 1), ceil_mode=True), torch.randn(2, 2, 9, 8))
    record(w, cases, "avgpool_ceil_incl",
           ["type=avgpool kernel=3 stride=2 padding=1 ceil_mode=1 count_include_pad=1"],
           nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True, count_include_pad=True),
           torch.randn(2, 3, 8, 10))
    record(w, cases, "avgpool_ceil_excl",
           ["type=avgpool kernel=3 stride=2 padding=1 ceil_mode=1 count_include_pad=0"],
           nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
           torch.randn(2, 3, 8, 10))
    record(w, cases, "avgpool_ceil_k2", ["type=avgpool kernel=2 ceil_mode=1"],
           nn.AvgPool2d(2, ceil_mode=True), torch.randn(2, 3, 7, 9))

    def padded_max(pads, k, stride):
        t, l, b, r = pads
        return Lambda(lambda x: F.max_pool2d(F.pad(x, (l, r, t, b), value=float("-inf")), k,
                                             stride))

    def padded_avg(pads, k, stride, include):
        t, l, b, r = pads

        def fn(x):
            s = F.avg_pool2d(F.pad(x, (l, r, t, b)), k, stride)
            if include:
                return s
            ones = torch.ones_like(x[:1, :1])
            return s / F.avg_pool2d(F.pad(ones, (l, r, t, b)), k, stride)
        return Lambda(fn)

    record(w, cases, "maxpool_asym", ["type=maxpool kernel=2 stride=2 pads=0,1,1,0"],
           padded_max((0, 1, 1, 0), 2, 2), torch.randn(2, 3, 7, 8))
    record(w, cases, "maxpool_sides",
           ["type=maxpool kernel=3x2 stride=2x1 pad_top=2 pad_bottom=0 pad_left=0 pad_right=1"],
           padded_max((2, 0, 0, 1), (3, 2), (2, 1)), torch.randn(2, 2, 6, 5))
    record(w, cases, "maxpool_pad_k1", ["type=maxpool kernel=3 stride=2 padding=2"],
           padded_max((2, 2, 2, 2), 3, 2), torch.randn(2, 3, 6, 7))
    record(w, cases, "avgpool_asym_incl",
           ["type=avgpool kernel=3 stride=2 pads=1,0,2,1 count_include_pad=1"],
           padded_avg((1, 0, 2, 1), 3, 2, True), torch.randn(2, 3, 7, 8))
    record(w, cases, "avgpool_asym_excl",
           ["type=avgpool kernel=3 stride=2 pads=1,0,2,1 count_include_pad=0"],
           padded_avg((1, 0, 2, 1), 3, 2, False), torch.randn(2, 3, 7, 8))
    # Convolutions padded asymmetrically (ONNX Conv's pads), as F.pad then an unpadded conv:
    # a dense one (dtnn's im2col path) and a depthwise one (its depthwise path).
    class PaddedConv(nn.Conv2d):
        def __init__(self, c, k, kernel, pads, stride=1, groups=1):
            super().__init__(c, k, kernel, stride=stride, groups=groups)
            t, l, b, r = pads
            self.pad4 = (l, r, t, b)

        def forward(self, x):
            return F.conv2d(F.pad(x, self.pad4), self.weight, self.bias, self.stride,
                            groups=self.groups)

    record(w, cases, "conv_asym",
           ["type=conv2d filters=4 kernel=3 stride=2 pads=0,1,2,0"],
           PaddedConv(3, 4, 3, (0, 1, 2, 0), stride=2), torch.randn(2, 3, 7, 8))
    record(w, cases, "conv_dw_asym",
           ["type=conv2d filters=4 kernel=3x2 groups=4 pad_top=1 pad_bottom=0 pad_left=0 "
            "pad_right=1"],
           PaddedConv(4, 4, (3, 2), (1, 0, 0, 1), groups=4), torch.randn(2, 4, 6, 5))
    # 16 channels in and out, where a symmetric 3x3 would go to Winograd or direct.
    record(w, cases, "conv_asym_c16", ["type=conv2d filters=16 kernel=3 pads=1,0,0,2"],
           PaddedConv(16, 16, 3, (1, 0, 0, 2)), torch.randn(1, 16, 6, 6))
    record(w, cases, "avgpool_pad_k1_excl",
           ["type=avgpool kernel=3 stride=1 padding=2 count_include_pad=0"],
           padded_avg((2, 2, 2, 2), 3, 1, False), torch.randn(2, 2, 5, 6))



class ByConstant(nn.Module):
    """fn(x, c) with c a buffer "constant" (dtnn's one-input mul, sub, add: a constant operand,
    saved like running statistics, no gradient), of the given per-sample shape."""

    def __init__(self, shape, fn):
        super().__init__()
        self.register_buffer("constant", torch.randn(shape))
        self.fn = fn

    def forward(self, x):
        return self.fn(x, self.constant)


def constant_cases(w, cases):
    """Constant operands of mul, sub and add (ONNX's Mul / Sub / Add by an initializer) and
    constant padding (the pad layer, F.pad mode "constant"). Their own seed, after all older
    cases, so those keep their bytes."""
    torch.manual_seed(2026)
    record(w, cases, "mul_const_channel", ["type=mul const_shape=4x1x1"],
           ByConstant((4, 1, 1), lambda x, c: x * c), torch.randn(2, 4, 5, 3))
    record(w, cases, "mul_const_map", ["type=mul const_shape=3x4x5"],
           ByConstant((3, 4, 5), lambda x, c: x * c), torch.randn(2, 3, 4, 5))
    record(w, cases, "sub_const_plane", ["type=sub const_shape=1x4x5"],
           ByConstant((1, 4, 5), lambda x, c: x - c), torch.randn(2, 3, 4, 5))
    record(w, cases, "sub_const_reverse", ["type=sub const_shape=3x1x1 reverse=true"],
           ByConstant((3, 1, 1), lambda x, c: c - x), torch.randn(2, 3, 4, 5))
    record(w, cases, "add_const_scalar", ["type=add const_shape=1"],
           ByConstant((1, 1, 1), lambda x, c: x + c), torch.randn(2, 3, 4, 5))
    # Flat [N, features]: a [features] vector, as ONNX broadcasts it against [N, F].
    record(w, cases, "mul_const_features", ["type=mul const_shape=6"],
           ByConstant((6,), lambda x, c: x * c), torch.randn(3, 6))
    record(w, cases, "sub_const_features_reverse", ["type=sub const_shape=6 reverse=true"],
           ByConstant((6,), lambda x, c: c - x), torch.randn(3, 6))
    record(w, cases, "pad_sides", ["type=pad pad_top=1 pad_bottom=2 pad_left=0 pad_right=3 "
                                   "value=1.5"],
           Lambda(lambda x: F.pad(x, (0, 3, 1, 2), value=1.5)), torch.randn(2, 3, 4, 5))
    record(w, cases, "pad_channels",
           ["type=pad pads=2,1,0,1 pad_front=1 pad_back=2 value=-0.5"],
           Lambda(lambda x: F.pad(x, (1, 1, 2, 0, 1, 2), value=-0.5)), torch.randn(2, 3, 4, 3))


def div_cases(w, cases):
    """Division (ONNX Div, torch's /): by a per-channel divisor from the input itself (the
    sigmoid of its mean over H x W, so both paths carry a gradient and the divisor stays near
    1/2), by a constant, and a constant by x (x in [0.5, 1.5)). Its own seed, after all older
    cases, so those keep their values."""
    torch.manual_seed(2033)
    record(w, cases, "div_channel",
           ["type=global_avgpool inputs=input name=g", "type=sigmoid inputs=g name=d",
            "type=div inputs=input,d"],
           Lambda(lambda x: x / torch.sigmoid(x.mean((2, 3), keepdim=True))),
           torch.randn(2, 4, 5, 3))
    record(w, cases, "div_const_channel", ["type=div const_shape=3x1x1"],
           ByConstant((3, 1, 1), lambda x, c: x / c), torch.randn(2, 3, 4, 5))
    record(w, cases, "div_const_reverse", ["type=div const_shape=1x4x5 reverse=true"],
           ByConstant((1, 4, 5), lambda x, c: c / x), torch.rand(2, 3, 4, 5) + 0.5)


def erf_cases(w, cases):
    """erf (ONNX Erf, as GELU's decomposition before opset 20 uses it) over inputs of a few
    units, where it curves and saturates, and sqrt (ONNX Sqrt) on [0.1, 4.1). Their own seed,
    after all older cases."""
    torch.manual_seed(2035)
    record(w, cases, "erf", ["type=erf"], Lambda(torch.erf), torch.randn(2, 3, 5, 4) * 2.0)
    record(w, cases, "sqrt", ["type=sqrt"], Lambda(torch.sqrt), torch.rand(2, 3, 5, 4) * 4.0 + 0.1)


def silu_cases(w, cases):
    """nn.SiLU over inputs of a few units, both tails included. Its own seed, after all older
    cases, so those keep their values."""
    torch.manual_seed(2036)
    record(w, cases, "silu", ["type=silu"], nn.SiLU(), torch.randn(2, 3, 5, 4) * 4.0)


def group_cases(w, cases):
    """Softmax and reductions across channel groups, as ResNeSt's and SKNet's split attention
    write them on [N, G, C/G, H, W]; softmax over the channels at each pixel (groups = C). Their
    own seed, after all older cases, so those keep their values."""
    torch.manual_seed(2040)

    def grouped(g, fn):
        return Lambda(lambda x: fn(x.view(x.shape[0], g, -1, *x.shape[2:])))

    x = torch.randn(2, 6, 3, 4) * 2.0
    record(w, cases, "softmax_groups", ["type=softmax groups=2"],
           grouped(2, lambda v: v.softmax(1).flatten(1, 2)), x)
    record(w, cases, "softmax_channels", ["type=softmax groups=6"],
           Lambda(lambda v: v.softmax(1)), x)
    record(w, cases, "reduce_groups_sum", ["type=reduce axes=channels op=sum groups=2"],
           grouped(2, lambda v: v.sum(1)), x)
    record(w, cases, "reduce_groups_mean", ["type=reduce axes=channels op=mean groups=3"],
           grouped(3, lambda v: v.mean(1)), x)


class Attention(nn.Module):
    """A pre-norm self-attention block on [N, 1, T, D] (T tokens of D features, 2 heads), as
    timm's MobileViT writes it: LayerNorm, one qkv Linear, heads split by view and permute,
    softmax(q k^T) v, heads merged, a projection and the residual."""

    def __init__(self, tokens, dim, heads):
        super().__init__()
        self.t, self.d, self.h = tokens, dim, heads
        self.norm = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        n, t, d, h = x.shape[0], self.t, self.d, self.h
        tokens = x.view(n, t, d)
        qkv = self.qkv(self.norm(tokens)).view(n, t, 3, h, d // h).permute(0, 2, 3, 1, 4)
        q, k, v = qkv[:, 0], qkv[:, 1], qkv[:, 2]
        a = torch.softmax(q @ k.transpose(-2, -1), dim=-1)
        o = (a @ v).permute(0, 2, 1, 3).reshape(n, t, d)
        return (self.proj(o) + tokens).view(n, 1, t, d)


def attention_cases(w, cases):
    """The attention layers (permute, matmul, and softmax, layernorm and linear over the last
    axis) in one block against PyTorch's. Its own seed, after all older cases."""
    torch.manual_seed(2041)
    t, d, h = 6, 8, 2
    hd = d // h
    recipe = [f"type=layernorm axis=last name=norm",
              f"type=linear axis=last outputs={3 * d} name=qkv",
              f"type=permute dims={t}x3x{h}x{hd} perm=1,2,0,3 name=heads",
              f"type=slice start=0 end={h} name=q inputs=heads",
              f"type=slice start={h} end={2 * h} name=k inputs=heads",
              f"type=slice start={2 * h} end={3 * h} name=v inputs=heads",
              f"type=permute dims={h}x{t}x{hd} perm=0,2,1 name=kt inputs=k",
              "type=matmul name=scores inputs=q,kt",
              "type=softmax axis=last name=attn",
              "type=matmul name=mixed inputs=attn,v",
              f"type=permute dims={h}x{t}x{hd} perm=1,0,2 name=merge",
              f"type=reshape shape=1x{t}x{d} name=tokens",
              f"type=linear axis=last outputs={d} name=proj",
              "type=add inputs=proj,input name=out"]
    record(w, cases, "attention", recipe, Attention(t, d, h), torch.randn(2, 1, t, d))


def gelu_cases(w, cases):
    """GELU in both of nn.GELU's forms, over inputs of a few units (where both curve the
    most). Its own seed, after all older cases, so those keep their values."""
    torch.manual_seed(2031)
    record(w, cases, "gelu", ["type=gelu"], nn.GELU(), torch.randn(2, 3, 5, 4) * 3.0)
    record(w, cases, "gelu_tanh", ["type=gelu approximate=tanh"], nn.GELU(approximate="tanh"),
           torch.randn(2, 3, 5, 4) * 3.0)
