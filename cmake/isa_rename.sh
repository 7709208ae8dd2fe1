#!/usr/bin/env bash
# isa_rename.sh — makes one CPU kernel set link beside the others. The objects of one compile
# of src/backend/cpu/ (say, with -mavx2 -mfma) are linked into one relocatable object, and
# every global symbol that object defines gets the set's suffix (cpu_im2col becomes
# cpu_im2col_avx2), in its definitions and in the set's own references to it alike; what it
# takes from the rest of the library or libc is left as it is. So the list of renamed names is
# read off the compiled code, never kept by hand, and a new kernel function needs no line
# anywhere. cpu_select.c then names each set's table (cpu_backend_table_avx2).
# Usage: isa_rename.sh LD NM OBJCOPY SUFFIX OUTPUT OBJECT...
set -euo pipefail
ld=$1 nm=$2 objcopy=$3 suffix=$4 out=$5
shift 5
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$ld" -r -o "$tmp/merged.o" "$@"
"$nm" -P -g --defined-only "$tmp/merged.o" | awk -v s="_$suffix" '{ print $1, $1 s }' \
    >"$tmp/renames"
if [[ ! -s $tmp/renames ]]; then
    echo "isa_rename: no global symbols in the $suffix objects" >&2
    exit 1
fi
"$objcopy" --redefine-syms="$tmp/renames" "$tmp/merged.o" "$tmp/renamed.o"
mv -f "$tmp/renamed.o" "$out"
