#!/usr/bin/python3
"""gen_reference.py -- writes the PyTorch reference files that tests/test_reference.c checks
dtnn against. The files are committed, so the C tests never need PyTorch.

Regenerate (from the repository root, with Debian's python3-torch, not a virtualenv python):

    /usr/bin/python3 tools/gen_reference.py [FILE ...]   # all files, or only those named
                                                         # (e.g. optim_resnet20.safetensors)

except the optim_torch2_* files, whose references (NAdam as PyTorch 2 fixed it, timm's LAMB)
need PyTorch 2 and timm, from a virtualenv:

    python3 -m venv /tmp/torch2 && /tmp/torch2/bin/pip install torch torchvision
    /tmp/torch2/bin/pip install --no-deps timm
    /tmp/torch2/bin/python tools/gen_reference.py optim_torch2_lenet5.safetensors \
        optim_torch2_resnet20.safetensors

Output (deterministic: fixed seeds, one thread, so rerunning gives the same bytes on the same
PyTorch build; every stored tensor is float32, except int64 labels and num_batches_tracked):

  tests/ref/layers.safetensors
      One case per layer configuration. Tensors "<case>.x" (input), "<case>.<param>" (PyTorch
      parameter names, which are dtnn's tensor names below the layer name), "<case>.dy" (a random
      upstream gradient), "<case>.y", "<case>.dx", "<case>.grad.<param>" (autograd), and for
      layers with buffers (batch norm) "<case>.<buffer>" before and "<case>.out.<buffer>" after
      the training-mode forward. Loss cases hold "<case>.x" (logits), "<case>.labels" (int64),
      "<case>.loss" (0-d) and "<case>.dx" (d loss / d logits).
      Metadata "cases" lists the case names in order; metadata "<case>" is the dtnn recipe:
          "input=CxHxW ; type=conv2d filters=5 kernel=3 stride=2 padding=1"
      i.e. segments separated by " ; ": the per-sample input shape, then one segment per layer
      (type=, optional name= and inputs= for the test, every other key=value is passed verbatim
      to dtnn_model_add), or a final "loss=<name> [label_smoothing=e]" segment.
      A layer's dtnn name is "<case>.<name>" when it has name=, else "<case>"; inputs= names
      other layers of the case or "input" (the model input).
      Multi-input layers (add, concat) get distinct inputs from one model input through 1x1
      "selection" convolutions whose weights are fixed 0/1 matrices: each picks a block of the
      input channels. Products with 1 and 0 are exact in float32, so the selection adds no
      rounding, and the reference is simply add / cat of channel slices of x, while dtnn's graph
      plumbing (two producers, gradient accumulation into one input) is exercised for real.

  tests/ref/optim_lenet5.safetensors, tests/ref/optim_resnet20.safetensors,
  tests/ref/optim_torch2_lenet5.safetensors, tests/ref/optim_torch2_resnet20.safetensors
      (the second pair: NAdam, LARS, LAMB, and SGD with gradient clipping and parameter groups)
      The zoo models rebuilt in PyTorch with the same module names (so state_dict keys equal
      dtnn's tensor names): "init.<name>" the initial state_dict, "x" one fixed batch, "labels"
      (int64), and for each optimizer "<opt>.<name>" the state_dict after 5 training steps
      (train mode, mean cross-entropy, the same batch every step) and "<opt>.losses" the 5 loss
      values (each computed before its step). Metadata: "optimizers" lists them, "opt.<opt>"
      gives the configuration as key=value pairs, "seed" the seed used, "margin.<opt>" and
      "float32_deviation.<opt>" the conditioning figures described below.

      Why these trajectories are float64 and their seeds searched. A 5-step run is compared
      value by value, so it must be well conditioned, and two things break that:
      * A ReLU input (or max-pool winner) within rounding distance of its kink. A float32 run
        may then take the other side, and one flipped mask changes every later gradient. With
        ResNet-20 on a 4x3x32x32 batch (750k ReLU inputs per forward) the closest one is
        typically 1e-7 from zero, and PyTorch's own float32 run then ends 5e-2 away from its
        float64 run: no float32 implementation could be held to it. So the trajectories are
        computed in float64 from the float32 initial state (the exact result to the precision
        that matters), the seed is the first one from a base whose float64 runs keep every ReLU
        input and max-pool gap at least MIN_MARGIN = 3e-6 away from the kink (max-pool windows
        of zeros after a ReLU tie harmlessly and are ignored), and ResNet-20 gets a 4x3x8x8
        batch, which has 16 times fewer ReLU inputs, so such a seed is found in a few tries.
        The network, its parameters and state_dict are the same at any input size (global
        average pooling); the test passes the batch's shape to dtnn_zoo_create.
      * Adam and RMSProp divide each gradient element by its running magnitude plus eps, so an
        update's sensitivity to its gradient is up to lr / eps: 1e5 with the default eps of
        1e-8, where an element whose gradient is within rounding noise of zero moves by up to
        ~lr in a direction the noise picks (PyTorch's own float32 RMSProp on ResNet-20 ended
        4.6e-3 from float64). The references use eps = ADAPTIVE_EPS = 1e-4 instead: a
        sensitivity of at most lr / eps = 10, while every element whose gradient exceeds
        ~1e-3 still takes the adaptive ~lr-sized step, and eps, being far from negligible, is
        tested where it sits (outside the square root, after the bias correction).
      PyTorch's own float32 run against the float64 reference is recorded as the trajectory's
      conditioning (tests/test_reference.c derives its tolerances from it): over the final
      state, "float32_deviation.<opt>" (max abs) and "float32_mean_deviation.<opt>" (mean abs),
      and "float32_loss_deviation.<opt>" (max relative over the losses).

The layer cases are in gen_reference_layers.py, the zoo models and optimizers in
gen_reference_optim.py, the safetensors writer in gen_reference_writer.py: modules beside this
file, which import without a package because Python puts the script's folder on sys.path.
"""

import os
import sys

import torch

from gen_reference_layers import layer_cases
from gen_reference_optim import LeNet5, ResNet20, optim_file, optimizers_torch2
# Not used here: torch_freeze.py, torch_interop.py and gen_zoo_reference.py import them
# from this module.
from gen_reference_optim import Kinks  # noqa: F401
from gen_reference_writer import SafetensorsWriter  # noqa: F401

OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "ref")


def main():
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    os.makedirs(OUT_DIR, exist_ok=True)
    total = 0
    outputs = [
        ("layers.safetensors", layer_cases),
        ("optim_lenet5.safetensors", lambda: optim_file(LeNet5, "lenet5", (8, 1, 28, 28), 1)),
        ("optim_resnet20.safetensors",
         lambda: optim_file(ResNet20, "resnet20", (4, 3, 8, 8), 1)),
        ("optim_torch2_lenet5.safetensors",
         lambda: optim_file(LeNet5, "lenet5", (8, 1, 28, 28), 1, optimizers_torch2())),
        ("optim_torch2_resnet20.safetensors",
         lambda: optim_file(ResNet20, "resnet20", (4, 3, 8, 8), 1, optimizers_torch2())),
    ]
    only = set(sys.argv[1:])
    unknown = only - {fname for fname, _ in outputs}
    if unknown:
        print(f"gen_reference.py: no output named {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    for fname, make in outputs:
        if only and fname not in only:
            continue
        size = make().write(os.path.join(OUT_DIR, fname))
        total += size
        print(f"{fname}: {size} bytes")
    print(f"total: {total} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
