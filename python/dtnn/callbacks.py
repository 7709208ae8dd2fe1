"""Callbacks of Model.fit, a Keras-like History, and the progress bar.

An epoch's `logs` are the metrics `dtnn train --log` writes for it, under the same keys:
epoch (1-based), step, train_loss, train_acc, test_loss, test_acc (None without validation
data), ema_test_loss and ema_test_acc (with ema), images_per_sec, seconds,
comm_wait_seconds, skipped_steps, skipped_images, lr.

The training loop stays in C: Python is entered at each epoch's end, and within an epoch
only when a callback overrides on_batch_end (then after every step) or a progress bar draws
(at most 4 times a second).
"""
import sys
import time


class Callback:
    """Override what you need. Setting model.stop_training = True ends the run after the
    current step (every rank after the same one)."""

    def on_train_begin(self, model):
        pass

    def on_batch_end(self, step, logs):
        """After every optimizer step: logs has step, step_in_epoch, steps_per_epoch, epoch,
        train_loss and train_acc (running means over the epoch), lr, images_per_sec."""

    def on_epoch_end(self, epoch, logs):
        pass

    def on_train_end(self, model, history):
        pass


def wants_batches(callback):
    return type(callback).on_batch_end is not Callback.on_batch_end


class History(Callback):
    """history.history: key -> list over epochs (Keras's shape); history.epochs: the logs."""

    def __init__(self):
        self.epochs = []
        self.history = {}

    def on_epoch_end(self, epoch, logs):
        self.epochs.append(dict(logs))
        for key, value in logs.items():
            self.history.setdefault(key, []).append(value)

    def __repr__(self):
        return f"History({len(self.epochs)} epochs)"


def _in_notebook():
    shell = sys.modules.get("IPython")
    if shell is None or "ipykernel" not in sys.modules:
        return False
    try:
        return shell.get_ipython() is not None
    except AttributeError:
        return False


class ProgressBar(Callback):
    """A bar redrawn in place in a terminal or a notebook; one line per epoch in a log."""

    interval = 0.25

    def __init__(self, stream=None):
        self.stream = stream or sys.stdout
        self.notebook = _in_notebook()
        self.tty = self.notebook or (hasattr(self.stream, "isatty") and self.stream.isatty())
        self.handle = None
        self.t0 = time.monotonic()

    def _draw(self, line, final):
        if self.notebook:
            from IPython.display import display  # only in a notebook, where it exists
            if self.handle is None:
                self.handle = display(line, display_id=True)
            else:
                self.handle.update(line)
            if final:
                self.handle = None
        elif self.tty:
            self.stream.write("\r\x1b[2K" + line + ("\n" if final else ""))
            self.stream.flush()
        elif final:
            self.stream.write(line + "\n")
            self.stream.flush()

    def on_progress(self, logs):
        done, total = logs["step_in_epoch"], logs["steps_per_epoch"]
        width = 24
        filled = int(width * done / total) if total else width
        self._draw(f"epoch {logs['epoch']}/{logs['epochs']} [{'#' * filled}"
                   f"{'.' * (width - filled)}] {done}/{total} loss {logs['train_loss']:.4f} "
                   f"acc {100 * logs['train_acc']:.2f}% {logs['images_per_sec']:.0f} img/s",
                   final=False)

    def on_epoch_end(self, epoch, logs):
        line = (f"epoch {logs['epoch']}: loss {logs['train_loss']:.4f} acc "
                f"{100 * logs['train_acc']:.2f}%")
        if logs.get("test_loss") is not None:
            line += f", test loss {logs['test_loss']:.4f} acc {100 * logs['test_acc']:.2f}%"
        line += f", {logs['images_per_sec']:.0f} img/s, {logs['seconds']:.1f} s"
        self._draw(line, final=True)
