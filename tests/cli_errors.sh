#!/usr/bin/env bash
# Bad input gets one clear line on stderr and a non-zero exit, never a crash (exit >= 128) and
# never a silent success. Usage: cli_errors.sh DTNN TMPDIR
set -u
dtnn=$1
tmp=$2
rm -rf "$tmp" && mkdir -p "$tmp"
failures=0

# expect CODE PATTERN -- ARGS... (tests/cli_common.sh)
source "$(dirname "$0")/cli_common.sh"

expect 2 "unknown command" -- frobnicate
expect 2 "unknown option '--bogus'" -- train --model lenet5 --bogus 1
expect 2 "needs an integer" -- train --model lenet5 --epochs two
expect 2 "needs a finite number" -- train --model lenet5 --lr nan
expect 2 "needs a value" -- train --model lenet5 --lr
expect 2 "--model is required" -- train --dataset synthetic
expect 2 "batch-size must be" -- train --model lenet5 --batch-size 0
expect 2 "unknown optimizer" -- train --model lenet5 --optimizer sgdd
expect 1 "unknown model 'lenet6'" -- train --model lenet6 --dataset synthetic
expect 1 "unknown dataset|dataset" -- train --model lenet5 --dataset imagenet7
expect 1 "cannot open model file" -- train --model "$tmp/missing.model" --dataset synthetic
expect 2 "unknown device 'tpu'" -- train --model lenet5 --dataset synthetic --device tpu
# --device cuda is an error unless this build has CUDA and this machine a GPU
if "$dtnn" devices | grep -qE '^cuda +usable'; then
    echo "ok: --device cuda is usable here, so not an error"
else
    expect 1 "device 'cuda': (not built into this dtnn|built, no device found)" -- \
        train --model lenet5 --dataset synthetic --device cuda
fi
expect 2 "unknown device 'tpu'" -- bench --model lenet5 --device tpu --steps 1
expect 2 "init-exclude needs --init" -- train --model lenet5 --init-exclude 'fc3.*'
expect 2 "bucket-mb must be auto or a positive size" -- train --model lenet5 --bucket-mb 0
expect 2 "bucket-mb must be auto or a positive size" -- train --model lenet5 --bucket-mb 4MB
expect 2 "bucket-mb must be auto or a positive size" -- bench --model lenet5 --bucket-mb Auto
expect 2 "the train command follows --" -- launch --hosts h1,h2
expect 2 "give --hosts or --hostfile" -- launch -- train --model lenet5
expect 2 "host 'h1' is listed twice" -- launch --hosts h1,h1 -- train --model lenet5
# A checkpoint of 10 classes into a 12-class model: the error names the head and the fix; the
# fix trains; a pattern that matches nothing is refused.
"$dtnn" train --model lenet5 --dataset synthetic --synthetic-shape 1x28x28 --synthetic-samples 64 \
    --batch-size 32 --steps 1 --threads 1 --quiet --save "$tmp/ten.safetensors" >/dev/null 2>&1
expect 1 "only layer 'fc3' differs.*--init-exclude 'fc3\.\*'" -- train --model lenet5 \
    --classes 12 --dataset synthetic --synthetic-shape 1x28x28 --synthetic-samples 64 \
    --batch-size 32 --steps 1 --threads 1 --init "$tmp/ten.safetensors"
expect 1 "matches no tensor" -- train --model lenet5 --classes 12 --dataset synthetic \
    --synthetic-shape 1x28x28 --synthetic-samples 64 --batch-size 32 --steps 1 --threads 1 \
    --init "$tmp/ten.safetensors" --init-exclude 'fc9.*'
if ! "$dtnn" train --model lenet5 --classes 12 --dataset synthetic --synthetic-shape 1x28x28 \
    --synthetic-samples 64 --batch-size 32 --steps 1 --threads 1 --quiet \
    --init "$tmp/ten.safetensors" --init-exclude 'fc3.*' >"$tmp/out" 2>"$tmp/err"; then
    echo "FAIL: --init-exclude 'fc3.*' did not train:"
    sed 's/^/    /' "$tmp/err"
    failures=$((failures + 1))
