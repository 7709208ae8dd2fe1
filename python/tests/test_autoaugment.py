"""TrivialAugmentWide's and RandAugment's operations (--augment trivialaugment,
randaugment) against torchvision's own: every operation at every magnitude bin of both
augmentation spaces, both signs, on 8-bit images of 3 and 1 channels, through
torchvision.transforms.autoaugment._apply_op on uint8 tensors (nearest, no fill: the
transforms' defaults) and the library's dtnn__aa_apply on the same bytes.

Exact, byte for byte, for every colour and histogram operation and for translations (whole
pixels: exact centres). Shears and rotations sample at grid points torchvision computes as a
float32 matrix product (theta through bmm), summed as the BLAS kernel of the CPU sums it: with
fused multiply-adds on CPUs whose kernels have them (dtnn's formula; identical here), rounded
twice per term on others. A sampling point within float32 rounding of a half-integer (shears
by simple ratios put many exactly on one) can then round either way, and that pixel takes
its neighbour's value. The bound: at most 2% of a warped image's pixels, each differing pixel
a value of the source image or the zero fill."""
import os

import numpy as np
import pytest

from dtnn import _lib

torch = pytest.importorskip("torch")
autoaugment = pytest.importorskip("torchvision.transforms.autoaugment")
from torchvision.transforms import InterpolationMode  # noqa: E402

OPS = ["Identity", "ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate", "Brightness",
       "Color", "Contrast", "Sharpness", "Posterize", "Solarize", "AutoContrast", "Equalize"]
GEOMETRIC = {"ShearX", "ShearY", "Rotate"}


@pytest.fixture(scope="module")
def aa():
    import cffi
    ffi = cffi.FFI()
    ffi.cdef("void dtnn__aa_apply(int op, double magnitude, unsigned char *img, int c, int h, "
             "int w, float *tmp);\n"
             "double dtnn__aa_magnitude(int op, int bin, int wide, int h, int w);")
    return ffi, ffi.dlopen(_lib.LIBRARY_PATH)


def _images():
    rng = np.random.default_rng(11)
    noise = rng.integers(0, 256, (3, 21, 27), dtype=np.uint8)
    # smooth, low-contrast content: autocontrast and equalize have work to do
    yy, xx = np.mgrid[0:21, 0:27]
    soft = np.stack([(60 + 2 * xx + yy) % 256, (90 + xx * yy // 8) % 256,
                     100 + (xx + 2 * yy) % 40]).astype(np.uint8)
    gray = rng.integers(30, 200, (1, 19, 16), dtype=np.uint8)
    return [noise, soft, gray]


def _dtnn(aa, op, magnitude, img):
    ffi, lib = aa
    out = np.ascontiguousarray(img.copy())
    tmp = np.empty(img.size, dtype=np.float32)
    lib.dtnn__aa_apply(OPS.index(op), magnitude, ffi.from_buffer("unsigned char[]", out),
                       img.shape[0], img.shape[1], img.shape[2], ffi.from_buffer("float[]", tmp))
    return out


def _torch(op, magnitude, img):
    return autoaugment._apply_op(torch.from_numpy(img.copy()), op, magnitude,
                                 interpolation=InterpolationMode.NEAREST, fill=None).numpy()


def _spaces(h, w):
    return [("wide", 1, autoaugment.TrivialAugmentWide()._augmentation_space(31)),
            ("randaugment", 0, autoaugment.RandAugment()._augmentation_space(31, (h, w)))]


def test_magnitude_bins_are_torchvisions(aa):
    """dtnn's bins are the float32 roundings of linspace's exact values; PyTorch's CPU kernel
    sums float32 steps in vector blocks as wide as the CPU's vectors, so its own bins move by
    up to one float32 ulp from one CPU to another: the bound, exact for the integer ones."""
    _, lib = aa
    off = 0
    for name, wide, space in _spaces(21, 27):
        for i, op in enumerate(OPS):
            magnitudes, _ = space[op]
            if magnitudes.ndim == 0:
                continue
            for b in range(31):
                want = np.float32(magnitudes[b].item())
                got = np.float32(lib.dtnn__aa_magnitude(i, b, wide, 21, 27))
                ulps = abs(int(got.view(np.int32)) - int(want.view(np.int32)))
                assert ulps <= (0 if op == "Posterize" else 1), (name, op, b, got, want)
                off += ulps > 0
    print(f"bins one ulp from this CPU's torch.linspace: {off}")


def _neighbour_of_torch(got, want, img):
    """Every differing pixel of a warp equals a source pixel next to torchvision's choice:
    checked loosely, as a value present in the source (or the zero fill)."""
    values = set(np.unique(img).tolist()) | {0}
    return all(v in values for v in got[got != want].tolist())


def test_every_operation_and_bin(aa):
    worst, warped, exact = 0.0, 0, 0
    for img in _images():
        c, h, w = img.shape
        for _, _, space in _spaces(h, w):
            for op in OPS:
                magnitudes, signed = space[op]
                values = [float(m) for m in magnitudes.reshape(-1).tolist()] \
                    if magnitudes.ndim > 0 else [0.0]
                for m in values:
                    for sign in ((1.0, -1.0) if signed else (1.0,)):
                        got, want = _dtnn(aa, op, m * sign, img), _torch(op, m * sign, img)
                        if op in GEOMETRIC:
                            differ = np.count_nonzero(np.any(got != want, axis=0))
                            share = differ / (h * w)
                            worst = max(worst, share)
                            warped += 1
                            assert share <= 0.02 and _neighbour_of_torch(got, want, img), \
                                (op, m * sign, c, differ)
                        else:
                            assert np.array_equal(got, want), (op, m * sign, c)
                            exact += 1
    print(f"{exact} exact, {warped} warps, worst share of pixels off {worst:.4f}")
