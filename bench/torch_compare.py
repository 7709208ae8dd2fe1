"""dtnn against PyTorch on the same CPU cores: training images/s of the same architecture
(batch 64, synthetic data, SGD with momentum, forward + backward + update, after warm-up),
dtnn and PyTorch runs alternating, best of --repeats each (noise only ever slows a run down),
at 1 and 2 threads (torch.set_num_threads = dtnn --threads). Also: achieved GFLOP/s (training
FLOPs = 3 x forward FLOPs, forward = 2 x MACs of conv and linear layers, counted by dtnn) as a
share of the SGEMM peak (`dtnn bench --sgemm 2048`, best of its repeats), and each side's peak
RSS. The peak is measured in every repeat of every row, next to that row's training runs: this
machine's speed drifts by 10-20% over minutes (a shared VM), and a peak taken once at the start
made a row's share depend on whether the machine had slowed down since (resnet20 at 1 thread:
71-88% of a peak measured 73-85 GFLOP/s, on the same code).
  /usr/bin/python3 bench/torch_compare.py [--build build] [--repeats 3] [models...]
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_util import run_json  # noqa: E402


def dtnn_json(args, *extra):
    return run_json([os.path.join(args.build, "dtnn"), "bench", *extra])


def torch_run(model, threads, steps, warmup, batch):
    """One PyTorch measurement in a fresh process (as dtnn's), so RSS and threads are its own."""
    return run_json(["/usr/bin/python3", os.path.join(HERE, "torch_ddp.py"), "--model", model,
                     "--procs", "1", "--threads", str(threads), "--batch", str(batch),
                     "--steps", str(steps), "--warmup", str(warmup)])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="*", default=["lenet5", "cifarcnn", "resnet20", "vgg16-64"])
    p.add_argument("--build", default="build")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--steps", type=int, default=0,
                   help="timed steps (0: 30, or 4 for vgg16-64 and 2 for 224x224 models)")
    args = p.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    print(f"{'model':<10} {'thr':>3} {'dtnn img/s':>11} {'PyTorch':>9} {'ratio':>6} "
          f"{'peak GF/s':>9} {'dtnn GF/s':>9} {'of peak':>7} {'PyTorch':>8} "
          f"{'RSS MB dtnn':>11} {'PyTorch':>8}")
    for model in args.models:
        steps, warmup = (30, 5) if model in ("lenet5", "cifarcnn", "resnet20", "mlp") else \
            (4, 1) if model == "vgg16-64" else (2, 1)
        if args.steps:
            steps = args.steps
        for t in threads:
            ours, theirs, peaks = [], [], []
            for _ in range(args.repeats):
                peaks.append(dtnn_json(args, "--sgemm", "2048", "--threads", str(t),
                                       "--steps", "3")["gflops"])
                ours.append(dtnn_json(args, "--model", model, "--batch-size", str(args.batch),
                                      "--steps", str(steps), "--warmup", str(warmup),
                                      "--threads", str(t)))
                theirs.append(torch_run(model, t, steps, warmup, args.batch))
            d = max(ours, key=lambda r: r["images_per_sec"])
            q = max(theirs, key=lambda r: r["images_per_sec"])
            flops_per_image = d["gflops"] / d["images_per_sec"]
            torch_gf = flops_per_image * q["images_per_sec"]
            peak = max(peaks)
            print(f"{model:<10} {t:>3} {d['images_per_sec']:>11.1f} {q['images_per_sec']:>9.1f} "
                  f"{d['images_per_sec'] / q['images_per_sec']:>5.2f}x {peak:>9.1f} "
                  f"{d['gflops']:>9.1f} {100 * d['gflops'] / peak:>6.0f}% "
                  f"{100 * torch_gf / peak:>7.0f}% "
                  f"{d['peak_rss_mb']:>11.0f} {q['peak_rss_mb']:>8.0f}")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
