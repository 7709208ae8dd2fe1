"""The projections of docs/scaling.md: `dtnn bench --project` for resnet50 and vgg16 (224x224)
on 8..1024 nodes at 10/25/100 Gbit/s, with the link calibrated by bench/scaling_calibrate.py
(alpha from the 10gbit namespace link, the share of the line rate reached from the 1gbit one) and the
per-layer profile measured here, scaled to a GPU-like step time (--step-ms; the assumptions
are in docs/scaling.md). Writes docs/scaling-data/projection-<model>.txt (the tables) and .jsonl
(every cell), and the .dat files bench/plot_scaling.gp draws.
  /usr/bin/python3 bench/scaling_project.py [--build build] [--threads 2] [--profile-batch 32]
      [models...]
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "docs", "scaling-data")
GRID = "8-1024,10/25/100"

# model: (step ms of a P100-class GPU at batch 32, fp32, compute only: docs/scaling.md).
# The per-layer profile is measured at --profile-batch (32; a step of vgg16 at 224x224 takes
# about 30 s on 2 quiet cores here, minutes on a busy machine: 8 is the faster choice) and
# scaled to that step time; its shape (which layers take how long, so when each bucket is
# ready) is what the projection uses from it.
MODELS = {"resnet50": 145.0, "vgg16": 210.0}
RANKS_PER_NODE = "1/4"
BUCKETS_MB = "4/64/auto"


def mb_name(mb):
    """A bucket size as the tables name it: 0 is auto (a size chosen per cell)."""
    return "auto" if mb == 0 else f"{mb:g} MiB"


def markdown_tables(models):
    """The tables of docs/scaling.md, from the .jsonl files: efficiency (%) per node count for
    every link rate and variant, per ranks per node and bucket size."""
    out = []
    variants = [("ring", 0, "fp32", "ring blocking"), ("ring", 1, "fp32", "ring overlap"),
                ("ring", 1, "fp16", "ring overlap fp16"),
                ("hierarchical", 0, "fp32", "hier. blocking"),
                ("hierarchical", 1, "fp32", "hier. overlap (model only)")]
    for model in models:
        path = os.path.join(DATA, f"projection-{model}.jsonl")
        if not os.path.exists(path):
            continue
        cells = [json.loads(l) for l in open(path)]
        nodes = [n for n in sorted({c["nodes"] for c in cells}) if n in (8, 32, 128, 512, 1024)]
        for rpn, mb in sorted({(c["ranks_per_node"], c["bucket_mb"]) for c in cells}):
            out.append(f"\n**{model}**, {MODELS[model]:g} ms compute per step, {rpn} rank"
                       f"{'s' if rpn > 1 else ''} per node, {mb_name(mb)} buckets "
                       f"(efficiency %, nodes {' / '.join(map(str, nodes))}):\n")
            out.append("| Gbit/s | " + " | ".join(v[3] for v in variants) + " |")
            out.append("|---|" + "---|" * len(variants))
            for g in sorted({c["gbits"] for c in cells}):
                row = [f"{g:g}"]
                for algo, ovl, dt, _ in variants:
                    effs = []
                    for n in nodes:
                        c = next(c for c in cells if c["nodes"] == n and c["gbits"] == g and
                                 c["ranks_per_node"] == rpn and c["bucket_mb"] == mb and
                                 c["algo"] == algo and c["overlap"] == ovl and
                                 c["comm_dtype"] == dt)
                        effs.append(f"{100 * c['efficiency']:.0f}")
                    row.append(" / ".join(effs))
                out.append("| " + " | ".join(row) + " |")
    with open(os.path.join(DATA, "projection-tables.md"), "w") as f:
        f.write("\n".join(out) + "\n")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="*", default=list(MODELS))
    p.add_argument("--profile-batch", default="32")
    p.add_argument("--build", default="build")
    p.add_argument("--threads", default="2")
    p.add_argument("--tables-only", action="store_true",
                   help="only rewrite projection-tables.md from the .jsonl files")
    args = p.parse_args()
    if args.tables_only:
        return markdown_tables(args.models)
    with open(os.path.join(DATA, "calibration.json")) as f:
        cal = json.load(f)
    # alpha from the 10gbit fit; the share of the line rate from the 1gbit one, the only rate at
    # which the link and not this 2-core machine's TCP stack was the bottleneck (unlimited veth
    # reached 2.8 Gbit/s, the 10gbit link 3.7).
    link = cal["links"]["10gbit"]
    share = min(1.0, cal["links"]["1gbit"]["gbits"] / 1.0)
    for model in args.models:
        cmd = [os.path.join(args.build, "dtnn"), "bench", "--model", model, "--batch-size",
               args.profile_batch, "--threads", args.threads, "--steps", "1", "--warmup", "1",
               "--project", GRID, "--step-ms", str(MODELS[model]), "--project-batch", "32",
               "--ranks-per-node", RANKS_PER_NODE, "--project-bucket-mb", BUCKETS_MB,
               "--alpha-us", f"{link['alpha'] * 1e6:.2f}", "--link-efficiency", f"{share:.4f}"]
        print(" ".join(cmd[1:]), flush=True)
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode:
            sys.exit(f"failed: {out.stdout}\n{out.stderr}")
        lines = out.stdout.splitlines()
        table = [l for l in lines if not l.startswith('{"projection"')]
        cells = [json.loads(l) for l in lines if l.startswith('{"projection"')]
        with open(os.path.join(DATA, f"projection-{model}.txt"), "w") as f:
            f.write("$ dtnn " + " ".join(cmd[1:]) + "\n" + "\n".join(table) + "\n")
        with open(os.path.join(DATA, f"projection-{model}.jsonl"), "w") as f:
            f.writelines(json.dumps(c) + "\n" for c in cells)
        # Per (ranks per node, bucket size): nodes, then efficiency (%) per link rate: ring
        # overlapped fp32 and fp16, ring blocking fp32, hierarchical (after backward) fp32.
        rates = sorted({c["gbits"] for c in cells})
        variants = (("ring", 1, "fp32"), ("ring", 1, "fp16"), ("ring", 0, "fp32"),
                    ("hierarchical", 0, "fp32"))
        for rpn, mb in sorted({(c["ranks_per_node"], c["bucket_mb"]) for c in cells}):
            name = f"projection-{model}-{rpn}rpn-{mb_name(mb).replace(' MiB', 'mb')}.dat"
            with open(os.path.join(DATA, name), "w") as f:
                f.write("# nodes, then per link rate " + "/".join(f"{g:g}" for g in rates) +
                        " Gbit/s: efficiency % of ring-ovl-fp32 ring-ovl-fp16 ring-blk-fp32 "
                        "hier-blk-fp32\n")
                for n in sorted({c["nodes"] for c in cells}):
                    row = [str(n)]
                    for g in rates:
                        for algo, ovl, dt in variants:
                            c = next(c for c in cells if c["nodes"] == n and c["gbits"] == g and
                                     c["ranks_per_node"] == rpn and c["bucket_mb"] == mb and
                                     c["algo"] == algo and c["overlap"] == ovl and
                                     c["comm_dtype"] == dt)
                            row.append(f"{100 * c['efficiency']:.2f}")
                    f.write(" ".join(row) + "\n")
        print("\n".join(table[:4]), flush=True)
    markdown_tables(args.models)


if __name__ == "__main__":
    main()
