#!/usr/bin/python3
"""torch_interop.py -- checks that dtnn checkpoints and PyTorch modules are interchangeable.

    /usr/bin/python3 tools/torch_interop.py DTNN_CHECKPOINT MODEL INPUT.npy DTNN_LOGITS.npy OUT

1. Reads the dtnn checkpoint (safetensors, parsed here by hand), drops the "optimizer." entries
   and loads the rest into the PyTorch module of the same zoo model (torchvision's own, with
   10 classes, for the torchvision models) with load_state_dict
   (strict: every name and shape must match).
2. Runs the module in eval mode on INPUT.npy and compares with the logits dtnn predict wrote.
3. Writes the module's state_dict as a plain safetensors file OUT (as a PyTorch user would
   export one), for dtnn to load the other way round.
Exits 0 on success, 1 on a mismatch, 77 (ctest's skip) when Debian's python3-torch is missing.
"""
import json
import os
import struct
import sys

try:
    import numpy as np
    import torch
except ImportError:
    print("torch_interop: python3-torch is not installed; skipping")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_reference import LeNet5, ResNet20, SafetensorsWriter  # noqa: E402

DTYPES = {"F32": np.float32, "I64": np.int64}


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        arr = np.frombuffer(data[b:e], dtype=DTYPES[info["dtype"]]).reshape(info["shape"])
        out[name] = torch.from_numpy(arr.copy())
    return out


def randomise_batch_norms(model):
    """Random running statistics and affine parameters in every BatchNorm2d, so that a test
    sees each batch-norm tensor imported or loaded (the defaults 0 and 1 hide a swap)."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)


def make_model(name, classes=10):
    if name in ("lenet5", "resnet20"):
        return {"lenet5": LeNet5, "resnet20": ResNet20}[name](classes)
    import torchvision  # only the torchvision models need it (python3-torchvision)
    return getattr(torchvision.models, name)(num_classes=classes)


def main():
    ckpt, model_name, x_path, logits_path, out_path = sys.argv[1:6]
    model = make_model(model_name)
    state = {k: v for k, v in read_safetensors(ckpt).items() if not k.startswith("optimizer.")}
    model.load_state_dict(state)  # strict: raises on any missing, extra or misshapen tensor
    model.eval()
    x = torch.from_numpy(np.load(x_path))
    with torch.no_grad():
        want = model(x).numpy()
    got = np.load(logits_path)
    err = float(np.max(np.abs(got - want)))
    # float32 rounding grows with the size of the values summed: 1e-4 of the largest logit (at
    # least 1e-4), ~1000 ulps, far above what two correct float32 forwards differ by and far
    # below what a wrong layer gives. RegNetY, trained 3 steps at lr 0.05 from random weights,
    # reaches logits of ~7600, where the two differ by 3e-3.
    tol = 1e-4 * max(1.0, float(np.max(np.abs(want))))
    print(f"torch_interop: {model_name}: load_state_dict ok; dtnn vs PyTorch logits max abs "
          f"error {err:.3g} (tol {tol:.3g})")
    if got.shape != want.shape or not err <= tol:
        print("torch_interop: FAIL: logits differ")
        return 1
    w = SafetensorsWriter()
    for k, v in model.state_dict().items():
        w.add(k, v)
    w.write(out_path)
    np.save(out_path + ".logits.npy", want)
    return 0


if __name__ == "__main__":
    sys.exit(main())
