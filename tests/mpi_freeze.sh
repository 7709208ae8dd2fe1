#!/usr/bin/env bash
# --freeze / --freeze-bn (fine-tuning): frozen parameters stay bitwise their starting values
# over training, the optimizer keeps no state for them, and the rest trains:
#  - resnet20 from a checkpoint with its stem and first stage frozen: frozen tensors bitwise
#    unchanged, every other parameter moved, no optimizer state saved for frozen ones; with
#    --freeze-bn the frozen batch norms' running statistics are unchanged too;
#  - 2 ranks (--sync-bn) train like 1 over a step (mpi_equivalence's ResNet-20 check): frozen
#    tensors are not all-reduced;
#  - a run stopped at step 2 and resumed with the same --freeze ends bitwise where the
#    uninterrupted run ends; resuming without it is refused with a message;
#  - PyTorch with requires_grad=False on the same tensors (tools/torch_freeze.py, where Debian's
#    python3-torch is installed): lenet5 and resnet20, batch norms in training and eval mode;
#  - bad use: a pattern matching no parameter, --freeze-bn without --freeze.
# Usage: mpi_freeze.sh DTNN CKDIFF MPIRUN TMPDIR
set -u
dtnn=$1
ckdiff=$2
mpirun=$3
tmp=$4
root=$(cd "$(dirname "$0")/.." && pwd)
rm -rf "$tmp" && mkdir -p "$tmp"
py=$(command -v /usr/bin/python3 python3 | head -n1)
[[ -n $py ]] || { echo "skipped: python3 is not installed"; exit 77; }
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

pats="conv1.*,bn1.*,layer1.*"
fr=(--freeze 'conv1.*' --freeze 'bn1.*' --freeze 'layer1.*')
data=(--model resnet20 --dataset synthetic --synthetic-shape 3x16x16 --synthetic-samples 128
      --batch-size 32 --threads 1
      --seed 7 --quiet --optimizer sgd --momentum 0.9)
"$dtnn" train "${data[@]}" --steps 1 --lr 1e-30 --save "$tmp/init.safetensors" >/dev/null ||
    fail "making the starting checkpoint"

for bn in train eval; do
    extra=()
    [[ $bn == eval ]] && extra=(--freeze-bn)
    out="$tmp/one-$bn.safetensors"
    if ! "$dtnn" train "${data[@]}" --init "$tmp/init.safetensors" "${fr[@]}" "${extra[@]}" \
        --lr 0.05 --steps 4 --save "$out" >"$tmp/one-$bn.out" 2>&1; then
        fail "1 rank, batch norm $bn: $(tail -2 "$tmp/one-$bn.out")"
        continue
    fi
    if msg=$("$py" "$root/tools/frozen_check.py" "$tmp/init.safetensors" "$out" "$pats" ${extra[@]:+eval}); then
        echo "ok: 1 rank, frozen batch norms in $bn mode: $msg"
    else
        fail "1 rank, batch norm $bn: $msg"
    fi
    # One step, with --sync-bn where batch norms train: ResNet-20's trajectory is chaotic
    # past the first step (mpi_equivalence.sh says why), and a step is where every frozen
    # and trained part has run once.
    "$dtnn" train "${data[@]}" --init "$tmp/init.safetensors" "${fr[@]}" "${extra[@]}" \
        --lr 0.05 --steps 1 --save "$tmp/one1-$bn.safetensors" >/dev/null 2>&1
    unset diff
    if timeout 300 "$mpirun" -np 2 "$dtnn" train "${data[@]}" --init "$tmp/init.safetensors" \
        "${fr[@]}" "${extra[@]}" --sync-bn --lr 0.05 --steps 1 --save "$tmp/two-$bn.safetensors" \
        >"$tmp/two-$bn.out" 2>&1 &&
        diff=$("$ckdiff" "$tmp/one1-$bn.safetensors" "$tmp/two-$bn.safetensors" 1e-5); then
        echo "ok: 2 ranks (--sync-bn) like 1 after a step, batch norm $bn: $diff"
    else
        fail "2 ranks, batch norm $bn: ${diff:-$(tail -3 "$tmp/two-$bn.out")}"
    fi
done

# Resume keeps what trains.
"$dtnn" train "${data[@]}" --init "$tmp/init.safetensors" "${fr[@]}" --lr 0.05 --steps 2 \
    --save "$tmp/half.safetensors" >/dev/null 2>&1 || fail "the first half"
