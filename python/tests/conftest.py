"""Shared fixtures: the CLI and launcher of the same build (for comparisons), and the data."""
import os

import pytest

import dtnn


def _tool(var):
    path = os.environ.get(var)
    return path if path and os.access(path, os.X_OK) else None


@pytest.fixture(scope="session")
def cli():
    path = _tool("DTNN_CLI")
    if not path:
        pytest.skip("DTNN_CLI (the build's dtnn) is not set: no comparison with the CLI")
    return path


@pytest.fixture(scope="session")
def mpirun():
    path = _tool("DTNN_MPIRUN")
    if not path:
        pytest.skip("DTNN_MPIRUN (the build's tests/mpirun) is not set: no MPI runs")
    return path


@pytest.fixture(scope="session")
def fmnist():
    try:
        return dtnn.datasets.fashion_mnist()
    except dtnn.Error as e:
        pytest.skip(f"Fashion-MNIST is not installed (dataset-fashion-mnist): {e}")


@pytest.fixture(scope="session")
def small():
    """A small synthetic set of 1x12x12 images in 4 classes."""
    return dtnn.datasets.synthetic(samples=256, shape=(1, 12, 12), classes=4, seed=7)


MLP = """[input]
shape = 1x12x12

[flatten]

[linear]
name = fc1
outputs = 16

[relu]

[linear]
name = fc2
outputs = 4
"""


@pytest.fixture
def mlp_text():
    return MLP
