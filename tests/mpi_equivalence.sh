#!/usr/bin/env bash
# Data parallelism means the same training: 20 SGD-momentum steps of lenet5 on 2 and 4 MPI
# ranks, with every all-reduce strategy, fp16/bf16 transport, gradient accumulation, and
# NAdam, LARS and LAMB with clipping and parameter groups, the weights' average, and a network
# of the newer layers (layernorm, slice, reduce, upsample, split and self-attention), end
# within a stated tolerance of the same command on one process (half-precision transport on
# cpu-guarded, a device's staged path, equals cpu's bit for bit); a rank count change on resume
# continues the same run. Usage: mpi_equivalence.sh DTNN CKDIFF MPIRUN TMPDIR, where MPIRUN is the
# build's launcher (build/tests/mpirun, written by tests/CMakeLists.txt) that holds the vendor's
# options.
set -u
dtnn=$1
ckdiff=$2
mpirun=$3
tmp=$4
rm -rf "$tmp" && mkdir -p "$tmp"
# A run that fails says why here (its checkpoint would be missing and the comparison after it
# could only say that): the launcher's and the ranks' last lines of stderr, on stderr since the
# callers discard stdout; then it is tried once more. Twice (in CI and once here, both under
# OPENBLAS_CORETYPE=Prescott) the 2-rank fp16 run on cpu-guarded left no checkpoint and, its
# report then going to stdout, no message; 120 reruns, alone and three at a time, did not fail.
# The retry keeps an unexplained one-off from failing the suite, the report keeps it visible,
# and a failure that repeats still fails.
mpi() {
    local np=$1 attempt rc
    shift
    for attempt in 1 2; do
        rc=0
        "$mpirun" -np "$np" "$@" 2>"$tmp/mpi.err" || rc=$?
        [[ $rc -eq 0 ]] && return 0
        echo "mpirun -np $np ${*:2:12} ... exited $rc (attempt $attempt of 2):" >&2
        tail -20 "$tmp/mpi.err" | sed 's/^/    /' >&2
    done
    return $rc
}
failures=0

# Tolerances. fp32: the ranks sum the same per-sample gradients in another order (partial sums
# per rank, then the all-reduce), a few ulp per step; 20 steps with momentum 0.9 amplify that to
# ~1e-6 on weights of size ~0.1. 2e-5 leaves a 10x margin yet catches any real error: a
# missing or doubled rank, a wrong scale or a wrong shard moves the weights by >= 1e-3.
# fp16 transport rounds every gradient to 11 significant bits (bf16: 8). Those perturbations are
# ~1e4 times the fp32 ones and 20 steps at lr 0.05 with momentum amplify them (a ReLU unit that
# switches on or off changes its bias' momentum by its whole gradient), so half precision is
# held to the weights only, within 1e-2 (measured: 3.9e-3 fp16, 4.1e-3 bf16 max abs).
base=(--model lenet5 --dataset synthetic --synthetic-shape 1x28x28 --synthetic-samples 640
      --batch-size 32 --optimizer sgd --lr 0.05 --momentum 0.9 --threads 1 --seed 3 --quiet)
common=("${base[@]}" --steps 20)
"$dtnn" train "${common[@]}" --save "$tmp/ref.safetensors" >/dev/null || exit 1

check() { # name atol checkpoint [--weights-only]
    if out=$("$ckdiff" "$tmp/ref.safetensors" "$3" "$2" ${4:-}); then
        echo "ok: $1: $out"
    else
        echo "FAIL: $1: $out"
        failures=$((failures + 1))
    fi
}

