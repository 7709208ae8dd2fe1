"""PyTorch's training throughput for a dtnn zoo model: one process, or DistributedDataParallel
over gloo with N processes on this machine, T threads each, batch B per process, synthetic data,
SGD with momentum, forward + backward + update after warm-up. Prints one JSON line (global
images/s, the slowest process's time), the same fields as `dtnn bench`. The variants users
pick: --channels-last (the model and its input in channels_last memory format), --compile
(torch.compile, PyTorch 2.x; compiled during the warm-up steps), --bf16 (autocast to bfloat16
on the CPU, as dtnn's --precision bf16).
  /usr/bin/python3 bench/torch_ddp.py --model resnet20 --procs 2 --threads 1 --batch 64
"""
import argparse
import json
import os
import resource
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_models import MODELS  # noqa: E402


def train(rank, args, port, results):
    torch.set_num_threads(args.threads)
    torch.manual_seed(rank)
    make, shape = MODELS[args.model]
    model = make()
    x = torch.randn(args.batch, *shape)
    if args.channels_last and x.dim() == 4:
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    if args.procs > 1:
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = str(port)
        dist.init_process_group("gloo", rank=rank, world_size=args.procs)
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    if args.compile:
        model = torch.compile(model)
    y = torch.arange(args.batch) % 10
    autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16)
    for i in range(args.warmup + args.steps):
        if i == args.warmup:
            if args.procs > 1:
                dist.barrier()
            t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with autocast:
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    seconds = time.perf_counter() - t0
    if args.procs > 1:
        t = torch.tensor([seconds], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        seconds = t.item()
        dist.destroy_process_group()
    if rank == 0:
        results.put(seconds)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True, choices=sorted(MODELS))
    p.add_argument("--procs", type=int, default=1)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--channels-last", action="store_true")
    p.add_argument("--compile", action="store_true")
    p.add_argument("--bf16", action="store_true")
    args = p.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    if args.procs == 1:
        train(0, args, port, results)
    else:
        mp.spawn(train, args=(args, port, results), nprocs=args.procs, join=True)
    seconds = results.get()
    ips = args.batch * args.procs * args.steps / seconds
    variant = ",".join(v for v, on in (("channels_last", args.channels_last),
                                        ("compiled", args.compile), ("bf16", args.bf16)) if on)
    print(json.dumps({"framework": f"pytorch {torch.__version__}", "variant": variant or "nchw",
                      "model": args.model,
                      "ranks": args.procs, "threads": args.threads, "batch_size": args.batch,
                      "steps": args.steps, "images_per_sec": round(ips, 1),
                      "step_ms": round(1e3 * seconds / args.steps, 3),
                      "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                                           / 1024, 1)}))


if __name__ == "__main__":
    main()
