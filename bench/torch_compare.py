"""dtnn against PyTorch on the same CPU cores: training images/s of the same architecture
(batch 64, synthetic data, SGD with momentum, forward + backward + update, after warm-up),
dtnn and PyTorch runs alternating, best of --repeats each (noise only ever slows a run down),
at 1 and 2 threads (torch.set_num_threads = dtnn --threads). Also: achieved GFLOP/s (training
FLOPs = 3 x forward FLOPs, forward = 2 x MACs of conv and linear layers, counted by dtnn) as a
share of the SGEMM peak measured in the same run (`dtnn bench --sgemm 2048`), and each side's
peak RSS.
  /usr/bin/python3 bench/torch_compare.py [--build build] [--repeats 3] [models...]
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def dtnn_json(args, *extra):
    out = subprocess.run([os.path.join(args.build, "dtnn"), "bench", *extra],
                         capture_output=True, text=True)
    for line in out.stdout.splitlines():
        if line.startswith("{"):
            return json.loads(line)
    sys.exit(f"dtnn bench {' '.join(extra)} failed:\n{out.stdout}\n{out.stderr}")


def torch_run(model, threads, steps, warmup, batch):
    """One PyTorch measurement in a fresh process (as dtnn's), so RSS and threads are its own."""
    code = f"""
import json, resource, sys, time, torch, torch.nn.functional as F
sys.path.insert(0, {HERE!r})
from torch_models import MODELS
torch.set_num_threads({threads})
make, shape = MODELS[{model!r}]
torch.manual_seed(0)
m = make()
opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
x = torch.randn({batch}, *shape)
y = torch.arange({batch}) % 10
for i in range({warmup} + {steps}):
    if i == {warmup}:
        t0 = time.perf_counter()
    opt.zero_grad(set_to_none=True)
    F.cross_entropy(m(x), y).backward()
    opt.step()
s = time.perf_counter() - t0
print(json.dumps({{"images_per_sec": {batch} * {steps} / s,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""
    out = subprocess.run(["/usr/bin/python3", "-c", code], capture_output=True, text=True)
    if out.returncode:
        sys.exit(f"PyTorch run failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="*", default=["lenet5", "cifarcnn", "resnet20", "vgg16-64"])
    p.add_argument("--build", default="build")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--batch", type=int, default=64)
    args = p.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    peak = {t: max(dtnn_json(args, "--model", "lenet5", "--sgemm", "2048", "--threads", str(t),
                             "--steps", "5")["gflops"] for _ in range(2)) for t in threads}
    print("SGEMM peak (2048^3, dtnn's GEMM): " +
          ", ".join(f"{t} thread{'s' if t > 1 else ''} {peak[t]:.1f} GFLOP/s" for t in threads))
    print(f"{'model':<10} {'thr':>3} {'dtnn img/s':>11} {'PyTorch':>9} {'ratio':>6} "
          f"{'dtnn GF/s':>9} {'of peak':>7} {'PyTorch':>8} {'RSS MB dtnn':>11} {'PyTorch':>8}")
    for model in args.models:
        big = model == "vgg16-64"
        steps, warmup = (4, 1) if big else (30, 5)
        for t in threads:
            ours, theirs = [], []
            for _ in range(args.repeats):
                ours.append(dtnn_json(args, "--model", model, "--batch-size", str(args.batch),
                                      "--steps", str(steps), "--warmup", str(warmup),
                                      "--threads", str(t)))
                theirs.append(torch_run(model, t, steps, warmup, args.batch))
            d = max(ours, key=lambda r: r["images_per_sec"])
            q = max(theirs, key=lambda r: r["images_per_sec"])
            flops_per_image = d["gflops"] / d["images_per_sec"]
            torch_gf = flops_per_image * q["images_per_sec"]
            print(f"{model:<10} {t:>3} {d['images_per_sec']:>11.1f} {q['images_per_sec']:>9.1f} "
                  f"{d['images_per_sec'] / q['images_per_sec']:>5.2f}x {d['gflops']:>9.1f} "
                  f"{100 * d['gflops'] / peak[t]:>6.0f}% {100 * torch_gf / peak[t]:>7.0f}% "
                  f"{d['peak_rss_mb']:>11.0f} {q['peak_rss_mb']:>8.0f}")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
