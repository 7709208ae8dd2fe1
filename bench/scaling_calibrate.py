"""Calibrates the all-reduce model of `dtnn bench --project` on the namespace-host measurements
and prints predicted against measured for every configuration that was run.

1. alpha and beta per link rate: weighted least-squares fits of the ring formula
   T = 2 (P-1) alpha + 2 (P-1)/P n beta  (see fit() for the weights) to the fastest whole-gradient MPI_Allreduce
   (fp32, measured while no rank computes: `mpi_allreduce_best_ms`) of every gradient size
   (lenet5 0.25 MB .. vgg16-64 64 MB) on 2 and 4 hosts x 1 rank; the intra-node link (TCP
   over loopback between two ranks of one namespace) from 1 host x 2 ranks. Images/s are not
   used: with more ranks than this machine's 2 cores, compute slows down, and that is not the
   network's doing.
2. For every measured training run (hosts x ranks per host, link, model, all-reduce mode,
   fp16): `dtnn bench --project HOSTS,GBITS` with that run's compute time per step (step time
   less the measured wait for gradients: --step-ms) and the fitted link, which predicts the
   exposed communication; predicted images/s = ranks x batch / (compute + predicted exposed).
   The whole-gradient all-reduce time is predicted by the formula directly; fp16 adds a cost
   per value (dtnn converts and sums 16-bit values in software), fitted from blocking-fp16.
Writes docs/scaling-data/calibration.json (the fitted links) and prints markdown tables.
  /usr/bin/python3 bench/scaling_calibrate.py [--data docs/scaling-data/multihost.jsonl]
      [--build build]
"""
import argparse
import json
import math
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIB = 1048576.0
RATE_GBITS = {"10gbit": 10.0, "1gbit": 1.0, "25gbit": 25.0, "100gbit": 100.0}


def ring_terms(p, nbytes):
    return 2.0 * (p - 1), 2.0 * (p - 1) / p * nbytes


def fit(points):
    """beta from a least-squares fit of the ring formula weighted 1/T (the large gradients, which
    dominate the projections, count most); alpha from the same fit weighted 1/T^2 (relative
    error: the small messages decide it), because the 1/T fit cannot resolve it here (it comes
    out 0): tbf's 256 KB burst lets a small all-reduce through at full speed."""
    return fit_weighted(points, 2)[0], fit_weighted(points, 1)[1]


def fit_weighted(points, k):
    """alpha, beta >= 0 minimising sum((2(P-1) alpha + 2(P-1)/P n beta - T)^2 / T^k)."""
    a11 = a12 = a22 = b1 = b2 = 0.0
    for p, n, t in points:
        x1, x2 = ring_terms(p, n)
        w = 1.0 / t ** k
        a11 += w * x1 * x1
        a12 += w * x1 * x2
        a22 += w * x2 * x2
        b1 += w * x1 * t
        b2 += w * x2 * t
    det = a11 * a22 - a12 * a12
    alpha = (b1 * a22 - b2 * a12) / det
    beta = (a11 * b2 - a12 * b1) / det
    if alpha < 0:  # latency not resolvable: bandwidth only
        alpha, beta = 0.0, b2 / a22
    if beta < 0:
        alpha, beta = b1 / a11, 0.0
    return alpha, beta


def predict_ring(link, p, nbytes):
    x1, x2 = ring_terms(p, nbytes)
    return x1 * link["alpha"] + x2 * link["beta"]


def load(path):
    runs = []
    with open(path) as f:
        for line in f:
            if line.strip():
                runs.append(json.loads(line))
    return runs


def best_allreduce_points(runs):
    """(rate, hosts, rph, model) -> (bytes, fastest plain fp32 MPI_Allreduce seconds)."""
    pts = {}
    for r in runs:
        if "mpi_allreduce_best_ms" not in r:
            continue
        key = (r["rate"], r["hosts"], r["ranks_per_host"], r["model"])
        t = r["mpi_allreduce_best_ms"] / 1e3
        if key not in pts or t < pts[key][1]:
            pts[key] = (r["gradient_mb"] * MIB, t)
    return pts


