"""Models from Python: the zoo, model files, Sequential, ONNX; weights in and out; errors."""
import numpy as np
import pytest

import dtnn


def test_zoo_and_layer_lists():
    assert "resnet20" in dtnn.zoo() and "lenet5" in dtnn.zoo()
    assert "conv2d" in dtnn.layer_types()
    assert dtnn.cpu_kernels()["kernels"]


def test_errors_are_exceptions_with_the_library_message():
    with pytest.raises(dtnn.Error, match="nosuchmodel"):
        dtnn.Model("nosuchmodel")
    with pytest.raises(dtnn.Error):
        dtnn.Model.from_text("[input]\nshape = 1x4x4\n\n[conv2d]\nfilters = -3\n")
    with pytest.raises(ValueError, match="precision|bf16"):
        dtnn.Model("lenet5", precision="fp7")


def test_state_dict_names_shapes_and_round_trip(small, mlp_text):
    a = dtnn.Model.from_text(mlp_text, seed=1)
    b = dtnn.Model.from_text(mlp_text, seed=2)
    sa = a.state_dict()
    assert list(sa) == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    assert sa["fc1.weight"].shape == (16, 144) and sa["fc2.bias"].shape == (4,)
    x = small.test.x[:10]
    assert not np.array_equal(a.predict(x), b.predict(x))
    b.load_state_dict(sa)
    assert np.array_equal(a.predict(x), b.predict(x))
    with pytest.raises(ValueError, match="fc1.weight"):
        b.load_state_dict({**sa, "fc1.weight": np.zeros((3, 3), np.float32)})
    with pytest.raises(KeyError, match="fc2.bias"):
        b.load_state_dict({k: v for k, v in sa.items() if k != "fc2.bias"})


def test_predict_matches_in_pieces_and_whole(small, mlp_text):
    m = dtnn.Model.from_text(mlp_text)
    x = small.train.x[:37]
    whole = m.predict(x, batch_size=64)
    assert whole.shape == (37, 4) and whole.dtype == np.float32
    again = dtnn.Model.from_text(mlp_text)
    pieces = again.predict(x, batch_size=5)
    # The same layer on each sample, in any batching: a row's sums are its own.
    assert np.array_equal(whole, pieces)


def test_shapes_and_labels_are_checked(small, mlp_text):
    m = dtnn.Model.from_text(mlp_text)
    with pytest.raises(ValueError, match="1, 12, 12"):
        m.predict(np.zeros((2, 3, 12, 12), np.float32))
    with pytest.raises(ValueError, match="4 classes"):
        m.fit(small.train.x[:8], np.full(8, 9), batch_size=8, verbose=0)
    with pytest.raises(TypeError, match="integers"):
        m.fit(small.train.x[:8], np.zeros(8, np.float32), batch_size=8, verbose=0)
    with pytest.raises(ValueError, match="divide"):
        m.fit(small, batch_size=0, verbose=0)


def test_sequential_is_its_model_file(small, mlp_text):
    net = dtnn.Sequential(input_shape=(1, 12, 12))
    net.add("flatten")
    net.add("linear", name="fc1", outputs=16)
    net.add("relu")
    net.add("linear", name="fc2", outputs=4)
    a = net.build(seed=3)
    b = dtnn.Model.from_text(mlp_text, seed=3)
    x = small.test.x[:4]
    assert np.array_equal(a.predict(x), b.predict(x))
    assert "[linear]\nname = fc2\noutputs = 4" in net.to_text()


def test_checkpoint_save_and_load(tmp_path, small, mlp_text):
    a = dtnn.Model.from_text(mlp_text, seed=1)
    a.fit(small, epochs=1, batch_size=32, verbose=0)
    path = tmp_path / "a.safetensors"
    a.save(path)
    b = dtnn.Model.from_text(mlp_text, seed=9)
    b.load(path)
    x = small.test.x
    assert np.array_equal(a.predict(x), b.predict(x))
    c = dtnn.Model.from_text(mlp_text, seed=9)
    c.load(path, exclude=["fc2.*"])
    assert np.array_equal(c.state_dict()["fc1.weight"], a.state_dict()["fc1.weight"])
    assert not np.array_equal(c.state_dict()["fc2.weight"], a.state_dict()["fc2.weight"])
    with pytest.raises(dtnn.Error):
        b.load(tmp_path / "missing.safetensors")


def test_onnx_out_and_back_in(tmp_path, small):
    m = dtnn.Model("lenet5", input_shape=(1, 28, 28), seed=5)
    path = tmp_path / "lenet5.onnx"
    try:
        m.export_onnx(path)
    except dtnn.Error as e:
        pytest.skip(f"this build writes no ONNX: {e}")
    back = dtnn.Model.from_onnx(path)
    x = np.random.default_rng(0).standard_normal((3, 1, 28, 28)).astype(np.float32)
    # The same layers, the same weights and the same kernels on the same batch.
    assert np.array_equal(m.predict(x), back.predict(x))


def test_rebuild_for_a_larger_batch_keeps_weights(small, mlp_text):
    m = dtnn.Model.from_text(mlp_text)
    before = m.predict(small.test.x[:3], batch_size=3)   # built for batches of 3
    m.fit(small, epochs=1, batch_size=64, optimizer=dtnn.optim.SGD(lr=1e-9), verbose=0)
    after = m.state_dict()
    fresh = dtnn.Model.from_text(mlp_text)
    np.testing.assert_allclose(after["fc1.weight"], fresh.state_dict()["fc1.weight"],
                               atol=1e-6)
    assert before.shape == (3, 4)


def test_a_zoo_model_takes_the_datas_shape_and_classes(small):
    m = dtnn.Model("resnet20")
    assert m.input_shape == (3, 32, 32)
    m.fit(small, steps=1, batch_size=8, verbose=0)      # 1x12x12 images in 4 classes
    assert m.input_shape == (1, 12, 12) and m.classes == 4
    fixed = dtnn.Model("resnet20", input_shape=(3, 32, 32))
    with pytest.raises(ValueError, match="3, 32, 32"):
        fixed.fit(small, steps=1, batch_size=8, verbose=0)


def test_a_failed_build_can_be_retried_and_a_closed_model_refuses(small, mlp_text):
    m = dtnn.Model.from_text(mlp_text)
    with pytest.raises(dtnn.Error):
        m.evaluate(small, batch_size=1 << 28)     # more memory than the machine has
    assert m.predict(small.test.x[:2]).shape == (2, 4)
    m.close()
    with pytest.raises(ValueError, match="closed"):
        m.predict(small.test.x[:2])
