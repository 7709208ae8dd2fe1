"""The library's loaders for Model.fit and evaluate: image folders streamed and decoded by
background threads, and augmentation of data in memory, exactly as `dtnn train` sets them up
(tools/cli_data.c): the same options give the same batches on every rank."""
import os

from ._lib import ffi, lib, new_error, raise_error

_AUG_FLAGS = {"crop": 1, "flip": 2, "trivialaugment": 4}
_AUG_HELP = ("augment is 'none' or a comma-separated list of crop, flip and one of "
             "trivialaugment and randaugment[:N[:M]] (N in [1, 16], M in [0, 30])")


def parse_augment(text):
    """`dtnn train --augment`'s text as (flags, RandAugment's N, M)."""
    flags, n, m = 0, 2, 9
    if text == "none":
        return flags, n, m
    for part in text.split(","):
        if part in _AUG_FLAGS:
            flags |= _AUG_FLAGS[part]
        elif part.split(":")[0] == "randaugment" and len(part.split(":")) <= 3:
            fields = part.split(":")[1:]
            try:
                n, m = (int(fields[0]) if fields else 2), (int(fields[1]) if len(fields) > 1 else 9)
            except ValueError:
                raise ValueError(f"{_AUG_HELP}, not {text!r}") from None
            if not (1 <= n <= 16 and 0 <= m <= 30):
                raise ValueError(f"{_AUG_HELP}, not {text!r}")
            flags |= 8
        else:
            raise ValueError(f"{_AUG_HELP}, not {text!r}")
    if not flags or (flags & 12) == 12:
        raise ValueError(f"{_AUG_HELP}, not {text!r}")
    return flags, n, m


class ImageFolder:
    """An image folder as `dtnn train --dataset imagefolder --data-dir DIR`: DIR/train/<class>/
    <image> and DIR/val/<class>/<image> (JPEG or PNG), decoded to image_size x image_size,
    normalised with ImageNet's mean and std. loader_threads: decoding threads (-1: 2);
    strict: an unreadable image is an error rather than skipped."""

    def __init__(self, data_dir, image_size=224, loader_threads=-1, prefetch=0, strict=False):
        self.data_dir = os.fspath(data_dir)
        if not os.path.isdir(os.path.join(self.data_dir, "train")):
            raise FileNotFoundError(f"{self.data_dir}/train: no such folder (an image folder "
                                    "holds train/<class>/<image> and val/<class>/<image>)")
        if not 8 <= image_size <= 4096:
            raise ValueError(f"image_size must be in [8, 4096], not {image_size}")
        self.image_size, self.prefetch, self.strict = image_size, prefetch, strict
        self.loader_threads = 2 if loader_threads == -1 else loader_threads
        self.has_val = os.path.isdir(os.path.join(self.data_dir, "val"))

    def info(self):
        """(C, H, W) and classes of the training split."""
        params = loader_params(1, 1, 0, 1, 1, image_size=self.image_size)
        with Loader.folder(self, "train", params) as l:
            i = l.info()
            return (i.c, i.h, i.w), i.classes

    def __repr__(self):
        return f"{type(self).__name__}({self.data_dir!r}, image_size={self.image_size})"


class Shards(ImageFolder):
    """A sharded dataset as `dtnn train --dataset shards --data-dir DIR`: WebDataset tar
    shards (KEY.jpg / .png with KEY.cls) listed by DIR/index.json (`dtnn shard` writes them)
    or named train-*.tar / val-*.tar, read as an image folder is (decoded to image_size,
    ImageNet's normalisation). Under mpirun each rank reads only its own shards, through a
    shuffle buffer of shuffle_buffer samples."""

    def __init__(self, data_dir, image_size=224, loader_threads=-1, prefetch=0, strict=False,
                 shuffle_buffer=1000):
        self.data_dir = os.fspath(data_dir)
        if not lib.dtnn_shards_has_split(self.data_dir.encode(), b"train"):
            raise FileNotFoundError(f"{self.data_dir}: no training shards (an index.json as "
                                    "`dtnn shard` writes, or train-*.tar)")
        if not 8 <= image_size <= 4096 or shuffle_buffer < 0:
            raise ValueError("image_size must be in [8, 4096], shuffle_buffer not negative")
        self.image_size, self.prefetch, self.strict = image_size, prefetch, strict
        self.shuffle_buffer = shuffle_buffer
        self.loader_threads = 2 if loader_threads == -1 else loader_threads
        self.has_val = bool(lib.dtnn_shards_has_split(self.data_dir.encode(), b"val"))


