#!/usr/bin/env bash
# A faster CPU kernel set links beside the portable one only if cmake/isa_rename.sh gave every
# global it defines the set's suffix. Fails, naming the symbol, when the renamed object
# defines a global without the suffix (it would clash with the portable set's, or replace
# it), or references a symbol the portable compile defines (the set's code would call
# portable code: a name the rename missed). Also fails when either side has no symbols at all
# (the objects were not found).
# Usage: isa_symbols.sh NM GENERIC_OBJECTS_LIST RENAMED_OBJECT SUFFIX
# where the list file names the portable compile's object files, one a line.
set -eu
nm=$1
generic_list=$2
renamed=$3
suffix=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

while IFS= read -r obj; do
    [[ -n $obj ]] && "$nm" -P -g --defined-only "$obj"
done <"$generic_list" | awk '{ print $1 }' | sort -u >"$tmp/generic"
"$nm" -P -g --defined-only "$renamed" | awk '{ print $1 }' | sort -u >"$tmp/set"
"$nm" -P -u "$renamed" | awk '{ print $1 }' | sort -u >"$tmp/refs"
if [[ ! -s $tmp/generic || ! -s $tmp/set ]]; then
    echo "FAIL: no symbols read from the objects ($generic_list, $renamed)"
    exit 1
fi

failures=0
unsuffixed=$(awk -v s="_$suffix" 'substr($1, length($1) - length(s) + 1) != s' "$tmp/set")
if [[ -n $unsuffixed ]]; then
    echo "FAIL: the $suffix set defines globals without the suffix _$suffix:"
    echo "$unsuffixed" | sed 's/^/    /'
    failures=$((failures + 1))
fi
calls=$(comm -12 "$tmp/generic" "$tmp/refs")
if [[ -n $calls ]]; then
    echo "FAIL: the $suffix set references symbols of the portable set:"
    echo "$calls" | sed 's/^/    /'
    failures=$((failures + 1))
fi
if ((failures)); then
    exit 1
fi
set_only=$(sed "s/_$suffix\$//" "$tmp/set" | comm -13 "$tmp/generic" - | wc -l)
echo "isa_symbols: $(wc -l <"$tmp/set") globals in the $suffix set, all suffixed _$suffix," \
    "$set_only of them without a portable twin (intrinsics code); no call into the portable set: ok"
