#!/usr/bin/env bash
# Restart after a lost node (dtnn launch), on 3 network-namespace hosts x 1 rank
# (scripts/netns.sh, as multihost_tcp.sh):
#  - lenet5 trains under `dtnn launch` with a checkpoint every 10 steps; once the copy of step
#    20 exists, every process of host dtnn-h2 is killed (SIGKILL) and its namespace deleted, so
#    it is gone as a lost node is and the probe (the rsh agent, netns-agent.sh) fails. The run
#    must finish on 2 ranks, with one restart line in its JSONL log (reason, lost host, ranks,
#    resume step), every log line one JSON object, and final weights bitwise equal (ckdiff
#    tolerance 0) to an uninterrupted run resumed from that same checkpoint on the same 2
#    hosts: both sides then run 2 ranks with the same shards and the same reduction order
#    from the same complete state, so no rounding difference is allowed in;
#  - a non-finite loss (--lr 1e30) and a missing data folder are permanent: exit 1 after 0
#    restarts, with the rank's message.
# Skipped (77) with a message where it cannot run: not root, no `ip netns`, or an MPI other
# than Open MPI. Usage: restart_lost_node.sh DTNN CKDIFF MPIRUN TMPDIR
set -u
dtnn=$1
ckdiff=$2
mpirun=$3
tmp=$4
root=$(cd "$(dirname "$0")/.." && pwd)
rm -rf "$tmp" && mkdir -p "$tmp"
skip() { echo "skipped: $*"; exit 77; }
"$mpirun" --version 2>&1 | grep -qiE "open ?mpi|openrte" || skip "the rsh agent set-up is Open MPI's"
why=$("$root/scripts/netns.sh" check) || skip "$why"
trap '"$root/scripts/netns.sh" down' EXIT
"$root/scripts/netns.sh" up 3 >/dev/null || { echo "FAIL: netns.sh up 3"; exit 1; }
net=$("$root/scripts/netns.sh" mpirun-args)
read -r -a net_words <<<"$net"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# 48 divides by 3 ranks and by 2: the same global batch before and after the loss.
common=(--model lenet5 --synthetic-shape 1x28x28 --synthetic-samples 960 --batch-size 48
        --optimizer sgd --momentum 0.9 --threads 1 --seed 3 --quiet --steps 300)
good=(--dataset synthetic --lr 0.05)
# The probe is the default: the rsh agent named in the mpirun arguments. Each start gets its
# own Open MPI session folder ({attempt}), for the reason multihost_tcp.sh gives.
launch() { # name hosts train-args...
    local name=$1 hosts=$2
    shift 2
    timeout 300 "$root/scripts/netns.sh" exec dtnn-h0 "$dtnn" launch --hosts "$hosts" \
        --mpirun "$mpirun" --mpirun-args "$net" \
        --mpirun-args "--mca orte_tmpdir_base $tmp/ompi-$name-{attempt}" \
        --probe-timeout 10 --max-restarts 3 -- train "${common[@]}" "$@"
}

# ---- a host lost mid-run ----
run=$tmp/run
launch lost dtnn-h0,dtnn-h1,dtnn-h2 "${good[@]}" --checkpoint-every 10 --keep 1000 --save "$run.safetensors" \
    --log "$run.jsonl" >"$tmp/lost.out" 2>&1 &
job=$!
for ((i = 0; i < 1200; i++)); do
    [[ -e $run.step00000020.safetensors ]] && break
    kill -0 $job 2>/dev/null || break
    sleep 0.1
done
if [[ -e $run.step00000020.safetensors ]]; then
    pids=$(ip netns pids dtnn-h2)
    # shellcheck disable=SC2086
    [[ -n $pids ]] && kill -9 $pids
    ip netns del dtnn-h2
    echo "killed host dtnn-h2 (pids $(echo $pids)) after the checkpoint of step 20"
else
    fail "no checkpoint of step 20 appeared (launch still running: $(kill -0 $job 2>/dev/null && echo yes || echo no))"
fi
wait $job
rc=$?
restart=$(grep '"event": "restart"' "$run.jsonl" 2>/dev/null | tail -n1)
step=$(grep -o '"resume_step": [0-9]*' <<<"$restart" | grep -o '[0-9]*$')
if [[ $rc -ne 0 ]]; then
    fail "the run with a lost host: exit $rc:"
    sed 's/^/    /' "$tmp/lost.out" | tail -25
