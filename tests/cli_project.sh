#!/usr/bin/env bash
# dtnn bench --project: bad NODES,GBITS and link options are refused with one line before
# anything is measured (exit 2); a tiny profiled run prints the table and one JSON line per
# cell, with 100% at one node and efficiency never rising with the node count; auto buckets are
# never worse than fixed ones. The numbers themselves are checked by test_projection.
# Usage: cli_project.sh DTNN TMPDIR
set -u
dtnn=$1
tmp=$2
rm -rf "$tmp" && mkdir -p "$tmp"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

expect() { # CODE PATTERN -- ARGS...
    local code=$1 pattern=$2
    shift 3
    "$dtnn" "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    if [[ $rc -ne $code ]] || ! grep -qE -e "$pattern" "$tmp/err"; then
        fail "dtnn $* -> exit $rc (want $code), stderr: $(head -n3 "$tmp/err")"
    elif grep -q '"images_per_sec"' "$tmp/out"; then
        fail "dtnn $*: refused only after measuring"
    else
        echo "ok: dtnn $* -> $(head -n1 "$tmp/err")"
    fi
}

b=(bench --model lenet5 --batch-size 8 --steps 1 --warmup 0 --threads 1)
expect 2 "must be NODES,GBITS" -- "${b[@]}" --project 8-1024
expect 2 "NODES: 'x' is not a number" -- "${b[@]}" --project x,10
expect 2 "NODES: 8-4 must be" -- "${b[@]}" --project 8-4,10
expect 2 "GBITS: 0 must be a positive" -- "${b[@]}" --project 8,0
expect 2 "GBITS ends with '/'" -- "${b[@]}" --project 8,10/
expect 2 "more than 64 node counts" -- "${b[@]}" --project 1/1/1/1/1/1/1/1/1/1/1/1/1/1/1/1/1/1/1/1/1/1/1/1/1/1/1/1/1/1/1/1/1/1/1/1/1/1/1/1/1/1/1/1/1/1/1/1/1/1/1/1/1/1/1/1/1/1/1/1/1/1/1/1/1,10
expect 2 "link-efficiency is a share" -- "${b[@]}" --project 8,10 --link-efficiency 1.5
expect 2 "alpha-us must be >= 0" -- "${b[@]}" --project 8,10 --alpha-us -1
expect 2 "fp16-ns-per-value must be >= 0" -- "${b[@]}" --project 8,10 --fp16-ns-per-value -2
expect 2 "intra-gbs must be positive" -- "${b[@]}" --project 8,10 --intra-gbs 0
expect 2 "ranks-per-node must be" -- "${b[@]}" --project 8,10 --ranks-per-node 0
expect 2 "ranks-per-node must be" -- "${b[@]}" --project 8,10 --ranks-per-node 1/2.5
expect 2 "project-bucket-mb must be" -- "${b[@]}" --project 8,10 --project-bucket-mb 4/
expect 2 "project-batch must not be negative" -- "${b[@]}" --project 8,10 --project-batch -1
expect 2 "give one" -- "${b[@]}" --project 8,10 --step-ms 100 --compute-scale 2
expect 2 "step-ms must be positive" -- "${b[@]}" --project 8,10 --step-ms 0
expect 2 "without --sweep" -- "${b[@]}" --project 8,10 --sweep

if "$dtnn" "${b[@]}" --project 1-64,1/100 --step-ms 50 --ranks-per-node 1/2 \
        --project-bucket-mb 0.01/4 >"$tmp/out" 2>"$tmp/err"; then
    cells=$(grep -c '^{"projection"' "$tmp/out")
    [[ $cells -eq $((7 * 2 * 8 * 4)) ]] || fail "--project 1-64,1/100: $cells JSON cells, want 448"
    grep -q 'compute 50.00 ms per step' "$tmp/out" || fail "--step-ms 50 not applied"
    # One node x one rank: 100%; then never rising with the nodes, per link and variant.
    awk -F'[:,]' '/^\{"projection"/ {
            for (i = 1; i < NF; i++) { gsub(/[ "{}]/, "", $i); v[$i] = $(i + 1) }
            gsub(/[ "}]/, "", v["efficiency"]); key = v["ranks_per_node"] v["bucket_mb"] v["gbits"] v["algo"] v["overlap"] v["comm_dtype"]
            e = v["efficiency"] + 0
            if (v["nodes"] * v["ranks_per_node"] == 1 && e != 1) { print "1 rank not 100%: " $0; bad = 1 }
            if (key in last && e > last[key] + 1e-9) { print "rose: " $0; bad = 1 }
            last[key] = e }
         END { exit bad }' "$tmp/out" || fail "efficiency table inconsistent"
    echo "ok: --project 1-64,1/100 printed $cells cells"
else
    fail "--project 1-64,1/100: exit $?: $(cat "$tmp/err")"
fi

expect 2 "project-profile is measured or flops" -- "${b[@]}" --project 8,10 --project-profile x
expect 2 "give --step-ms" -- "${b[@]}" --project 8,10 --project-profile flops
expect 2 "bucket-mb must be auto or a positive" -- "${b[@]}" --project 8,10 --bucket-mb 0
expect 2 "project-bucket-mb must be" -- "${b[@]}" --project 8,10 --project-bucket-mb 4/automatic

# --bucket-mb auto against fixed sizes, on ResNet-50's FLOP-shaped profile (no timed run): in
# every cell auto's efficiency is at least the best fixed size's, less the tie margin
# (exposures within 0.1% of the step count as equal; DTNN_BUCKET_AUTO_TIE).
if "$dtnn" bench --model resnet50 --batch-size 1 --threads 1 --project 8-1024,10/25/100 \
        --project-profile flops --step-ms 145 --project-batch 32 --ranks-per-node 1/4 \
        --project-bucket-mb 1/4/16/64/auto >"$tmp/out" 2>"$tmp/err"; then
    grep -q "auto buckets" "$tmp/out" || fail "--project-bucket-mb auto: no auto table"
    grep -q '^{"model"' "$tmp/out" && fail "--project-profile flops ran a timed benchmark"
    awk -F'[:,]' '/^\{"projection"/ {
            for (i = 1; i < NF; i++) { gsub(/[ "{}]/, "", $i); v[$i] = $(i + 1) }
            gsub(/[ "}]/, "", v["efficiency"])
            key = v["nodes"] " " v["ranks_per_node"] " " v["gbits"] " " v["algo"] " " v["overlap"] " " v["comm_dtype"]
            e = v["efficiency"] + 0
            if (v["bucket_mb"] + 0 == 0) { a[key] = e; mb[key] = v["auto_bucket_mb"] + 0 }
            else if (!(key in best) || e > best[key]) { best[key] = e; bmb[key] = v["bucket_mb"] }
            cells++ }
         END { for (k in a) { n++; if (a[k] < best[k] - 0.0011) { print "auto worse: " k ": " a[k] " (" mb[k] " MiB) < " best[k] " (" bmb[k] " MiB)"; bad = 1 } }
               if (n != 8 * 2 * 3 * 8) { print "auto cells: " n; bad = 1 }
               exit bad }' "$tmp/out" || fail "auto worse than a fixed size"
    echo "ok: auto never worse than 1/4/16/64 MiB over $(grep -c '"auto_bucket_mb"' "$tmp/out") cells"
else
    fail "--project-bucket-mb auto: exit $?: $(cat "$tmp/err")"
fi

[[ $failures -eq 0 ]] && echo "cli_project: all passed" || echo "cli_project: $failures failed"
[[ $failures -eq 0 ]]