else
    echo "ok: --init with --init-exclude 'fc3.*' trains a 12-class head"
fi

# Missing and corrupt dataset files.
mkdir -p "$tmp/idx"
expect 1 "train-images" -- train --model lenet5 --dataset mnist --data-dir "$tmp/idx"
printf 'garbage!' >"$tmp/idx/train-images-idx3-ubyte"
printf '\x00\x00\x08\x01\x00\x00\x00\x02\x01\x02' >"$tmp/idx/train-labels-idx1-ubyte"
printf '\x00\x00\x08\x03\x00\x00\x00\x01\x00\x00\x00\x1c\x00\x00\x00\x1c' >"$tmp/idx/t10k-images-idx3-ubyte"
printf '\x00\x00\x08\x01\x00\x00\x00\x01\x01' >"$tmp/idx/t10k-labels-idx1-ubyte"
expect 1 "magic|train-images" -- train --model lenet5 --dataset mnist --data-dir "$tmp/idx"
# right magic, truncated pixels
printf '\x00\x00\x08\x03\x00\x00\x00\x02\x00\x00\x00\x1c\x00\x00\x00\x1c\x00\x01' >"$tmp/idx/train-images-idx3-ubyte"
expect 1 "truncated|short|expected" -- train --model lenet5 --dataset mnist --data-dir "$tmp/idx"
# label count mismatch: 1 image, 2 labels
head -c 800 /dev/zero >"$tmp/zeros"
{ printf '\x00\x00\x08\x03\x00\x00\x00\x01\x00\x00\x00\x1c\x00\x00\x00\x1c'; head -c 784 "$tmp/zeros"; } >"$tmp/idx/train-images-idx3-ubyte"
{ printf '\x00\x00\x08\x03\x00\x00\x00\x01\x00\x00\x00\x1c\x00\x00\x00\x1c'; head -c 784 "$tmp/zeros"; } >"$tmp/idx/t10k-images-idx3-ubyte"
expect 1 "2 labels|mismatch|labels" -- train --model lenet5 --dataset mnist --data-dir "$tmp/idx"

# Model files: unknown key and impossible shapes name file:line.
cat >"$tmp/badkey.model" <<'M'
[input]
shape = 1x28x28
[conv2d]
filters = 4
kernel = 3
colour = blue
M
expect 1 "badkey.model:6: .*colour" -- train --model "$tmp/badkey.model" --dataset synthetic
cat >"$tmp/badshape.model" <<'M'
[input]
shape = 3x32x32
[conv2d]
filters = 4
kernel = 40
M
expect 1 "badshape.model:3: .*does not fit" -- info --model "$tmp/badshape.model"
cat >"$tmp/nolinear.model" <<'M'
[input]
shape = 3x32x32
[conv2d]
filters = 4
kernel = 3
[linear]
outputs = 10
M
expect 1 "nolinear.model:6: .*flatten" -- info --model "$tmp/nolinear.model"
# a trainable constant's tensor suffix: letters, digits and '_' only
cat >"$tmp/badname.model" <<'M'
[input]
shape = 2x4x4
[mul]
const_shape = 2x1x1
trainable = true
const_name = bad/name
[flatten]
[linear]
out_features = 3
M
expect 1 "badname.model:6: .*'bad/name' is not 1 to 23 letters, digits and '_'" -- info \
    --model "$tmp/badname.model"

# Corrupt and mismatched checkpoints.
"$dtnn" train --model lenet5 --dataset synthetic --synthetic-samples 64 --epochs 1 --batch-size 32 \
    --save "$tmp/ok.safetensors" --quiet >/dev/null 2>&1 || { echo "FAIL: could not train"; failures=$((failures + 1)); }
