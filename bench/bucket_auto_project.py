"""--bucket-mb auto against fixed bucket sizes in the projection of docs/scaling.md: `dtnn bench
--project` for resnet50 and vgg16 with the layers' shape taken from their FLOPs
(--project-profile flops: no timed run, so the result is the same on any machine), the link of
bench/scaling_project.py (docs/scaling-data/calibration.json) and the step times of
docs/scaling.md. Writes docs/scaling-data/projection-auto-<model>.{txt,jsonl} and the markdown
table docs/scaling-data/projection-auto.md (ring overlapped with backward, fp32: efficiency at
each node count for each fixed size and auto, auto's choice, and the worst shortfall of auto
against the best fixed size over every cell and variant).
  /usr/bin/python3 bench/bucket_auto_project.py [--build build] [models...]
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "docs", "scaling-data")
GRID = "8-1024,10/25/100"
MODELS = {"resnet50": 145.0, "vgg16": 210.0}    # compute ms per step: docs/scaling.md
FIXED = [1, 4, 16, 64]
SHOWN_NODES = (8, 32, 128, 512, 1024)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="*", default=list(MODELS))
    p.add_argument("--build", default="build")
    args = p.parse_args()
    with open(os.path.join(DATA, "calibration.json")) as f:
        cal = json.load(f)
    link = cal["links"]["10gbit"]
    share = min(1.0, cal["links"]["1gbit"]["gbits"] / 1.0)
    md = ["<!-- written by bench/bucket_auto_project.py -->"]
    for model in args.models:
        cmd = [os.path.join(args.build, "dtnn"), "bench", "--model", model, "--batch-size", "1",
               "--threads", "1", "--project", GRID, "--project-profile", "flops",
               "--step-ms", str(MODELS[model]), "--project-batch", "32",
               "--ranks-per-node", "1/4",
               "--project-bucket-mb", "/".join(str(s) for s in FIXED) + "/auto",
               "--alpha-us", f"{link['alpha'] * 1e6:.2f}", "--link-efficiency", f"{share:.4f}"]
        print(" ".join(cmd[1:]), flush=True)
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode:
            sys.exit(f"failed: {out.stdout}\n{out.stderr}")
        lines = out.stdout.splitlines()
        cells = [json.loads(l) for l in lines if l.startswith('{"projection"')]
        with open(os.path.join(DATA, f"projection-auto-{model}.txt"), "w") as f:
            f.write("$ dtnn " + " ".join(cmd[1:]) + "\n" +
                    "\n".join(l for l in lines if not l.startswith('{"projection"')) + "\n")
        with open(os.path.join(DATA, f"projection-auto-{model}.jsonl"), "w") as f:
            f.writelines(json.dumps(c) + "\n" for c in cells)

        def key(c):
            return (c["nodes"], c["ranks_per_node"], c["gbits"], c["algo"], c["overlap"],
                    c["comm_dtype"])
        auto = {key(c): c for c in cells if c["bucket_mb"] == 0}
        best = {}
        for c in cells:
            if c["bucket_mb"] != 0 and (key(c) not in best or
                                        c["efficiency"] > best[key(c)]["efficiency"]):
                best[key(c)] = c
        worst = min(auto[k]["efficiency"] - best[k]["efficiency"] for k in auto)
        wins = sum(auto[k]["efficiency"] > best[k]["efficiency"] + 5e-4 for k in auto)
        md.append(f"\n**{model}**, {MODELS[model]:g} ms compute per step (FLOP-shaped profile), "
                  f"ring overlapped with backward, fp32; efficiency % at nodes "
                  f"{' / '.join(map(str, SHOWN_NODES))}; auto's choice in MiB. Over all "
                  f"{len(auto)} cells (every variant, 1 and 4 ranks per node) auto is at "
                  f"worst {100 * worst:+.2f} points from the best fixed size of "
                  f"{'/'.join(map(str, FIXED))} MiB, and ahead of it by more than 0.05 points "
                  f"in {wins}.\n")
        md.append("| ranks/node | Gbit/s | " + " | ".join(f"{s} MiB" for s in FIXED) +
                  " | auto | auto MiB |")
        md.append("|---|---|" + "---|" * (len(FIXED) + 2))
        for rpn in (1, 4):
            for g in sorted({c["gbits"] for c in cells}):
                row = [str(rpn), f"{g:g}"]
                pick = lambda mb, n: next(  # noqa: E731
                    c for c in cells if c["nodes"] == n and c["ranks_per_node"] == rpn and
                    c["gbits"] == g and c["algo"] == "ring" and c["overlap"] == 1 and
                    c["comm_dtype"] == "fp32" and c["bucket_mb"] == mb)
                for mb in FIXED + [0]:
                    row.append(" / ".join(f"{100 * pick(mb, n)['efficiency']:.0f}"
                                          for n in SHOWN_NODES))
                row.append(" / ".join(f"{pick(0, n)['auto_bucket_mb']:g}" for n in SHOWN_NODES))
                md.append("| " + " | ".join(row) + " |")
    with open(os.path.join(DATA, "projection-auto.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
