#!/usr/bin/env python3
"""frozen_check.py -- what --freeze promises of a checkpoint, without a reference run.

    frozen_check.py INIT RESULT PATTERNS [EVAL_BN]

PATTERNS is comma-separated globs, as --freeze. Checks, reading both safetensors files by hand
(the standard library only, so any python3 runs it): the parameters matching PATTERNS are
bitwise INIT's in RESULT, and with EVAL_BN (--freeze-bn) the running statistics of the frozen
layers too; every other parameter moved; RESULT has no optimizer state for a frozen one and
records what was frozen (its "frozen" metadata). Used by tests/mpi_freeze.sh and
tests/finetune_resnet18.sh for runs too long or too chaotic for a PyTorch comparison
(tools/torch_freeze.py). Prints one line; exits 0 when all hold, 1 otherwise.
"""
import fnmatch
import json
import struct
import sys

STATS = ("running_mean", "running_var", "num_batches_tracked")


def load(path):
    """{name: raw bytes}, metadata: bitwise comparison needs no dtype."""
    with open(path, "rb") as f:
        blob = f.read()
    n = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8:8 + n])
    meta = header.pop("__metadata__", {})
    return {k: blob[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]
            for k, v in header.items()}, meta


def main():
    if len(sys.argv) not in (4, 5):
        print(__doc__)
        return 2
    a, _ = load(sys.argv[1])
    b, meta = load(sys.argv[2])
    pats = [p for p in sys.argv[3].split(",") if p]
    eval_bn = len(sys.argv) > 4
    bad, stats = [], 0
    params = [k for k in a if not k.startswith("optimizer.") and not k.endswith(STATS)]
    frozen = [k for k in params if any(fnmatch.fnmatchcase(k, p) for p in pats)]
    missing = [k for k in params if k not in b]
    if missing:
        bad.append(f"{len(missing)} tensors missing from the result (first: {missing[0]})")
    for k in frozen:
        if a[k] != b.get(k):
            bad.append(k + " changed")
        layer = k.rsplit(".", 1)[0]
        if eval_bn and k.endswith(".weight") and layer + ".running_mean" in a:
            for s in STATS:
                stats += 1
                if a[layer + "." + s] != b.get(layer + "." + s):
                    bad.append(layer + "." + s + " changed")
    moved = [k for k in params if k not in frozen and a[k] != b.get(k)]
    if len(moved) != len(params) - len(frozen):
        bad.append("%d of %d trainable tensors did not move"
                   % (len(params) - len(frozen) - len(moved), len(params) - len(frozen)))
    stray = [k for k in b if k.startswith("optimizer.") and k.split(".", 2)[2] in frozen]
    if stray:
        bad.append("optimizer state for " + stray[0])
    if "frozen" not in meta:
        bad.append("no 'frozen' metadata")
    if not frozen:
        bad.append(f"no tensor matches {sys.argv[3]}")
    print("; ".join(sorted(set(bad))[:5]) if bad else
          "%d frozen tensors bitwise unchanged%s, %d trained, no optimizer state for frozen ones"
          % (len(frozen), f" (and {stats} running statistics)" if stats else "", len(moved)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