# ranks_agree LABEL TOL NAME MPI_OPTION ARGS...: `dtnn train ARGS` on one process, then on 2 and
# 4 ranks (with MPI_OPTION, "" for none, added there), each held to TOL against the first.
ranks_agree() {
    local label=$1 tol=$2 name=$3 extra=$4
    shift 4
    "$dtnn" train "$@" --save "$tmp/$name-ref.safetensors" >/dev/null || exit 1
    for np in 2 4; do
        mpi $np "$dtnn" train "$@" $extra --save "$tmp/$name-np$np.safetensors" >/dev/null
        if out=$("$ckdiff" "$tmp/$name-ref.safetensors" "$tmp/$name-np$np.safetensors" "$tol"); then
            echo "ok: $label, $np ranks: $out"
        else
            echo "FAIL: $label, $np ranks: $out"
            failures=$((failures + 1))
        fi
    done
}

for np in 2 4; do
    for mode in overlap blocking hierarchical; do
        mpi $np "$dtnn" train "${common[@]}" --allreduce $mode --bucket-mb 0.05 \
            --save "$tmp/np$np-$mode.safetensors" >/dev/null
        check "$np ranks, $mode" 2e-5 "$tmp/np$np-$mode.safetensors"
    done
done
mpi 2 "$dtnn" train "${common[@]}" --comm-dtype fp16 --save "$tmp/fp16.safetensors" >/dev/null
check "2 ranks, fp16 gradients" 1e-2 "$tmp/fp16.safetensors" --weights-only
mpi 2 "$dtnn" train "${common[@]}" --comm-dtype bf16 --save "$tmp/bf16.safetensors" >/dev/null
check "2 ranks, bf16 gradients" 1e-2 "$tmp/bf16.safetensors" --weights-only
# The half copies are made where the gradient lives (the backend's half_pack / half_unpack):
# on cpu MPI sums them in place; on cpu-guarded, which takes a GPU's paths under MPI, they are
# downloaded, summed on the host and uploaded again. The same conversions and the same sums:
# the same bits, optimizer state included. (The guarded pass of this script is on
# cpu-guarded already.)
if [[ "${DTNN_DEVICE:-cpu}" == cpu ]]; then
    for dt in fp16 bf16; do
        mpi 2 "$dtnn" train "${common[@]}" --device cpu-guarded --comm-dtype $dt \
            --save "$tmp/$dt-guarded.safetensors" >/dev/null
        if out=$("$ckdiff" "$tmp/$dt.safetensors" "$tmp/$dt-guarded.safetensors" 0); then
            echo "ok: 2 ranks, $dt gradients, cpu-guarded = cpu exactly: $out"
        else
            echo "FAIL: 2 ranks, $dt gradients, cpu-guarded against cpu: $out"
            failures=$((failures + 1))
        fi
    done
fi
mpi 2 "$dtnn" train "${common[@]}" --accumulate 2 --save "$tmp/acc.safetensors" >/dev/null
check "2 ranks x accumulate 2" 2e-5 "$tmp/acc.safetensors"
"$dtnn" train "${common[@]}" --accumulate 4 --save "$tmp/acc1.safetensors" >/dev/null
check "1 rank x accumulate 4" 2e-5 "$tmp/acc1.safetensors"

# The optimizers that read norms of the all-reduced gradient (LARS's and LAMB's per tensor,
# clipping's over all of it) or keep more state (NAdam): ranks agree with one process to the
# fp32 tolerance above. eps 1e-4 keeps the adaptive ones' sensitivity to rounding at lr / eps
# (the reference tests' reasoning, test_reference.c); LARS and LAMB's trust ratios are ratios
# of norms, as well conditioned as the norms.
opt_base=(--model lenet5 --dataset synthetic --synthetic-shape 1x28x28 --synthetic-samples 640
          --batch-size 32 --threads 1 --seed 3 --quiet --steps 20)
for opt in "nadam --lr 0.002 --eps 1e-4 --weight-decay 1e-4 --no-decay bias" \
           "lars --lr 2 --weight-decay 5e-4 --nesterov" \
           "lamb --lr 0.005 --eps 1e-4 --clip-grad-norm 1" \
           "sgd --lr 0.05 --momentum 0.9 --ema 0.9 --ema-steps 3"; do
    read -ra o <<<"--optimizer $opt"
    ranks_agree "--optimizer $opt" 2e-5 opt "" "${opt_base[@]}" "${o[@]}"
