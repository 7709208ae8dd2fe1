#!/usr/bin/env bash
# End to end: LeNet-5 reaches >= 88% test accuracy on Fashion-MNIST after 2 epochs, then
# eval of the saved checkpoint reports the same accuracy. Usage: cli_fashion_mnist.sh DTNN TMPDIR
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
echo "1 passed, 0 failed"
