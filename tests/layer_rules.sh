#!/usr/bin/env bash
# The layer files hold options and shape inference and call only the backend table
# (src/backend/backend.h): no OpenMP, no memcpy / memset / memmove, no loop over tensor data.
# A loop is allowed only over a layer's inputs (bounded by l->n_in), or on a line listed in
# tests/layer_rules.allow ("file: text of the line"). Fails naming each offending line.
#   bash tests/layer_rules.sh [SRC_DIR]   (default: the repository's src/)
set -u
here="$(cd "$(dirname "$0")" && pwd)"
src="${1:-$here/../src}"
allow="$here/layer_rules.allow"
bad=0
for f in "$src"/layers/*.c; do
    name="$(basename "$f")"
    case "$name" in layer.c | registry.c) continue ;; esac   # the contract's own helpers
    while IFS= read -r hit; do
        line="${hit#*:}"
        text="$(printf '%s' "$line" | sed 's/^[[:space:]]*//')"
        if [ -f "$allow" ] && grep -qxF "$name: $text" "$allow"; then
            continue
        fi
        echo "layer_rules: src/layers/$name:${hit%%:*}: $text"
        bad=1
    done < <(grep -nE '#[[:space:]]*pragma[[:space:]]+omp|\bmem(cpy|set|move)\b|\b(for|while)[[:space:]]*\(' "$f" |
             grep -vE '\b(for|while)[[:space:]]*\([^;]*;[^;]*<[[:space:]]*l->n_in[[:space:]]*;' )
done
if [ "$bad" -ne 0 ]; then
    echo "layer_rules: layer files must call the backend table for tensor data (src/backend/backend.h)"
    exit 1
fi
echo "layer_rules: $(ls "$src"/layers/*.c | wc -l) layer files clean"
