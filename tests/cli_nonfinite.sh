#!/usr/bin/env bash
# Bad numbers: a step whose loss or gradient goes NaN/Inf stops training with a message naming
# the step and the first layer where it shows, and writes no checkpoint with NaN in it;
# --skip-nonfinite skips such steps (no update, running statistics kept), counts them in the
# log, and the run finishes with a finite checkpoint. Usage: cli_nonfinite.sh DTNN TMPDIR
set -u
dtnn=$1
tmp=$2
rm -rf "$tmp" && mkdir -p "$tmp"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# A learning rate of 1e30 blows the weights up after the first update.
common=(--model models/small_bn_dropout.model --dataset synthetic --synthetic-samples 256
        --batch-size 32 --optimizer sgd --lr 1e30 --threads 1 --quiet --epochs 2)

"$dtnn" train "${common[@]}" --save "$tmp/a.safetensors" >"$tmp/a.out" 2>&1
rc=$?
line=$(grep -o "non-finite values at step [0-9]* (epoch 1), first in [^;]*" "$tmp/a.out")
if [[ $rc -eq 1 && $line == *"first in the output of layer '"* && ! -e $tmp/a.safetensors ]]; then
    echo "ok: stops: $line"
else
    fail "non-finite run: exit $rc, checkpoint $(ls "$tmp"), output: $(cat "$tmp/a.out")"
fi

"$dtnn" train "${common[@]}" --skip-nonfinite --save "$tmp/b.safetensors" --log "$tmp/b.jsonl" \
    >"$tmp/b.out" 2>&1
rc=$?
skipped=$(grep -o '"skipped_steps": [0-9]*' "$tmp/b.jsonl" | tail -n1 | grep -o '[0-9]*$')
if [[ $rc -eq 0 && ${skipped:-0} -gt 0 && -e $tmp/b.safetensors ]] &&
    "$dtnn" eval --model models/small_bn_dropout.model --dataset synthetic \
        --load "$tmp/b.safetensors" --threads 1 >/dev/null 2>&1; then
    echo "ok: --skip-nonfinite: finished, $skipped of 16 steps skipped, the checkpoint loads"
else
    fail "--skip-nonfinite: exit $rc, skipped '${skipped:-}', output: $(cat "$tmp/b.out")"
fi

[[ $failures -eq 0 ]] && echo "cli_nonfinite: all passed" || echo "cli_nonfinite: $failures failed"
[[ $failures -eq 0 ]]
