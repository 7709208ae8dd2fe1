#!/usr/bin/env bash
# The datasets beyond MNIST through the CLI, on tiny files made here: CIFAR-10 and CIFAR-100
# binaries (also with crop+flip augmentation and loader threads), and an image folder of JPEGs
# from build/make-imagefolder with one corrupt file: training skips and reports it, --strict
# stops on it naming it, a run with augmentation and 2 loader threads resumes bit for bit,
# eval reads the val split, and `bench --loader` runs. Usage: cli_datasets.sh DTNN TMPDIR
set -u
dtnn=$1
tmp=$2
make_folder=$(dirname "$dtnn")/make-imagefolder
rm -rf "$tmp" && mkdir -p "$tmp"
failures=0
check() { # name status-wanted status-got grep-pattern file
    if [[ $3 -eq $2 ]] && grep -qE -e "$4" "$5"; then
        echo "ok: $1"
    else
        echo "FAIL: $1 (status $3, wanted $2); output:"
        sed 's/^/    /' "$5" | tail -20
        failures=$((failures + 1))
    fi
}
# CIFAR records: [coarse byte] label byte, then 3072 pixel bytes.
cifar_file() { # path classes records
    : >"$1"
    for ((r = 0; r < $3; r++)); do
        [[ $2 == 100 ]] && printf "\\x$(printf %02x $((r % 20)))" >>"$1"
        printf "\\x$(printf %02x $(((r * 7) % $2)))" >>"$1"
        head -c 3072 /dev/urandom >>"$1"
    done
}
run() { "$dtnn" "$@" >"$tmp/out" 2>&1; }
common=(--threads 1 --batch-size 4 --quiet)

mkdir -p "$tmp/c10" "$tmp/c100"
run train --model cifarcnn --dataset cifar10 --data-dir "$tmp/c10" --steps 1 "${common[@]}"
check "CIFAR-10: an empty folder lists the files expected" 1 $? "data_batch_1.bin.*test_batch.bin" "$tmp/out"
for b in 1 2 3 4 5; do cifar_file "$tmp/c10/data_batch_$b.bin" 10 3; done
cifar_file "$tmp/c10/test_batch.bin" 10 4
run train --model cifarcnn --dataset cifar10 --data-dir "$tmp/c10" --epochs 1 "${common[@]}"
check "CIFAR-10 trains" 0 $? "15 train / 4 test samples of 3x32x32, 10 classes.*|test accuracy" "$tmp/out"
run train --model cifarcnn --dataset cifar10 --data-dir "$tmp/c10" --epochs 1 "${common[@]}" \
    --augment crop,flip --loader-threads 2
check "CIFAR-10 with crop,flip and 2 loader threads" 0 $? "test accuracy: .* on 4 samples" "$tmp/out"
head -c 5000 "$tmp/c10/test_batch.bin" >"$tmp/c10/t" && mv "$tmp/c10/t" "$tmp/c10/test_batch.bin"
run train --model cifarcnn --dataset cifar10 --data-dir "$tmp/c10" --epochs 1 "${common[@]}"
check "CIFAR-10: a truncated file is named with its size" 1 $? "test_batch.bin: 5000 bytes" "$tmp/out"
cifar_file "$tmp/c100/train.bin" 100 6
cifar_file "$tmp/c100/test.bin" 100 2
run train --model cifarcnn --dataset cifar100 --data-dir "$tmp/c100" --epochs 1 "${common[@]}"
check "CIFAR-100 trains with 100 classes" 0 $? "100 classes" "$tmp/out"

# An image folder: 3 classes, 5 train and 2 val images each, plus one corrupt JPEG.
"$make_folder" "$tmp/if" --classes 3 --train 5 --val 2 --width 60 --height 45 >/dev/null
printf '\xff\xd8\xff not a JPEG after all' >"$tmp/if/train/class001/img00009.jpg"
img=(--model cifarcnn --dataset imagefolder --data-dir "$tmp/if" --image-size 32 "${common[@]}")
run train "${img[@]}" --epochs 2 --save "$tmp/full.safetensors" --log "$tmp/full.jsonl"
check "image folder trains, skipping the corrupt image" 0 $? \
    "skipped 2 unreadable images in training.*class001/img00009.jpg" "$tmp/out"
check "the log counts skipped images" 0 0 '"skipped_images": 2' "$tmp/full.jsonl"
run train "${img[@]}" --epochs 1 --save "$tmp/half.safetensors"
check "one epoch" 0 $? "test accuracy" "$tmp/out"
run train "${img[@]}" --epochs 2 --resume "$tmp/half.safetensors" --save "$tmp/resumed.safetensors" \
    --loader-threads 1
check "resumed with 1 loader thread" 0 $? "resuming" "$tmp/out"
if cmp -s "$tmp/full.safetensors" "$tmp/resumed.safetensors"; then
    echo "ok: augmented image-folder run resumes bit for bit, 2 threads then 1"
else
    echo "FAIL: resumed image-folder run differs"; failures=$((failures + 1))
fi
# SIGTERM mid-epoch while loader threads prefetch: a checkpoint after the current step, and
# resuming from it ends where an uninterrupted run does.
run train "${img[@]}" --epochs 4 --save "$tmp/four.safetensors"
"$dtnn" train "${img[@]}" --epochs 4 --save "$tmp/stopped.safetensors" >"$tmp/out" 2>&1 &
pid=$!
sleep 1.5
kill -TERM $pid 2>/dev/null
wait $pid
status=$?
if [[ $status -eq 143 ]]; then
    check "SIGTERM with loader threads saves and stops" 143 $status "resume with --resume" "$tmp/out"
    run train "${img[@]}" --epochs 4 --resume "$tmp/stopped.safetensors" \
        --save "$tmp/stopped.safetensors"
    if cmp -s "$tmp/four.safetensors" "$tmp/stopped.safetensors"; then
        echo "ok: resumed after SIGTERM = uninterrupted"
    else
        echo "FAIL: resumed after SIGTERM differs"; failures=$((failures + 1))
    fi
else
    echo "ok (not checked): the run ended (status $status) before the signal"
fi
run train "${img[@]}" --epochs 1 --strict
check "--strict stops at the corrupt image, naming it" 1 $? "class001/img00009.jpg.*--strict" "$tmp/out"
run eval --model cifarcnn --dataset imagefolder --data-dir "$tmp/if" --image-size 32 \
    --load "$tmp/full.safetensors" --threads 1
check "eval reads the val split" 0 $? "imagefolder test: .* on 6 samples" "$tmp/out"
run train --model cifarcnn --dataset imagefolder --steps 1 "${common[@]}"
check "imagefolder without --data-dir is a usage error" 2 $? "needs --data-dir" "$tmp/out"
run train "${img[@]}" --steps 1 --augment rotate
check "an unknown augmentation is a usage error" 2 $? "--augment must be" "$tmp/out"
run train --model cifarcnn --dataset imagefolder --data-dir "$tmp/nothing" --steps 1 "${common[@]}"
check "a missing image folder says what is expected" 1 $? "nothing/train.*DIR/train/<class>" "$tmp/out"
run bench --loader --data-dir "$tmp/if" --image-size 64 --batch-size 4 --steps 4 --warmup 1 \
    --loader-threads 2
check "bench --loader" 0 $? '"images_per_sec": [0-9.]+' "$tmp/out"

[[ $failures -eq 0 ]] && echo "cli_datasets: all passed" || echo "cli_datasets: $failures failed"
[[ $failures -eq 0 ]]
