#!/usr/bin/env bash
# --bucket-mb auto against fixed bucket sizes on 2 network-namespace hosts x 1 rank over TCP
# (scripts/netns.sh, launched as tests/multihost_tcp.sh does): `dtnn train` images/s of the
# second epoch (the first holds the warm-up) for every size, the sizes alternating within each
# repeat so that a slow spell of a shared machine hits all of them alike. Prints one line per
# run, then a table: best and median images/s per size, and what auto chose. Every run's log
# stays in the work folder. Needs root, iproute2 and Open MPI; it times, so run it on a quiet
# machine. The results go to docs/perf-notes.md and docs/scaling.md, not into code.
#   bench/bucket_auto.sh [--build build] [--rate 1gbit|none] [--model vgg16_cifar]
#       [--shape 3x32x32] [--batch 64] [--steps 10] [--repeats 3] [--threads 1]
#       [--sizes "1 4 16 64 auto"] [--work DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build rate=1gbit model=vgg16_cifar shape=3x32x32 batch=64 steps=10 repeats=3
threads=1 sizes="1 4 16 64 auto" work=
while [[ $# -gt 0 ]]; do
    case $1 in
    --build) build=$(cd "$2" && pwd) ;;
    --rate) rate=$2 ;;
    --model) model=$2 ;;
    --shape) shape=$2 ;;
    --batch) batch=$2 ;;
    --steps) steps=$2 ;;
    --repeats) repeats=$2 ;;
    --threads) threads=$2 ;;
    --sizes) sizes=$2 ;;
    --work) work=$2 ;;
    *) sed -n '2,12p' "$0" >&2; exit 2 ;;
    esac
    shift 2
done
dtnn=$build/dtnn
mpirun=$build/tests/mpirun
[[ -x $dtnn && -x $mpirun ]] || { echo "bucket_auto.sh: build $build first" >&2; exit 2; }
[[ $(id -u) -eq 0 ]] || { echo "bucket_auto.sh: network namespaces need root" >&2; exit 2; }
work=${work:-$(mktemp -d /tmp/dtnn-bucket-auto.XXXXXX)}
mkdir -p "$work"
trap '"$root/scripts/netns.sh" down' EXIT
[[ $rate == none ]] && rate=
"$root/scripts/netns.sh" up 2 $rate
read -r -a net <<<"$("$root/scripts/netns.sh" mpirun-args)"
printf 'dtnn-h0 slots=1\ndtnn-h1 slots=1\n' >"$work/hosts"
echo "model $model ($shape), global batch $batch, $steps steps per epoch, 2 hosts x 1 rank," \
     "link ${rate:-unlimited}, $threads thread(s) per rank, $repeats repeat(s); logs in $work"

results=$work/results.txt
: >"$results"
for ((r = 1; r <= repeats; r++)); do
    for size in $sizes; do
        name=r$r-$size
        # A session directory per run: the namespace hosts share /tmp (see multihost_tcp.sh).
        if ! "$root/scripts/netns.sh" exec dtnn-h0 "$mpirun" --hostfile "$work/hosts" -np 2 \
            --mca orte_tmpdir_base "$work/ompi-$name" "${net[@]}" \
            "$dtnn" train --model "$model" --dataset synthetic --synthetic-shape "$shape" \
            --synthetic-samples $((batch * steps)) --batch-size "$batch" --epochs 2 \
            --threads "$threads" --quiet --bucket-mb "$size" --log "$work/$name.jsonl" \
            >"$work/$name.out" 2>&1; then
            echo "run $name failed:" >&2
            tail -5 "$work/$name.out" >&2
            exit 1
        fi
        ips=$(awk -F'"images_per_sec": ' '/"epoch": 2,/ { split($2, a, ","); print a[1] }' \
              "$work/$name.jsonl")
        chosen=$(sed -n 's/^dtnn: buckets: //p' "$work/$name.out" | head -n1)
        echo "$size $ips" >>"$results"
        printf '%-6s repeat %d: %8s images/s   (%s)\n' "$size" "$r" "$ips" "$chosen"
    done
done

echo
printf '%-8s %12s %12s %s\n' "bucket" "best img/s" "median img/s" "runs"
for size in $sizes; do
    # Sorted first: plain awk (mawk on Debian) has no sort of its own.
    awk -v s="$size" '$1 == s { print $2 }' "$results" | sort -g |
        awk -v s="$size" '{ v[++n] = $1; runs = runs " " $1 }
            END { m = n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
                  printf "%-8s %12.1f %12.1f%s\n", s, v[n], m, runs }'
done
sed -n 's/^dtnn: buckets: //p' "$work"/r*-auto.out 2>/dev/null | sort | uniq -c |
    awk '{ n = $1; sub(/^ *[0-9]+ /, ""); print "auto chose, in " n " run(s): " $0 }'
