"""dtnn.Model: a libdtnn model with fit, evaluate, predict and its weights as NumPy arrays.

The Python side only fills the library's structures and calls it: training is dtnn_train,
the loop `dtnn train` runs, so the same options on the same data give the same weights bit
for bit. A model is built (its flat buffers laid out, its parameters initialised from
`seed`) on first use, for the largest batch asked of it so far; a later call that needs a
larger batch rebuilds it through a checkpoint in memory's place (a temporary file), weights
and optimizer state kept.
"""
import os
import signal
import tempfile
import threading

import numpy as np

from . import distributed
from . import optim as _optim
from ._lib import Error, Interrupted, check, ffi, lib, new_error, raise_error, text
from .callbacks import History, ProgressBar, wants_batches
from .datasets import Dataset, Split
from .layers import Binding, Layer
from .loaders import ImageFolder, Loader, loader_params, needs_loader

_INIT = {"default": lib.DTNN_INIT_DEFAULT, "he": lib.DTNN_INIT_HE,
         "xavier": lib.DTNN_INIT_XAVIER}


def _path(p):
    return os.fsencode(os.fspath(p))


def _as_images(x, shape, what):
    x = np.asarray(x)
    if x.dtype != np.float32:
        if not np.issubdtype(x.dtype, np.floating):
            raise TypeError(f"{what}: images must be floating point (float32 NCHW, normalised "
                            f"as the model expects), got {x.dtype}")
        x = x.astype(np.float32)
    if x.ndim == 3 and shape[0] == 1:
        x = x[:, None]
    if x.ndim != 4 or tuple(x.shape[1:]) != tuple(shape):
        raise ValueError(f"{what}: images of shape {tuple(x.shape)}, the model takes "
                         f"[N, {shape[0]}, {shape[1]}, {shape[2]}] (NCHW)")
    return np.ascontiguousarray(x)


def _as_labels(y, n, classes, what):
    y = np.asarray(y)
    if not np.issubdtype(y.dtype, np.integer):
        raise TypeError(f"{what}: labels must be integers (class indices), got {y.dtype}")
    if y.shape != (n,):
        raise ValueError(f"{what}: {y.shape} labels for {n} images (one class index each)")
    if n and (y.min() < 0 or y.max() >= classes):
        raise ValueError(f"{what}: labels from {y.min()} to {y.max()}, the model has "
                         f"{classes} classes (0 to {classes - 1})")
    return np.ascontiguousarray(y, dtype=np.int32)


def _fill_split(s, x, y, classes):
    s.x = ffi.cast("float *", x.ctypes.data)
    s.y = ffi.cast("int32_t *", y.ctypes.data)
    s.n = x.shape[0]
    s.c, s.h, s.w = x.shape[1:]
    s.classes = classes


