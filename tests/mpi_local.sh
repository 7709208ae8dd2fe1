#!/usr/bin/env bash
# Local parallelism: kernel threads are fitted to the cores given to each rank and never
# oversubscribe them; `dtnn bench` runs data parallel under mpirun and measures the all-reduce;
# `dtnn bench --sweep` runs every ranks x threads combination that fits and prints the table.
# Usage: mpi_local.sh DTNN CKDIFF MPIRUN TMPDIR, where MPIRUN is the build's launcher
# (build/tests/mpirun, written by tests/CMakeLists.txt) that holds the vendor's options.
set -u
dtnn=$1
mpirun=$3
tmp=$4
rm -rf "$tmp" && mkdir -p "$tmp"
launch=("$mpirun")
cores=$(nproc)
failures=0
check() { # name command-status grep-pattern file
    if [[ $2 -eq 0 ]] && grep -qE -e "$3" "$4"; then
        echo "ok: $1"
    else
        echo "FAIL: $1 (status $2); output:"
        sed 's/^/    /' "$4" | head -20
        failures=$((failures + 1))
    fi
}
bench=(bench --model lenet5 --steps 2 --warmup 1 --batch-size 16)

# More threads than the cores given: refused with a usage error, one process or several.
"$dtnn" "${bench[@]}" --threads $((cores + 1)) >"$tmp/out" 2>&1
[[ $? -eq 2 ]]; check "--threads $((cores + 1)) on $cores cores is refused" $? "oversubscribe" "$tmp/out"
if [[ $cores -ge 2 ]]; then
    timeout 120 "${launch[@]}" -np 2 "$dtnn" "${bench[@]}" --threads "$cores" >"$tmp/out" 2>&1
    [[ $? -ne 0 ]]; check "2 ranks x $cores threads on $cores cores is refused" $? \
        "oversubscribe.*shared with the other ranks on this node" "$tmp/out"
fi

# Data-parallel bench: throughput of the job and the all-reduce next to plain MPI_Allreduce.
timeout 120 "${launch[@]}" -np 2 "$dtnn" "${bench[@]}" --threads 1 >"$tmp/out" 2>&1
check "bench on 2 ranks" $? '"ranks": 2.*"allreduce_busbw_gbs": [0-9.]+.*"mpi_allreduce_busbw_gbs"' \
    "$tmp/out"

# The sweep: one row per ranks x threads with ranks x threads <= cores.
rows=0
for ((r = 1; r <= cores; r++)); do rows=$((rows + cores / r)); done
timeout 300 "$dtnn" "${bench[@]}" --sweep --launcher "${launch[*]}" >"$tmp/out" 2>&1
status=$?
got=$(grep -cE '^ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+ +[0-9.]+%' "$tmp/out")
[[ $status -eq 0 && $got -eq $rows ]]
check "sweep prints $rows rows (got $got)" $? "^fastest: " "$tmp/out"

[[ $failures -eq 0 ]] && echo "mpi_local: all passed" || echo "mpi_local: $failures failed"
[[ $failures -eq 0 ]]