def loader_params(batch, ranks, rank, seed, shuffle, augment="none", crop_padding=4,
                  random_erase=0.0, threads=0, prefetch=0, image_size=224, strict=False,
                  mixup=0.0, cutmix=0.0, repeated_augment=0):
    flags, ra_ops, ra_magnitude = parse_augment(augment)
    if not 0.0 <= random_erase <= 1.0 or not 0 <= crop_padding <= 64:
        raise ValueError("random_erase is a probability in [0, 1], crop_padding in [0, 64]")
    if not 0.0 <= mixup <= 100.0 or not 0.0 <= cutmix <= 100.0:
        raise ValueError("mixup and cutmix are Beta alphas in [0, 100] (0: off)")
    if not 0 <= repeated_augment <= 64:
        raise ValueError("repeated_augment must be in [0, 64] (0 or 1: off)")
    p = ffi.new("dtnn_loader_params *")
    lib.dtnn_loader_params_default(p)
    p.batch_size, p.rank, p.ranks, p.seed, p.shuffle = batch, rank, ranks, seed, shuffle
    p.augment, p.crop_padding, p.random_erase = flags, crop_padding, random_erase
    p.randaugment_ops, p.randaugment_magnitude = ra_ops, ra_magnitude
    p.threads, p.prefetch, p.image_size, p.strict = threads, prefetch, image_size, int(strict)
    p.mixup_alpha, p.cutmix_alpha, p.repeated_augment = mixup, cutmix, repeated_augment
    return p


def needs_loader(params):
    """Whether loader params ask for anything only the library's loader does."""
    return bool(params.augment or params.threads > 0 or params.random_erase > 0 or
                params.mixup_alpha > 0 or params.cutmix_alpha > 0 or
                params.repeated_augment > 1)


class Loader:
    """One library loader, freed on close (or as a context manager)."""

    def __init__(self, ptr, keep=None):
        self.ptr, self._keep = ptr, keep

    @classmethod
    def folder(cls, source, split, params):
        err = new_error()
        create = lib.dtnn_loader_create_shards if isinstance(source, Shards) \
            else lib.dtnn_loader_create_folder
        if isinstance(source, Shards):
            params.shuffle_buffer = source.shuffle_buffer
        ptr = create(source.data_dir.encode(), split.encode(), params, err)
        if ptr == ffi.NULL:
            raise_error(err)
        return cls(ptr)

    @classmethod
    def memory(cls, dataset, test_split, params):
        """Over a dtnn_dataset (cffi, with the arrays it points to kept by the caller)."""
        err = new_error()
        ptr = lib.dtnn_loader_create(dataset, test_split, params, err)
        if ptr == ffi.NULL:
            raise_error(err)
        return cls(ptr, dataset)

    def info(self):
        i = ffi.new("dtnn_loader_info *")
        lib.dtnn_loader_get_info(self.ptr, i)
        return i

    def batch(self, epoch, step):
        """This rank's part of global step `step` of `epoch`, decoded now: (x [n, C, H, W]
        float32, y [n] int32, mix), mix a dict of the batch's MixUp / CutMix (kind "none",
        "mixup" or "cutmix"; lam, the weight of y; y2, the partners' labels; draw, the Beta
        draw; centre and box (x0, y0, x1, y1) of CutMix)."""
        import numpy as np
        i = self.info()
        x = np.empty((i.local_max, i.c, i.h, i.w), dtype=np.float32)
        y = np.empty(i.local_max, dtype=np.int32)
        n = ffi.new("int *")
        err = new_error()
        if lib.dtnn_loader_batch(self.ptr, epoch, step, ffi.from_buffer("float[]", x),
                                 ffi.from_buffer("int32_t[]", y), n, err):
            raise_error(err)
        m = ffi.new("dtnn_batch_mix *")
        lib.dtnn_loader_mix(self.ptr, m)
        k = n[0]
        y2 = np.frombuffer(ffi.buffer(m.y2, 4 * k), dtype=np.int32).copy() \
            if m.y2 != ffi.NULL else None
        mix = {"kind": ("none", "mixup", "cutmix")[m.kind], "lam": m.lam, "y2": y2,
               "draw": m.draw, "centre": (m.cx, m.cy), "box": tuple(m.box)}
        return x[:k], y[:k], mix

    def skipped(self):
        paths = ffi.new("char[1600]")
        return lib.dtnn_loader_skipped(self.ptr, paths, 1600), ffi.string(paths).decode()

    def close(self):
        if self.ptr is not None and self.ptr != ffi.NULL:
            lib.dtnn_loader_free(self.ptr)
        self.ptr = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()
