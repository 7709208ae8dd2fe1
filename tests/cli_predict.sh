#!/usr/bin/env bash
# save -> load -> predict through the tool: `dtnn predict` reads a float32 .npy, writes a
# [N, classes] .npy, and gives identical logits run to run (bitwise identity of outputs before
# save and after load is checked in test_e2e). Usage: cli_predict.sh DTNN TMPDIR
set -eu
dtnn=$1
tmp=$2
rm -rf "$tmp" && mkdir -p "$tmp"
"$dtnn" train --model lenet5 --dataset synthetic --synthetic-samples 128 --epochs 1 \
    --batch-size 32 --save "$tmp/m.safetensors" --quiet >/dev/null
# A float32 .npy of 5 x 3 x 32 x 32 written by hand (header, then little-endian floats).
{
    header="{'descr': '<f4', 'fortran_order': False, 'shape': (5, 3, 32, 32), }"
    pad=$((64 - (10 + ${#header} + 1) % 64))
    printf '\x93NUMPY\x01\x00'
    printf "\\x$(printf %02x $(((${#header} + pad + 1) % 256)))\\x$(printf %02x $(((${#header} + pad + 1) / 256)))"
    printf '%s%*s\n' "$header" "$pad" ""
    head -c $((5 * 3 * 32 * 32 * 4)) /dev/zero | tr '\0' '\077'
} >"$tmp/x.npy"
"$dtnn" predict --model lenet5 --load "$tmp/m.safetensors" --input "$tmp/x.npy" --output "$tmp/y1.npy"
"$dtnn" predict --model lenet5 --load "$tmp/m.safetensors" --input "$tmp/x.npy" --output "$tmp/y2.npy"
cmp "$tmp/y1.npy" "$tmp/y2.npy" || { echo "FAIL: predictions differ between runs"; exit 1; }
head -c 128 "$tmp/y1.npy" | grep -aq "(5, 10)" || { echo "FAIL: output shape"; exit 1; }
size=$(stat -c %s "$tmp/y1.npy")
[[ $size -eq $((128 + 5 * 10 * 4)) ]] || { echo "FAIL: output size $size"; exit 1; }
echo "1 passed, 0 failed"
