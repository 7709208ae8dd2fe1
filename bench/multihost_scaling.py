"""Data parallelism between hosts that talk only over TCP, at several link speeds.

Hosts are network namespaces on this machine (scripts/netns.sh), the link of each limited with
tc tbf (unlimited, 10gbit, 1gbit, ...). For each link speed and model: images/s and the share
of step time spent waiting for gradients (exposed communication) of `dtnn bench` (batch 64 per
rank, synthetic data) with the overlap, blocking and hierarchical all-reduce, and overlap with
fp16 gradients; plus the time of one whole-gradient all-reduce. Needs root and Open MPI; run it
on a quiet machine: it times.
  /usr/bin/python3 bench/multihost_scaling.py [--build build] [--hosts 2] [--ranks-per-host 1]
      [--rates none,10gbit,1gbit] [--steps 20] [models...]
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NETNS = os.path.join(ROOT, "scripts", "netns.sh")


def sh(*cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def bench(args, model, extra):
    hosts = os.path.join(args.tmp, "hosts")
    with open(hosts, "w") as f:
        for h in range(args.hosts):
            f.write(f"dtnn-h{h} slots={args.ranks_per_host}\n")
    cmd = ["ip", "netns", "exec", "dtnn-h0", os.path.join(args.build, "tests", "mpirun"),
           "--hostfile", hosts, "-np", str(args.hosts * args.ranks_per_host),
           *sh(NETNS, "mpirun-args").split(),
           os.path.join(args.build, "dtnn"), "bench", "--model", model, "--batch-size", "64",
           "--steps", str(args.steps), "--warmup", "3", "--threads", "1", *extra]
    # One retry: Open MPI 4.1's launcher itself (hwloc, in mpirun) crashed once in ~20 starts
    # here, before any rank ran.
    for attempt in range(2):
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        for line in out.stdout.splitlines():
            if line.startswith("{"):
                return json.loads(line)
    sys.exit(f"failed twice: {' '.join(cmd)}\n{out.stdout}\n{out.stderr}")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="*", default=["cifarcnn", "resnet20"])
    p.add_argument("--build", default="build")
    p.add_argument("--hosts", type=int, default=2)
    p.add_argument("--ranks-per-host", type=int, default=1)
    p.add_argument("--rates", default="none,10gbit,1gbit")
    p.add_argument("--steps", type=int, default=20)
    args = p.parse_args()
    args.tmp = sh("mktemp", "-d").strip()
    modes = [("overlap", ["--allreduce", "overlap"]), ("blocking", ["--allreduce", "blocking"]),
             ("hierarchical", ["--allreduce", "hierarchical"]),
             ("overlap fp16", ["--allreduce", "overlap", "--comm-dtype", "fp16"])]
    print(f"{args.hosts} hosts x {args.ranks_per_host} rank(s), TCP over veth, batch 64 per rank")
    print(f"{'link':<8} {'model':<10} {'all-reduce':<14} {'images/s':>9} {'exposed':>8} "
          f"{'all-reduce ms':>13}")
    try:
        for rate in args.rates.split(","):
            sh(NETNS, "up", str(args.hosts), *([] if rate == "none" else [rate]))
            for model in args.models:
                for name, extra in modes:
                    r = bench(args, model, extra)
                    print(f"{rate:<8} {model:<10} {name:<14} {r['images_per_sec']:>9.1f} "
                          f"{100 * r['exposed_comm']:>7.1f}% {r['allreduce_ms']:>13.2f}")
                    sys.stdout.flush()
    finally:
        subprocess.run([NETNS, "down"])


if __name__ == "__main__":
    main()