class Model:
    """A model from the zoo or a model file: Model("resnet20", classes=10). input_shape
    (C, H, W) overrides the zoo model's default input; seed initialises the weights (and is
    fit's default seed, as `dtnn train --seed`); device "cpu", "cpu-guarded" or "cuda";
    precision "fp32" or "bf16"; threads 0: the cores given to this process; init "default"
    (PyTorch's), "he" or "xavier"."""

    def __init__(self, spec, classes=0, input_shape=None, *, device="cpu", precision="fp32",
                 threads=0, seed=42, init="default"):
        c, h, w = input_shape if input_shape is not None else (0, 0, 0)
        self._setup(("spec", os.fspath(spec), int(classes), int(c), int(h), int(w)), device,
                    precision, threads, seed, init)
        # As `dtnn train --model NAME`: a zoo model not told its input or classes takes the
        # first training data's (before it is built).
        self._adapts = (input_shape is None, classes <= 0)

    @classmethod
    def from_file(cls, path, **kwargs):
        """A model file ([section] per layer, as `dtnn train --model FILE`)."""
        with open(path, encoding="utf-8") as f:
            return cls.from_text(f.read(), origin=os.fspath(path), **kwargs)

    @classmethod
    def from_text(cls, text_, origin="<text>", **kwargs):
        """A model file's text."""
        self = cls.__new__(cls)
        self._setup(("text", text_, origin), **_model_kwargs(kwargs))
        return self

    @classmethod
    def from_onnx(cls, path, **kwargs):
        """An ONNX model (as `dtnn train --model FILE.onnx`), with its weights."""
        err = new_error()
        ptr = lib.dtnn_onnx_import_text(_path(path), err)
        if ptr == ffi.NULL:
            raise_error(err)
        try:
            source = ffi.string(ptr).decode()
        finally:
            lib.free(ptr)
        self = cls.__new__(cls)
        self._setup(("text", source, os.fspath(path)), **_model_kwargs(kwargs))
        self._onnx_weights = os.fspath(path)
        return self

    def _setup(self, source, device="cpu", precision="fp32", threads=0, seed=42,
               init="default"):
        self._m = ffi.NULL
        self._opt = ffi.NULL
        self._opt_key = None
        self._source = source
        self._onnx_weights = None
        self._built = 0
        self._norm = None
        self._adapts = (False, False)
        self._bindings = []         # Python layers' callbacks, alive as long as the model
        self._input_grad = False
        self._slots = 0             # optimizer state the memory check counts (as the CLI)
        self.device = device
        self.seed = int(seed)
        self.threads = int(threads)
        if init not in _INIT:
            raise ValueError(f"init must be one of {', '.join(_INIT)}, not {init!r}")
        self.init = init
        err = new_error()
        prec = ffi.new("dtnn_precision *")
        check(lib.dtnn_precision_parse(precision.encode(), prec, err), err)
        self.precision = precision
        self._precision = prec[0]
        self.stop_training = False
        self._m = self._create()

    def _create(self):
        err = new_error()
        if self._source[0] == "spec":
            _, spec, classes, c, h, w = self._source
            m = lib.dtnn_model_from_spec(spec.encode(), classes, c, h, w, err)
        elif self._source[0] == "builder":
            return self._create_layers(*self._source[1:])
        else:
            _, source, origin = self._source
            m = lib.dtnn_model_parse_string(source.encode(), origin.encode(), err)
        if m == ffi.NULL:
            raise_error(err)
        return m

    @classmethod
    def _from_layers(cls, input_shape, layers, **kwargs):
        """A model added layer by layer (Sequential with Python layers)."""
        self = cls.__new__(cls)
        self._setup(("builder", tuple(input_shape), tuple(layers), "<Sequential>"),
                    **_model_kwargs(kwargs))
        return self

    def _create_layers(self, shape, layers, origin):
        err = new_error()
        m = lib.dtnn_model_create(*shape)
        if m == ffi.NULL:
            raise MemoryError("out of memory creating a model")
        try:
            for kind, name, inputs, options in layers:
                names = [inputs] if isinstance(inputs, str) else list(inputs or [])
                ids = [-1 if n == "input" else lib.dtnn_model_find(m, n.encode())
                       for n in names]     # "input": the model's (DTNN_INPUT), as model files
                if any(i == -2 for i in ids):
                    raise ValueError(f"{origin}: inputs {names} of layer {name or kind!r}: "
                                     "name earlier layers")
                arr = ffi.new("int[]", ids) if ids else ffi.NULL
                cname = name.encode() if name else ffi.NULL
                if isinstance(kind, Layer):
                    b = Binding(kind)
                    self._bindings.append(b)
                    node = lib.dtnn_model_add_external(m, cname, b.ops, arr, len(ids), err)
                else:
                    node = lib.dtnn_model_add(m, kind.encode(), cname, options.encode(), arr,
                                              len(ids), err)
                if node < 0:
                    raise_error(err, origin)
        except BaseException:
            lib.dtnn_model_free(m)
            raise
        return m

    def _check(self, status, err, what=None):
        """check(), raising first an exception a Python layer's callback raised."""
        if status == lib.DTNN_OK:
            return
        for b in self._bindings:
            if b.error is not None:
                e, b.error = b.error, None
                raise e
        raise_error(err, what)

    # ---- lifetime ----

    def close(self):
        """Frees the library's model and optimizer now (also done when garbage collected)."""
        if getattr(self, "_opt", ffi.NULL) != ffi.NULL:
            lib.dtnn_optimizer_free(self._opt)
            self._opt = ffi.NULL
        if getattr(self, "_m", ffi.NULL) != ffi.NULL:
            lib.dtnn_model_free(self._m)
            self._m = ffi.NULL
        self._built = 0

    def __del__(self):
        self.close()

    # ---- building ----

    @property
    def input_shape(self):
        if self._m == ffi.NULL:
            raise ValueError("this model was closed")
        c, h, w = ffi.new("int *"), ffi.new("int *"), ffi.new("int *")
        lib.dtnn_model_input_shape(self._m, c, h, w)
        return (c[0], h[0], w[0])

    @property
    def classes(self):
        self._build(1)
        n, k = ffi.new("int *"), ffi.new("int *")
        lib.dtnn_model_output_shape(self._m, n, k)
        return k[0]

    def _build_params(self, max_batch, keep):
        bp = ffi.new("dtnn_build_params *")
        lib.dtnn_build_params_default(bp)
        bp.max_batch = max_batch
        # A Python layer without backward can only run forward: such a model is built for
        # inference, and fit then says so.
        bp.training = 0 if any(b.ops.backward == ffi.NULL for b in self._bindings) else 1
        bp.seed = self.seed
        bp.init = _INIT[self.init]
        device = ffi.new("char[]", self.device.encode())
        keep.append(device)
        bp.device = device
        bp.threads = self.threads if self.threads > 0 else distributed.cores()
        bp.precision = self._precision
        bp.input_grad = 1 if self._input_grad else 0
        bp.optimizer_slots = self._slots
        return bp

    def _build(self, max_batch):
        """Builds for batches of up to max_batch samples (a rebuild keeps the weights and the
        optimizer's state)."""
        if self._built >= max_batch:
            return
        keep = []
        err = new_error()
        if self._m == ffi.NULL:
            raise ValueError("this model was closed")
        if not self._built:
            status = lib.dtnn_model_build(self._m, self._build_params(max_batch, keep), err)
            if status == lib.DTNN_OK and self._onnx_weights:
                status = lib.dtnn_onnx_load_weights(_path(self._onnx_weights), self._m, err)
            if status != lib.DTNN_OK:
                # A failed build leaves the handle unusable: a fresh one for the next try.
                fresh = self._create()
                lib.dtnn_model_free(self._m)
                self._m = fresh
                self._check(status, err)
            self._built = max_batch
            return
        with tempfile.TemporaryDirectory(prefix="dtnn-rebuild-") as tmp:
            saved = os.path.join(tmp, "state.safetensors").encode()
            ts = ffi.new("dtnn_train_state *")
            check(lib.dtnn_checkpoint_save(saved, self._m, self._opt, ts, ffi.NULL, err), err)
            fresh, opt = self._create(), ffi.NULL
            try:
                self._check(lib.dtnn_model_build(fresh, self._build_params(max_batch, keep),
                                                  err), err)
                if self._opt != ffi.NULL:
                    opt = lib.dtnn_optimizer_create(fresh, self._opt_params, err)
                    if opt == ffi.NULL:
                        raise_error(err)
                check(lib.dtnn_checkpoint_load(saved, fresh, opt, ts, ffi.NULL, err), err)
            except BaseException:
                if opt != ffi.NULL:
                    lib.dtnn_optimizer_free(opt)
                lib.dtnn_model_free(fresh)
                raise
        self.close()
        self._m, self._opt, self._built = fresh, opt, max_batch

    # ---- training ----

    def _optimizer(self, optimizer):
        """The library optimizer for `optimizer` (kept, with its state, while it is the same
        configuration)."""
        if optimizer is None:
            optimizer = _optim.SGD() if self._opt_key is None else None
        if optimizer is not None:
            key = repr(optimizer)
            if key != self._opt_key:
                params = optimizer.params()
                err = new_error()
                opt = lib.dtnn_optimizer_create(self._m, params, err)
                if opt == ffi.NULL:
                    raise_error(err)
                if self._opt != ffi.NULL:
                    lib.dtnn_optimizer_free(self._opt)
                self._opt, self._opt_key, self._opt_params = opt, key, params
                self._lr = optimizer.lr
        return self._lr

    def _adapt(self, shape, classes):
        """Re-creates an unbuilt zoo model for the data's input shape and classes."""
        if self._built or not any(self._adapts):
            return
        kind, spec, k, c, h, w = self._source
        if self._adapts[0] and len(shape) == 3:
            c, h, w = (int(v) for v in shape)
        if self._adapts[1] and classes:
            k = int(classes)
        if (k, c, h, w) != self._source[2:]:
            old = self._m
            self._source = (kind, spec, k, c, h, w)
            self._m = self._create()
            lib.dtnn_model_free(old)

    def _data(self, x, y, what):
        """(x, y, normalisation Dataset or None) from arrays, a Split or a Dataset."""
        norm = None
        if isinstance(x, Dataset):
            norm, (x, y) = x, x.train
        elif isinstance(x, Split):
            x, y = x
        if y is None:
            raise ValueError(f"{what}: labels are missing (fit(x, y), or a Dataset)")
        x = _as_images(x, self.input_shape, what)
        return x, _as_labels(y, x.shape[0], self.classes, what), norm

    def fit(self, x, y=None, *, epochs=1, batch_size=64, optimizer=None, schedule=None,
            warmup_epochs=0.0, loss="cross-entropy", label_smoothing=0.0,
            validation_data=None, shuffle=True, seed=None, steps=0, callbacks=(), verbose=1,
            save=None, resume=None, log=None, checkpoint_every=0, keep=0, accumulate=1,
            sync_bn=False, allreduce="overlap", comm_dtype="fp32", ema=0.0, ema_steps=32,
            early_stop=0, stop_at_accuracy=0.0, skip_nonfinite=False, augment=None,
            crop_padding=4, random_erase=0.0, mixup=0.0, cutmix=0.0, repeated_augment=0,
            loader_threads=None, prefetch=0):
        """Trains, as `dtnn train` with the same options (each keyword is the option of the
        same name). x: float32 [N, C, H, W] with integer labels y, a Dataset from
        dtnn.datasets (its test split then validates after each epoch, as the CLI's), or a
        dtnn.datasets.ImageFolder (streamed by loader threads; its val split validates).
        augment: "none" or as `dtnn train --augment`, e.g. "crop,flip,trivialaugment" or
        "crop,randaugment:2:9" (None: crop,flip for an image folder, else none); mixup /
        cutmix: Beta alphas of torchvision's v2.MixUp / CutMix over each global batch; repeated_augment: K repeats of each sample (RASampler). With any of
        these or loader_threads > 0, data in memory goes through the library's loader as in
        the CLI. Under mpirun each rank passes the
        whole data set and trains on its share of every global batch of batch_size. Returns a
        History. Ctrl-C or SIGTERM ends the run after the current step (with a checkpoint
        when `save` is given) and raises dtnn.Interrupted."""
        folder = x if isinstance(x, ImageFolder) else None
        if folder is not None:
            self._adapt(*folder.info())
        elif isinstance(x, Dataset):
            self._adapt(x.train.x.shape[1:], x.classes)
        elif isinstance(x, (Split, np.ndarray)):
            labels = x[1] if isinstance(x, Split) else y
            self._adapt(np.shape(x[0] if isinstance(x, Split) else x)[1:],
                        int(np.max(labels)) + 1 if labels is not None and len(labels) else 0)
        comm = distributed.communicator()
        ranks, rank = lib.dtnn_comm_size(comm), lib.dtnn_comm_rank(comm)
        if batch_size <= 0 or accumulate < 1 or batch_size % (ranks * accumulate):
            raise ValueError(f"batch_size {batch_size} does not divide by {ranks} ranks x "
                             f"accumulate {accumulate}")
        micro = batch_size // ranks // accumulate
        if optimizer is not None or self._opt_key is None:
            self._slots = lib.dtnn_opt_state_slots((optimizer or _optim.SGD()).params())
        self._build(micro)
        lr = self._optimizer(optimizer)
        keep_alive = []
        tp = self._train_params(locals(), keep_alive)
        threads = loader_threads if loader_threads is not None else \
            (folder.loader_threads if folder is not None else 0)
        aug = augment or ("crop,flip" if folder is not None else "none")
        common = dict(threads=threads, image_size=folder.image_size if folder else 224,
                      strict=folder.strict if folder else False)
        if folder is not None and not prefetch:
            prefetch = folder.prefetch
        train_p = loader_params(batch_size, ranks, rank, tp.seed, tp.shuffle, aug,
                                crop_padding, random_erase, prefetch=prefetch, mixup=mixup,
                                cutmix=cutmix, repeated_augment=repeated_augment, **common)
        test_p = loader_params(micro * ranks, ranks, rank, tp.seed, 0, **common)
        loaders = []
        try:
            return self._fit_with(loaders, folder, x, y, validation_data, keep_alive, tp, comm,
                                  train_p, test_p, resume, callbacks, verbose)
        finally:
            for loader in loaders:
                if loader is not None:
                    loader.close()

    def _fit_with(self, loaders, folder, x, y, validation_data, keep_alive, tp, comm, train_p,
                  test_p, resume, callbacks, verbose):
        """fit's run from its settings; the loaders it opens go into `loaders`."""
        if folder is not None:
            loaders.append(Loader.folder(folder, "train", train_p))
            loaders.append(Loader.folder(folder, "val", test_p) if folder.has_val else None)
        else:
            d = self._dataset(x, y, validation_data, keep_alive)
            if needs_loader(train_p):
                loaders.append(Loader.memory(d, 0, train_p))
                loaders.append(Loader.memory(d, 1, test_p) if d.test.n > 0 else None)
        if loaders:
            info = loaders[0].info()
            self._norm = (tuple(info.mean), tuple(info.std), ffi.string(info.name))
        ts = ffi.new("dtnn_train_state *")
        if resume is not None:
            self._resume(resume, ts, tp)

        def start(progress, err):
            if not loaders:
                return lib.dtnn_train(self._m, self._opt, d, comm, tp, ts, progress, ffi.NULL,
                                      err)
            test = loaders[1].ptr if loaders[1] is not None else ffi.NULL
            return lib.dtnn_train_loader(self._m, self._opt, loaders[0].ptr, test, comm, tp, ts,
                                         progress, ffi.NULL, err)
        return self._run(start, tp, comm, list(callbacks), verbose)

    def _dataset(self, x, y, validation_data, keep):
        """A dtnn_dataset over arrays (kept alive in keep) for dtnn_train and the loaders."""
        x, y, norm = self._data(x, y, "fit")
        if validation_data is None and norm is not None:
            validation_data = norm.test
        d = ffi.new("dtnn_dataset *")
        keep += [x, y]
        _fill_split(d.train, x, y, self.classes)
        if validation_data is not None and len(validation_data[0]):
            vx, vy = validation_data
            vx = _as_images(vx, self.input_shape, "validation_data")
            vy = _as_labels(vy, vx.shape[0], self.classes, "validation_data")
            keep += [vx, vy]
            _fill_split(d.test, vx, vy, self.classes)
        for i in range(4):
            d.mean[i], d.std[i] = 0.0, 1.0
        if norm is not None:
            for i, (mu, sd) in enumerate(zip(norm.mean, norm.std)):
                d.mean[i], d.std[i] = mu, sd
        d.name = (norm.name if norm is not None else "numpy").encode()[:63]
        self._norm = (tuple(d.mean), tuple(d.std), ffi.string(d.name))
        return d

    def _train_params(self, a, keep):
        err = new_error()
        tp = ffi.new("dtnn_train_params *")
        lib.dtnn_train_params_default(tp)
        tp.epochs, tp.steps, tp.batch_size = int(a["epochs"]), int(a["steps"]), a["batch_size"]
        if tp.epochs <= 0 and tp.steps <= 0:
            raise ValueError("give a positive epochs or steps")
        tp.shuffle = 1 if a["shuffle"] else 0
        tp.seed = self.seed if a["seed"] is None else int(a["seed"])
        check(lib.dtnn_loss_parse(a["loss"].encode(), ffi.addressof(tp.loss, "kind"), err),
              err)
        tp.loss.label_smoothing = a["label_smoothing"]
        tp.sched = _optim.schedule_params(a["schedule"], a["lr"], a["warmup_epochs"])[0]
        tp.stop_at_accuracy, tp.early_stop = a["stop_at_accuracy"], a["early_stop"]
        tp.ema_decay, tp.ema_steps = a["ema"], a["ema_steps"]
        main = lib.dtnn_comm_rank(a["comm"]) == 0
        for field, value in (("save_path", a["save"]), ("log_path", a["log"]),
                             ("resume_from", a["resume"])):
            if value is not None and (main or field == "resume_from"):
                keep.append(ffi.new("char[]", _path(value)))
                setattr(tp, field, keep[-1])
        tp.checkpoint_every, tp.keep = a["checkpoint_every"], a["keep"]
        check(lib.dtnn_allreduce_parse(a["allreduce"].encode(),
                                       ffi.addressof(tp, "allreduce"), err), err)
        check(lib.dtnn_comm_dtype_parse(a["comm_dtype"].encode(),
                                        ffi.addressof(tp, "comm_dtype"), err), err)
        tp.accumulate, tp.sync_bn = a["accumulate"], 1 if a["sync_bn"] else 0
        tp.skip_nonfinite = 1 if a["skip_nonfinite"] else 0
        return tp

    def _resume(self, path, ts, tp):
        err = new_error()
        check(lib.dtnn_checkpoint_load(_path(path), self._m, self._opt, ts, ffi.NULL, err),
              err, f"resume {os.fspath(path)}")
        if ts.global_batch != tp.batch_size or ts.seed != tp.seed:
            raise ValueError(f"{os.fspath(path)} was trained with batch_size "
                             f"{ts.global_batch} and seed {ts.seed}; resume with the same")

    def _run(self, start, tp, comm, callbacks, verbose):
        history = History()
        main = lib.dtnn_comm_rank(comm) == 0
        bar = ProgressBar() if verbose and main else None
        if bar is not None and lib.dtnn_comm_size(comm) > 1:
            # Open MPI gives its ranks a pseudo-terminal whether or not mpirun's output is
            # one: a redrawn bar would fill a redirected log with escape codes (as the CLI).
            bar.tty = bar.notebook = False
        every = [cb for cb in callbacks if wants_batches(cb)]
        ends = callbacks + [history] + ([bar] if bar else [])
        stop = ffi.new("sig_atomic_t *")
        tp.stop = stop
        state = {"error": None, "signal": 0}
        self.stop_training = False

        handlers = {}

        def on_signal(signum, frame):
            # As the CLI's SA_RESETHAND: a second signal is the previous handler's (Ctrl-C
            # twice raises KeyboardInterrupt in a run that does not stop).
            state["signal"] = signum
            stop[0] = signum
            signal.signal(signum, handlers[signum])

        main_thread = threading.current_thread() is threading.main_thread()
        # Python runs a signal's handler only when it runs Python: a few times a second is
        # enough to stop within a step of Ctrl-C.
        tp.progress_interval = 0.0 if every else (ProgressBar.interval if bar or main_thread
                                                  else -1.0)

        @ffi.callback("void(const dtnn_progress *, void *)")
        def on_progress(p, user):
            try:
                if p.epoch_end:
                    logs = _epoch_logs(p)
                    for cb in ends:
                        cb.on_epoch_end(logs["epoch"], logs)
                else:
                    logs = _batch_logs(p)
                    for cb in every:
                        cb.on_batch_end(logs["step"], logs)
                    if bar and bar.tty:
                        bar.on_progress(logs)
                if self.stop_training:
                    stop[0] = -1
            except BaseException as e:  # noqa: B902 -- raised again after the run stops
                state["error"] = e
                stop[0] = -1

        for cb in callbacks:
            cb.on_train_begin(self)
        err = new_error()
        try:
            if main_thread:
                for sig in (signal.SIGINT, signal.SIGTERM):
                    handlers[sig] = signal.signal(sig, on_signal)
            status = start(on_progress, err)
        finally:
            for sig, previous in handlers.items():
                signal.signal(sig, previous)
        if state["error"] is not None:
            raise state["error"]
        if status != lib.DTNN_OK and not (status == lib.DTNN_ERR_INTERRUPTED and
                                          self.stop_training and not state["signal"]):
            self._check(status, err)
        if state["signal"] and status == lib.DTNN_OK:
            # The signal came as the run ended: it completed, and the caller still stops.
            raise Interrupted(f"signal {state['signal']} as the run ended after step "
                              f"{history.epochs[-1]['step'] if history.epochs else 0}: "
                              "training completed" + (", checkpoint saved" if tp.save_path !=
                                                      ffi.NULL else ""))
        for cb in callbacks:
            cb.on_train_end(self, history)
        return history

    # ---- inference ----

    def evaluate(self, x, y=None, *, batch_size=256, loss="cross-entropy"):
        """Loss and accuracy on (x, y), a Split, a Dataset (its test split) or an ImageFolder
        (its val split, else train): a dict with loss (mean), accuracy and top5 (fractions)
        and count. Under mpirun each rank evaluates its share and every rank gets the whole
        set's metrics."""
        if isinstance(x, Dataset):
            x = x.test
        self._build(1 if self._built else batch_size)
        err = new_error()
        lp = ffi.new("dtnn_loss_params *")
        lib.dtnn_loss_params_default(lp)
        check(lib.dtnn_loss_parse(loss.encode(), ffi.addressof(lp[0], "kind"), err), err)
        out = ffi.new("dtnn_metrics *")
        comm = distributed.communicator()
        if isinstance(x, ImageFolder):
            ranks = lib.dtnn_comm_size(comm)
            p = loader_params(self._built * ranks, ranks, lib.dtnn_comm_rank(comm), self.seed, 0,
                              threads=x.loader_threads, image_size=x.image_size,
                              strict=x.strict)
            with Loader.folder(x, "val" if x.has_val else "train", p) as loader:
                self._check(lib.dtnn_evaluate_loader(self._m, loader.ptr, self._built, lp, comm,
                                                     out, err), err)
            return _metrics(out)
        x, y, _ = self._data(x, y, "evaluate")
        s = ffi.new("dtnn_split *")
        _fill_split(s, x, y, self.classes)
        self._check(lib.dtnn_evaluate(self._m, s, min(batch_size, self._built), lp, comm, out,
                                      err), err)
        return _metrics(out)

    def predict(self, x, *, batch_size=256):
        """The model's outputs (logits) for x, float32 [N, classes], in evaluation mode."""
        if isinstance(x, (Dataset, Split)):
            x = x.test.x if isinstance(x, Dataset) else x.x
        x = _as_images(x, self.input_shape, "predict")
        self._build(1 if self._built else min(batch_size, max(1, x.shape[0])))
        out = np.empty((x.shape[0], self.classes), np.float32)
        err = new_error()
        step = self._built
        for i in range(0, x.shape[0], step):
            chunk = x[i:i + step]
            self._check(lib.dtnn_model_forward(self._m, ffi.cast("float *", chunk.ctypes.data),
                                               chunk.shape[0], 0, err), err)
            lib.dtnn_model_read_output(self._m, ffi.cast("float *", out[i:].ctypes.data))
        return out

    __call__ = predict

    def gradcheck(self, x, eps=1e-2, tol=1e-2, max_entries=24):
        """The library's finite-difference check of this model's gradients at input x (a
        batch): dtnn_model_gradcheck. Returns a dict: ok, checked, mismatches, worst (the
        largest relative error), where, analytic, numeric (at the worst entry). The input's
        gradient is checked too in a model made by dtnn.gradcheck.

        Tolerance: in float32 the central difference of L = sum(probe * output) carries a
        rounding error of about u |L| / eps (u = 2^-24: about 6e-6 |L| at eps 1e-2) and a
        truncation error of eps^2 / 6 times L's third derivative; a relative 1e-2 holds both
        for smooth layers with values of order 1, as the suite's own checks use."""
        x = _as_images(x, self.input_shape, "gradcheck")
        self._build(x.shape[0])
        out = ffi.new("dtnn_gradcheck_result *")
        err = new_error()
        self._check(lib.dtnn_model_gradcheck(self._m, ffi.cast("float *", x.ctypes.data),
                                             x.shape[0], eps, tol, max_entries, out, err), err)
        return {"ok": out.mismatches == 0 and out.checked > 0, "checked": out.checked,
                "mismatches": out.mismatches, "worst": out.worst,
                "where": text(out.worst_name), "analytic": out.worst_analytic,
                "numeric": out.worst_numeric}

    # ---- weights ----

    def _tensors(self):
        self._build(1)
        for i in range(lib.dtnn_model_tensor_count(self._m)):
            t = lib.dtnn_model_tensor(self._m, i)
            yield text(t.name), t

    def state_dict(self):
        """Parameters and buffers as NumPy arrays under PyTorch's state_dict names (copies)."""
        err = new_error()
        out = {}
        for name, t in self._tensors():
            dims = tuple(t.dims[k] for k in range(t.ndim))
            a = np.empty(dims, np.float32 if t.dtype == lib.DTNN_F32 else np.int64)
            check(lib.dtnn_model_tensor_read(self._m, t, ffi.cast("void *", a.ctypes.data),
                                             err), err)
            out[name] = a
        return out

    def load_state_dict(self, state, strict=True):
        """Writes arrays (NumPy, or anything with .numpy(), as PyTorch tensors) into the
        tensors of the same names. strict: every model tensor must be given, and no other."""
        err = new_error()
        given = {k: (v.detach().cpu().numpy() if hasattr(v, "detach") else np.asarray(v))
                 for k, v in state.items()}
        names = set()
        for name, t in self._tensors():
            names.add(name)
            if name not in given:
                if strict:
                    raise KeyError(f"load_state_dict: no value for {name}")
                continue
            dims = tuple(t.dims[k] for k in range(t.ndim))
            a = given[name]
            if a.shape != dims and not (a.size == t.count and a.ndim == 0 and not dims):
                raise ValueError(f"load_state_dict: {name} is {dims}, the value given is "
                                 f"{a.shape}")
            a = np.ascontiguousarray(a, np.float32 if t.dtype == lib.DTNN_F32 else np.int64)
            check(lib.dtnn_model_tensor_write(self._m, t, ffi.cast("void *", a.ctypes.data),
                                              err), err, name)
        extra = sorted(set(given) - names)
        if strict and extra:
            raise KeyError(f"load_state_dict: the model has no tensor {', '.join(extra[:5])}")

    def save(self, path):
        """A checkpoint (safetensors, as `dtnn train --save`): weights, optimizer state and
        the normalisation of the data last trained on; written atomically."""
        self._build(1)
        err = new_error()
        norm = ffi.NULL
        if self._norm is not None:
            norm = ffi.new("dtnn_dataset *")
            norm.mean, norm.std, norm.name = self._norm
        check(lib.dtnn_checkpoint_save(_path(path), self._m, self._opt, ffi.NULL, norm, err),
              err)

    def load(self, path, exclude=(), ema=False):
        """Weights from a checkpoint of `dtnn train` or save(); exclude: globs over tensor
        names left as they are ("fc.*", fine-tuning on other classes); ema: the weights'
        average a run with ema saved."""
        self._build(1)
        err = new_error()
        if ema:
            check(lib.dtnn_checkpoint_load_average(_path(path), self._m, err), err)
            return
        pats = [ffi.new("char[]", p.encode()) for p in exclude]
        arr = ffi.new("const char *[]", pats) if pats else ffi.NULL
        check(lib.dtnn_checkpoint_load_weights(_path(path), self._m, arr, len(pats), err), err)

    def export_onnx(self, path, opset=13):
        """The inference graph with the current weights as an ONNX file (atomic write)."""
        self._build(1)
        err = new_error()
        check(lib.dtnn_onnx_export(self._m, _path(path), int(opset), err), err)

    def parameter_count(self):
        self._build(1)
        return int(lib.dtnn_model_param_count(self._m))

    def __repr__(self):
        what = self._source[1] if self._source[0] == "spec" else self._source[-1]
        built = f", {self.parameter_count()} parameters" if self._built else ""
        return f"dtnn.Model({what!r}, input {self.input_shape}{built}, device {self.device!r})"


