#!/usr/bin/env bash
# --trace: the timeline a run writes is a Chrome trace-event file that a JSON parser reads and
# whose spans make sense, on 1 and on 2 ranks:
#  - one process: every step has a step span, each holding a forward with every layer of the
#    model inside it, a loss, a backward and an optimizer span;
#  - 2 ranks (small buckets, so there are several): both ranks have layer spans, bucket spans
#    (async begin/end pairs, end after begin, numbered 1..n of n, as many per step as buckets)
#    and collectives named by purpose; rank 0 merged both, with the clock offsets measured;
#  - a failed run (non-finite loss) leaves its rank's own PATH.rank0 and no merged file;
#  - ranks that disagree on --trace stop at start (exit 2) instead of waiting for each other;
#  - scripts/trace_plot draws the 2-rank trace as a PNG, where gnuplot is installed.
# Needs python3 (skipped, 77, without it). Usage: mpi_trace.sh DTNN CKDIFF MPIRUN TMPDIR.
set -u
dtnn=$1
mpirun=$3
tmp=$4
root=$(cd "$(dirname "$0")/.." && pwd)
rm -rf "$tmp" && mkdir -p "$tmp"
command -v python3 >/dev/null || { echo "skipped: python3 is not installed"; exit 77; }
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
common=(train --model lenet5 --dataset synthetic --synthetic-shape 1x28x28 --synthetic-samples 256
        --batch-size 32 --threads 1 --quiet --seed 4)

# check.py FILE RANKS STEPS EXPECT_BUCKETS: prints one line of findings, exit 1 on a problem.
cat >"$tmp/check.py" <<'EOF'
import json, sys
path, ranks, steps, want_buckets = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
doc = json.load(open(path))
ev = doc["traceEvents"]
problems = []
def bad(msg):
    problems.append(msg)
if doc["otherData"]["ranks"] != ranks or len(doc["otherData"]["clock_offsets_us"]) != ranks:
    bad("otherData says %r" % doc["otherData"])
layers = {"conv1", "pool1", "conv2", "pool2", "flatten", "fc1", "fc2", "fc3"}
summary = []
for r in range(ranks):
    mine = [e for e in ev if e.get("pid") == r]
    x = [e for e in mine if e["ph"] == "X"]
    if any(e["dur"] < 0 or e["ts"] < -1e6 for e in x):
        bad("rank %d: a span with negative duration or far before the start" % r)
    step_spans = [e for e in x if e["cat"] == "step"]
    if len(step_spans) != steps:
        bad("rank %d: %d step spans, not %d" % (r, len(step_spans), steps))
    fwd = [e for e in x if e["cat"] == "forward"]
    lf = [e for e in x if e["cat"] == "layer-forward"]
    lb = [e for e in x if e["cat"] == "layer-backward"]
    names = {e["name"] for e in lf}
    if not layers <= names:
        bad("rank %d: layer spans for %s, missing %s" % (r, sorted(names), sorted(layers - names)))
    for e in lf:
        if not any(f["ts"] - 1 <= e["ts"] and e["ts"] + e["dur"] <= f["ts"] + f["dur"] + 1 for f in fwd):
            bad("rank %d: layer %s at %.1f lies in no forward span" % (r, e["name"], e["ts"]))
            break
    for cat in ("loss", "backward", "optimizer", "data"):
        if sum(e["cat"] == cat for e in x) < steps:
            bad("rank %d: fewer %s spans than steps" % (r, cat))
    begins = {e["id"]: e for e in mine if e["ph"] == "b"}
    ends = {e["id"]: e for e in mine if e["ph"] == "e"}
    if want_buckets:
        if not begins or set(begins) != set(ends):
            bad("rank %d: bucket begins %d, ends %d, unmatched" % (r, len(begins), len(ends)))
        of = {b["args"]["of"] for b in begins.values()}
        if len(of) != 1 or of.pop() < 2:
            bad("rank %d: buckets of %r" % (r, {b["args"]["of"] for b in begins.values()}))
        for i, b in begins.items():
            if i in ends and ends[i]["ts"] < b["ts"]:
                bad("rank %d: bucket %s ends before it begins" % (r, i))
        n = next(iter(begins.values()))["args"]["of"]
        if len(begins) != n * steps:
            bad("rank %d: %d bucket spans for %d steps of %d buckets" % (r, len(begins), steps, n))
        coll = {e["name"] for e in x if e["cat"] == "collective"}
        if "step agreement (signals, finiteness)" not in coll:
            bad("rank %d: collectives %s lack the step agreement" % (r, sorted(coll)))
    summary.append("rank %d: %d spans, %d layer, %d bucket" % (r, len(mine), len(lf) + len(lb), len(begins)))
