"""Layers written in Python: the library's gradient check, training beside built-in layers
(bit for bit where the arithmetic is the same), every host backend, errors."""
import numpy as np
import pytest

import dtnn


class Scale(dtnn.Layer):
    """y = gain[c] x + shift[c]."""

    def infer(self, shape):
        return shape, {"gain": ((shape[0],), "ones"), "shift": ((shape[0],), "zeros")}

    def forward(self, inputs, params, training):
        return (inputs[0] * params["gain"][None, :, None, None] +
                params["shift"][None, :, None, None])

    def backward(self, inputs, params, y, dy):
        return ([dy * params["gain"][None, :, None, None]],
                {"gain": (dy * inputs[0]).sum(axis=(0, 2, 3)), "shift": dy.sum(axis=(0, 2, 3))})


class WrongScale(Scale):
    def backward(self, inputs, params, y, dy):
        dx, dp = super().backward(inputs, params, y, dy)
        return [2 * dx[0]], dp


class PyReLU(dtnn.Layer):
    def forward(self, inputs, params, training):
        return np.maximum(inputs[0], 0)

    def backward(self, inputs, params, y, dy):
        return [np.where(inputs[0] > 0, dy, 0).astype(np.float32)], {}


class PyLinear(dtnn.Layer):
    def __init__(self, outputs):
        self.outputs = outputs

    def infer(self, shape):
        features = shape[0] * shape[1] * shape[2]
        return (self.outputs, 1, 1), {"weight": ((self.outputs, features), "weight"),
                                      "bias": ((self.outputs,), ("bias", features))}

    def forward(self, inputs, params, training):
        x = inputs[0].reshape(len(inputs[0]), -1)
        y = x @ params["weight"].T + params["bias"]
        return y.reshape(len(x), self.outputs, 1, 1)

    def backward(self, inputs, params, y, dy):
        x = inputs[0].reshape(len(inputs[0]), -1)
        g = dy.reshape(len(x), -1)
        return ([(g @ params["weight"]).reshape(inputs[0].shape)],
                {"weight": g.T @ x, "bias": g.sum(axis=0)})


def test_the_library_checks_a_python_layers_gradients():
    r = dtnn.gradcheck(Scale(), (3, 4, 5))
    assert r["ok"] and r["checked"] == 24 + 3 + 3, r
    wrong = dtnn.gradcheck(WrongScale(), (3, 4, 5))
    assert not wrong["ok"] and wrong["where"].startswith("input"), wrong
    assert dtnn.gradcheck(PyLinear(7), (2, 3, 3))["ok"]


def _net(act, linear):
    net = dtnn.Sequential(input_shape=(1, 12, 12))
    net.add("conv2d", name="conv", filters=4, kernel=3, padding=1)
    net.add(act, name="act")
    net.add("flatten")
    net.add(linear, name="fc") if isinstance(linear, dtnn.Layer) else \
        net.add("linear", name="fc", outputs=4)
    return net


def test_a_python_relu_trains_bit_for_bit_as_the_libraries(small):
    opts = dict(epochs=2, batch_size=32, optimizer=dtnn.optim.SGD(lr=0.05, momentum=0.9),
                verbose=0)
    ours = _net("relu", None).build(seed=4)
    ours.fit(small, **opts)
    theirs = _net(PyReLU(), None).build(seed=4)
    theirs.fit(small, **opts)
    a, b = ours.state_dict(), theirs.state_dict()
    assert list(a) == list(b)
    for name in a:
        assert np.array_equal(a[name], b[name]), name


def test_python_parameters_start_as_the_libraries_and_train_close(small):
    ours = _net("relu", None).build(seed=5)
    theirs = _net("relu", PyLinear(4)).build(seed=5)
    a, b = ours.state_dict(), theirs.state_dict()
    assert list(a) == list(b) and all(np.array_equal(a[k], b[k]) for k in a)
    opts = dict(epochs=1, batch_size=32, optimizer=dtnn.optim.SGD(lr=0.05), verbose=0)
    ha, hb = ours.fit(small, **opts), theirs.fit(small, **opts)
    # The same sums in another order (NumPy's GEMM against dtnn's): float32 rounding, over
    # 8 steps of lr 0.05 on values of order 1.
    for k, v in ours.state_dict().items():
        np.testing.assert_allclose(theirs.state_dict()[k], v, rtol=1e-4, atol=1e-5)
    assert abs(ha.history["train_loss"][0] - hb.history["train_loss"][0]) < 1e-4


def test_a_python_layer_on_cpu_guarded_is_cpu(small):
    x = small.test.x[:6]
    cpu = _net(Scale(), PyLinear(4)).build(seed=6).predict(x)
    guarded = _net(Scale(), PyLinear(4)).build(seed=6, device="cpu-guarded").predict(x)
    assert np.array_equal(cpu, guarded)


def test_a_python_layers_exception_reaches_the_caller(small):
    class Broken(PyReLU):
        def forward(self, inputs, params, training):
            raise FloatingPointError("no good")

    class BadShape(PyReLU):
        def forward(self, inputs, params, training):
            return inputs[0][:, :1]

    with pytest.raises(FloatingPointError, match="no good"):
        _net(Broken(), None).build().predict(small.test.x[:2])
    with pytest.raises(FloatingPointError, match="no good"):
        _net(Broken(), None).build().fit(small, epochs=1, batch_size=32, verbose=0)
    with pytest.raises(ValueError, match="forward returned"):
        _net(BadShape(), None).build().predict(small.test.x[:2])

    class Once(PyReLU):
        failed = False

        def forward(self, inputs, params, training):
            if not self.failed:
                self.failed = True
                raise RuntimeError("transient")
            return super().forward(inputs, params, training)

    model = _net(Once(), None).build()
    with pytest.raises(RuntimeError, match="transient"):
        model.predict(small.test.x[:2])
    assert model.predict(small.test.x[:2]).shape == (2, 4)     # the cause gone, it runs


def test_a_forward_only_python_layer_predicts_but_does_not_train(small):
    class Forward(dtnn.Layer):
        def forward(self, inputs, params, training):
            return inputs[0] * 2

    model = _net(Forward(), None).build()
    assert model.predict(small.test.x[:2]).shape == (2, 4)
    with pytest.raises(dtnn.Error, match="inference"):
        model.fit(small, epochs=1, batch_size=32, verbose=0)
