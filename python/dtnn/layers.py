"""Layers written in Python: forward and backward on NumPy arrays, beside the library's own.

    class Scale(dtnn.Layer):
        def infer(self, shape):
            return shape, {"gain": ((shape[0],), "ones")}
        def forward(self, inputs, params, training):
            return inputs[0] * params["gain"][None, :, None, None]
        def backward(self, inputs, params, y, dy):
            g = params["gain"][None, :, None, None]
            return [dy * g], {"gain": (dy * inputs[0]).sum(axis=(0, 2, 3))}

    net = dtnn.Sequential(input_shape=(3, 32, 32))
    net.add("conv2d", name="conv", filters=8, kernel=3, padding=1)
    net.add(Scale(), name="scale")
    ...
    dtnn.gradcheck(Scale(), (8, 4, 4))     # the library's finite-difference check

This is the slow, flexible path: each call copies the layer's values between the library and
NumPy and runs Python, once per forward and backward. Its parameters live in the model's flat
buffers (the optimizers, the all-reduce and checkpoints see them as any layer's), and it runs
on every backend (cpu, cpu-guarded, cuda) through those copies. The fast path is a C layer:
one file in src/layers/ calling the backend table (docs/architecture.md).
"""
import numpy as np

from ._lib import ffi, lib

_INITS = {"zeros": lib.DTNN_EXTERNAL_ZEROS, "ones": lib.DTNN_EXTERNAL_ONES,
          "weight": lib.DTNN_EXTERNAL_WEIGHT, "bias": lib.DTNN_EXTERNAL_BIAS}


class Layer:
    """Subclass and define forward (and backward to train). Arrays are float32 NCHW: each
    input [N, C, H, W], the output [N, *out_shape]."""

    type = "python"

    def infer(self, *input_shapes):
        """The output's (C, H, W) from the inputs', and the parameters as {name: (shape,
        init)}, init "zeros", "ones", "weight" or "bias" (PyTorch's rules for a linear or
        convolution weight and bias), or (init, fan_in). Default: shaped as input 0, none."""
        return input_shapes[0], {}

    def forward(self, inputs, params, training):
        """The output for inputs (a list of arrays) and params ({name: array}). The arrays
        are views of the library's copies, valid during the call only: copy what you keep."""
        raise NotImplementedError(f"{type(self).__name__}.forward")

    def backward(self, inputs, params, y, dy):
        """([d loss / d input i] per input, {name: d loss / d param}) from the output y and
        its gradient dy. Return None for an input whose gradient is not wanted."""
        raise NotImplementedError(f"{type(self).__name__}.backward")


def _view(ptr, shape):
    count = int(np.prod(shape))
    return np.frombuffer(ffi.buffer(ptr, 4 * count), dtype=np.float32).reshape(shape)


def _fail(err, what, e):
    text = f"{what}: {type(e).__name__}: {e}".encode("utf-8", "replace")[:500]
    err.code = lib.DTNN_ERR_ARG
    err.message = text
    return lib.DTNN_ERR_ARG


