"""MixUp and CutMix of the library's loader against torchvision's: the same unmixed batch
(same seed, MixUp and CutMix off) run through torchvision's v2 transforms with dtnn's draws
must give dtnn's mixed batch. The v2 classes themselves need torchvision >= 0.16 (PyTorch 2.x,
from pip): they run in the interpreter named by DTNN_TORCH2_PYTHON (else /tmp/torch2's, where
bench/torch_compare.py leaves its venv) and are skipped with a message where there is none;
the lines of v2's transform that do the arithmetic are run on Debian's torch 1.13 always.
Also: fit(mixup=, cutmix=, repeated_augment=) trains as `dtnn train` with the options."""
import os
import subprocess
import sys

import numpy as np
import pytest

import dtnn
from dtnn._lib import ffi
from dtnn.loaders import Loader, loader_params
from dtnn.model import _fill_split

CLASSES = 6
HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def batches():
    """(unmixed x, y, mixed x, y, mix) of 12 steps of a 40-sample set, crop and flip on."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((40, 3, 9, 11)).astype(np.float32)
    y = rng.integers(0, CLASSES, 40).astype(np.int32)
    d = ffi.new("dtnn_dataset *")
    _fill_split(d.train, x, y, CLASSES)
    for i in range(4):
        d.mean[i], d.std[i] = 0.0, 1.0
    d.name = b"numpy"
    out = []
    for mixup, cutmix in ((0.0, 0.0), (0.4, 1.0)):
        p = loader_params(16, 1, 0, 5, 1, "crop,flip", 2, mixup=mixup, cutmix=cutmix)
        with Loader.memory(d, 0, p) as loader:
            out.append([loader.batch(e, s) for e in range(4) for s in range(3)])
    return [(ux, uy, mx, my, mix) for (ux, uy, _), (mx, my, mix) in zip(*out)]


def _onehot(y):
    return np.eye(CLASSES, dtype=np.float32)[y]


def _soft(y, mix):
    """dtnn's target of each sample, as its loss weighs the two labels."""
    lam = np.float64(mix["lam"])
    return (lam * _onehot(y) + (1.0 - lam) * _onehot(mix["y2"])).astype(np.float32)


def test_both_kinds_are_drawn(batches):
    kinds = [b[4]["kind"] for b in batches]
    assert "mixup" in kinds and "cutmix" in kinds and "none" not in kinds


def test_v2_arithmetic_on_torch(batches):
    """torchvision 0.29's MixUp.transform / CutMix.transform / _mixup_label, line for line."""
    torch = pytest.importorskip("torch")
    for ux, uy, mx, my, mix in batches:
        x, onehot = torch.from_numpy(ux), torch.from_numpy(_onehot(uy))
        if mix["kind"] == "mixup":
            lam = mix["draw"]
            want = x.roll(1, 0).mul_(1.0 - lam).add_(x.mul(lam))
        else:
            x1, y1, x2, y2 = mix["box"]
            want = x.clone()
            want[..., y1:y2, x1:x2] = x.roll(1, 0)[..., y1:y2, x1:x2]
            lam = 1.0 - (x2 - x1) * (y2 - y1) / (ux.shape[3] * ux.shape[2])
            assert mix["lam"] == np.float32(lam)
        labels = onehot.roll(1, 0).mul_(1.0 - lam).add_(onehot.mul(lam))
        assert np.array_equal(want.numpy(), mx), mix["kind"]
        assert (my == uy).all()
        # the loss weighs the labels in double from the float32 lam: rounding of 1 - lam
        np.testing.assert_allclose(_soft(my, mix), labels.numpy(), rtol=0, atol=1.2e-7)


def _torch2_python():
    path = os.environ.get("DTNN_TORCH2_PYTHON") or "/tmp/torch2/bin/python"
    if not os.access(path, os.X_OK):
        return None
    probe = subprocess.run([path, "-c", "from torchvision.transforms import v2; v2.CutMix"],
                           capture_output=True)
    return path if probe.returncode == 0 else None


def test_torchvision_v2_on_the_same_draws(batches, tmp_path):
    python = _torch2_python()
    if python is None:
        pytest.skip("no PyTorch 2.x with torchvision.transforms.v2 (set DTNN_TORCH2_PYTHON to "
                    "its python, e.g. bench/torch_compare.py's venv): v2's own classes not run")
    src, dst = tmp_path / "in.npz", tmp_path / "out.npz"
    arrays = {"classes": CLASSES,
              "kind": [1 if b[4]["kind"] == "mixup" else 2 for b in batches],
              "draw": [b[4]["draw"] for b in batches],
              "cx": [b[4]["centre"][0] for b in batches],
              "cy": [b[4]["centre"][1] for b in batches]}
    for i, (ux, uy, _, _, _) in enumerate(batches):
        arrays[f"x{i}"], arrays[f"y{i}"] = ux, uy
    np.savez(src, **arrays)
    subprocess.run([python, os.path.join(HERE, "mix_v2_reference.py"), str(src), str(dst)],
                   check=True)
    got = np.load(dst)
    for i, (_, _, mx, my, mix) in enumerate(batches):
        assert np.array_equal(got[f"x{i}"], mx), (i, mix["kind"])
        np.testing.assert_allclose(_soft(my, mix), got[f"y{i}"], rtol=0, atol=1.2e-7)


def test_fit_with_mixing_trains_as_dtnn_train(tmp_path, fmnist, cli):
    for i, augment in enumerate(("crop,trivialaugment", "flip,randaugment:3:12")):
        py, ref = tmp_path / f"py{i}.safetensors", tmp_path / f"cli{i}.safetensors"
        dtnn.Model("lenet5").fit(fmnist, steps=8, batch_size=16, mixup=0.2, cutmix=1.0,
                                 repeated_augment=3, augment=augment, save=py, verbose=0)
        subprocess.run([cli, "train", "--model", "lenet5", "--dataset", "fashion-mnist",
                        "--steps", "8", "--epochs", "1", "--batch-size", "16", "--mixup", "0.2",
                        "--cutmix", "1.0", "--repeated-augment", "3", "--augment", augment,
                        "--save", str(ref), "--quiet"], check=True, capture_output=True)
        assert py.read_bytes() == ref.read_bytes(), augment


def test_mixing_options_are_checked(small):
    with pytest.raises(ValueError, match="Beta"):
        dtnn.Model("lenet5").fit(small, steps=1, mixup=-1, verbose=0)
    with pytest.raises(ValueError, match="repeated_augment"):
        dtnn.Model("lenet5").fit(small, steps=1, repeated_augment=100, verbose=0)
    for bad in ("trivialaugment,randaugment", "randaugment:0", "randaugment:2:31", "rotate"):
        with pytest.raises(ValueError, match="randaugment"):
            dtnn.Model("lenet5").fit(small, steps=1, augment=bad, verbose=0)
