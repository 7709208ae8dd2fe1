#!/usr/bin/env bash
# The CPU kernel sets from the outside: DTNN_CPU=generic runs (and `dtnn info` reports) the
# portable kernels; the default runs avx2+fma where the build has them and the CPU has AVX2 and
# FMA; DTNN_CPU=avx2 runs them or fails with a message saying why; an unknown DTNN_CPU fails.
# ResNet-20 trained 3 steps on either set ends with the same weights within rounding (below).
# Where the CPU (or build) lacks AVX2 both runs are generic and must be bitwise identical.
# Usage: isa_kernels.sh DTNN CKDIFF SETS TMPDIR, SETS the build's sets: generic or generic,avx2.
#
# Tolerance, per tensor of weights and batch-norm statistics (not the optimizer's momentum, the
# gradient itself): the difference may be RTOL = 0.25 of how far the tensor moved from its start
# (a 1-step run at lr 1e-30, which moves no weight by a float's resolution), plus 1e-6. The AVX2
# set runs Winograd F(4x4, 3x3) and the direct convolution where the generic set has im2col + BLAS
# only: other summation orders, ~1e-6 relative per layer (Winograd ~10x less exact). Through the
# network that grows: a ReLU whose input lies within that rounding of 0 passes its gradient in one
# run only, and batch norm's backward cancels most of what it sums. So one step's weight gradients
# differ by up to ~2% of their largest value, and 3 steps' weights by up to 0.07 of their change
# (measured: seeds 3, 9 and the default, 1 and 2 threads; the worst 2.1e-5 against a change of
# 3.0e-4 in layer3.0.conv1.weight; the largest difference 1.1e-4 in conv1.weight). RTOL is 3.5x
# that. It catches a kernel that is wrong by more than the sets' rounding (tried: batch norm's eps
# 1000x too large in the AVX2 set gives 0.52, and a NaN fails); subtler errors (eps 100x too large
# passed) are the per-layer tests' to find. With every convolution on im2col the two sets'
# gradients are bitwise identical: the difference is the algorithms', which test_conv_paths,
# test_gradcheck and test_reference check layer by layer with tight tolerances, also with
# DTNN_CPU=generic. A relative bound, because an absolute one loose enough for conv1 would pass
# anything in the tensors that moved 30x less (layer3's batch-norm weights: 6.6e-5).
set -eu
dtnn=$1
ckdiff=$2
sets=$3
tmp=$4
atol=1e-6
rtol=0.25
rm -rf "$tmp" && mkdir -p "$tmp"
failures=0
fail() {
    echo "FAIL: $*"
    failures=$((failures + 1))
}

kernels_of() { # DTNN_CPU value: the set `dtnn info` reports
    DTNN_CPU=$1 "$dtnn" info --model resnet20 | sed -n 's/^cpu kernels: \([^ ]*\).*/\1/p'
}

expected=generic
if [[ $sets == *avx2* ]]; then
    if grep -qw avx2 /proc/cpuinfo 2>/dev/null && grep -qw fma /proc/cpuinfo 2>/dev/null; then
        expected=avx2+fma
    else
        echo "isa_kernels: this CPU lacks AVX2 + FMA: every run uses the generic kernels"
    fi
else
    echo "isa_kernels: this build has the generic kernels only: every run uses them"
fi

got=$(kernels_of generic)
[[ $got == generic ]] || fail "DTNN_CPU=generic: dtnn info reports '$got', not generic"
got=$(kernels_of "")
[[ $got == "$expected" ]] || fail "default: dtnn info reports '$got', expected $expected"
DTNN_CPU=generic "$dtnn" info --model resnet20 |
    grep -q '^cpu kernels: generic (forced by DTNN_CPU=generic)$' ||
    fail "DTNN_CPU=generic: dtnn info does not say it was forced"

if DTNN_CPU=avx512 "$dtnn" info --model resnet20 >"$tmp/out" 2>&1; then
    fail "DTNN_CPU=avx512 accepted"
fi
grep -q "DTNN_CPU='avx512' is not a CPU kernel set" "$tmp/out" ||
    fail "DTNN_CPU=avx512: unclear message: $(cat "$tmp/out")"
if [[ $expected == avx2+fma ]]; then
    got=$(kernels_of avx2)
    [[ $got == avx2+fma ]] || fail "DTNN_CPU=avx2: dtnn info reports '$got'"
else
    if DTNN_CPU=avx2 "$dtnn" info --model resnet20 >"$tmp/out" 2>&1; then
        fail "DTNN_CPU=avx2 accepted where the kernels cannot run"
    fi
    grep -q "DTNN_CPU=avx2, but" "$tmp/out" ||
        fail "DTNN_CPU=avx2 without AVX2: unclear message: $(cat "$tmp/out")"
fi

train=(train --model resnet20 --dataset synthetic --synthetic-samples 256 --batch-size 32
       --threads 1)
"$dtnn" "${train[@]}" --steps 1 --lr 1e-30 --quiet --save "$tmp/init.safetensors" >/dev/null
DTNN_CPU=generic "$dtnn" "${train[@]}" --steps 3 --save "$tmp/generic.safetensors" \
    >"$tmp/generic.out"
"$dtnn" "${train[@]}" --steps 3 --save "$tmp/default.safetensors" >"$tmp/default.out"
grep -q "generic kernels$" "$tmp/generic.out" || fail "DTNN_CPU=generic: train does not name them"
grep -q "$expected kernels$" "$tmp/default.out" || fail "default: train does not name $expected"
if [[ $expected == generic ]]; then
    cmp "$tmp/generic.safetensors" "$tmp/default.safetensors" ||
        fail "two generic runs differ"
else
    if cmp -s "$tmp/generic.safetensors" "$tmp/default.safetensors"; then
        fail "generic and avx2+fma runs are bitwise identical: DTNN_CPU had no effect?"
    fi
    "$ckdiff" "$tmp/generic.safetensors" "$tmp/default.safetensors" "$atol" --weights-only \
        --init "$tmp/init.safetensors" "$rtol" ||
        fail "generic and avx2+fma weights differ by more than $rtol of their change + $atol"
fi

if ((failures)); then
    echo "$failures failed"
    exit 1
fi
echo "isa_kernels: ok (default $expected)"