def _model_kwargs(kwargs):
    allowed = {"device", "precision", "threads", "seed", "init"}
    unknown = set(kwargs) - allowed
    if unknown:
        raise TypeError(f"unexpected argument {sorted(unknown)[0]!r} (one of "
                        f"{', '.join(sorted(allowed))})")
    return kwargs


def _metrics(out):
    count = max(out.count, 1)
    return {"loss": out.loss_sum / count, "accuracy": out.top1 / count,
            "top5": out.top5 / count, "count": out.count}


def _epoch_logs(p):
    logs = {"epoch": p.epoch + 1, "step": p.step, "train_loss": p.loss, "train_acc": p.acc,
            "test_loss": p.test_loss if p.has_test else None,
            "test_acc": p.test_acc if p.has_test else None}
    if p.has_ema_test:
        logs["ema_test_loss"], logs["ema_test_acc"] = p.ema_test_loss, p.ema_test_acc
    logs.update({"images_per_sec": p.images_per_sec, "seconds": p.elapsed,
                 "comm_wait_seconds": p.comm_wait, "skipped_steps": p.skipped,
                 "skipped_images": p.skipped_images, "lr": p.lr})
    if p.stopping != ffi.NULL:
        logs["stopping"] = text(p.stopping)
    return logs


def _batch_logs(p):
    return {"step": p.step, "epoch": p.epoch + 1, "epochs": p.epochs,
            "step_in_epoch": p.step_in_epoch, "steps_per_epoch": p.steps_per_epoch,
            "train_loss": p.loss, "train_acc": p.acc, "lr": p.lr,
            "images_per_sec": p.images_per_sec}


__all__ = ["Model", "Error", "Interrupted"]
