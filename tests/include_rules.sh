#!/usr/bin/env bash
# The architecture's floors as a check: every #include "..." of a file under src/ (and tools/)
# must be allowed by the "may include" column of the table in docs/architecture.md (the rows
# whose first cell is a `src/...` folder), so the document and the code cannot drift apart.
# Every folder holding sources needs a row of its own (a new backend folder included): a file
# may include its own folder's files and the files directly in each folder its row names (a
# row's subfolders are rows of their own: `backend` is backend.h, not backend/cpu/). Besides, a header named
# *_internal.h may be included only from its own folder. tools/ may include only dtnn.h and
# its own files. Fails naming each file, the include and the rule.
# Usage: include_rules.sh ROOT (the source tree: ROOT/src, ROOT/tools, ROOT/docs/architecture.md)
set -eu
root=$1
doc=$root/docs/architecture.md
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# "folder allowed,allowed,..." for each table row, folders without src/ and the trailing /.
awk -F'|' '$2 ~ /^ *`src\// {
    f = $2; gsub(/[ `]/, "", f); sub(/^src\//, "", f); sub(/\/$/, "", f)
    a = $(NF - 1); gsub(/[ `]/, "", a); gsub(/—/, "", a)
    print f, (a == "" ? "-" : a) }' "$doc" >"$tmp/rules"
if [[ $(wc -l <"$tmp/rules") -lt 8 ]]; then
    echo "FAIL: no include table read from $doc"
    exit 1
fi

# The folder of a path under src/ if the table has a row for it, or "" if not.
unit_of() {
    local dir f
    dir=$(dirname "$1")
    while read -r f _; do
        if [[ $dir == "$f" ]]; then
            echo "$f"
            return
        fi
    done <"$tmp/rules"
}

failures=0
checked=0
fail() {
    echo "FAIL: $1"
    failures=$((failures + 1))
}

while IFS= read -r file; do
    rel=${file#"$root"/src/}
    unit=$(unit_of "$rel")
    if [[ -z $unit ]]; then
        fail "src/$rel: its folder src/$(dirname "$rel")/ has no row in docs/architecture.md's table (what it is, what it may include)"
        continue
    fi
    allowed=$(awk -v u="$unit" '$1 == u { print $2 }' "$tmp/rules")
    dir=$(dirname "$file")
    while IFS= read -r inc; do
        # resolved as the compiler does: beside the file, then from src/ (its include path)
        if [[ -e $dir/$inc ]]; then
            target=$(realpath -m "$dir/$inc")
        elif [[ -e $root/src/$inc ]]; then
            target=$(realpath -m "$root/src/$inc")
        else
            continue    # dtnn.h, generated headers (onnx.pb-c.h), system headers in quotes
        fi
        [[ $target == "$(realpath "$root")/src/"* ]] || continue
        trel=${target#"$(realpath "$root")"/src/}
        tunit=$(unit_of "$trel")
        checked=$((checked + 1))
        if [[ $trel == *_internal.h && ${trel%%/*} != "${rel%%/*}" ]]; then
            fail "src/$rel includes $trel: an _internal.h header is for its own folder only"
            continue
        fi
        [[ $tunit == "$unit" ]] && continue
        if [[ ",$allowed," != *",$tunit,"* ]]; then
            fail "src/$rel includes $trel: src/$unit/ may include only ${allowed//,/, } (docs/architecture.md)"
        fi
    done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$file")
done < <(find "$root/src" -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) | sort)

while IFS= read -r file; do
    while IFS= read -r inc; do
        checked=$((checked + 1))
        [[ $inc == dtnn.h || -e $(dirname "$file")/$inc ]] && [[ $inc != *..* ]] && continue
        fail "${file#"$root"/}: includes \"$inc\": the tools use only the public header"
    done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$file")
done < <(find "$root/tools" -type f \( -name '*.c' -o -name '*.h' \) | sort)

# Names: a function src/ defines with external linkage and the public prefix dtnn_ must be
# declared in include/ (internal ones are dtnn__ or carry their folder's prefix).
cat "$root"/include/dtnn.h "$root"/include/dtnn/*.h | grep -oE '\bdtnn_[a-z0-9_]+ *\(' |
    sed 's/ *(//' | sort -u >"$tmp/public"
find "$root/src" -name '*.c' -print0 |
    xargs -0 grep -hE '^[a-z][a-z0-9_ *]*\bdtnn_[a-z0-9][a-z0-9_]*\(' | grep -v '^static' | sed -E 's/^[^(]*\b(dtnn_[a-z0-9][a-z0-9_]*)\(.*/\1/' | sort -u >"$tmp/defined"
while IFS= read -r name; do
    fail "src/ defines $name with the public prefix, but include/ does not declare it: name it dtnn__${name#dtnn_} (internal) or declare it"
done < <(comm -13 "$tmp/public" "$tmp/defined")

if ((failures)); then
    echo "include_rules: $failures violation(s)"
    exit 1
fi
echo "include_rules: $checked includes of src/ and tools/ follow docs/architecture.md's table;" \
    "$(wc -l <"$tmp/defined") dtnn_ functions of src/, all public: ok"
