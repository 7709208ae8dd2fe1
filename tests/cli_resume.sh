#!/usr/bin/env bash
# Resuming after epoch 1 gives bitwise the same checkpoint as an uninterrupted 2-epoch run
# (weights, batch-norm statistics, optimizer state), with a model that has batch norm and
# dropout, SGD with Nesterov momentum and a step schedule, and with NAdam, LARS and LAMB.
# Usage: cli_resume.sh DTNN TMPDIR
set -eu
dtnn=$1
tmp=$2
rm -rf "$tmp" && mkdir -p "$tmp"
common=(--model models/small_bn_dropout.model --dataset synthetic --synthetic-samples 200
        --batch-size 32 --optimizer sgd --lr 0.05 --momentum 0.9 --nesterov --weight-decay 1e-4
        --lr-schedule step:1:0.5 --threads 2 --seed 7)
"$dtnn" train "${common[@]}" --quiet --epochs 2 --save "$tmp/full.safetensors" --log "$tmp/full.jsonl"
"$dtnn" train "${common[@]}" --quiet --epochs 1 --save "$tmp/half.safetensors"
"$dtnn" train "${common[@]}" --quiet --epochs 2 --resume "$tmp/half.safetensors" --save "$tmp/resumed.safetensors"
if cmp "$tmp/full.safetensors" "$tmp/resumed.safetensors"; then
    echo "resume: bitwise identical"
else
    echo "FAIL: resumed run differs from the uninterrupted run"
    exit 1
fi
# The same for the optimizers with state beyond the flat buffers' slots (NAdam's float32
# mu_product, recomputed from the step on resume) or with per-tensor norms (LARS, LAMB),
# with parameter groups kept from decay and the gradient clipped; and with the loader's
# MixUp, CutMix, repeated augmentation and RandAugment (their draws keyed by seed, epoch and
# step or sample).
opt_base=(--model models/small_bn_dropout.model --dataset synthetic --synthetic-samples 200
          --batch-size 32 --threads 2 --seed 7 --quiet)
for opt in "nadam --lr 0.01 --weight-decay 1e-3 --no-decay norm,bias" \
           "lars --lr 2 --weight-decay 5e-4" "lamb --lr 0.01 --clip-grad-norm 1" \
           "sgd --lr 0.05 --mixup 0.2 --cutmix 1.0 --repeated-augment 2 --augment crop,randaugment" \
           "sgd --lr 0.05 --momentum 0.9 --ema 0.9 --ema-steps 2 --warmup-epochs 0.5"; do
    read -ra o <<<"--optimizer $opt"
    "$dtnn" train "${opt_base[@]}" "${o[@]}" --epochs 2 --save "$tmp/full-o.safetensors"
    "$dtnn" train "${opt_base[@]}" "${o[@]}" --epochs 1 --save "$tmp/half-o.safetensors"
    "$dtnn" train "${opt_base[@]}" "${o[@]}" --epochs 2 --resume "$tmp/half-o.safetensors" \
        --save "$tmp/resumed-o.safetensors"
    cmp "$tmp/full-o.safetensors" "$tmp/resumed-o.safetensors" ||
        { echo "FAIL: --optimizer $opt: resumed run differs"; exit 1; }
    echo "resume --optimizer $opt: bitwise identical"
done
# (The EMA run is the loop's last: what follows reads its checkpoint.)
# The weights' average is in the checkpoint ("ema.<name>"): eval and export take it with
# --ema, the trained weights without; a resume with --ema needs one.
"$dtnn" eval --model models/small_bn_dropout.model --dataset synthetic --load "$tmp/full-o.safetensors" \
    --ema >"$tmp/eval-ema.out"
"$dtnn" eval --model models/small_bn_dropout.model --dataset synthetic --load "$tmp/full-o.safetensors" \
    >"$tmp/eval.out"
cmp -s "$tmp/eval.out" "$tmp/eval-ema.out" && { echo "FAIL: eval --ema gave the trained weights' result"; exit 1; }
if "$dtnn" train "${common[@]}" --quiet --epochs 2 --ema 0.9 --resume "$tmp/half.safetensors" \
        2>"$tmp/no-ema.err"; then
    echo "FAIL: resumed with --ema from a checkpoint without an average"; exit 1