class Binding:
    """A Layer's callbacks for the library (kept alive as long as the model that uses them).
    The first exception a callback raises is kept in .error, for the caller to raise again."""

    def __init__(self, layer):
        self.layer = layer
        self.error = None
        self.in_shapes, self.out_shape, self.param_shapes = [], None, {}
        self.type = ffi.new("char[]", (getattr(layer, "type", "python") or "python").encode())
        self.ops = ffi.new("dtnn_external_ops *")
        self.ops.type = self.type
        # error=: what the library gets should an exception escape the callbacks' own
        # handling (it cannot, short of one in the handler itself).
        fail = lib.DTNN_ERR_ARG
        self._callbacks = (
            ffi.callback("dtnn_status(void *, int, const int *, int *, dtnn_external_params *,"
                         " dtnn_error *)", self._infer, error=fail),
            ffi.callback("dtnn_status(void *, int, int, const float *const *, const float "
                         "*const *, float *, dtnn_error *)", self._forward, error=fail),
            ffi.callback("dtnn_status(void *, int, const float *const *, const float *const *,"
                         " const float *, const float *, float *const *, float *const *, "
                         "dtnn_error *)", self._backward, error=fail))
        self.ops.infer, self.ops.forward, self.ops.backward = self._callbacks
        if type(layer).backward is Layer.backward:
            self.ops.backward = ffi.NULL

    def _keep(self, e):
        if self.error is None:
            self.error = e

    def _infer(self, user, n_in, in_chw, out_chw, params, err):
        try:
            self.in_shapes = [tuple(in_chw[3 * i + k] for k in range(3)) for i in range(n_in)]
            out, declared = self.layer.infer(*self.in_shapes)
            out = tuple(int(v) for v in out)
            if len(out) != 3:
                raise ValueError(f"infer returned the output shape {out}: give (C, H, W)")
            self.out_shape = out
            if len(declared) > 4:
                raise ValueError(f"{len(declared)} parameters: at most 4")
            self.param_shapes = {}
            params.count = len(declared)
            for k, (name, spec) in enumerate(declared.items()):
                shape, init = spec
                fan_in = 0.0
                if isinstance(init, tuple):
                    init, fan_in = init
                shape = tuple(int(d) for d in shape)
                if not 1 <= len(shape) <= 4 or init not in _INITS or not 0 < len(name) < 24:
                    raise ValueError(f"parameter {name!r}: a name of 1 to 23 characters, 1 to "
                                     f"4 dimensions and an init in {sorted(_INITS)}")
                params.names[k] = name.encode()
                params.ndim[k] = len(shape)
                for d, v in enumerate(shape):
                    params.dims[k][d] = v
                params.init[k] = _INITS[init]
                params.fan_in[k] = float(fan_in)
                self.param_shapes[name] = shape
            out_chw[0], out_chw[1], out_chw[2] = out
            return lib.DTNN_OK
        except BaseException as e:  # noqa: B902 -- raised again by the model
            self._keep(e)
            return _fail(err, "infer", e)

    def _arrays(self, n, x, params):
        inputs = [_view(x[i], (n,) + s) for i, s in enumerate(self.in_shapes)]
        values = {name: _view(params[k], s)
                  for k, (name, s) in enumerate(self.param_shapes.items())}
        return inputs, values

    def _forward(self, user, n, training, x, params, y, err):
        try:
            inputs, values = self._arrays(n, x, params)
            out = np.asarray(self.layer.forward(inputs, values, bool(training)))
            want = (n,) + self.out_shape
            if out.shape != want:
                raise ValueError(f"forward returned {out.shape}, infer said {want}")
            _view(y, want)[...] = out
            return lib.DTNN_OK
        except BaseException as e:  # noqa: B902
            self._keep(e)
            return _fail(err, "forward", e)

    def _backward(self, user, n, x, params, y, dy, dx, dparams, err):
        try:
            inputs, values = self._arrays(n, x, params)
            out_shape = (n,) + self.out_shape
            grads_in, grads_p = self.layer.backward(inputs, values, _view(y, out_shape),
                                                    _view(dy, out_shape))
            if len(grads_in) != len(inputs):
                raise ValueError(f"backward returned {len(grads_in)} input gradients for "
                                 f"{len(inputs)} inputs")
            for i, g in enumerate(grads_in):
                if dx[i] != ffi.NULL:
                    self._put(dx[i], g, inputs[i].shape, f"the gradient of input {i}")
            for k, (name, shape) in enumerate(self.param_shapes.items()):
                if dparams[k] != ffi.NULL:
                    self._put(dparams[k], (grads_p or {}).get(name), shape,
                              f"the gradient of {name!r}")
            return lib.DTNN_OK
        except BaseException as e:  # noqa: B902
            self._keep(e)
            return _fail(err, "backward", e)

    @staticmethod
    def _put(ptr, value, shape, what):
        if value is None:
            raise ValueError(f"backward gave no value for {what}, which is needed")
        value = np.asarray(value)
        if value.shape != tuple(shape):
            raise ValueError(f"backward gave {what} of shape {value.shape}, not {tuple(shape)}")
        _view(ptr, shape)[...] = value
