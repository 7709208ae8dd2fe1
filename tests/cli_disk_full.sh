#!/usr/bin/env bash
# Unwritable file systems, on small tmpfs mounts made for the test (skipped where mounting is
# not allowed):
#  - a read-only file system (which stops root too, unlike permission bits) is reported before
#    training starts, for the checkpoint and for the log;
#  - a checkpoint that cannot fit is reported before training starts;
#  - when the disk fills up during the run, the failed write says so, training stops, and the
#    last good checkpoint is intact and loads.
# Usage: cli_disk_full.sh DTNN TMPDIR
set -u
dtnn=$1
tmp=$2
rm -rf "$tmp" && mkdir -p "$tmp/small" "$tmp/fill" "$tmp/ro"
if ! mount -t tmpfs -o size=200k tmpfs "$tmp/small" 2>/dev/null; then
    echo "skipped: cannot mount a tmpfs here (needs root and CAP_SYS_ADMIN)"
    exit 77
fi
mount -t tmpfs -o size=1200k tmpfs "$tmp/fill" || { umount "$tmp/small"; exit 77; }
mount -t tmpfs -o ro,size=64k tmpfs "$tmp/ro" || { umount "$tmp/small" "$tmp/fill"; exit 77; }
trap 'umount "$tmp/small" "$tmp/fill" "$tmp/ro" 2>/dev/null' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# lenet5 with SGD momentum: 2 x 61,706 floats, a checkpoint of about 0.5 MB.
common=(--model lenet5 --dataset synthetic --synthetic-shape 1x28x28 --synthetic-samples 320
        --batch-size 32 --threads 1 --quiet --optimizer sgd --momentum 0.9)

for what in checkpoint log; do
    flag=--save
    [[ $what == log ]] && flag=--log
    "$dtnn" train "${common[@]}" --epochs 1 "$flag" "$tmp/ro/x" >"$tmp/out" 2>&1
    rc=$?
    if [[ $rc -eq 1 ]] && grep -q "cannot write the $what '$tmp/ro/x': Read-only file system" \
        "$tmp/out" && ! grep -q "epoch 1" "$tmp/out"; then
        echo "ok: read-only $what: $(cat "$tmp/out")"
    else
        fail "read-only $what: exit $rc: $(cat "$tmp/out")"
    fi
done

"$dtnn" train "${common[@]}" --epochs 1 --save "$tmp/small/a.safetensors" >"$tmp/out" 2>&1
rc=$?
if [[ $rc -eq 1 ]] && grep -q "needs about .* MiB and its file system has .* MiB free" "$tmp/out"; then
    echo "ok: before training: $(cat "$tmp/out")"
else
    fail "too small a disk: exit $rc: $(cat "$tmp/out")"
fi

"$dtnn" train "${common[@]}" --steps 100000 --checkpoint-every 5 --save "$tmp/fill/b.safetensors" \
    >"$tmp/out" 2>&1 &
pid=$!
for _ in $(seq 600); do [[ -e $tmp/fill/b.safetensors ]] && break; sleep 0.1; done
# Fill the disk, and keep it full until the run stops: a save in progress holds a second
# checkpoint's space until its rename frees the older one, so one filler that ran in between
# left exactly a checkpoint's room, and the run saved every 5 steps for ever.
while kill -0 "$pid" 2>/dev/null; do
    dd if=/dev/zero of="$tmp/fill/filler" bs=4k oflag=append conv=notrunc 2>/dev/null
    sleep 0.05
done
wait "$pid"
rc=$?
if [[ $rc -eq 1 ]] && grep -q "could not be written, so training stops; the last good one is intact" \
    "$tmp/out" && "$dtnn" eval --model lenet5 --dataset fashion-mnist --batch-size 1000 \
        --load "$tmp/fill/b.safetensors" --threads 1 >/dev/null 2>&1; then
    echo "ok: disk full mid-run: $(grep -o 'the checkpoint at step [0-9]* could not.*intact' "$tmp/out"); it loads"
else
    fail "disk full mid-run: exit $rc: $(cat "$tmp/out")"
fi
leftovers=$(ls "$tmp/fill" | grep -v -e '^b\.safetensors$' -e '^filler$')
[[ -z $leftovers ]] || fail "left behind: $leftovers"

[[ $failures -eq 0 ]] && echo "cli_disk_full: all passed" || echo "cli_disk_full: $failures failed"
[[ $failures -eq 0 ]]
