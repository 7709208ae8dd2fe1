#!/usr/bin/env bash
# `dtnn export` (label onnx): lenet5, resnet20 (option-A shortcuts), mobilenet_v2 (depthwise,
# relu6, dropout), densenet121 (concat, average pools), models/onnx_all_layers.model (every
# other layer type and setting the exporter writes) and models/mobile_blocks.model (hardswish,
# hardsigmoid, broadcast mul / add, sub and their constant operands, constant padding, clamp,
# hardtanh, ceil-mode, asymmetric and dilated pools, global max pooling) and
# models/gelu_blocks.model (gelu in both forms, decomposed: export only until the importer
# maps Erf), models/split_attention.model (softmax and reductions across channel groups as
# Reshape to 5-D, Softmax / ReduceSum / ReduceMean over axis 1; refused at opset 11),
# models/attention_blocks.model (permute as Reshape, Transpose, Reshape; matmul as MatMul;
# softmax, layernorm and linear over the last axis; opset 17), each trained 2 steps
# so weights and batch-norm statistics are not the defaults, exported to ONNX, checked by
# onnx.checker with full_check (Debian's python3-onnx) and by tools/onnx_check.py (initializer
# and node names),
# then run in onnxruntime against dtnn predict's logits: max |a - b| / max |b| <= 1e-5, for a
# batch and for one sample (the dynamic batch N). onnxruntime comes from PyPI into a venv kept
# beside the test's folder; where pip cannot get it, that part is skipped with a message.
# Also: a bad --opset is a usage error, a layer with no ONNX form an error naming it.
# Skipped (exit 77) without python3-onnx, or in a build without ONNX support.
# Usage: cli_onnx_export.sh DTNN TMPDIR
set -eu
dtnn=$1
tmp=$2
. "$(dirname "$0")/onnx_common.sh"
onnx_test_start "$dtnn" "$tmp" onnx numpy

# onnxruntime: a venv that sees Debian's numpy, made once and shared by the cpu and guarded
# runs (the lock: they may run at the same time).
venv="$(dirname "$tmp")/onnxruntime-venv"
ort=$venv/bin/python
(
    flock 9
    if ! "$ort" -c "import onnxruntime" 2>/dev/null; then
        rm -rf "$venv"
        $py -m venv --system-site-packages "$venv" >"$tmp/pip.log" 2>&1 &&
            "$venv/bin/pip" install -q --disable-pip-version-check onnxruntime \
                >>"$tmp/pip.log" 2>&1 ||
            rm -rf "$venv"
    fi
) 9>"$venv.lock"
if ! "$ort" -c "import onnxruntime" 2>/dev/null; then
    echo "onnxruntime comparison skipped: pip could not install onnxruntime (no network?):" \
        "$(tail -1 "$tmp/pip.log" 2>/dev/null)"
    ort=""
fi

