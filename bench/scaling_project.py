"""The projections of docs/scaling.md: `dtnn bench --project` for resnet50 and vgg16 (224x224)
on 8..1024 nodes at 10/25/100 Gbit/s, with the link calibrated by bench/scaling_calibrate.py
(alpha and the share of the line rate reached, from the 10gbit namespace link) and the
per-layer profile measured here, scaled to a GPU-like step time (--step-ms; the assumptions
are in docs/scaling.md). Writes docs/scaling-data/projection-<scenario>.txt (the table) and
.jsonl (every cell), and the .dat files bench/plot_scaling.gp draws.
  /usr/bin/python3 bench/scaling_project.py [--build build] [--threads 2] [scenario...]
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "docs", "scaling-data")
GRID = "8-1024,10/25/100"

# name: (model, batch per GPU, step ms, extra options). Step times: P100-class, fp32, compute
# only (docs/scaling.md, "GPU-like step time").
SCENARIOS = {
    "resnet50-p100": ("resnet50", 32, 145.0, []),
    "resnet50-p100-64mb": ("resnet50", 32, 145.0, ["--bucket-mb", "64"]),
    "resnet50-p100-4gpu": ("resnet50", 32, 145.0, ["--ranks-per-node", "4"]),
    "resnet50-cpu": ("resnet50", 32, None, []),
    "vgg16-p100": ("vgg16", 32, 210.0, []),
    "vgg16-p100-64mb": ("vgg16", 32, 210.0, ["--bucket-mb", "64"]),
}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("scenarios", nargs="*", default=list(SCENARIOS))
    p.add_argument("--build", default="build")
    p.add_argument("--threads", default="2")
    args = p.parse_args()
    with open(os.path.join(DATA, "calibration.json")) as f:
        cal = json.load(f)
    link = cal["links"]["10gbit"]
    share = min(1.0, link["gbits"] / 10.0)
    for name in args.scenarios:
        model, batch, step_ms, extra = SCENARIOS[name]
        cmd = [os.path.join(args.build, "dtnn"), "bench", "--model", model, "--batch-size",
               str(batch), "--threads", args.threads, "--steps", "1", "--warmup", "1",
               "--project", GRID, "--alpha-us", f"{link['alpha'] * 1e6:.2f}",
               "--link-efficiency", f"{share:.4f}", *extra]
        if step_ms:
            cmd += ["--step-ms", str(step_ms)]
        print(" ".join(cmd[1:]), flush=True)
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode:
            sys.exit(f"failed: {out.stdout}\n{out.stderr}")
        lines = out.stdout.splitlines()
        table = [l for l in lines if not l.startswith('{"projection"')]
        cells = [json.loads(l) for l in lines if l.startswith('{"projection"')]
        with open(os.path.join(DATA, f"projection-{name}.txt"), "w") as f:
            f.write("$ dtnn " + " ".join(cmd[1:]) + "\n" + "\n".join(table) + "\n")
        with open(os.path.join(DATA, f"projection-{name}.jsonl"), "w") as f:
            f.writelines(json.dumps(c) + "\n" for c in cells)
        # nodes, then efficiency (%) per link rate: ring overlap fp32 and fp16, hierarchical
        # after backward fp32.
        rates = sorted({c["gbits"] for c in cells})
        with open(os.path.join(DATA, f"projection-{name}.dat"), "w") as f:
            f.write("# nodes " + " ".join(f"ovl32_{g:g} ovl16_{g:g} hier32_{g:g}"
                                          for g in rates) + "\n")
            for n in sorted({c["nodes"] for c in cells}):
                row = [str(n)]
                for g in rates:
                    for algo, ovl, dt in (("ring", 1, "fp32"), ("ring", 1, "fp16"),
                                          ("hierarchical", 0, "fp32")):
                        c = next(c for c in cells if c["nodes"] == n and c["gbits"] == g and
                                 c["algo"] == algo and c["overlap"] == ovl and
                                 c["comm_dtype"] == dt)
                        row.append(f"{100 * c['efficiency']:.2f}")
                f.write(" ".join(row) + "\n")
        print("\n".join(table[:3]), flush=True)


if __name__ == "__main__":
    main()