if "$dtnn" train "${data[@]}" "${fr[@]}" --lr 0.05 --steps 4 --resume "$tmp/half.safetensors" \
    --save "$tmp/resumed.safetensors" >"$tmp/resumed.out" 2>&1 &&
    diff=$("$ckdiff" "$tmp/one-train.safetensors" "$tmp/resumed.safetensors" 0); then
    echo "ok: resumed with the same --freeze ends bitwise where the whole run does: $diff"
else
    fail "resume: ${diff:-$(tail -2 "$tmp/resumed.out")}"
fi
"$dtnn" train "${data[@]}" --lr 0.05 --steps 4 --resume "$tmp/half.safetensors" >"$tmp/nofreeze.out" 2>&1
rc=$?
if [[ $rc -eq 1 ]] && grep -q "resume with the same --freeze" "$tmp/nofreeze.out"; then
    echo "ok: resume without --freeze refused: $(grep -m1 "freeze" "$tmp/nofreeze.out")"
else
    fail "resume without --freeze: exit $rc: $(tail -2 "$tmp/nofreeze.out")"
fi

# Bad use.
"$dtnn" train "${data[@]}" --lr 0.05 --steps 1 --freeze 'layer9.*' >"$tmp/bad.out" 2>&1
rc=$?
if [[ $rc -eq 1 ]] && grep -q "matches no parameter" "$tmp/bad.out"; then
    echo "ok: $(tail -1 "$tmp/bad.out")"
else
    fail "--freeze 'layer9.*': exit $rc: $(tail -1 "$tmp/bad.out")"
fi
"$dtnn" train "${data[@]}" --lr 0.05 --steps 1 --freeze-bn >"$tmp/bad2.out" 2>&1
rc=$?
if [[ $rc -eq 2 ]] && grep -q "needs --freeze" "$tmp/bad2.out"; then
    echo "ok: $(head -1 "$tmp/bad2.out")"
else
    fail "--freeze-bn alone: exit $rc: $(tail -1 "$tmp/bad2.out")"
fi

# PyTorch, same tensors with requires_grad=False. Small images (8x8, as the optimizer
# references of tools/gen_reference.py): the data is chosen to keep every ReLU input away from
# its kink (tools/torch_freeze.py data).
if ! /usr/bin/python3 -c "import torch, numpy" 2>/dev/null; then
    echo "note: Debian's python3-torch is not installed: the PyTorch comparison is skipped"
else
    for spec in "lenet5 1,28,28 conv1.*,conv2.* 0" "resnet20 3,8,8 conv1.*,bn1.*,layer1.* 0" \
        "resnet20 3,8,8 conv1.*,bn1.*,layer1.* 1"; do
        read -r model shape patterns fbn <<<"$spec"
        d="$tmp/npy-$model-$fbn"
        mkdir -p "$d"
        set_=(8 0.05 0.9 "$patterns" "$fbn")
        args=(--model "$model" --classes 10 --batch-size 8 --threads 1 --quiet --optimizer sgd
              --momentum 0.9)
        frz=()
        IFS=, read -r -a list <<<"$patterns"
        for p in "${list[@]}"; do frz+=(--freeze "$p"); done
        [[ $fbn == 1 ]] && frz+=(--freeze-bn)
        unset msg
        if "$dtnn" train "${args[@]}" --dataset synthetic --synthetic-shape "${shape//,/x}" \
            --synthetic-samples 16 --lr 1e-30 --steps 1 --save "$d/init.safetensors" >/dev/null &&
            /usr/bin/python3 "$root/tools/torch_freeze.py" data "$model" "$d/init.safetensors" "$d" \
                "$shape" 16 "${set_[@]}" >"$d/data.out" &&
            "$dtnn" train "${args[@]}" --dataset npy --data-dir "$d" --no-shuffle --epochs 1 \
                --lr 0.05 --init "$d/init.safetensors" "${frz[@]}" --save "$d/dtnn.safetensors" \
                >"$d/out" 2>&1 &&
            msg=$(/usr/bin/python3 "$root/tools/torch_freeze.py" compare "$model" \
                  "$d/init.safetensors" "$d" "${set_[@]}" "$d/dtnn.safetensors"); then
            echo "ok: $msg"
        else
            fail "PyTorch $model --freeze $patterns (freeze-bn $fbn): ${msg:-$(tail -2 "$d/data.out" "$d/out" 2>/dev/null)}"
        fi
    done
fi

[[ $failures -eq 0 ]] && echo "mpi_freeze: all passed" || echo "mpi_freeze: $failures failed"
[[ $failures -eq 0 ]]
