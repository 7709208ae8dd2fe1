#!/usr/bin/env bash
# The main paths under valgrind's memcheck: train a few steps and save, resume from the
# checkpoint (load), eval, predict. Any invalid access, use of uninitialised memory or
# definite leak fails (exit 1). Built separately into build-vg/ as a Debug build. No dtnn build
# uses -march=native, which valgrind could not follow where it meant AVX-512: dtnn picks its
# CPU kernel set, and OpenBLAS its kernel, from what valgrind reports. Without the cuda backend
# (DTNN_CUDA=OFF): valgrind cannot follow GPU code, and the CUDA libraries' loading code alone
# trips memcheck (reads in ld.so's dlopen at start-up). Usage: scripts/valgrind.sh
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh valgrind
cmake -S . -B build-vg -DCMAKE_BUILD_TYPE=Debug -DDTNN_MPI=OFF -DDTNN_CUDA=OFF >build-vg.cmake.log 2>&1 ||
    { cat build-vg.cmake.log; exit 1; }
cmake --build build-vg -j "$(nproc)" >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
vg=(valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite
    --show-leak-kinds=definite)
dtnn=build-vg/dtnn
data=(--dataset synthetic --synthetic-samples 64)
# [2, 3, 32, 32] float32 zeros as .npy (version 1.0 header padded to 128 bytes).
header="{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 32, 32), }"
{
    printf '\x93NUMPY\x01\x00\x76\x00'
    printf '%-117s\n' "$header"
    head -c $((2 * 3 * 32 * 32 * 4)) /dev/zero
} >"$tmp/x.npy"
failures=0
run() { # name args...
    local name=$1
    shift
    if "${vg[@]}" "$dtnn" "$@" >"$tmp/out" 2>&1; then
        echo "ok: $name"
    else
        echo "FAIL: $name (exit $?):"
        sed 's/^/    /' "$tmp/out" | tail -40
        failures=$((failures + 1))
    fi
}
model=(--model tests/models/small_bn_dropout.model)
run "train 3 steps and save" train "${model[@]}" "${data[@]}" --batch-size 16 --steps 3 \
    --threads 1 --quiet --optimizer adam --save "$tmp/a.safetensors"
run "resume from the checkpoint" train "${model[@]}" "${data[@]}" --batch-size 16 --steps 5 \
    --threads 1 --quiet --optimizer adam --resume "$tmp/a.safetensors" --save "$tmp/b.safetensors"
run "eval" eval "${model[@]}" --dataset synthetic --load "$tmp/b.safetensors" --threads 1
run "predict" predict "${model[@]}" --load "$tmp/b.safetensors" --input "$tmp/x.npy" \
    --output "$tmp/y.npy" --threads 1
[[ $failures -eq 0 ]] && echo "valgrind: main paths clean" || echo "valgrind: $failures failed"
[[ $failures -eq 0 ]]