fail=0
all_layers=models/onnx_all_layers.model
for spec in lenet5:1x28x28 resnet20:3x32x32 mobilenet_v2:3x64x64 densenet121:3x64x64 \
        $all_layers:3x8x8 models/mobile_blocks.model:3x32x32 models/gelu_blocks.model:3x8x8 \
        models/split_attention.model:3x8x8 models/attention_blocks.model:3x8x8; do
    model=${spec%%:*}
    shape=${spec#*:}
    d="$tmp/$(basename "$model" .model)"
    mkdir -p "$d"
    $py - "$d" "$shape" <<'P'
import sys, numpy as np
d, shape = sys.argv[1], tuple(int(v) for v in sys.argv[2].split("x"))
rng = np.random.default_rng(0)
np.save(f"{d}/train_x.npy", rng.standard_normal((16,) + shape).astype(np.float32))
np.save(f"{d}/train_y.npy", rng.integers(0, 10, 16).astype(np.int64))
np.save(f"{d}/x.npy", rng.standard_normal((5,) + shape).astype(np.float32))
P
    "$dtnn" train --model $model --classes 10 --dataset npy --data-dir "$d" --steps 2 \
        --batch-size 8 --optimizer sgd --lr 0.05 --momentum 0.9 --threads 1 \
        --save "$d/ck.safetensors" --quiet >/dev/null
    "$dtnn" predict --model $model --classes 10 --load "$d/ck.safetensors" --input "$d/x.npy" \
        --output "$d/dtnn.npy" --threads 1 >/dev/null
    opset=13
    [[ $model == *attention_blocks* ]] && opset=17   # its LayerNormalization
    "$dtnn" export --model $model --classes 10 --input $shape --load "$d/ck.safetensors" \
        --output "$d/model.onnx" --opset $opset
    $py ../tools/onnx_check.py check "$d/model.onnx" "$d/ck.safetensors" || fail=1
    if [[ -n $ort ]]; then
        "$ort" ../tools/onnx_check.py run "$d/model.onnx" "$d/x.npy" "$d/dtnn.npy" 1e-5 || fail=1
    fi
done

# SiLU, written as Sigmoid and Mul, comes back as one silu layer computing the same values.
d="$tmp/gelu_blocks"
"$dtnn" predict --model "$d/model.onnx" --input "$d/x.npy" --output "$d/back.npy" \
    --threads 1 >/dev/null || fail=1
$py -c "import sys, numpy as np; a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
e = float(np.abs(a - b).max()); print(f'gelu_blocks re-imported: max abs difference {e:.3g}')
sys.exit(0 if e <= 1e-6 else 1)" "$d/dtnn.npy" "$d/back.npy" || fail=1
if ! "$dtnn" info --model "$d/model.onnx" | grep -q ' silu '; then
    echo "FAIL: Sigmoid + Mul not re-imported as one silu layer"
    fail=1
fi

# The oldest and newest opsets written, on the model with the most operators.
for opset in 11 17; do
    d="$tmp/onnx_all_layers"
    "$dtnn" export --model $all_layers --load "$d/ck.safetensors" --output "$d/opset$opset.onnx" \
        --opset $opset >/dev/null
    $py ../tools/onnx_check.py check "$d/opset$opset.onnx" "$d/ck.safetensors" || fail=1
    if [[ -n $ort ]]; then
        "$ort" ../tools/onnx_check.py run "$d/opset$opset.onnx" "$d/x.npy" "$d/dtnn.npy" 1e-5 ||
            fail=1
    fi
done

# Layer normalisation exists in ONNX from opset 17: a ConvNeXt block and LayerNorm of
# features (models/layernorm_blocks.model) there, and refused, saying so, at 13.
d="$tmp/layernorm_blocks"
mkdir -p "$d"
$py - "$d" <<'P'
import sys, numpy as np
rng = np.random.default_rng(0)
np.save(f"{sys.argv[1]}/train_x.npy", rng.standard_normal((16, 3, 16, 16)).astype(np.float32))
np.save(f"{sys.argv[1]}/train_y.npy", rng.integers(0, 10, 16).astype(np.int64))
np.save(f"{sys.argv[1]}/x.npy", rng.standard_normal((5, 3, 16, 16)).astype(np.float32))
P
ln_model=models/layernorm_blocks.model
"$dtnn" train --model $ln_model --dataset npy --data-dir "$d" --steps 2 --batch-size 8 \
    --optimizer sgd --lr 0.05 --momentum 0.9 --threads 1 --save "$d/ck.safetensors" --quiet \
    >/dev/null
"$dtnn" predict --model $ln_model --load "$d/ck.safetensors" --input "$d/x.npy" \
    --output "$d/dtnn.npy" --threads 1 >/dev/null
"$dtnn" export --model $ln_model --load "$d/ck.safetensors" --output "$d/model.onnx" \
    --opset 17 >/dev/null
$py ../tools/onnx_check.py check "$d/model.onnx" "$d/ck.safetensors" || fail=1
if [[ -n $ort ]]; then
    "$ort" ../tools/onnx_check.py run "$d/model.onnx" "$d/x.npy" "$d/dtnn.npy" 1e-5 || fail=1
fi
"$dtnn" predict --model "$d/model.onnx" --input "$d/x.npy" --output "$d/back.npy" \
    --threads 1 >/dev/null || fail=1
$py -c "import sys, numpy as np; a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
r = np.abs(a - b).max() / np.abs(b).max(); print(f\"{'ok  ' if r <= 1e-6 else 'FAIL'} layernorm_blocks.onnx imported back: {r:.3g} (tolerance 1e-6)\"); sys.exit(int(r > 1e-6))" \
    "$d/back.npy" "$d/dtnn.npy" || fail=1

# Errors: exit code and message.
expect() {  # expect CODE TEXT command...
    local code=$1 text=$2 rc=0
    shift 2
    "$@" >"$tmp/out.txt" 2>&1 || rc=$?
    if [[ $rc -ne $code ]] || ! grep -q -- "$text" "$tmp/out.txt"; then
        echo "FAIL: '$*' gave exit $rc (want $code) and:"; cat "$tmp/out.txt"; fail=1
    else
        echo "error as expected (exit $rc): $(head -1 "$tmp/out.txt")"
    fi
}
expect 1 "LayerNormalization is in ONNX from opset 17" "$dtnn" export --model $ln_model \
    --load "$tmp/layernorm_blocks/ck.safetensors" --output "$tmp/ln13.onnx" --opset 13
expect 1 "across channel groups is one ONNX Softmax from opset 13" "$dtnn" export \
    --model models/split_attention.model --load "$tmp/split_attention/ck.safetensors" \
    --output "$tmp/sa11.onnx" --opset 11
expect 2 "opset must be 11 to 17" "$dtnn" export --model lenet5 \
    --load "$tmp/lenet5/ck.safetensors" --output "$tmp/bad.onnx" --opset 9
expect 1 "cannot write the ONNX file '/nonexistent/x.onnx'" "$dtnn" export --model lenet5 \
    --load "$tmp/lenet5/ck.safetensors" --output /nonexistent/x.onnx
# Adaptive pooling from 8x8 to 3x3 has windows of two sizes: no ONNX pooling operator says that.
mkdir -p "$tmp/adaptive"
cat >"$tmp/adaptive/net.model" <<'M'
[input]
shape = 3x8x8
[conv2d]
name = conv
filters = 4
kernel = 3
padding = 1
[adaptive_avgpool]
name = pool
output = 3
[flatten]
[linear]
name = fc
outputs = 10
M
$py -c "
import numpy as np; r = np.random.default_rng(0)
np.save('$tmp/adaptive/train_x.npy', r.standard_normal((8, 3, 8, 8)).astype(np.float32))
np.save('$tmp/adaptive/train_y.npy', r.integers(0, 10, 8).astype(np.int64))"
"$dtnn" train --model "$tmp/adaptive/net.model" --dataset npy --data-dir "$tmp/adaptive" \
    --steps 1 --batch-size 8 --threads 1 --save "$tmp/adaptive/ck.safetensors" --quiet >/dev/null
expect 1 "layer 'pool' (adaptive_avgpool)" "$dtnn" export --model "$tmp/adaptive/net.model" \
    --load "$tmp/adaptive/ck.safetensors" --output "$tmp/adaptive/net.onnx"
if [[ -e $tmp/adaptive/net.onnx ]] || ls "$tmp/adaptive/" | grep -q tmp; then
    echo "FAIL: a failed export left a file behind"; ls "$tmp/adaptive"; fail=1
fi

if [[ $fail -ne 0 ]]; then
    echo "0 passed, 1 failed"
    exit 1
fi
echo "1 passed, 0 failed"
