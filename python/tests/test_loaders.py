"""The library's loaders from Python: an image folder and augmented data in memory give the
checkpoint `dtnn train` gives with the same options, byte for byte."""
import os
import subprocess

import pytest

import dtnn


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    tool = os.environ.get("DTNN_MAKE_IMAGEFOLDER")
    if not tool or not os.access(tool, os.X_OK):
        pytest.skip("DTNN_MAKE_IMAGEFOLDER (the build's make-imagefolder) is not set")
    path = tmp_path_factory.mktemp("images") / "folder"
    subprocess.run([tool, str(path), "--classes", "3", "--train", "12", "--val", "4",
                    "--width", "48", "--height", "40"], check=True, capture_output=True)
    return path


def test_an_image_folder_trains_as_dtnn_train(tmp_path, folder, cli):
    py, ref = tmp_path / "py.safetensors", tmp_path / "cli.safetensors"
    model = dtnn.Model("resnet20")
    history = model.fit(dtnn.datasets.ImageFolder(folder, image_size=32), steps=4,
                        batch_size=8, optimizer=dtnn.optim.SGD(lr=0.05, momentum=0.9),
                        save=py, verbose=0)
    assert model.input_shape == (3, 32, 32) and model.classes == 3
    assert history.epochs[-1]["test_acc"] is not None
    subprocess.run([cli, "train", "--model", "resnet20", "--dataset", "imagefolder",
                    "--data-dir", str(folder), "--image-size", "32", "--steps", "4", "--epochs",
                    "1", "--batch-size", "8", "--lr", "0.05", "--momentum", "0.9", "--save",
                    str(ref), "--quiet"], check=True, capture_output=True)
    assert py.read_bytes() == ref.read_bytes()
    metrics = model.evaluate(dtnn.datasets.ImageFolder(folder, image_size=32))
    assert metrics["count"] == 12


def test_augmented_data_in_memory_trains_as_dtnn_train(tmp_path, fmnist, cli):
    py, ref = tmp_path / "py.safetensors", tmp_path / "cli.safetensors"
    dtnn.Model("lenet5").fit(fmnist, steps=12, batch_size=16, augment="crop,flip",
                             random_erase=0.5, loader_threads=1, save=py, verbose=0)
    subprocess.run([cli, "train", "--model", "lenet5", "--dataset", "fashion-mnist",
                    "--steps", "12", "--epochs", "1", "--batch-size", "16", "--augment",
                    "crop,flip", "--random-erase", "0.5", "--loader-threads", "1", "--save",
                    str(ref), "--quiet"], check=True, capture_output=True)
    assert py.read_bytes() == ref.read_bytes()


def test_loader_options_are_checked(fmnist):
    with pytest.raises(ValueError, match="augment"):
        dtnn.Model("lenet5").fit(fmnist, steps=1, augment="rotate", verbose=0)
    with pytest.raises(FileNotFoundError, match="train"):
        dtnn.datasets.ImageFolder("/nonexistent")


def test_shards_train_as_dtnn_train(tmp_path, folder, cli):
    shards = tmp_path / "shards"
    subprocess.run([cli, "shard", "--data-dir", str(folder), "--output", str(shards),
                    "--shard-mb", "0.02"], check=True, capture_output=True)
    py, ref = tmp_path / "py.safetensors", tmp_path / "cli.safetensors"
    data = dtnn.datasets.Shards(shards, image_size=32, shuffle_buffer=8)
    assert data.has_val
    dtnn.Model("resnet20").fit(data, steps=4, batch_size=8, save=py, verbose=0)
    subprocess.run([cli, "train", "--model", "resnet20", "--dataset", "shards", "--data-dir",
                    str(shards), "--image-size", "32", "--shuffle-buffer", "8", "--steps", "4",
                    "--epochs", "1", "--batch-size", "8", "--save", str(ref), "--quiet"],
                   check=True, capture_output=True)
    assert py.read_bytes() == ref.read_bytes()
    with pytest.raises(FileNotFoundError, match="shards"):
        dtnn.datasets.Shards(tmp_path)
