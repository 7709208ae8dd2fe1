"""dtnn against PyTorch on the same CPU cores: training images/s of the same architecture
(batch 64, synthetic data, SGD with momentum, forward + backward + update, after warm-up), at 1
and 2 threads (torch.set_num_threads = dtnn --threads), against the PyTorch users have:
Debian's python3-torch (1.13) and the PyTorch 2.x that pip installs today (with torchvision,
for the ImageNet models such as resnet50), in a venv this script creates (build/torch2-venv;
skipped with a message where pip cannot reach PyPI), in the variants users pick: fp32 NCHW,
fp32 channels_last, channels_last under torch.compile, and bfloat16 autocast. dtnn runs in fp32
and in --precision bf16.

Every run of a row alternates with the others (dtnn, each PyTorch variant, the peak), and each
is the best of --repeats (noise only ever slows a run down). "ratio" is dtnn fp32 over the best
fp32 PyTorch variant, eager or compiled. The machine's peak is measured in the same row, by
`dtnn bench --fma-peak` (a register-only FMA loop in ymm and, with AVX-512, zmm vectors), not by
a BLAS's SGEMM, which on a CPU that Debian's OpenBLAS does not know measures its SSE3 kernels;
achieved GFLOP/s (training FLOPs = 3 x forward FLOPs of conv and linear layers, counted by
dtnn) are reported as a share of the zmm peak (of ymm where there is no AVX-512).
  /usr/bin/python3 bench/torch_compare.py [--build build] [--repeats 2] [--no-torch2]
      [--no-compile] [models...]
"""
import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_util import run_json  # noqa: E402

DEBIAN_PYTHON = "/usr/bin/python3"


def dtnn_json(args, *extra):
    return run_json([os.path.join(args.build, "dtnn"), "bench", *extra])


def torch2_python(args):
    """The venv's python with PyTorch 2.x, made on first use; None (and why) where it cannot be."""
    venv = os.path.abspath(args.torch2_venv)
    python = os.path.join(venv, "bin", "python")
    probe = [python, "-c", "import torch, torchvision; "
             "assert int(torch.__version__.split('.')[0]) >= 2"]
    if os.path.exists(python) and subprocess.run(probe, capture_output=True).returncode == 0:
        return python, None
    print(f"PyTorch 2.x: installing into {venv} (pip, from PyPI; a few GB, once)", flush=True)
    steps = [[DEBIAN_PYTHON, "-m", "venv", venv],
             [python, "-m", "pip", "install", "--quiet", "torch>=2", "torchvision", "numpy"]]
    for cmd in steps:
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            last = (out.stderr.strip().splitlines() or ["(no message)"])[-1]
            return None, f"'{' '.join(cmd)}' failed: {last}"
    if subprocess.run(probe, capture_output=True).returncode != 0:
        return None, "the venv's torch does not import"
    return python, None


def torch_run(python, model, threads, steps, warmup, batch, flags):
    """One PyTorch measurement in a fresh process (as dtnn's), so RSS and threads are its own."""
    return run_json([python, os.path.join(HERE, "torch_ddp.py"), "--model", model,
                     "--procs", "1", "--threads", str(threads), "--batch", str(batch),
                     "--steps", str(steps), "--warmup", str(warmup), *flags])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="*", default=["lenet5", "cifarcnn", "resnet20", "vgg16-64"])
    p.add_argument("--build", default="build")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--steps", type=int, default=0,
                   help="timed steps (0: 30, or 4 for vgg16-64 and 2 for 224x224 models)")
    p.add_argument("--torch2-venv", default=os.path.join("build", "torch2-venv"))
    p.add_argument("--no-torch2", action="store_true", help="Debian's PyTorch 1.13 only")
    p.add_argument("--no-compile", action="store_true", help="leave out torch.compile")
    args = p.parse_args()
    threads = [int(t) for t in args.threads.split(",")]

    variants = [("1.13", DEBIAN_PYTHON, [], True)]
    if not args.no_torch2:
        python, why = torch2_python(args)
        if python:
            variants += [("2.x", python, [], True),
                         ("2.x cl", python, ["--channels-last"], True)]
            if not args.no_compile:
                variants.append(("2.x cl+compile", python, ["--channels-last", "--compile"],
                                 True))
            variants.append(("2.x bf16", python, ["--channels-last", "--bf16"], False))
        else:
            print(f"PyTorch 2.x skipped: {why}")
    for name, python, _, _ in variants:
        version = subprocess.run([python, "-c", "import torch; print(torch.__version__)"],
                                 capture_output=True, text=True).stdout.strip()
        print(f"PyTorch '{name}': {python}, torch {version or '(does not import)'}")

    header = f"{'model':<9} {'thr':>3} {'dtnn':>8} {'bf16':>8}"
    for name, _, _, _ in variants:
        header += f" {name:>14}"
    header += f" {'ratio':>6} {'ymm GF/s':>8} {'zmm GF/s':>8} {'dtnn GF/s':>9} {'of peak':>7}"
    print(header)
    for model in args.models:
        steps, warmup = (30, 5) if model in ("lenet5", "cifarcnn", "resnet20", "mlp") else \
            (4, 1) if model == "vgg16-64" else (2, 1)
        if args.steps:
            steps = args.steps
        for t in threads:
            ours, ours_bf16, peaks = [], [], []
            theirs = {name: [] for name, _, _, _ in variants}
            common = ["--batch-size", str(args.batch), "--steps", str(steps), "--warmup",
                      str(warmup), "--threads", str(t)]
            for _ in range(args.repeats):
                peaks.append(dtnn_json(args, "--fma-peak", "--threads", str(t)))
                ours.append(dtnn_json(args, "--model", model, *common))
                ours_bf16.append(dtnn_json(args, "--model", model, "--precision", "bf16",
                                           *common))
                for name, python, flags, _ in variants:
                    compiled = "--compile" in flags
                    theirs[name].append(torch_run(python, model, t, steps,
                                                  warmup + 2 if compiled else warmup,
                                                  args.batch, flags))
            d = max(ours, key=lambda r: r["images_per_sec"])
            d16 = max(ours_bf16, key=lambda r: r["images_per_sec"])
            best = {name: max(r["images_per_sec"] for r in runs) for name, runs in theirs.items()}
            fp32_best = max(best[name] for name, _, _, fp32 in variants if fp32)
            ymm = max(r["ymm_gflops"] for r in peaks)
            zmm = max((r["zmm_gflops"] or 0.0) for r in peaks)
            peak = zmm or ymm
            line = (f"{model:<9} {t:>3} {d['images_per_sec']:>8.1f} "
                    f"{d16['images_per_sec']:>8.1f}")
            for name, _, _, _ in variants:
                line += f" {best[name]:>14.1f}"
            line += (f" {d['images_per_sec'] / fp32_best:>5.2f}x {ymm:>8.1f} "
                     f"{zmm or float('nan'):>8.1f} {d['gflops']:>9.1f} "
                     f"{100 * d['gflops'] / peak:>6.0f}%")
            print(line)
            sys.stdout.flush()


if __name__ == "__main__":
    main()
