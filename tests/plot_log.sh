#!/usr/bin/env bash
# scripts/plot_log draws a PNG from a 3-epoch log that also holds an event line and a null
# test metric (as a run without a test set writes), refuses a log without epochs (exit 1) and
# a wrong call (exit 2). Skipped (77) where gnuplot is not installed.
# Usage: plot_log.sh PLOT_LOG TMPDIR
set -u
plot=$1
tmp=$2
rm -rf "$tmp" && mkdir -p "$tmp"
command -v gnuplot >/dev/null 2>&1 || { echo "skipped: gnuplot is not installed (gnuplot-nox)"; exit 77; }
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

cat >"$tmp/run.jsonl" <<'LOG'
{"epoch": 1, "step": 10, "train_loss": 2.1, "train_acc": 0.3, "test_loss": 1.9, "test_acc": 0.35, "images_per_sec": 1000.5, "seconds": 1.0, "comm_wait_seconds": 0.0, "skipped_steps": 0, "skipped_images": 0, "lr": 0.01}
{"event": "restart", "epoch": 2, "reason": "a host was lost"}
{"epoch": 2, "step": 20, "train_loss": 1.5, "train_acc": 0.5, "test_loss": null, "test_acc": null, "images_per_sec": 1100.0, "seconds": 1.0, "comm_wait_seconds": 0.0, "skipped_steps": 0, "skipped_images": 0, "lr": 0.005}
{"epoch": 3, "step": 30, "train_loss": 1.2, "train_acc": 0.6, "test_loss": 1.3, "test_acc": 0.58, "images_per_sec": 1050.0, "seconds": 1.0, "comm_wait_seconds": 0.0, "skipped_steps": 0, "skipped_images": 0, "lr": 0.001}
LOG
if out=$("$plot" "$tmp/run.jsonl" "$tmp/run.png" 2>"$tmp/err"); then
    magic=$(head -c 8 "$tmp/run.png" | od -An -tx1 | tr -d ' \n')
    [[ $magic == 89504e470d0a1a0a ]] || fail "not a PNG: $magic"
    [[ $out == "$tmp/run.png" ]] || fail "printed '$out', not the picture's path"
    [[ -s $tmp/err ]] && fail "stderr: $(cat "$tmp/err")"
    echo "ok: 3 epochs -> $(wc -c <"$tmp/run.png") bytes of PNG"
else
    fail "plot_log exited $?: $(cat "$tmp/err")"
fi
echo '{"event": "start"}' >"$tmp/none.jsonl"
"$plot" "$tmp/none.jsonl" "$tmp/none.png" 2>/dev/null
rc=$?
[[ $rc -eq 1 && ! -e $tmp/none.png ]] && echo "ok: no epochs -> exit 1" || fail "no epochs: exit $rc"
"$plot" "$tmp/run.jsonl" 2>/dev/null
rc=$?
[[ $rc -eq 2 ]] && echo "ok: one argument -> exit 2" || fail "one argument: exit $rc"

[[ $failures -eq 0 ]] && echo "plot_log: all passed" || echo "plot_log: $failures failed"
[[ $failures -eq 0 ]]
