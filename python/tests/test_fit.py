"""Training from Python is `dtnn train`: the same weights bit for bit, the same per-epoch
metrics, the same checkpoints, resume and stop; callbacks and errors the Python way."""
import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

import dtnn

HERE = os.path.dirname(os.path.abspath(__file__))


def _script_env():
    """The environment for a script run by mpirun: this package and its library."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(dtnn.__file__)))
    return dict(os.environ, DTNN_LIBRARY=dtnn.LIBRARY_PATH,
                PYTHONPATH=os.pathsep.join([package, os.environ.get("PYTHONPATH", "")]))


def test_fit_is_dtnn_train_bit_for_bit(tmp_path, cli, fmnist):
    """The README's training, cut to 40 steps: the Python run's checkpoint file is the
    CLI's, byte for byte (weights, optimizer state, normalisation, training state)."""
    py, ref = tmp_path / "py.safetensors", tmp_path / "cli.safetensors"
    model = dtnn.Model("lenet5", seed=3)
    model.fit(fmnist, steps=40, batch_size=32, optimizer=dtnn.optim.AdamW(lr=0.002),
              schedule="cosine", warmup_epochs=0.01, seed=3, save=py, verbose=0)
    subprocess.run([cli, "train", "--model", "lenet5", "--dataset", "fashion-mnist",
                    "--steps", "40", "--epochs", "1", "--batch-size", "32", "--optimizer",
                    "adamw", "--lr", "0.002", "--lr-schedule", "cosine", "--warmup-epochs", "0.01", "--seed",
                    "3", "--save", str(ref), "--quiet"], check=True, capture_output=True)
    assert py.read_bytes() == ref.read_bytes()


def test_epoch_logs_are_the_jsonl_log(tmp_path, small, mlp_text):
    log = tmp_path / "log.jsonl"
    m = dtnn.Model.from_text(mlp_text)
    history = m.fit(small, epochs=2, batch_size=32, optimizer=dtnn.optim.SGD(lr=0.05),
                    log=log, verbose=0)
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(lines) == len(history.epochs) == 2
    for written, given in zip(lines, history.epochs):
        assert set(written) == set(given)
        for key, value in written.items():
            if value is None or isinstance(value, int):
                assert given[key] == value, key
            else:   # the log prints 6 to 8 significant digits, one decimal for img/s
                assert abs(given[key] - value) <= 1e-6 * abs(value) + 0.05 + 1e-6, key
    assert history.history["train_loss"] == [e["train_loss"] for e in history.epochs]


class Counter(dtnn.callbacks.Callback):
    def __init__(self):
        self.steps, self.epochs = [], []

    def on_batch_end(self, step, logs):
        self.steps.append(step)

    def on_epoch_end(self, epoch, logs):
        self.epochs.append(epoch)


def test_batch_callbacks_see_every_step(small, mlp_text):
    m = dtnn.Model.from_text(mlp_text)
    c = Counter()
    m.fit(small, epochs=2, batch_size=64, callbacks=[c], verbose=0)
    assert c.epochs == [1, 2]
    assert c.steps == list(range(1, 9))     # 256 samples in steps of 64, twice


def test_stop_training_from_a_callback_ends_the_run_normally(small, mlp_text):
    class StopAfterFirst(dtnn.callbacks.Callback):
        def on_train_begin(self, model):
            self.model, self.steps = model, []

        def on_batch_end(self, step, logs):
            self.steps.append(step)

        def on_epoch_end(self, epoch, logs):
            self.model.stop_training = True

    m = dtnn.Model.from_text(mlp_text)
    stopper = StopAfterFirst()
    history = m.fit(small, epochs=3, batch_size=32, callbacks=[stopper], verbose=0)
    # Stopped at the epoch's end, not after the next epoch's first step.
    assert len(history.epochs) == 1 and stopper.steps == list(range(1, 9))


def test_an_exception_in_a_callback_reaches_the_caller(small, mlp_text):
    class Boom(dtnn.callbacks.Callback):
        def on_epoch_end(self, epoch, logs):
            raise ArithmeticError("boom at epoch %d" % epoch)

    m = dtnn.Model.from_text(mlp_text)
    with pytest.raises(ArithmeticError, match="boom at epoch 1"):
        m.fit(small, epochs=3, batch_size=32, callbacks=[Boom()], verbose=0)