head -c 1000 "$tmp/ok.safetensors" >"$tmp/truncated.safetensors"
expect 1 "truncated|short|bounds|size" -- eval --model lenet5 --load "$tmp/truncated.safetensors" --dataset synthetic
printf 'not a checkpoint at all' >"$tmp/junk.safetensors"
expect 1 "junk.safetensors" -- eval --model lenet5 --load "$tmp/junk.safetensors" --dataset synthetic
expect 1 "missing.safetensors" -- eval --model lenet5 --load "$tmp/missing.safetensors" --dataset synthetic
expect 1 "shape|expects" -- eval --model cifarcnn --load "$tmp/ok.safetensors" --dataset synthetic
expect 1 "cannot write|No such file" -- train --model lenet5 --dataset synthetic --synthetic-samples 64 --epochs 1 --save "$tmp/no/such/dir/x.safetensors"
expect 1 "NaN|infinite|non-finite" -- train --model lenet5 --dataset synthetic --synthetic-samples 256 --epochs 1 --lr 1e30

# Paths that cannot be written are reported before training starts.
expect 1 "cannot write the log" -- train --model lenet5 --dataset synthetic --synthetic-samples 64 --epochs 1 --log "$tmp/no/such/dir/log.jsonl"
expect 2 "need --save" -- train --model lenet5 --dataset synthetic --checkpoint-every 5
# A model and batch that cannot fit: refused before allocating, with required vs available
# (the same figure `dtnn info` prints).
expect 1 "needs [0-9.]+ GiB at batch 400000 .* but [0-9.]+ GiB is available" -- \
    train --model resnet20 --dataset synthetic --batch-size 400000
expect 1 "needs [0-9.]+ GiB at batch 400000" -- info --model resnet20 --batch-size 400000
"$dtnn" info --model resnet20 --batch-size 64 | grep -qE "memory to train at batch 64 .*: [0-9.]+ MiB" ||
    { echo "FAIL: info prints no memory figure"; failures=$((failures + 1)); }
# Too many threads for the cores given.
expect 2 "oversubscribe" -- bench --model lenet5 --threads $(($(nproc) + 1))
# The SGEMM speed and the FMA peak need no model (bench/torch_compare.py measures the peak next
# to every row); a model run still needs --model.
expect 2 "--sgemm must be in" -- bench --sgemm -1
expect 2 "--model is required" -- bench --threads 1
"$dtnn" bench --sgemm 64 --threads 1 --steps 1 | grep -qE '"gflops": [0-9.]*[1-9]' ||
    { echo "FAIL: bench --sgemm without --model prints no GFLOP/s"; failures=$((failures + 1)); }
# The FMA peak: a positive ymm figure where the CPU has AVX2 + FMA, and a zmm figure exactly
# where it has AVX-512F (the loop asks cpuid and the OS; /proc/cpuinfo says what the kernel
# saw), null elsewhere.
peak=$("$dtnn" bench --fma-peak --threads 1)
echo "bench --fma-peak: $peak"
if grep -qw avx2 /proc/cpuinfo && ! grep -qE '"ymm_gflops": [0-9.]*[1-9]' <<<"$peak"; then
    echo "FAIL: no ymm FMA peak on an AVX2 CPU"; failures=$((failures + 1))
fi
if grep -qw avx512f /proc/cpuinfo; then
    grep -qE '"zmm_gflops": [0-9.]*[1-9]' <<<"$peak" ||
        { echo "FAIL: no zmm FMA peak on an AVX-512 CPU"; failures=$((failures + 1)); }
else
    grep -q '"zmm_gflops": null' <<<"$peak" ||
        { echo "FAIL: a zmm FMA peak without AVX-512"; failures=$((failures + 1)); }
fi

echo "cli_errors: $failures failed"
[[ $failures -eq 0 ]]
