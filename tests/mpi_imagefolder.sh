#!/usr/bin/env bash
# An image folder trained on 2 MPI ranks, each decoding only its own half of every global
# batch (with RandomResizedCrop + flip and 2 loader threads per rank), ends within 5e-5 of the
# same command on one process (the sums in another order, as in mpi_equivalence.sh; measured
# 9e-6, while a wrong shard or augmentation moves weights by 1e-3 or more); the corrupt image
# is skipped on whichever rank meets it, and the epoch log counts it once.
# Usage: mpi_imagefolder.sh DTNN CKDIFF MPIRUN TMPDIR
set -u
dtnn=$1
ckdiff=$2
mpirun=$3
tmp=$4
rm -rf "$tmp" && mkdir -p "$tmp"
"$(dirname "$dtnn")/make-imagefolder" "$tmp/if" --classes 3 --train 6 --val 2 --width 48 \
    --height 40 >/dev/null || exit 1
printf 'GIF89a, not a JPEG' >"$tmp/if/train/class002/img00003.jpg"
common=(--model cifarcnn --dataset imagefolder --data-dir "$tmp/if" --image-size 32
        --batch-size 6 --epochs 2 --optimizer sgd --lr 0.05 --momentum 0.9 --threads 1 --seed 5
        --loader-threads 2 --quiet)
"$dtnn" train "${common[@]}" --save "$tmp/ref.safetensors" --log "$tmp/ref.jsonl" >/dev/null 2>&1 || exit 1
"$mpirun" -np 2 "$dtnn" train "${common[@]}" --save "$tmp/np2.safetensors" \
    --log "$tmp/np2.jsonl" >"$tmp/out" 2>&1
status=$?
failures=0
if [[ $status -eq 0 ]] && out=$("$ckdiff" "$tmp/ref.safetensors" "$tmp/np2.safetensors" 5e-5); then
    echo "ok: 2 ranks match 1 process: $out"
else
    echo "FAIL: 2 ranks (status $status): ${out:-}"; sed 's/^/    /' "$tmp/out" | tail -20
    failures=1
fi
if grep -q '"epoch": 2.*"skipped_images": 2' "$tmp/np2.jsonl" &&
   grep -q '"epoch": 2.*"skipped_images": 2' "$tmp/ref.jsonl"; then
    echo "ok: the corrupt image is counted once per epoch over the ranks"
else
    echo "FAIL: skipped_images in the logs"; cat "$tmp/ref.jsonl" "$tmp/np2.jsonl"
    failures=1
fi
[[ $failures -eq 0 ]]
