#!/usr/bin/env bash
# --stall-timeout: a rank that stops answering (here: SIGSTOP, as a hung file system or a
# swapping node would) makes the others report, after the timeout, which rank never reached the
# collective, and the job ends non-zero instead of hanging. 2 ranks (rank 1 stopped) and 4
# ranks (rank 2 stopped; the message must name rank 2 and no other, and say what each other
# rank waits in: collective number, purpose, step). `timeout` bounds every run
# so a hang fails the test. Also signals: SIGTERM delivered to one rank only (a scheduler
# signals them one by one) stops every rank after the same step with one checkpoint, and
# resuming on 2 ranks ends bit for bit where an uninterrupted 2-rank run ends.
# Usage: mpi_stall.sh DTNN CKDIFF MPIRUN TMPDIR, where MPIRUN is the build's launcher
# (build/tests/mpirun, written by tests/CMakeLists.txt) that holds the vendor's options.
set -u
dtnn=$1
mpirun=$3
tmp=$4
rm -rf "$tmp" && mkdir -p "$tmp"
failures=0
stopped=()
cleanup() {
    for p in "${stopped[@]}"; do kill -CONT "$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null; done
}
trap cleanup EXIT

# The pid of the dtnn process of MPI rank $2 among those whose command line contains $1.
rank_pid() {
    local p
    for p in $(pgrep -f -- "$1"); do
        [[ $(cat "/proc/$p/comm" 2>/dev/null) == dtnn ]] || continue
        if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null |
            grep -qE "^(OMPI_COMM_WORLD_RANK|PMI_RANK|PMIX_RANK)=$2\$"; then
            echo "$p"
            return
        fi
    done
}

stall_case() { # ranks rank_to_stop
    local ranks=$1 victim=$2 log="$tmp/stall-$1.jsonl" out="$tmp/stall-$1.out"
    timeout 180 "$mpirun" -np "$ranks" "$dtnn" train \
        --model lenet5 --dataset synthetic --synthetic-shape 1x28x28 --synthetic-samples 512 \
        --batch-size 64 --epochs 1000000 --threads 1 --quiet --stall-timeout 4 --log "$log" \
        >"$out" 2>&1 &
    local job=$!
    # Training has passed start-up once the first epoch is logged.
    for _ in $(seq 600); do [[ -s $log ]] && break; sleep 0.1; done
    local pid
    pid=$(rank_pid "$log" "$victim")
    if [[ -z $pid ]]; then
        echo "FAIL: $ranks ranks: rank $victim never started or was not found"
        kill "$job" 2>/dev/null
        failures=$((failures + 1))
        return
    fi
    kill -STOP "$pid"
    stopped+=("$pid")
    local t0=$SECONDS
    wait "$job"
    local rc=$? dt=$((SECONDS - t0))
    local line
    line=$(grep -m1 "stalled" "$out")
    # The ranks any report calls silent: exactly the stopped one (the others may be reported
    # as held up in an earlier collective, which is what they are).
    local others
    others=$(grep -o "rank(s) [0-9 .]* did not answer" "$out" | grep -oE "[0-9]+" | sort -u |
             tr '\n' ' ')
    # With 4 ranks, two others answer: the report says what they wait in (the collective's
    # number, purpose and step), not only who is missing.
    local named=1
    if [[ $ranks -gt 2 ]]; then
        grep -qE "rank\(s\) [0-9 ]+ (wait in collective #[0-9]+ \([a-z].*: MPI_[A-Za-z]+\) at step [0-9]+|are computing at step [0-9]+)" "$out" ||
            named=0
    fi
    if [[ $rc -ne 0 && $rc -ne 124 && -n $line && $others == "$victim " && $named == 1 ]]; then
        echo "ok: $ranks ranks, rank $victim stopped: exit $rc ${dt}s later: $line"
    else
        echo "FAIL: $ranks ranks, rank $victim stopped: exit $rc after ${dt}s, named [$others]:"
        sed 's/^/    /' "$out" | head -20
        failures=$((failures + 1))
    fi
}

stall_case 2 1
stall_case 4 2

common=(train --model lenet5 --dataset synthetic --synthetic-shape 1x28x28 --synthetic-samples 512
        --batch-size 64 --steps 300 --threads 1 --quiet --seed 5 --optimizer sgd --momentum 0.9)
timeout 300 "$mpirun" -np 2 "$dtnn" "${common[@]}" --save "$tmp/full.safetensors" >/dev/null 2>&1 ||
    { echo "FAIL: uninterrupted 2-rank run"; failures=$((failures + 1)); }
timeout 300 "$mpirun" -np 2 "$dtnn" "${common[@]}" --save "$tmp/sig.safetensors" \
    --log "$tmp/sig.jsonl" >"$tmp/sig.out" 2>&1 &
job=$!
for _ in $(seq 600); do [[ -s $tmp/sig.jsonl ]] && break; sleep 0.1; done
pid=$(rank_pid "$tmp/sig.jsonl" 1)
[[ -n $pid ]] && kill -TERM "$pid"
wait "$job"
rc=$?
line=$(grep -m1 "stopped by a signal after step" "$tmp/sig.out")
if [[ $rc -ne 0 && $rc -ne 124 && -n $line && -e $tmp/sig.safetensors ]]; then
    echo "ok: SIGTERM to rank 1: exit $rc: $line"
else
    echo "FAIL: SIGTERM to rank 1: exit $rc:"
    sed 's/^/    /' "$tmp/sig.out" | head -20
    failures=$((failures + 1))
fi
timeout 300 "$mpirun" -np 2 "$dtnn" "${common[@]}" --resume "$tmp/sig.safetensors" \
    --save "$tmp/resumed.safetensors" >"$tmp/resume.out" 2>&1
if cmp -s "$tmp/full.safetensors" "$tmp/resumed.safetensors"; then
    echo "ok: resumed on 2 ranks: bitwise the uninterrupted run"
else
    echo "FAIL: the resumed run differs from the uninterrupted one:"
    sed 's/^/    /' "$tmp/resume.out" | head -10
    failures=$((failures + 1))
fi

[[ $failures -eq 0 ]] && echo "mpi_stall: all passed" || echo "mpi_stall: $failures failed"
[[ $failures -eq 0 ]]