def test_ctrl_c_saves_and_resume_is_exact(tmp_path, small, mlp_text):
    opts = dict(epochs=3, batch_size=32, optimizer=dtnn.optim.SGD(lr=0.05, momentum=0.9),
                verbose=0)
    whole = tmp_path / "whole.safetensors"
    dtnn.Model.from_text(mlp_text).fit(small, save=whole, **opts)

    class CtrlC(dtnn.callbacks.Callback):
        def on_batch_end(self, step, logs):
            if step == 11:
                os.kill(os.getpid(), signal.SIGINT)

    part = tmp_path / "part.safetensors"
    with pytest.raises(dtnn.Interrupted):
        dtnn.Model.from_text(mlp_text).fit(small, save=part, callbacks=[CtrlC()], **opts)
    resumed = dtnn.Model.from_text(mlp_text)
    resumed.fit(small, save=part, resume=part, **opts)
    a, b = dtnn.Model.from_text(mlp_text), dtnn.Model.from_text(mlp_text)
    a.load(whole)
    b.load(part)
    for name, value in a.state_dict().items():
        assert np.array_equal(value, b.state_dict()[name]), name


def test_two_ranks_under_mpirun_train_as_the_cli(tmp_path, mpirun, cli):
    script = tmp_path / "train.py"
    script.write_text(
        "import sys, dtnn\n"
        "data = dtnn.datasets.synthetic(samples=512, shape=(3, 16, 16), classes=10)\n"
        "model = dtnn.Model('resnet20', input_shape=(3, 16, 16))\n"
        "model.fit(data, epochs=1, batch_size=64, optimizer=dtnn.optim.SGD(lr=0.1, "
        "momentum=0.9), save=sys.argv[1], verbose=0)\n"
        "assert dtnn.distributed.size() == 2\n")
    py, ref = tmp_path / "py.safetensors", tmp_path / "cli.safetensors"
    subprocess.run([mpirun, "-np", "2", sys.executable, str(script), str(py)], check=True,
                   timeout=600, env=_script_env())
    subprocess.run([mpirun, "-np", "2", cli, "train", "--model", "resnet20", "--dataset",
                    "synthetic", "--synthetic-samples", "512", "--synthetic-shape", "3x16x16",
                    "--epochs", "1", "--batch-size", "64", "--lr", "0.1", "--momentum", "0.9",
                    "--save", str(ref), "--quiet"], check=True, capture_output=True,
                   timeout=600)
    assert py.read_bytes() == ref.read_bytes()


def test_an_mpi4py_communicator_is_accepted(tmp_path, mpirun):
    pytest.importorskip("mpi4py", reason="Debian's python3-mpi4py is not installed")
    script = tmp_path / "with_mpi4py.py"
    script.write_text(
        "from mpi4py import MPI\n"
        "import dtnn\n"
        "world = MPI.COMM_WORLD\n"
        "sub = world.Split(world.Get_rank(), 0)\n"
        "try:\n"
        "    dtnn.distributed.init(sub)\n"
        "    raise SystemExit('a sub-communicator was accepted')\n"
        "except ValueError as e:\n"
        "    assert 'sub-communicator' in str(e), e\n"
        "dtnn.distributed.init(world)\n"
        "assert (dtnn.distributed.rank(), dtnn.distributed.size()) == "
        "(world.Get_rank(), world.Get_size()) == (world.Get_rank(), 2)\n"
        "data = dtnn.datasets.synthetic(samples=128, shape=(1, 8, 8), classes=3)\n"
        "h = dtnn.Model('mlp').fit(data, epochs=1, batch_size=32, verbose=0)\n"
        "losses = world.allgather(h.history['train_loss'][0])\n"
        "assert losses[0] == losses[1], losses\n"
        "sub.Free()\n")
    subprocess.run([mpirun, "-np", "2", sys.executable, str(script)], check=True, timeout=600,
                   env=_script_env())


class FakeTerminal:
    def __init__(self):
        self.text = ""

    def write(self, s):
        self.text += s

    def flush(self):
        pass

    def isatty(self):
        return True


def test_the_progress_bar_redraws_in_a_terminal_and_prints_epochs_in_a_log():
    tty, log = FakeTerminal(), FakeTerminal()
    log.isatty = lambda: False
    step = {"epoch": 1, "epochs": 2, "step_in_epoch": 3, "steps_per_epoch": 6,
            "train_loss": 0.5, "train_acc": 0.75, "images_per_sec": 1000.0}
    end = {"epoch": 1, "train_loss": 0.5, "train_acc": 0.75, "test_loss": 0.25,
           "test_acc": 0.875, "images_per_sec": 1000.0, "seconds": 2.0}
    for stream in (tty, log):
        bar = dtnn.callbacks.ProgressBar(stream)
        bar.on_progress(step)
        bar.on_epoch_end(1, end)
    assert "\r" in tty.text and "3/6" in tty.text and tty.text.endswith("2.0 s\n")
    assert log.text == "epoch 1: loss 0.5000 acc 75.00%, test loss 0.2500 acc 87.50%, " \
                       "1000 img/s, 2.0 s\n"