elif [[ -z $restart || $restart != *'"lost_hosts": ["dtnn-h2"]'* || $restart != *'"ranks": 2'* ||
        $restart != *'"reason": "host dtnn-h2 lost'* || -z $step ]]; then
    fail "no restart line with the lost host, 2 ranks and a resume step in the log:"
    sed 's/^/    /' "$run.jsonl"
    sed 's/^/    /' "$tmp/lost.out" | tail -25
else
    echo "ok: the run finished on 2 ranks after losing dtnn-h2; log: $restart"
fi
if command -v python3 >/dev/null && [[ -e $run.jsonl ]]; then
    python3 -c 'import json, sys
for n, line in enumerate(open(sys.argv[1]), 1):
    v = json.loads(line)
    assert isinstance(v, dict), "line %d is not an object" % n' "$run.jsonl" ||
        fail "a line of the log is not one JSON object"
fi

# The reference: the same training resumed from the checkpoint the restart took, uninterrupted,
# on the 2 hosts left (started as multihost_tcp.sh starts it, retrying a start that crashed
# before any rank ran).
ckpt=$(printf '%s.step%08d.safetensors' "$run" "${step:-0}")
if [[ -n $step && -e $ckpt ]]; then
    printf 'dtnn-h0 slots=1\ndtnn-h1 slots=1\n' >"$tmp/hosts2"
    for attempt in 1 2 3; do
        timeout 300 "$root/scripts/netns.sh" exec dtnn-h0 "$mpirun" --hostfile "$tmp/hosts2" -np 2 \
            --mca orte_tmpdir_base "$tmp/ompi-ref-$attempt" "${net_words[@]}" "$dtnn" train \
            "${common[@]}" "${good[@]}" --resume "$ckpt" --save "$tmp/ref.safetensors" >"$tmp/ref.out" 2>&1
        rc=$?
        [[ $rc -ge 128 && $rc -ne 124 ]] && ! grep -q "^dtnn: " "$tmp/ref.out" || break
        echo "note: reference: mpirun crashed before any rank started (exit $rc); starting again"
    done
    if [[ $rc -ne 0 ]]; then
        fail "reference run resumed from step $step: exit $rc:"
        sed 's/^/    /' "$tmp/ref.out" | tail -15
    elif diff=$("$ckdiff" "$tmp/ref.safetensors" "$run.safetensors" 0); then
        echo "ok: bitwise equal to an uninterrupted 2-rank run resumed at step $step: $diff"
    else
        fail "final weights differ from the uninterrupted run resumed at step $step: $diff"
    fi
elif [[ -n $step ]]; then
    fail "the checkpoint the restart took, $ckpt, is not there"
fi

# ---- permanent errors are not restarted ----
"$root/scripts/netns.sh" up 2 >/dev/null || { echo "FAIL: netns.sh up 2"; exit 1; }
permanent() { # name pattern train-args...
    local name=$1 pattern=$2
    shift 2
    local t0=$SECONDS
    launch "$name" dtnn-h0,dtnn-h1 --log "$tmp/$name.jsonl" "$@" >"$tmp/$name.out" 2>&1
    local rc=$? dt=$((SECONDS - t0))
    if [[ $rc -eq 1 ]] && grep -qE -e "$pattern" "$tmp/$name.out" &&
        grep -q "a permanent error, not restarting (0 restarts before)" "$tmp/$name.out" &&
        ! grep -qs '"event": "restart"' "$tmp/$name.jsonl" &&
        [[ $(grep -c "dtnn launch: start " "$tmp/$name.out") -eq 1 ]]; then
        echo "ok: $name: exit 1 after ${dt}s, not restarted: $(grep -E -e "$pattern" "$tmp/$name.out" | head -n1)"
    else
        fail "$name: exit $rc after ${dt}s (want 1, one start, no restart line); output:"
        sed 's/^/    /' "$tmp/$name.out" | tail -20
    fi
}
permanent nonfinite "non-finite values at step [0-9]+" --dataset synthetic --lr 1e30
permanent missing-data "missing-dir.*(cannot open|No such file)" --lr 0.05 --dataset npy \
    --data-dir "$tmp/missing-dir"

[[ $failures -eq 0 ]] && echo "restart_lost_node: all passed" || echo "restart_lost_node: $failures failed"
[[ $failures -eq 0 ]]
