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

# A checkpoint with a valid checksum whose weights hold NaN (as a diverged run's would, saved by
# another tool): loaded silently before, predict exited 0 with NaN logits, and a resume from it
# blamed the learning rate. Now every load refuses it, naming the tensor and the first bad index;
# --allow-nonfinite-weights lets eval and predict load it, and eval scores its NaN logits 0%.
if [[ -e $tmp/b.safetensors ]] && python3 tools/poison_checkpoint.py "$tmp/b.safetensors" \
    "$tmp/nan.safetensors" conv1.weight 5 nan && python3 tools/poison_checkpoint.py \
    "$tmp/b.safetensors" "$tmp/inf.safetensors" fc.bias 2 inf; then
    small=(--model models/small_bn_dropout.model --dataset synthetic --synthetic-samples 256
           --threads 1)
    evals=(--model models/small_bn_dropout.model --dataset synthetic --threads 1)
    refused() { # LABEL PATTERN ARGS...
        local label=$1 pattern=$2
        shift 2
        "$dtnn" "$@" >"$tmp/p.out" 2>&1
        local rc=$?
        if [[ $rc -eq 1 ]] && grep -qE "$pattern" "$tmp/p.out"; then
            echo "ok: $label: $(grep -E "$pattern" "$tmp/p.out" | head -n1)"
        else
            fail "$label: exit $rc: $(cat "$tmp/p.out")"
        fi
    }
    nan_line="'conv1.weight' holds NaN at index 5 of [0-9]+ .*--allow-nonfinite-weights"
    refused "eval of a NaN checkpoint" "$nan_line" eval "${evals[@]}" --load "$tmp/nan.safetensors"
    refused "resume from it" "$nan_line" train "${small[@]}" --epochs 3 --quiet \
        --resume "$tmp/nan.safetensors"
    refused "--init from an Inf checkpoint" "'fc.bias' holds Inf at index 2" train "${small[@]}" \
        --epochs 1 --quiet --init "$tmp/inf.safetensors"
    "$dtnn" eval "${evals[@]}" --load "$tmp/nan.safetensors" --allow-nonfinite-weights \
        >"$tmp/p.out" 2>&1
    rc=$?
    if [[ $rc -eq 0 ]] && grep -q "accuracy 0.00%, top-5 0.00%" "$tmp/p.out"; then
        echo "ok: --allow-nonfinite-weights: $(grep accuracy "$tmp/p.out")"
    else
        fail "--allow-nonfinite-weights eval: exit $rc: $(cat "$tmp/p.out")"
    fi
else
    fail "could not write the poisoned checkpoints (tools/poison_checkpoint.py)"
fi

# The same for an ONNX initializer (its weights are loaded as a checkpoint's are).
if "$dtnn" import --help >/dev/null 2>&1 && /usr/bin/python3 -c "import onnx, numpy" 2>/dev/null &&
    "$dtnn" export --model models/small_bn_dropout.model --load "$tmp/b.safetensors" \
        --output "$tmp/b.onnx" >/dev/null 2>&1; then
    /usr/bin/python3 - "$tmp/b.onnx" "$tmp/nan.onnx" <<'PY'
import sys
import numpy as np
import onnx
from onnx import numpy_helper
m = onnx.load(sys.argv[1])
init = m.graph.initializer[0]
values = numpy_helper.to_array(init).copy()
values.flat[3] = np.inf
init.CopyFrom(numpy_helper.from_array(values, init.name))
onnx.save(m, sys.argv[2])
PY
    "$dtnn" eval --model "$tmp/nan.onnx" --dataset synthetic --threads 1 >"$tmp/p.out" 2>&1
    rc=$?
    if [[ $rc -eq 1 ]] && grep -qE "initializer '[^']+': tensor '[^']+' would hold Inf at index 3" "$tmp/p.out"; then
        echo "ok: an ONNX initializer with Inf: $(cat "$tmp/p.out")"
    else
        fail "ONNX initializer with Inf: exit $rc: $(cat "$tmp/p.out")"
    fi
fi

[[ $failures -eq 0 ]] && echo "cli_nonfinite: all passed" || echo "cli_nonfinite: $failures failed"
[[ $failures -eq 0 ]]
