"""The data sets libdtnn loads itself, as NumPy arrays.

Each function returns a Dataset: it unpacks as Keras's do, ((x_train, y_train), (x_test,
y_test)) with x float32 [N, C, H, W] (normalised as `dtnn train` normalises it) and y int32,
and it can be given to Model.fit whole, which then also evaluates the test split after each
epoch and records the normalisation in checkpoints, exactly as `dtnn train --dataset NAME`.
"""
import numpy as np

from ._lib import check, ffi, lib, new_error
from .loaders import ImageFolder, Shards  # noqa: F401 -- dtnn.datasets.ImageFolder, Shards


class Split(tuple):
    """(x, y) of one split."""

    def __new__(cls, x, y):
        return super().__new__(cls, (x, y))

    @property
    def x(self):
        return self[0]

    @property
    def y(self):
        return self[1]

    @property
    def n(self):
        return int(self[0].shape[0])


class Dataset(tuple):
    """((x_train, y_train), (x_test, y_test)) with .name, .classes, .mean and .std (the
    per-channel normalisation applied; identity: 0 and 1)."""

    def __new__(cls, train, test, name, classes, mean, std):
        self = super().__new__(cls, (train, test))
        self.name, self.classes, self.mean, self.std = name, classes, mean, std
        return self

    @property
    def train(self):
        return self[0]

    @property
    def test(self):
        return self[1]

    def __repr__(self):
        x = self.train.x
        return (f"Dataset({self.name!r}: {self.train.n} train / {self.test.n} test samples of "
                f"{'x'.join(str(s) for s in x.shape[1:])}, {self.classes} classes)")


def _split(s):
    n, sample = int(s.n), int(s.c) * int(s.h) * int(s.w)
    x = np.frombuffer(ffi.buffer(s.x, 4 * n * sample), dtype=np.float32) if n else \
        np.zeros(0, np.float32)
    y = np.frombuffer(ffi.buffer(s.y, 4 * n), dtype=np.int32) if n else np.zeros(0, np.int32)
    return Split(x.reshape(n, int(s.c), int(s.h), int(s.w)).copy(), y.copy())


def load(name, data_dir=None, normalize=None, synthetic_samples=None, synthetic_shape=None,
         classes=None, seed=None):
    """A data set by `dtnn train --dataset`'s name: fashion-mnist, mnist, cifar10, cifar100,
    npy (data_dir holds x_train.npy, ...), synthetic. What is None keeps the library's
    default, as an option left out of `dtnn train`."""
    p = ffi.new("dtnn_data_params *")
    lib.dtnn_data_params_default(p)
    keep = [ffi.new("char[]", name.encode())]
    p.name = keep[0]
    if data_dir is not None:
        keep.append(ffi.new("char[]", str(data_dir).encode()))
        p.dir = keep[-1]
    if normalize is not None:
        p.normalize = 1 if normalize else 0
    if synthetic_samples is not None:
        p.synthetic_n = int(synthetic_samples)
    if synthetic_shape is not None:
        p.c, p.h, p.w = (int(v) for v in synthetic_shape)
    if classes is not None:
        p.classes = int(classes)
    if seed is not None:
        p.seed = int(seed)
    d = ffi.new("dtnn_dataset *")
    err = new_error()
    check(lib.dtnn_dataset_load(d, p, err), err)
    try:
        train, test = _split(d.train), _split(d.test)
        c = int(d.train.c)
        mean = tuple(float(d.mean[i]) for i in range(min(c, 4)))
        std = tuple(float(d.std[i]) for i in range(min(c, 4)))
        return Dataset(train, test, ffi.string(d.name).decode(), int(d.train.classes), mean,
                       std)
    finally:
        lib.dtnn_dataset_free(d)


def fashion_mnist(data_dir=None):
    """Fashion-MNIST (Debian's dataset-fashion-mnist, or data_dir): 60000 + 10000 images of
    1x28x28, 10 classes."""
    return load("fashion-mnist", data_dir)


def mnist(data_dir=None):
    """MNIST from data_dir (IDX files)."""
    return load("mnist", data_dir)


def cifar10(data_dir=None):
    """CIFAR-10 from data_dir (the binary version)."""
    return load("cifar10", data_dir)


def cifar100(data_dir=None):
    """CIFAR-100 from data_dir (the binary version)."""
    return load("cifar100", data_dir)


def synthetic(samples=None, shape=None, classes=None, seed=None):
    """Seeded random images and labels, for smoke tests and benchmarks (`dtnn train
    --dataset synthetic`: 4096 samples of 3x32x32 in 10 classes unless given)."""
    return load("synthetic", synthetic_samples=samples, synthetic_shape=shape, classes=classes,
                seed=seed)