def project(args, model, hosts, rph, gbits, link, intra, step_ms):
    """Runs dtnn bench --project for one configuration; returns {(algo, overlap, dtype): cell}."""
    eff = min(1.0, 8.0 / (gbits * 1e9 * link["beta"])) if link["beta"] > 0 else 1.0
    cmd = [os.path.join(args.build, "dtnn"), "bench", "--model", model, "--batch-size", "64",
           "--threads", "1", "--steps", "1", "--warmup", "1",
           "--project", f"{hosts},{gbits:g}", "--ranks-per-node", str(rph),
           "--alpha-us", f"{link['alpha'] * 1e6:.4f}", "--link-efficiency", f"{eff:.6f}",
           "--intra-alpha-us", f"{intra['alpha'] * 1e6:.4f}",
           "--intra-gbs", f"{1.0 / intra['beta'] / 1e9:.6f}", "--step-ms", f"{step_ms:.4f}",
           "--fp16-ns-per-value", f"{args.half_cost * 1e9:.4f}"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    cells = {}
    for line in out.stdout.splitlines():
        if line.startswith('{"projection"'):
            c = json.loads(line)
            cells[(c["algo"], c["overlap"], c["comm_dtype"])] = c
    if not cells:
        sys.exit(f"failed: {' '.join(cmd)}\n{out.stdout}\n{out.stderr}")
    return cells


MODE_CELL = {"overlap": ("ring", 1, "fp32"), "blocking": ("ring", 0, "fp32"),
             "hierarchical": ("hierarchical", 0, "fp32"), "overlap-fp16": ("ring", 1, "fp16"),
             "blocking-fp16": ("ring", 0, "fp16"), "hierarchical-fp16": ("hierarchical", 0, "fp16")}


def summarise(runs):
    """What overlap, hierarchical and fp16 bought, measured: best images/s of each mode against
    blocking fp32 in the same configuration."""
    best = {}
    for r in runs:
        if r.get("kind") == "train":
            key = (r["rate"], r["hosts"], r["ranks_per_host"], r["model"], r["mode"])
            best[key] = max(best.get(key, 0.0), r["images_per_sec"])
    print("\n## What each mode bought (measured, best images/s relative to blocking fp32)\n")
    print("| link | hosts x ranks | model | blocking img/s | overlap | hierarchical | "
          "overlap fp16 | blocking fp16 |")
    print("|---|---|---|---|---|---|---|---|")
    for (rate, h, rph, model) in sorted({k[:4] for k in best}, key=lambda k: (
            -RATE_GBITS.get(k[0], 1e9), k[1], k[2], k[3])):
        base = best.get((rate, h, rph, model, "blocking"))
        if not base:
            continue
        cols = []
        for mode in ("overlap", "hierarchical", "overlap-fp16", "blocking-fp16"):
            v = best.get((rate, h, rph, model, mode))
            cols.append(f"{100 * (v / base - 1):+.0f}%" if v else "-")
        print(f"| {rate} | {h}x{rph} | {model} | {base:.1f} | " + " | ".join(cols) + " |")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default=os.path.join(ROOT, "docs", "scaling-data",
                                                  "multihost.jsonl"))
    p.add_argument("--build", default="build")
    p.add_argument("--links-only", action="store_true",
                   help="fit and write the links, skip the per-run predictions")
    p.add_argument("--out", default=os.path.join(ROOT, "docs", "scaling-data",
                                                 "calibration.json"))
    args = p.parse_args()
    runs = load(args.data)
    pts = best_allreduce_points(runs)

    # 1. The links.
    intra_pts = [(2, n, t) for (rate, h, rph, _), (n, t) in pts.items() if h == 1 and rph == 2]
    # Without 1 host x 2 runs: the projection's defaults (5 us, 10 GB/s).
    intra_a, intra_b = fit(intra_pts) if len(intra_pts) >= 2 else (5e-6, 1e-10)
    intra = {"alpha": intra_a, "beta": intra_b}
    links = {}
    rates = sorted({r["rate"] for r in runs}, key=lambda s: -RATE_GBITS.get(s, 1e9))
    print("## Fitted links (ring formula, fastest of 10 whole-gradient MPI_Allreduce per run)\n")
    print("| link | points | alpha (us) | beta (ns/byte) | bandwidth (Gbit/s) | share of tbf rate |")
    print("|---|---|---|---|---|---|")
    for rate in rates:
        fit_pts = [(h * rph, n, t) for (rt, h, rph, _), (n, t) in pts.items()
                   if rt == rate and h > 1 and rph == 1]
        if len(fit_pts) < 2:
            continue
        a, b = fit(fit_pts)
        gbits = 8.0 / b / 1e9 if b > 0 else math.inf
        links[rate] = {"alpha": a, "beta": b, "gbits": gbits, "points": len(fit_pts)}
        share = f"{gbits / RATE_GBITS[rate]:.2f}" if rate in RATE_GBITS else "-"
        print(f"| {rate} | {len(fit_pts)} | {a * 1e6:.1f} | {b * 1e9:.3f} | {gbits:.2f} | "
              f"{share} |")
    print(f"| intra-node (1 host x 2, loopback TCP) | {len(intra_pts)} | {intra_a * 1e6:.1f} | "
          f"{intra_b * 1e9:.3f} | {8.0 / intra_b / 1e9 if intra_b else math.inf:.2f} | - |")

    # fp16: dtnn converts and sums 16-bit values in software on the CPU; the cost per value is
    # the median of what the fastest blocking-fp16 all-reduce took beyond the ring time of half
    # the bytes.
    def link_for(rate, h, rph):
        if h == 1:
            return intra, 2
        if rate not in links:
            return None, 0
        link = dict(links[rate])
        if rph > 1:  # the ring's slowest hop, as the projection prices it
            link = {"alpha": max(link["alpha"], intra_a), "beta": max(link["beta"], intra_b)}
        return link, h * rph

    half = {}
    for r in runs:
        if r.get("mode") == "blocking-fp16" and "allreduce_best_ms" in r:
            key = (r["rate"], r["hosts"], r["ranks_per_host"], r["model"])
            t = r["allreduce_best_ms"] / 1e3
            if key not in half or t < half[key][1]:
                half[key] = (r["gradient_mb"] * MIB, t)
    extra = []
    for (rate, h, rph, model), (n, t) in half.items():
        link, pp = link_for(rate, h, rph)
        if link:
            extra.append((t - predict_ring(link, pp, n / 2)) / (n / 4))
    extra.sort()
    half_cost = max(0.0, extra[len(extra) // 2]) if extra else 0.0
    args.half_cost = half_cost
    print(f"\nfp16 in software: {half_cost * 1e9:.2f} ns per value beyond the ring time of half "
          f"the bytes (median of {len(extra)} blocking-fp16 runs)")
    with open(args.out, "w") as f:
        json.dump({"links": links, "intra": intra, "fp16_seconds_per_value": half_cost,
                   "data": os.path.relpath(args.data, ROOT)}, f, indent=1)

    # 2. All-reduce: predicted against measured, every size and topology.
    print("\n## Whole-gradient all-reduce (fp32 MPI_Allreduce, fastest of 10): predicted vs "
          "measured\n")
    print("| link | hosts x ranks | model | MB | measured ms | predicted ms | pred/meas | used in "
          "fit | fp16 (dtnn, blocking) measured / predicted ms |")
    print("|---|---|---|---|---|---|---|---|---|")
    for (rate, h, rph, model), (n, t) in sorted(pts.items(), key=lambda kv: (
            -RATE_GBITS.get(kv[0][0], 1e9), kv[0][1], kv[0][2], kv[1][0])):
        link, pp = link_for(rate, h, rph)
        if not link:
            continue
        pred = predict_ring(link, pp, n)
        used = "yes" if (h > 1 and rph == 1) or h == 1 else "no"
        fp16 = ""
        if (rate, h, rph, model) in half:
            t16 = half[(rate, h, rph, model)][1]
            p16 = predict_ring(link, pp, n / 2) + half_cost * n / 4
            fp16 = f"{t16 * 1e3:.2f} / {p16 * 1e3:.2f}"
        print(f"| {rate} | {h}x{rph} | {model} | {n / 1e6:.2f} | {t * 1e3:.2f} | "
              f"{pred * 1e3:.2f} | {pred / t:.2f} | {used} | {fp16} |")

    if args.links_only:
        return
    summarise(runs)
    # 3. Training runs: best images/s per configuration, predicted from its compute time.
    best = {}
    for r in runs:
        if r.get("kind") != "train":
            continue
        key = (r["rate"], r["hosts"], r["ranks_per_host"], r["model"], r["mode"])
        if key not in best or r["images_per_sec"] > best[key]["images_per_sec"]:
            best[key] = r
    print("\n## Training runs: measured vs predicted (exposed = share of step time waiting for "
          "gradients after backward)\n")
    print("| link | hosts x ranks | model | all-reduce | measured img/s | predicted img/s | "
          "measured exposed | predicted exposed | all-reduce ms (mean of 10) |")
    print("|---|---|---|---|---|---|---|---|---|")
    rows = []
    for (rate, h, rph, model, mode), r in sorted(best.items(), key=lambda kv: (
            -RATE_GBITS.get(kv[0][0], 1e9), kv[0][1], kv[0][2], kv[0][3])):
        if rate not in links:
            continue
        link = links[rate]
        gbits = RATE_GBITS.get(rate, link["gbits"])
        compute_ms = r["step_ms"] * (1.0 - r["exposed_comm"])
        cells = project(args, model, h, rph, gbits, link, intra, compute_ms)
        c = cells[MODE_CELL[mode]]
        ranks = h * rph
        pred_ips = ranks * 64 / ((c["compute_ms"] + c["exposed_ms"]) / 1e3)
        rows.append({"rate": rate, "hosts": h, "ranks_per_host": rph, "model": model,
                     "mode": mode, "measured_images_per_sec": r["images_per_sec"],
                     "predicted_images_per_sec": pred_ips,
                     "measured_exposed": r["exposed_comm"],
                     "predicted_exposed": c["exposed_share"],
                     "allreduce_ms": r["allreduce_ms"]})
        print(f"| {rate} | {h}x{rph} | {model} | {mode} | {r['images_per_sec']:.1f} | "
              f"{pred_ips:.1f} | {100 * r['exposed_comm']:.1f}% | "
              f"{100 * c['exposed_share']:.1f}% | {r['allreduce_ms']:.2f} |", flush=True)
    with open(os.path.join(os.path.dirname(args.out), "predicted_vs_measured.json"), "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
