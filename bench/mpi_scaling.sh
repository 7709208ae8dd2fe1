#!/usr/bin/env bash
# Weak scaling of data-parallel training on one machine: images/s of a model at
# 1 rank x 1 thread, 1 rank x 2 threads and 2 ranks x 1 thread (batch 64 per rank, synthetic
# 3x32x32 data), with the overlap and blocking all-reduce, and the share of step time spent
# waiting for gradients after backward (exposed communication).
#   bench/mpi_scaling.sh [BUILD_DIR] [STEPS] [MODELS...]     e.g. bench/mpi_scaling.sh build 30
# Efficiency = 2-rank images/s / (2 x 1-rank images/s). Run it on a quiet machine: it times.
set -eu
build=${1:-build}
steps=${2:-30}
shift $(( $# > 2 ? 2 : $# ))
models=("$@")
[[ ${#models[@]} -gt 0 ]] || models=(cifarcnn resnet20)
dtnn=$build/dtnn
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

run() { # label ranks threads extra...  -> prints "images/s comm_share"
    local ranks=$2 threads=$3
    shift 3
    local batch=$((64 * ranks))
    local args=(train --model "$model" --dataset synthetic --synthetic-samples $((batch * steps))
                --batch-size $batch --steps "$steps" --optimizer sgd --lr 0.01 --momentum 0.9
                --threads "$threads" --quiet --log "$tmp/log.jsonl" "$@")
    if [[ $ranks -eq 1 ]]; then
        "$dtnn" "${args[@]}" >/dev/null
    else
        mpirun -np "$ranks" --oversubscribe --bind-to none "$dtnn" "${args[@]}" >/dev/null
    fi
    python3 - "$tmp/log.jsonl" <<'P'
import json, sys
d = json.loads(open(sys.argv[1]).read().splitlines()[-1])
print(f"{d['images_per_sec']:.1f} {100.0 * d['comm_wait_seconds'] / d['seconds']:.1f}")
P
}

printf "%-10s %-24s %10s %12s\n" model config images/s exposed-comm
for model in "${models[@]}"; do
    read -r one _ < <(run "1x1" 1 1)
    printf "%-10s %-24s %10s %11s%%\n" "$model" "1 rank x 1 thread" "$one" "-"
    read -r two_threads _ < <(run "1x2" 1 2)
    printf "%-10s %-24s %10s %11s%%\n" "$model" "1 rank x 2 threads" "$two_threads" "-"
    for mode in overlap blocking; do
        read -r ips comm < <(run "2x1" 2 1 --allreduce $mode)
        eff=$(python3 -c "print(f'{100 * $ips / (2 * $one):.1f}')")
        printf "%-10s %-24s %10s %11s%%   efficiency %s%%\n" "$model" "2 ranks x 1 ($mode)" \
            "$ips" "$comm" "$eff"
    done
done
