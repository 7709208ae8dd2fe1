#!/usr/bin/env bash
# Multi-host training over TCP: separate network hosts made with Linux network namespaces
# (scripts/netns.sh: dtnn-h0.., 10.99.0.0/24 on veth links), ranks started on them by Open
# MPI's rsh launcher (scripts/netns-agent.sh), traffic over the TCP BTL on that subnet only.
#  - 2 hosts x 1 rank trains lenet5 like 1 rank (20 SGD-momentum steps, within 2e-5: the
#    tolerance and its reasons are in mpi_equivalence.sh);
#  - 2 hosts x 2 ranks with --allreduce hierarchical sees 2 nodes and matches too.
# Skipped (77) with a message where it cannot run: not root, no `ip netns`, or an MPI other
# than Open MPI. Usage: multihost_tcp.sh DTNN CKDIFF MPIRUN TMPDIR
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
"$root/scripts/netns.sh" up 2 >/dev/null || { echo "FAIL: netns.sh up 2"; exit 1; }
read -r -a net <<<"$("$root/scripts/netns.sh" mpirun-args)"
failures=0

common=(--model lenet5 --dataset synthetic --synthetic-shape 1x28x28 --synthetic-samples 640
        --batch-size 32 --optimizer sgd --lr 0.05 --momentum 0.9 --threads 1 --seed 3 --quiet
        --steps 20)
"$dtnn" train "${common[@]}" --save "$tmp/ref.safetensors" >/dev/null || exit 1

run() { # name slots-per-host extra-args...
    local name=$1 slots=$2
    shift 2
    printf 'dtnn-h0 slots=%d\ndtnn-h1 slots=%d\n' "$slots" "$slots" >"$tmp/hosts"
    local out="$tmp/$name.out" rc attempt
    # Each start gets a session directory of its own: the namespace hosts share the hostname
    # and /tmp, so Open MPI's default one collides with whatever an earlier or killed run left
    # (CI runs this test twice, plain and under ASan). mpirun then crashed before any rank
    # started (exit 139, in hwloc's topology discovery) until the directory was new. Such a
    # start is retried; a run in which dtnn started is never retried.
    for attempt in 1 2 3; do
        timeout 300 "$root/scripts/netns.sh" exec dtnn-h0 "$mpirun" --hostfile "$tmp/hosts" -np $((2 * slots)) \
            --mca orte_tmpdir_base "$tmp/ompi-${name// /_}-$attempt" \
            "${net[@]}" "$dtnn" train "${common[@]}" --save "$tmp/$name.safetensors" "$@" \
            >"$out" 2>&1
        rc=$?
        [[ $rc -ge 128 && $rc -ne 124 ]] && ! grep -q "^dtnn: " "$out" || break
        echo "note: $name: mpirun crashed before any rank started (exit $rc); starting again"
    done
    local nodes
    nodes=$(grep -o "([0-9]* nodes" "$out" | grep -o "[0-9]*")
    if [[ $rc -ne 0 || $nodes != 2 ]]; then
        echo "FAIL: $name: exit $rc, nodes '$nodes':"
        sed 's/^/    /' "$out" | tail -15
        failures=$((failures + 1))
    elif diff=$("$ckdiff" "$tmp/ref.safetensors" "$tmp/$name.safetensors" 2e-5); then
        echo "ok: $name over TCP, 2 nodes: $diff"
    else
        echo "FAIL: $name: $diff"
        failures=$((failures + 1))
    fi
}
run "2 hosts x 1 rank" 1
run "2 hosts x 2 ranks hierarchical" 2 --allreduce hierarchical

[[ $failures -eq 0 ]] && echo "multihost_tcp: all passed" || echo "multihost_tcp: $failures failed"
[[ $failures -eq 0 ]]
