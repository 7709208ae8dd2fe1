"""Weak scaling of dtnn's data parallelism on one machine, next to PyTorch DDP.

For each model (batch 64 per rank, synthetic data, SGD with momentum):
  - dtnn at 1 rank x 1 thread, 1 rank x 2 threads, and 2 ranks x 1 thread with each all-reduce
    (overlap, blocking, hierarchical, overlap with fp16 gradients): images/s, the share of step
    time spent waiting for gradients after backward (exposed communication), and efficiency =
    2-rank images/s / (2 x 1-rank images/s);
  - the all-reduce of the whole gradient through dtnn (buckets) against one plain
    MPI_Allreduce of the same buffer (bus bandwidth, GB/s);
  - PyTorch 1.13 at 1 process x 1 thread and DistributedDataParallel (gloo) at 2 processes x 1
    thread, so the ratio shows.
dtnn and PyTorch runs alternate; each figure is the best of --repeats runs (noise on a shared
machine only ever slows a run down). --buckets also sweeps --bucket-mb for the overlap mode.
Run it on a quiet machine: it times.
  /usr/bin/python3 bench/mpi_scaling.py [--build build] [--steps 30] [--repeats 2] [models...]
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_util import run_json  # noqa: E402


def dtnn(args, model, ranks, threads, *extra):
    cmd = [args.dtnn, "bench", "--model", model, "--batch-size", "64", "--steps",
           str(args.steps), "--warmup", "5", "--threads", str(threads), *extra]
    return run_json(([args.mpirun, "-np", str(ranks)] if ranks > 1 else []) + cmd)


def torch(args, model, procs):
    return run_json(["/usr/bin/python3", os.path.join(HERE, "torch_ddp.py"), "--model", model,
                     "--procs", str(procs), "--threads", "1", "--batch", "64", "--steps",
                     str(args.steps), "--warmup", "5"])


def best(runs):
    return max(runs, key=lambda r: r["images_per_sec"])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="*", default=["cifarcnn", "resnet20"])
    p.add_argument("--build", default="build")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--buckets", action="store_true", help="also sweep --bucket-mb (overlap)")
    p.add_argument("--no-torch", action="store_true", help="skip the PyTorch runs")
    args = p.parse_args()
    args.dtnn = os.path.join(args.build, "dtnn")
    # The build's own launcher (Open MPI or MPICH, with the flags a small machine needs).
    args.mpirun = os.path.join(args.build, "tests", "mpirun")
    configs = [("1 rank x 1 thread", 1, 1, []), ("1 rank x 2 threads", 1, 2, []),
               ("2 x 1 overlap", 2, 1, ["--allreduce", "overlap"]),
               ("2 x 1 blocking", 2, 1, ["--allreduce", "blocking"]),
               ("2 x 1 hierarchical", 2, 1, ["--allreduce", "hierarchical"]),
               ("2 x 1 overlap fp16", 2, 1, ["--allreduce", "overlap", "--comm-dtype", "fp16"])]
    print(f"{'model':<10} {'configuration':<24} {'images/s':>9} {'exposed':>8} "
          f"{'efficiency':>10} {'PyTorch':>9} {'ratio':>6}")
    for model in args.models:
        runs = {name: [] for name, *_ in configs}
        torch_runs = {1: [], 2: []}
        for _ in range(args.repeats):
            for name, ranks, threads, extra in configs:
                runs[name].append(dtnn(args, model, ranks, threads, *extra))
            if not args.no_torch:
                for procs in (1, 2):
                    torch_runs[procs].append(torch(args, model, procs))
        one = best(runs["1 rank x 1 thread"])["images_per_sec"]
        for name, ranks, threads, _ in configs:
            r = best(runs[name])
            ips = r["images_per_sec"]
            exposed = f"{100 * r['exposed_comm']:.1f}%" if ranks > 1 else "-"
            eff = f"{100 * ips / (ranks * one):.1f}%" if ranks > 1 else "-"
            ref = ""
            if not args.no_torch and threads == 1 and name in ("1 rank x 1 thread",
                                                                "2 x 1 overlap"):
                t = best(torch_runs[ranks])["images_per_sec"]
                ref = f"{t:>9.1f} {ips / t:>5.2f}x"
            print(f"{model:<10} {name:<24} {ips:>9.1f} {exposed:>8} {eff:>10} {ref}")
        r = best(runs["2 x 1 overlap"])
        print(f"{model:<10} all-reduce of the {r['gradient_mb']:.2f} MB gradient, 2 ranks: dtnn "
              f"{r['allreduce_ms']:.2f} ms ({r['allreduce_busbw_gbs']:.2f} GB/s bus, "
              f"{r['buckets']} buckets), plain MPI_Allreduce {r['mpi_allreduce_ms']:.2f} ms "
              f"({r['mpi_allreduce_busbw_gbs']:.2f} GB/s)")
        if args.buckets:
            for mb in ("0.25", "1", "2", "4", "8", "16", "64"):
                r = best([dtnn(args, model, 2, 1, "--bucket-mb", mb)
                          for _ in range(args.repeats)])
                print(f"{model:<10} {'overlap, buckets ' + mb + ' MB':<24} "
                      f"{r['images_per_sec']:>9.1f} {100 * r['exposed_comm']:>7.1f}% "
                      f"{100 * r['images_per_sec'] / (2 * one):>9.1f}%  ({r['buckets']} buckets)")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