print("; ".join(problems) if problems else ", ".join(summary))
sys.exit(1 if problems else 0)
EOF

# One process.
if "$dtnn" "${common[@]}" --steps 3 --trace "$tmp/one.json" >"$tmp/one.out" 2>&1; then
    if msg=$(python3 "$tmp/check.py" "$tmp/one.json" 1 3 0); then
        echo "ok: 1 process: $msg"
    else
        fail "1 process: $msg"
    fi
else
    fail "1 process: exit $?: $(tail -3 "$tmp/one.out")"
fi

# Two ranks, several buckets.
if timeout 300 "$mpirun" -np 2 "$dtnn" "${common[@]}" --steps 5 --bucket-mb 0.05 \
    --trace "$tmp/two.json" >"$tmp/two.out" 2>&1; then
    if msg=$(python3 "$tmp/check.py" "$tmp/two.json" 2 5 1); then
        echo "ok: 2 ranks: $msg"
    else
        fail "2 ranks: $msg"
    fi
else
    fail "2 ranks: exit $?: $(tail -3 "$tmp/two.out")"
fi

# A failure: each rank's own file, no merged one.
"$dtnn" "${common[@]}" --steps 3 --lr 1e30 --trace "$tmp/failed.json" >"$tmp/failed.out" 2>&1
rc=$?
if [[ $rc -eq 1 && -s $tmp/failed.json.rank0 && ! -e $tmp/failed.json ]] &&
    python3 -c "import json, sys; json.load(open(sys.argv[1]))" "$tmp/failed.json.rank0"; then
    echo "ok: a failed run leaves failed.json.rank0: $(grep -m1 "trace up to" "$tmp/failed.out")"
else
    fail "failed run: exit $rc, files: $(ls "$tmp" | tr '\n' ' ')"
fi

# Ranks that disagree on --trace.
timeout 120 "$mpirun" -np 1 "$dtnn" "${common[@]}" --steps 3 --trace "$tmp/half.json" : \
    -np 1 "$dtnn" "${common[@]}" --steps 3 >"$tmp/half.out" 2>&1
rc=$?
if [[ $rc -ne 0 && $rc -ne 124 ]] && grep -q "must be given to every rank" "$tmp/half.out"; then
    echo "ok: --trace on one rank only: exit $rc: $(grep -m1 "must be given" "$tmp/half.out")"
else
    fail "--trace on one rank only: exit $rc: $(tail -3 "$tmp/half.out")"
fi

# The picture.
if ! command -v gnuplot >/dev/null; then
    echo "note: gnuplot is not installed: scripts/trace_plot not tried"
elif [[ -s $tmp/two.json ]] && "$root/scripts/trace_plot" "$tmp/two.json" "$tmp/two.png" \
    >"$tmp/plot.out" 2>&1 && [[ $(head -c 8 "$tmp/two.png" | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]]; then
    echo "ok: $(cat "$tmp/plot.out")"
else
    fail "trace_plot: $(cat "$tmp/plot.out" 2>/dev/null)"
fi

[[ $failures -eq 0 ]] && echo "mpi_trace: all passed" || echo "mpi_trace: $failures failed"
[[ $failures -eq 0 ]]
