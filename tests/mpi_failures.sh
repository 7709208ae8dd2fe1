#!/usr/bin/env bash
# A failure on one rank ends the whole job promptly, non-zero, with that rank's message; ranks
# that disagree on the command are stopped at start. Both are bounded by `timeout`, so a hang
# fails the test instead of the suite. Usage: mpi_failures.sh DTNN CKDIFF MPIRUN TMPDIR, where
# MPIRUN is the build's launcher (build/tests/mpirun, written by tests/CMakeLists.txt) that holds
# the vendor's options.
set -u
dtnn=$1
mpirun=$3
tmp=$4
rm -rf "$tmp" && mkdir -p "$tmp"
failures=0
args=(train --model lenet5 --dataset synthetic --synthetic-shape 1x28x28 --synthetic-samples 256
      --batch-size 32 --epochs 1 --threads 1 --quiet)

expect_failure() { # name pattern -- mpirun arguments (MPMD: different commands per rank)
    local name=$1 pattern=$2
    shift 3
    local t0=$SECONDS
    timeout 120 "$mpirun" "$@" >"$tmp/out" 2>&1
    local rc=$? dt=$((SECONDS - t0))
    if [[ $rc -ne 0 && $rc -ne 124 ]] && grep -qE -e "$pattern" "$tmp/out"; then
        echo "ok: $name: exit $rc after ${dt}s: $(grep -E -e "$pattern" "$tmp/out" | head -n1)"
    else
        echo "FAIL: $name: exit $rc after ${dt}s; output:"
        sed 's/^/    /' "$tmp/out" | head -20
        failures=$((failures + 1))
    fi
}

# Rank 1 cannot read its data: rank 0 is already waiting in a collective, and must not hang.
expect_failure "one rank fails" "rank 1.*missing-dir|missing-dir" -- \
    -np 1 "$dtnn" "${args[@]}" : \
    -np 1 "$dtnn" train --model lenet5 --dataset npy --data-dir "$tmp/missing-dir" --batch-size 32 \
        --epochs 1 --threads 1
# Rank 1 runs another seed: caught by the start-up agreement check.
expect_failure "ranks disagree" "rank 1 disagrees with rank 0 on the training options" -- \
    -np 1 "$dtnn" "${args[@]}" --seed 1 : -np 1 "$dtnn" "${args[@]}" --seed 2
# One rank computes in bf16, the other in fp32: the replicas would drift apart.
expect_failure "ranks disagree on the precision" "rank 1 disagrees with rank 0 on the model" -- \
    -np 1 "$dtnn" "${args[@]}" : -np 1 "$dtnn" "${args[@]}" --precision bf16
# CPU kernel sets round differently. Ranks left to choose (auto) take the slowest set any rank
# chose (comm.c), as on nodes of different CPUs: here rank 1 forces generic and rank 0, auto,
# follows; ranks whose forced sets differ are stopped at start. Auto is never generic on an
# x86-64 with AVX2, which is where a second set exists to differ from.
if "$dtnn" devices | grep -q "cpu kernels: generic"; then
    echo "skip: ranks on different kernel sets: this machine runs only the generic set"
else
    if timeout 120 "$mpirun" -np 1 "$dtnn" "${args[@]}" : \
            -np 1 env DTNN_CPU=generic "$dtnn" "${args[@]}" >"$tmp/out" 2>&1 &&
            grep -q "generic kernels$" "$tmp/out"; then
        echo "ok: an auto rank takes the generic set another rank forces"
    else
        echo "FAIL: an auto rank beside a rank forced to generic:"
        sed 's/^/    /' "$tmp/out" | head -20
        failures=$((failures + 1))
    fi
    expect_failure "ranks forced to different kernel sets" "rank 1 disagrees with rank 0 on the CPU kernel set" -- \
        -np 1 env DTNN_CPU=avx2 "$dtnn" "${args[@]}" : -np 1 env DTNN_CPU=generic "$dtnn" "${args[@]}"
fi
# NCCL reduces a GPU's memory: asked for on the cpu, it says so (or that it is not built in).
expect_failure "nccl on the cpu" "collectives nccl (needs a model on --device cuda|: this dtnn was built without NCCL)" -- \
    -np 2 "$dtnn" "${args[@]}" --collectives nccl
# A non-finite loss on every rank stops the job with the step.
expect_failure "non-finite loss" "non-finite values at step [0-9]+ \(epoch 1\), first in" -- -np 2 "$dtnn" "${args[@]}" --lr 1e30
# The global batch must divide by the ranks.
expect_failure "batch not divisible" "does not divide by 3 ranks" -- -np 3 "$dtnn" "${args[@]}"

[[ $failures -eq 0 ]] && echo "mpi_failures: all passed" || echo "mpi_failures: $failures failed"
[[ $failures -eq 0 ]]
