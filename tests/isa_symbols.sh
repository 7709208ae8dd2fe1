#!/usr/bin/env bash
# The two compiles of the CPU kernels define the same external symbols, the AVX2 one each with
# the suffix _avx2 (src/kernels/cpu_isa_names.h renames them). Fails, naming the symbol, when
# an object of the AVX2 compile defines a global without the suffix (a name missing from
# cpu_isa_names.h: it would clash with the portable one, or be called from it), references a
# symbol the portable compile defines (AVX2 code calling the portable set), or when the two
# sets differ in anything but the suffix (a file or function in one compile only), except for
# the names the header lists as CPU_ISA_ONLY (AVX2 code with no portable twin).
# Usage: isa_symbols.sh NM GENERIC_OBJECTS_LIST AVX2_OBJECTS_LIST SUFFIX NAMES_HEADER
# where each list file names the compile's object files, one a line.
set -eu
nm=$1
generic_list=$2
avx2_list=$3
suffix=$4
names_header=$5
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# "symbol object" for every global symbol an object defines (or, with -u, references).
symbols() { # list-file [-u]
    local obj
    while IFS= read -r obj; do
        [[ -n $obj ]] || continue
        if [[ ${2:-} == -u ]]; then
            "$nm" -P -u "$obj"
        else
            "$nm" -P -g --defined-only "$obj"
        fi | awk -v o="$(basename "$obj")" '{ print $1, o }'
    done <"$1"
}
symbols "$generic_list" | sort >"$tmp/generic"
symbols "$avx2_list" | sort >"$tmp/avx2"
symbols "$avx2_list" -u | sort >"$tmp/avx2_refs"
if [[ ! -s $tmp/generic || ! -s $tmp/avx2 ]]; then
    echo "FAIL: no symbols read from the objects ($generic_list, $avx2_list)"
    exit 1
fi

failures=0
unsuffixed=$(awk -v s="_$suffix" 'substr($1, length($1) - length(s) + 1) != s' "$tmp/avx2")
if [[ -n $unsuffixed ]]; then
    echo "FAIL: the $suffix compile defines globals without the suffix _$suffix:"
    echo "$unsuffixed" | sed 's/^/    /'
    echo "  add '#define NAME CPU_ISA_NAME(NAME)' for each to src/kernels/cpu_isa_names.h"
    failures=$((failures + 1))
fi

awk '{ print $1 }' "$tmp/generic" | sort -u >"$tmp/generic_names"
awk -v s="_$suffix" '{ n = $1; if (substr(n, length(n) - length(s) + 1) == s)
                           n = substr(n, 1, length(n) - length(s)); print n }' "$tmp/avx2" |
    sort -u >"$tmp/avx2_names"
sed -n 's/^#define \([A-Za-z_0-9]*\) CPU_ISA_ONLY(\1)$/\1/p' "$names_header" | sort -u \
    >"$tmp/isa_only"
both=$(comm -12 "$tmp/generic_names" "$tmp/isa_only")
if [[ -n $both ]]; then
    echo "FAIL: listed as CPU_ISA_ONLY in $(basename "$names_header"), but the generic compile" \
        "defines them too (use CPU_ISA_NAME):"
    echo "$both" | sed 's/^/    /'
    failures=$((failures + 1))
fi
only_generic=$(comm -23 "$tmp/generic_names" "$tmp/avx2_names")
only_avx2=$(comm -13 "$tmp/generic_names" "$tmp/avx2_names" | comm -23 - "$tmp/isa_only")
if [[ -n $only_generic || -n $only_avx2 ]]; then
    echo "FAIL: the two compiles' symbols differ in more than the suffix _$suffix:"
    [[ -z $only_generic ]] || echo "$only_generic" | sed 's/^/    generic only: /'
    [[ -z $only_avx2 ]] || echo "$only_avx2" | sed 's/^/    '"$suffix"' only: /'
    failures=$((failures + 1))
fi

calls=$(awk 'NR == FNR { defined[$1] = 1; next } $1 in defined' "$tmp/generic_names" \
    "$tmp/avx2_refs")
if [[ -n $calls ]]; then
    echo "FAIL: objects of the $suffix compile reference symbols of the generic compile:"
    echo "$calls" | sed 's/^/    /'
    failures=$((failures + 1))
fi

if ((failures)); then
    exit 1
fi
echo "isa_symbols: $(wc -l <"$tmp/generic_names") external symbols in both compiles" \
    "(generic, _$suffix), $(wc -l <"$tmp/isa_only") in the $suffix compile only: ok"
