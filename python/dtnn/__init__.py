"""dtnn from Python: data-parallel CNN training on libdtnn's C core.

    import dtnn
    data = dtnn.datasets.fashion_mnist()
    model = dtnn.Model("lenet5")
    model.fit(data, epochs=2, batch_size=32, optimizer=dtnn.optim.AdamW(lr=0.002),
              schedule="cosine")
    print(model.evaluate(data))

Behaviour lives in the library: this package fills its structures and calls it (cffi), so a
script and `dtnn train` with the same options train the same weights.
"""
from . import callbacks, datasets, distributed, optim
from ._lib import LIBRARY_PATH, ArgumentError, Error, Interrupted, ffi, lib, text
from .layers import Layer
from .model import Model
from .sequential import Sequential

__version__ = "0.1.0"


def zoo():
    """The zoo's model names and descriptions, as `dtnn models` lists them."""
    out, i = {}, 0
    desc = ffi.new("const char **")
    while True:
        name = lib.dtnn_zoo_name(i, desc)
        if name == ffi.NULL:
            return out
        out[text(name)] = text(desc[0])
        i += 1


def layer_types():
    """The layer types a model file (and Sequential.add) can use."""
    out, i = [], 0
    while lib.dtnn_layer_type_name(i) != ffi.NULL:
        out.append(text(lib.dtnn_layer_type_name(i)))
        i += 1
    return out


def gradcheck(layer, input_shape, batch=2, eps=1e-2, tol=1e-2, max_entries=24, seed=0):
    """The library's finite-difference check of a Python layer of one input: its input and
    parameter gradients, in a model of the layer alone, on a batch of (C, H, W) inputs drawn
    from N(0, 1) with seed. Returns Model.gradcheck's dict ("ok": all within tol)."""
    import numpy as np
    net = Sequential(input_shape=input_shape)
    net.add(layer, name="layer")
    model = net.build(seed=seed)
    model._input_grad = True
    x = np.random.default_rng(seed).standard_normal((batch,) + tuple(input_shape))
    return model.gradcheck(x.astype(np.float32), eps=eps, tol=tol, max_entries=max_entries)


def cpu_kernels():
    """The CPU kernel set this process runs (generic, avx2+fma, avx512) and its GEMM."""
    buf = ffi.new("char[128]")
    return {"kernels": text(lib.dtnn_cpu_kernels_name()),
            "gemm": text(lib.dtnn_cpu_gemm_name(buf, 128))}


__all__ = ["Model", "Sequential", "Layer", "gradcheck", "Error", "ArgumentError", "Interrupted", "datasets", "optim", "callbacks",
           "distributed", "zoo", "layer_types", "cpu_kernels", "LIBRARY_PATH"]
