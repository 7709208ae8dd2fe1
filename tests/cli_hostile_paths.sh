#!/usr/bin/env bash
# Hostile and careless paths (issue "Hostile files and careless paths, round three"): an input
# that is a FIFO, a device or a directory is refused at once with one line naming it, never
# read from and never waited on. Each command runs under a 30 s timeout, so a regression that
# blocks fails here (exit 124) instead of hanging the suite. Usage: cli_hostile_paths.sh DTNN TMPDIR
set -u
dtnn=$1
tmp=$2
rm -rf "$tmp" && mkdir -p "$tmp"
failures=0

# expect CODE PATTERN -- ARGS...: the exit code must be CODE and stderr's one line must match.
expect() {
    local code=$1 pattern=$2
    shift 3
    timeout 30 "$dtnn" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
    local rc=$?
    if [[ $rc -ne $code ]] || ! grep -qE -e "$pattern" "$tmp/err"; then
        echo "FAIL: dtnn $* -> exit $rc (want $code), stderr:"
        sed 's/^/    /' "$tmp/err"
        failures=$((failures + 1))
    else
        echo "ok: dtnn $* -> $(head -n1 "$tmp/err")"
    fi
}

small=(--dataset synthetic --synthetic-shape 1x28x28 --synthetic-samples 64 --batch-size 32
       --threads 1 --quiet)
"$dtnn" train --model lenet5 "${small[@]}" --steps 1 --save "$tmp/good.safetensors" >/dev/null ||
    { echo "FAIL: could not train the checkpoint the cases start from"; exit 1; }
python3 - "$tmp/x.npy" <<'PY' || { echo "FAIL: could not write x.npy"; exit 1; }
import struct, sys
header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 1, 28, 28), }"
header += " " * (118 - len(header)) + "\n"
with open(sys.argv[1], "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
    f.write(b"\0" * (2 * 28 * 28 * 4))
PY

# FIFOs with no writer: opening one for reading the ordinary way blocks forever.
mkfifo "$tmp/fifo.model" "$tmp/fifo.onnx" "$tmp/fifo.safetensors" "$tmp/fifo.npy"
fifo="is not a regular file \(a FIFO\)"
expect 1 "model file '$tmp/fifo.model' $fifo" -- train --model "$tmp/fifo.model" "${small[@]}" --steps 1
expect 1 "ONNX file '$tmp/fifo.onnx' $fifo" -- info --model "$tmp/fifo.onnx"
expect 1 "'$tmp/fifo.safetensors' $fifo" -- eval --model lenet5 --load "$tmp/fifo.safetensors" \
    --dataset synthetic --threads 1
expect 1 "'$tmp/fifo.safetensors' $fifo" -- train --model lenet5 "${small[@]}" --steps 1 \
    --init "$tmp/fifo.safetensors"
expect 1 "'$tmp/fifo.npy' $fifo" -- predict --model lenet5 --load "$tmp/good.safetensors" \
    --input "$tmp/fifo.npy" --output "$tmp/y.npy"
[[ -e $tmp/y.npy ]] && { echo "FAIL: predict wrote an output after refusing its input"; failures=$((failures + 1)); }

# A dataset folder whose images file is a FIFO.
mkdir -p "$tmp/idx"
mkfifo "$tmp/idx/train-images-idx3-ubyte"
printf '\x00\x00\x08\x01\x00\x00\x00\x01\x01' >"$tmp/idx/train-labels-idx1-ubyte"
expect 1 "train-images-idx3-ubyte' $fifo" -- train --model lenet5 --dataset mnist \
    --data-dir "$tmp/idx" --steps 1 --threads 1 --quiet

# A character device and a directory where a file is expected.
expect 1 "'/dev/zero' is not a regular file \(a character device\)" -- eval --model lenet5 \
    --load /dev/zero --dataset synthetic --threads 1
expect 1 "'$tmp' is not a regular file \(a directory\)" -- predict --model lenet5 \
    --load "$tmp/good.safetensors" --input "$tmp" --output "$tmp/y.npy"

if [[ $failures -ne 0 ]]; then
    echo "cli_hostile_paths: $failures case(s) FAILED"
    exit 1
fi
echo "cli_hostile_paths: all cases passed"
