#!/usr/bin/env bash
# End to end: LeNet-5 reaches >= 88% test accuracy on Fashion-MNIST after 2 epochs, then
# eval of the saved checkpoint reports the same accuracy, and within half a point of it with
# --precision bf16 (bf16 convolutions and GEMMs); 600 steps trained in bf16 reach >= 80%
# (measured: 83.2%). Usage: cli_fashion_mnist.sh DTNN TMPDIR
set -eu
dtnn=$1
tmp=$2
rm -rf "$tmp" && mkdir -p "$tmp"
"$dtnn" train --model lenet5 --dataset fashion-mnist --epochs 2 --batch-size 32 --optimizer adamw \
    --lr 0.002 --lr-schedule cosine --save "$tmp/lenet5.safetensors" --log "$tmp/log.jsonl" | tee "$tmp/out"
acc=$(sed -n 's/^test accuracy: \([0-9.]*\)%.*/\1/p' "$tmp/out")
echo "test accuracy after 2 epochs: $acc%"
awk -v a="$acc" 'BEGIN { exit !(a >= 88.0) }' || { echo "FAIL: below 88%"; exit 1; }
"$dtnn" eval --model lenet5 --load "$tmp/lenet5.safetensors" --dataset fashion-mnist | tee "$tmp/eval"
grep -q "accuracy $acc%" "$tmp/eval" || { echo "FAIL: eval disagrees with training"; exit 1; }
"$dtnn" eval --model lenet5 --load "$tmp/lenet5.safetensors" --dataset fashion-mnist \
    --precision bf16 | tee "$tmp/eval_bf16"
acc16=$(sed -n 's/.*accuracy \([0-9.]*\)%.*/\1/p' "$tmp/eval_bf16" | head -n 1)
echo "eval in bf16: $acc16% (fp32: $acc%)"
awk -v a="$acc" -v b="$acc16" 'BEGIN { d = a - b; exit !(d <= 0.5 && d >= -0.5) }' ||
    { echo "FAIL: bf16 eval more than half a point from fp32's"; exit 1; }
"$dtnn" train --model lenet5 --dataset fashion-mnist --steps 600 --batch-size 32 \
    --optimizer adamw --lr 0.002 --precision bf16 | tee "$tmp/out_bf16"
acc16=$(sed -n 's/^test accuracy: \([0-9.]*\)%.*/\1/p' "$tmp/out_bf16")
echo "test accuracy after 600 steps in bf16: $acc16%"
awk -v a="$acc16" 'BEGIN { exit !(a >= 80.0) }' || { echo "FAIL: bf16 training below 80%"; exit 1; }
echo "3 passed, 0 failed"