fi
grep -q "holds no averaged weights (saved without --ema): resume without --ema" "$tmp/no-ema.err" ||
    { echo "FAIL: message:"; cat "$tmp/no-ema.err"; exit 1; }
echo "--ema: eval takes the average, a resume without one is refused"
# ReduceLROnPlateau's state (best loss, epochs without gain, cuts) is in the checkpoint: with
# patience 0 this run's test loss stops improving after epoch 3 and the rate is cut at epochs
# 4 and 5; resumed after epoch 5, the rest is the same, bit for bit.
plateau=(--model models/small_bn_dropout.model --dataset synthetic --synthetic-samples 200
         --batch-size 32 --threads 2 --seed 7 --lr 0.1 --momentum 0.9 --quiet
         --lr-schedule plateau:0:0.5)
"$dtnn" train "${plateau[@]}" --epochs 8 --save "$tmp/full-p.safetensors" >"$tmp/full-p.out"
"$dtnn" train "${plateau[@]}" --epochs 5 --save "$tmp/half-p.safetensors" >/dev/null
"$dtnn" train "${plateau[@]}" --epochs 8 --resume "$tmp/half-p.safetensors" \
    --save "$tmp/resumed-p.safetensors" >"$tmp/resumed-p.out"
cmp "$tmp/full-p.safetensors" "$tmp/resumed-p.safetensors" ||
    { echo "FAIL: --lr-schedule plateau: resumed run differs"; exit 1; }
grep -q "^epoch 8/8: .*lr 0.00625$" "$tmp/full-p.out" ||
    { echo "FAIL: plateau: 4 cuts by 0.5 expected by epoch 8:"; cat "$tmp/full-p.out"; exit 1; }
echo "resume --lr-schedule plateau:0:0.5: bitwise identical, 4 cuts"
# The run ends early: 2 epochs without a lower test loss (4 and 5), or a test accuracy. The
# epochs compared differ by at least 6e-4 in test loss, far beyond the 1e-6 by which kernel
# sets and BLAS cores move it (the same lines with DTNN_CPU=generic, avx2, avx512 and
# OPENBLAS_CORETYPE=Prescott); the accuracy is that of a model that predicts one class.
"$dtnn" train "${plateau[@]}" --epochs 8 --early-stop 2 >"$tmp/early.out"
grep -q "^stopping after epoch 5: 2 epochs without a lower loss" "$tmp/early.out" ||
    { echo "FAIL: --early-stop 2:"; cat "$tmp/early.out"; exit 1; }
"$dtnn" train "${plateau[@]}" --epochs 8 --stop-at-accuracy 0.15 >"$tmp/target.out"
grep -q "^stopping after epoch 6: test accuracy 20.00% reached the target 15.00%" "$tmp/target.out" ||
    { echo "FAIL: --stop-at-accuracy 0.15:"; cat "$tmp/target.out"; exit 1; }
echo "--early-stop and --stop-at-accuracy end the run at the expected epochs"
# The log has one object per epoch with the documented fields.
[[ $(wc -l <"$tmp/full.jsonl") -eq 2 ]] || { echo "FAIL: log lines"; exit 1; }
for key in epoch train_loss train_acc test_loss test_acc images_per_sec seconds lr; do
    grep -q "\"$key\"" "$tmp/full.jsonl" || { echo "FAIL: log lacks $key"; exit 1; }
done
# Same seed, same threads: the same result, bit for bit.
"$dtnn" train "${common[@]}" --quiet --epochs 2 --save "$tmp/again.safetensors"
cmp "$tmp/full.safetensors" "$tmp/again.safetensors" || { echo "FAIL: not deterministic"; exit 1; }
# --init takes the weights only: a new run (step 0, fresh optimizer) from them, and it refuses
# to be combined with --resume.
"$dtnn" train "${common[@]}" --quiet --epochs 1 --init "$tmp/half.safetensors" --save "$tmp/init.safetensors" \
    | grep -q "test accuracy" || { echo "FAIL: --init"; exit 1; }
if "$dtnn" train "${common[@]}" --epochs 2 --init "$tmp/half.safetensors" --resume "$tmp/half.safetensors" 2>/dev/null; then
    echo "FAIL: --init with --resume accepted"; exit 1
fi
echo "1 passed, 0 failed"
