"""The Python package's cost: images/s of Model.fit against `dtnn train` with the same
options, alternating, in one run (the goal: within 3%).

Both numbers are the trainer's own (the epoch's images/s that `dtnn train --log` writes and
fit's History holds), so what differs is only what runs around the C loop: Python's
callbacks at the epoch's end and, with verbose=1 in a terminal, a progress bar's redraw a
few times a second.

    python3 bench/python_overhead.py [--build build] [--repeats 3] [--steps 300]

Prints one line per model and round, then the best of each and their ratio.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = {"lenet5": 64, "resnet20": 64}


def cli_run(build, model, batch, steps, log):
    subprocess.run([os.path.join(build, "dtnn"), "train", "--model", model, "--dataset",
                    "fashion-mnist", "--steps", str(steps), "--epochs", "1", "--batch-size",
                    str(batch), "--lr", "0.01", "--log", log, "--quiet"], check=True,
                   capture_output=True)
    with open(log) as f:
        return json.loads(f.readline())["images_per_sec"]


PY = """
import sys, json, dtnn
model, batch, steps, verbose = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
data = dtnn.datasets.fashion_mnist()
m = dtnn.Model(model)
h = m.fit(data, steps=steps, batch_size=batch, optimizer=dtnn.optim.SGD(lr=0.01),
          verbose=verbose)
print(json.dumps(h.epochs[0]["images_per_sec"]))
"""


def py_run(build, model, batch, steps, verbose):
    env = dict(os.environ, DTNN_LIBRARY=os.path.join(build, "libdtnn.so"),
               PYTHONPATH=os.path.join(HERE, "..", "python"))
    out = subprocess.run([sys.executable, "-c", PY, model, str(batch), str(steps),
                          str(verbose)], check=True, capture_output=True, text=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--steps", type=int, default=300)
    args = ap.parse_args()
    best = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            for model, batch in MODELS.items():
                steps = args.steps if model == "lenet5" else max(args.steps // 3, 20)
                cli = cli_run(args.build, model, batch, steps, os.path.join(tmp, "log.jsonl"))
                py = py_run(args.build, model, batch, steps, 0)
                print(f"round {r + 1} {model}: dtnn train {cli:.1f} img/s, Model.fit {py:.1f}"
                      f" img/s", flush=True)
                b = best.setdefault(model, [0.0, 0.0])
                b[0], b[1] = max(b[0], cli), max(b[1], py)
    for model, (cli, py) in best.items():
        print(f"{model}: best dtnn train {cli:.1f} img/s, Model.fit {py:.1f} img/s, "
              f"fit / train {py / cli:.3f}")


if __name__ == "__main__":
    main()
