#!/usr/bin/env bash
# Progress is never lost:
#  - SIGTERM during training: the current step finishes, a checkpoint is written, the exit
#    status is 128 + 15 with a line saying how to resume, and resuming from that checkpoint
#    ends bit for bit where an uninterrupted run ends (mid-epoch: data order, dropout stream,
#    schedule and optimizer all continue);
#  - --checkpoint-every N and --keep K: step-numbered copies, only the K newest kept;
#  - SIGKILL at random moments, many times: the checkpoint on disk is always a complete one
#    that loads, and nothing else is left that --resume could take for it.
# Usage: cli_signals.sh DTNN TMPDIR
set -u
dtnn=$1
tmp=$2
rm -rf "$tmp" && mkdir -p "$tmp"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
common=(--model models/small_bn_dropout.model --dataset synthetic --synthetic-samples 320
        --batch-size 16 --optimizer sgd --lr 0.05 --momentum 0.9 --lr-schedule step:3:0.5
        --threads 1 --seed 11 --quiet)
steps=3000

# Waits until file $1 exists (up to 60 s); 0 when it does.
wait_for() { for _ in $(seq 600); do [[ -e $1 ]] && return 0; sleep 0.1; done; return 1; }

# 1. SIGTERM, then resume: the same final checkpoint as a run never interrupted.
"$dtnn" train "${common[@]}" --steps $steps --save "$tmp/full.safetensors" >/dev/null
"$dtnn" train "${common[@]}" --steps $steps --save "$tmp/stop.safetensors" --checkpoint-every 50 \
    >"$tmp/stop.out" 2>"$tmp/stop.err" &
pid=$!
wait_for "$tmp/stop.safetensors" && sleep 0.3
kill -TERM "$pid"
wait "$pid"
rc=$?
if [[ $rc -ne 143 ]] || ! grep -q "stopped by a signal after step [0-9]*.*resume with --resume" \
    "$tmp/stop.err"; then
    fail "SIGTERM: exit $rc, stderr: $(cat "$tmp/stop.err")"
else
    echo "ok: SIGTERM: exit 143: $(cat "$tmp/stop.err")"
fi
"$dtnn" train "${common[@]}" --steps $steps --resume "$tmp/stop.safetensors" \
    --save "$tmp/resumed.safetensors" >"$tmp/resume.out" 2>&1 || fail "resume: $(cat "$tmp/resume.out")"
if cmp -s "$tmp/full.safetensors" "$tmp/resumed.safetensors"; then
    echo "ok: stopped at $(grep -o 'step [0-9]*' "$tmp/stop.err" | head -n1), resumed: bitwise" \
         "the uninterrupted run"
else
    fail "the resumed run differs from the uninterrupted one"
fi

# 2. --checkpoint-every 7 --keep 2 over 2 epochs of 20 steps: saves at 7 14 20 21 28 35 40;
# the two newest copies remain, and the latest equals the final checkpoint.
"$dtnn" train "${common[@]}" --epochs 2 --save "$tmp/k.safetensors" --checkpoint-every 7 \
    --keep 2 >/dev/null || fail "--keep run"
kept=$(cd "$tmp" && ls k.step*.safetensors 2>/dev/null | tr '\n' ' ')
if [[ $kept == "k.step00000035.safetensors k.step00000040.safetensors " ]] &&
    cmp -s "$tmp/k.safetensors" "$tmp/k.step00000040.safetensors"; then
    echo "ok: --keep 2 left: $kept"
else
    fail "--checkpoint-every 7 --keep 2 left: [$kept]"
fi

# 3. SIGKILL at random moments while checkpoints are written every step.
RANDOM=12345
loads=0
for i in $(seq 1 20); do
    "$dtnn" train "${common[@]}" --steps $steps --save "$tmp/kill.safetensors" \
        --checkpoint-every 1 >/dev/null 2>&1 &
    pid=$!
    [[ $i -eq 1 ]] && wait_for "$tmp/kill.safetensors"
    sleep "0.$((RANDOM % 40 + 5))"
    kill -KILL "$pid"
    wait "$pid" 2>/dev/null
    if "$dtnn" eval --model models/small_bn_dropout.model --dataset synthetic \
        --load "$tmp/kill.safetensors" --threads 1 >/dev/null 2>"$tmp/eval.err"; then
        loads=$((loads + 1))
    else
        fail "after SIGKILL $i the checkpoint does not load: $(cat "$tmp/eval.err")"
    fi
done
others=$(cd "$tmp" && ls | grep '^kill' | grep -v '^kill\.safetensors$' | grep -v '\.tmp\.[0-9]*$')
[[ -z $others ]] || fail "after SIGKILL: unexpected files: $others"
"$dtnn" train "${common[@]}" --steps $steps --resume "$tmp/kill.safetensors" --save "$tmp/kill2.safetensors" \
    >/dev/null 2>"$tmp/r.err" || fail "resume after SIGKILL: $(cat "$tmp/r.err")"
echo "ok: SIGKILL 20 times: the checkpoint loaded $loads times; resume works"

[[ $failures -eq 0 ]] && echo "cli_signals: all passed" || echo "cli_signals: $failures failed"
[[ $failures -eq 0 ]]
