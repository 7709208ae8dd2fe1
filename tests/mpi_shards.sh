#!/usr/bin/env bash
# Sharded datasets under MPI: each rank reads only its own shards. One epoch on 1, 2 and 4
# ranks of 16 shards; every rank's training reads (the loader's count of header, class and
# image bytes) are at most 1.5 / N of one process's (its own 16 / N shards, give or take one
# shard's resampling and headers), and together the ranks read about what one process reads.
# A resume on 2 ranks after epoch 1 is bitwise the uninterrupted 2-rank run.
# Usage: mpi_shards.sh DTNN CKDIFF MPIRUN TMPDIR
set -u
dtnn=$1
mpirun=$3
tmp=$4
rm -rf "$tmp" && mkdir -p "$tmp"
mk="$(dirname "$dtnn")/make-imagefolder"
if [[ ! -x $mk ]]; then
    echo "skip: no make-imagefolder (a build without image support)"
    exit 77
fi
"$mk" "$tmp/if" --classes 4 --train 32 --val 4 --width 160 --height 128 >/dev/null || exit 1
# 128 training images in 16 shards of 8 (each image with its three 512-byte headers)
mb=$(find "$tmp/if/train" -type f -printf '%s\n' |
     awk '{ b += int(($1 + 511) / 512) * 512 + 1536 } END { printf "%.6f", b * 1.02 / 16 / 1048576 }')
"$dtnn" shard --data-dir "$tmp/if" --output "$tmp/s" --shard-mb "$mb" >/dev/null || exit 1
nshards=$(ls "$tmp/s"/train-*.tar | wc -l)
common=(--model lenet5 --dataset shards --data-dir "$tmp/s" --image-size 28 --batch-size 16
        --optimizer sgd --lr 0.05 --threads 1 --seed 3 --loader-threads 1 --quiet)
failures=0
reads() { # the training MiB each rank reported, one per line
    sed -n 's/.*rank \([0-9]*\) of [0-9]* read .* (training \([0-9.]*\)).*/\1 \2/p' "$1" | sort -n
}
"$dtnn" train "${common[@]}" --epochs 1 >/dev/null 2>"$tmp/np1.err" || { cat "$tmp/np1.err"; exit 1; }
one=$(reads "$tmp/np1.err" | awk '{ print $2 }')
for np in 2 4; do
    "$mpirun" -np $np "$dtnn" train "${common[@]}" --epochs 1 >/dev/null 2>"$tmp/np$np.err" ||
        { cat "$tmp/np$np.err"; exit 1; }
    per=$(reads "$tmp/np$np.err")
    verdict=$(echo "$per" | awk -v one="$one" -v np="$np" '
        { n++; sum += $2; if ($2 > 1.5 * one / np) over++ }
        END { ok = n == np && !over && sum > 0.8 * one && sum < 1.5 * one
              printf "%s %.2f", ok ? "ok" : "FAIL", sum }')
    line=$(echo "$per" | awk '{ printf "%s rank %s %.2f MiB", (NR > 1 ? "," : ""), $1, $2 }')
    if [[ $verdict == ok* ]]; then
        echo "ok: $np ranks of $nshards shards:$line (1 process: $one MiB; together ${verdict#ok })"
    else
        echo "FAIL: $np ranks of $nshards shards:$line (1 process: $one MiB)"
        failures=$((failures + 1))
    fi
done
resume=("${common[@]}" --shuffle-buffer 20)
"$mpirun" -np 2 "$dtnn" train "${resume[@]}" --epochs 2 --save "$tmp/full.safetensors" \
    >"$tmp/full.out" 2>&1 || { cat "$tmp/full.out"; exit 1; }
"$mpirun" -np 2 "$dtnn" train "${resume[@]}" --epochs 1 --save "$tmp/half.safetensors" \
    >/dev/null 2>&1 || exit 1
"$mpirun" -np 2 "$dtnn" train "${resume[@]}" --epochs 2 --resume "$tmp/half.safetensors" \
    --save "$tmp/resumed.safetensors" >/dev/null 2>&1 || exit 1
if cmp -s "$tmp/full.safetensors" "$tmp/resumed.safetensors"; then
    echo "ok: 2 ranks on shards resume bitwise"
else
    echo "FAIL: 2 ranks on shards: the resumed run differs"
    failures=$((failures + 1))
fi
[[ $failures -eq 0 ]]