done

# The loader's batch-level options: MixUp and CutMix pair a sample with the one before it in
# the global batch (on another rank for a rank's first), repeated augmentation deals a
# sample's repeats out in the global order; with crops, flips, TrivialAugmentWide and erasing
# on top, 2 and 4 ranks train on the same global batches as one process.
mix=("${opt_base[@]}" --optimizer sgd --lr 0.05 --momentum 0.9 --augment crop,flip,trivialaugment
     --random-erase 0.25 --mixup 0.2 --cutmix 1.0 --repeated-augment 2)
ranks_agree "--mixup --cutmix --repeated-augment" 2e-5 mix "" "${mix[@]}"

# ResNet-20 (batch norm) with --sync-bn: statistics over the global batch, as one process.
# 16x16 inputs keep it quick (the network is the same: global average pooling). One step:
# that step runs every synchronised part (batch statistics forward, their gradients backward,
# the running estimates, the gradient all-reduce), and it is the only step that can be held to
# a tolerance. ResNet-20's trajectory here is chaotic: a ReLU input within rounding of zero
# flips, the difference jumps, then grows ~4x per step, and where that happens moves with every
# change of rounding (one process on 1 vs 2 threads differed by 9e-2 after 10 steps; with the
# direct kernels 2 ranks agreed to 4.9e-7 for 4 steps and flipped at step 5; with Winograd
# they flip at step 2, 2.1e-3, and seed 5 at step 3). After one step: 1.8e-7 (2 ranks) and
# 1.7e-7 (4 ranks), against 8.8e-2 without --sync-bn, so 1e-5 tells them apart.
# lenet5 above carries the 20-step check.
rn=(--model resnet20 --dataset synthetic --synthetic-shape 3x16x16 --synthetic-samples 640
    --batch-size 32 --steps 1 --optimizer sgd --lr 0.05 --momentum 0.9 --threads 1 --seed 3 --quiet)
ranks_agree "resnet20 --sync-bn" 1e-5 rn --sync-bn "${rn[@]}"

# The newer layers (models/modern_blocks.model: layernorm, slice, reduce, upsample, gelu, silu,
# a trainable layer scale, softmax and a sum across channel groups; no batch norm, no ReLU, so the trajectory stays smooth): 20 steps on
# 2 and 4 ranks against one process, held to the fp32 tolerance above.
mb=(--model models/modern_blocks.model --dataset synthetic --synthetic-shape 3x16x16
    --synthetic-samples 640 --batch-size 32 --steps 20 --optimizer sgd --lr 0.05 --momentum 0.9
    --threads 1 --seed 3 --quiet)
ranks_agree "modern blocks" 2e-5 mb "" "${mb[@]}"

# Self-attention (models/attention_blocks.model: permute, matmul, softmax, layernorm and linear
# over the last axis; no batch norm): the same 20 steps, the same tolerance.
ab=(--model models/attention_blocks.model --dataset synthetic --synthetic-shape 3x8x8
    --synthetic-samples 640 --batch-size 32 --steps 20 --optimizer sgd --lr 0.05 --momentum 0.9
    --threads 1 --seed 3 --quiet)
ranks_agree "attention blocks" 2e-5 ab "" "${ab[@]}"

# Resume on another rank count: 10 steps on 4 ranks, then the rest on 2 ranks, equals the
# 20 steps of one process: the data order is a function of the seed and the global position.
mpi 4 "$dtnn" train "${base[@]}" --steps 10 --save "$tmp/half.safetensors" >/dev/null
mpi 2 "$dtnn" train "${common[@]}" --resume "$tmp/half.safetensors" --save "$tmp/resumed.safetensors" >/dev/null
check "4 ranks for 10 steps, then 2 ranks" 2e-5 "$tmp/resumed.safetensors"
[[ $failures -eq 0 ]] && echo "mpi_equivalence: all passed" || echo "mpi_equivalence: $failures failed"
[[ $failures -eq 0 ]]
