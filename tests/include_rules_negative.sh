#!/usr/bin/env bash
# The include-rule check can fail: on copies of the tree, it must reject train/ code that
# includes comm's internal header, comm/ code that includes model_internal.h, and a layer that
# includes the model's interface (a floor above its own), each by name.
# Usage: include_rules_negative.sh ROOT TMPDIR
set -eu
root=$1
tmp=$2
rm -rf "$tmp"
mkdir -p "$tmp"
failures=0

try() { # file-under-src include expected-text
    local copy=$tmp/tree
    rm -rf "$copy"
    mkdir -p "$copy/docs"
    cp -r "$root/src" "$root/tools" "$copy/"
    cp "$root/docs/architecture.md" "$copy/docs/"
    printf '#include "%s"\n' "$2" >>"$copy/src/$1"
    if out=$(bash "$root/tests/include_rules.sh" "$copy" 2>&1); then
        echo "FAIL: src/$1 including $2 was not caught"
        failures=$((failures + 1))
    elif ! grep -q "$3" <<<"$out"; then
        echo "FAIL: src/$1 including $2: caught, but the message lacks '$3':"
        echo "$out" | sed 's/^/    /'
        failures=$((failures + 1))
    else
        echo "caught: $(grep -m1 "$3" <<<"$out")"
    fi
}

try train/trainer.c ../comm/comm_internal.h "src/train/trainer.c includes comm/comm_internal.h"
try comm/comm.c ../model/model_internal.h "src/comm/comm.c includes model/model_internal.h"
try layers/linear.c ../model/model.h "src/layers/linear.c includes model/model.h"
try backend/cpu/pool.c ../cuda/cuda_internal.h "src/backend/cpu/pool.c includes backend/cuda"

# a new folder without a row of its own is named, not filed under its parent's
copy=$tmp/tree
mkdir -p "$copy/src/backend/newdev"
printf '#include "../backend.h"\n' >"$copy/src/backend/newdev/newdev.c"
if out=$(bash "$root/tests/include_rules.sh" "$copy" 2>&1) ||
    ! grep -q "src/backend/newdev/ has no row" <<<"$out"; then
    echo "FAIL: a folder without a row in the table was not named"
    failures=$((failures + 1))
else
    echo "caught: $(grep -m1 "has no row" <<<"$out")"
fi
rm -rf "$tmp"
if ((failures)); then
    exit 1
fi
echo "include_rules_negative: every violation caught"
