#!/usr/bin/env bash
# The CPU kernel sets from the outside: DTNN_CPU=generic runs (and `dtnn info` reports) the
# portable kernels; the default runs the fastest set the build has and the CPU runs (avx512
# where it has AVX-512 F, BW, VL and DQ and its zmm FMAs measure faster than ymm, else avx2+fma
# where it has AVX2 and FMA); DTNN_CPU=avx2
# and avx512 run theirs or fail with a message saying why; an unknown DTNN_CPU fails.
# ResNet-20 trained 3 steps on each set ends with the same weights as on generic within
# rounding (below). Where the CPU (or build) has no fast set, two runs are generic and must be
# bitwise identical.
# Usage: isa_kernels.sh DTNN CKDIFF SETS TMPDIR, SETS the build's sets, comma-separated:
# generic, generic,avx2 or generic,avx2,avx512.
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
cpu_has() { # flags of /proc/cpuinfo, all of them
    for flag; do grep -qw "$flag" /proc/cpuinfo 2>/dev/null || return 1; done
}

# The build's fast sets the CPU runs, fastest first (DTNN_CPU value, name reported).
runnable=()
declare -A name_of=([avx2]=avx2+fma [avx512]=avx512)
for set in avx512 avx2; do
    [[ ,$sets, == *,$set,* ]] || continue
    case $set in
    avx2) needs=(avx2 fma) ;;
    avx512) needs=(avx2 fma avx512f avx512bw avx512vl avx512dq) ;;
    esac
    if cpu_has "${needs[@]}"; then
        runnable+=("$set")
        continue
    fi
    echo "isa_kernels: this CPU lacks ${needs[*]}: DTNN_CPU=$set must be refused"
    if DTNN_CPU=$set "$dtnn" info --model resnet20 >"$tmp/out" 2>&1; then
        fail "DTNN_CPU=$set accepted where the kernels cannot run"
    fi
    grep -q "DTNN_CPU=$set, but" "$tmp/out" ||
        fail "DTNN_CPU=$set without its CPU features: unclear message: $(cat "$tmp/out")"
done
expected=generic
((${#runnable[@]})) && expected=${name_of[${runnable[0]}]}
[[ $sets == *avx* ]] || echo "isa_kernels: this build has the generic kernels only"

got=$(kernels_of generic)
[[ $got == generic ]] || fail "DTNN_CPU=generic: dtnn info reports '$got', not generic"
got=$(kernels_of "")
if [[ $expected == avx512 && $got == avx2+fma ]]; then
    # auto measures whether zmm pays here (Zen 4's split 512-bit units: it does not)
    "$dtnn" info --model resnet20 | grep -q '^cpu kernels: avx2+fma (AVX-512 runs here, but .*measured' ||
        fail "default: avx2+fma where AVX-512 runs, without saying it was measured"
    expected=avx2+fma
fi
[[ $got == "$expected" ]] || fail "default: dtnn info reports '$got', expected $expected"
DTNN_CPU=generic "$dtnn" info --model resnet20 |
    grep -q '^cpu kernels: generic (forced by DTNN_CPU=generic)$' ||
    fail "DTNN_CPU=generic: dtnn info does not say it was forced"
for set in "${runnable[@]}"; do
    got=$(kernels_of "$set")
    [[ $got == "${name_of[$set]}" ]] || fail "DTNN_CPU=$set: dtnn info reports '$got'"
done
if DTNN_CPU=sse9 "$dtnn" info --model resnet20 >"$tmp/out" 2>&1; then
    fail "DTNN_CPU=sse9 accepted"
fi
grep -q "DTNN_CPU='sse9' is not a CPU kernel set" "$tmp/out" ||
    fail "DTNN_CPU=sse9: unclear message: $(cat "$tmp/out")"
if [[ $sets != *avx512* ]]; then
    if DTNN_CPU=avx512 "$dtnn" info --model resnet20 >"$tmp/out" 2>&1; then
        fail "DTNN_CPU=avx512 accepted by a build without those kernels"
    fi
    grep -q "DTNN_CPU=avx512, but this build has no AVX-512 kernels" "$tmp/out" ||
        fail "DTNN_CPU=avx512 in a build without it: unclear message: $(cat "$tmp/out")"
fi

train=(train --model resnet20 --dataset synthetic --synthetic-samples 256 --batch-size 32
       --threads 1)
"$dtnn" "${train[@]}" --steps 1 --lr 1e-30 --quiet --save "$tmp/init.safetensors" >/dev/null
DTNN_CPU=generic "$dtnn" "${train[@]}" --steps 3 --save "$tmp/generic.safetensors" \
    >"$tmp/generic.out"
grep -q "generic kernels$" "$tmp/generic.out" || fail "DTNN_CPU=generic: train does not name them"
if ((${#runnable[@]} == 0)); then
    "$dtnn" "${train[@]}" --steps 3 --save "$tmp/default.safetensors" >"$tmp/default.out"
    cmp "$tmp/generic.safetensors" "$tmp/default.safetensors" || fail "two generic runs differ"
fi
for set in "${runnable[@]}"; do
    name=${name_of[$set]}
    DTNN_CPU=$set "$dtnn" "${train[@]}" --steps 3 --save "$tmp/$set.safetensors" \
        >"$tmp/$set.out"
    grep -q "$name kernels$" "$tmp/$set.out" || fail "DTNN_CPU=$set: train does not name $name"
    if cmp -s "$tmp/generic.safetensors" "$tmp/$set.safetensors"; then
        fail "generic and $name runs are bitwise identical: DTNN_CPU had no effect?"
    fi
    "$ckdiff" "$tmp/generic.safetensors" "$tmp/$set.safetensors" "$atol" --weights-only \
        --init "$tmp/init.safetensors" "$rtol" ||
        fail "generic and $name weights differ by more than $rtol of their change + $atol"
done

if ((failures)); then
    echo "$failures failed"
    exit 1
fi
echo "isa_kernels: ok (default $expected; sets run: generic ${runnable[*]})"
