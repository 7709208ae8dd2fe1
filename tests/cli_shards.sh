#!/usr/bin/env bash
# Sharded datasets on one process: `dtnn shard` packs an image folder (every image file as it
# is, its class beside it, each split's samples once), refuses a folder that holds shards;
# `--dataset shards` trains, resumes bit for bit, reads shards without an index (counting them
# from their headers) and says which shard is corrupt, truncated or miscounted. With pip, the
# webdataset package reads dtnn's shards (the same bytes and classes) and writes shards dtnn
# trains on; without it that part is skipped with a message.
# Usage: cli_shards.sh DTNN TMPDIR
set -u
dtnn=$1
tmp=$2
rm -rf "$tmp" && mkdir -p "$tmp"
mk="$(dirname "$dtnn")/make-imagefolder"
if [[ ! -x $mk ]]; then
    echo "skip: no make-imagefolder (a build without image support)"
    exit 77
fi
"$mk" "$tmp/if" --classes 3 --train 30 --val 8 --width 48 --height 40 >/dev/null || exit 1
failures=0
ok() { echo "ok: $*"; }
fail() {
    echo "FAIL: $*"
    failures=$((failures + 1))
}

# ---- packing ---------------------------------------------------------------------------------
"$dtnn" shard --data-dir "$tmp/if" --output "$tmp/s" --shard-mb 0.03 >"$tmp/shard.out" || exit 1
ntar=$(ls "$tmp/s"/train-*.tar | wc -l)
mkdir -p "$tmp/x"
for f in "$tmp/s"/train-*.tar; do tar -xf "$f" -C "$tmp/x" || fail "tar cannot read $f"; done
# every training image once, byte for byte, with its class folder's index as its class
want=$(cd "$tmp/if/train" && for f in */*; do
    echo "$(md5sum <"$f" | cut -c1-32) $((10#${f:5:3}))"; done | sort)
got=$(cd "$tmp/x" && for f in *.jpg; do
    echo "$(md5sum <"$f" | cut -c1-32) $(cat "${f%.jpg}.cls")"; done | sort)
if [[ $ntar -ge 3 && "$want" == "$got" && $(echo "$got" | wc -l) -eq 90 ]]; then
    ok "90 training images in $ntar shards, each file as it was, with its class"
else
    fail "the shards do not hold the folder's images and classes ($ntar shards)"
fi
nval=$(awk -F': ' '/"val-[0-9]+\.tar"/ { n += $2 } END { print n + 0 }' "$tmp/s/index.json")
if [[ $nval -eq 24 ]]; then
    ok "the index lists the val split's 24 samples"
else
    fail "index: $(cat "$tmp/s/index.json")"
fi
if out=$("$dtnn" shard --data-dir "$tmp/if" --output "$tmp/s" 2>&1); then
    fail "packing into a folder of shards was not refused"
elif [[ $out == *"already holds shards"* ]]; then
    ok "a folder that holds shards is refused: $out"
else
    fail "unexpected refusal: $out"
fi

# A dataset in memory (npy of 8-bit values in [0, 1]) packed as PNG: each image's pixels and
# class come back exactly (checked with Pillow where Debian's python3-pil is installed).
/usr/bin/python3 - "$tmp/npy" <<'PY' || fail "writing the npy dataset"
import os, sys
import numpy as np
d = sys.argv[1]
os.makedirs(d)
rng = np.random.default_rng(1)
for split, n in (("train", 20), ("test", 6)):
    np.save(f"{d}/{split}_x.npy", (rng.integers(0, 256, (n, 3, 8, 6)) / 255).astype(np.float32))
    np.save(f"{d}/{split}_y.npy", rng.integers(0, 4, n).astype(np.int64))
PY
if "$dtnn" shard --dataset npy --data-dir "$tmp/npy" --output "$tmp/snpy" >/dev/null; then
    mkdir -p "$tmp/xnpy" && tar -xf "$tmp/snpy/train-000000.tar" -C "$tmp/xnpy"
    if /usr/bin/python3 - "$tmp" <<'PY'; then
import glob, sys
import numpy as np
try:
    from PIL import Image
except ImportError:
    print("skip: no Pillow (python3-pil): PNG pixels not compared")
    sys.exit(0)
t = sys.argv[1]
x, y = np.load(f"{t}/npy/train_x.npy"), np.load(f"{t}/npy/train_y.npy")
want = sorted((bytes(np.rint(s * 255).astype(np.uint8).transpose(1, 2, 0).tobytes()), int(c))
              for s, c in zip(x, y))
got = sorted((np.asarray(Image.open(p)).tobytes(), int(open(p[:-4] + ".cls").read()))
             for p in glob.glob(f"{t}/xnpy/*.png"))
sys.exit(0 if got == want else 1)
PY
        ok "an npy dataset packed as PNG: its 20 images' pixels and classes, exactly"
    else
        fail "the PNG shards of the npy dataset differ from it"
    fi
else
    fail "dtnn shard --dataset npy"
fi

# ---- training and resuming -------------------------------------------------------------------
common=(--model cifarcnn --dataset shards --data-dir "$tmp/s" --image-size 32 --batch-size 12
        --optimizer sgd --lr 0.05 --momentum 0.9 --threads 1 --seed 3 --loader-threads 2
        --shuffle-buffer 16 --mixup 0.2 --quiet)
"$dtnn" train "${common[@]}" --epochs 2 --save "$tmp/full.safetensors" >/dev/null 2>"$tmp/full.err" ||
    fail "training on shards: $(cat "$tmp/full.err")"
"$dtnn" train "${common[@]}" --epochs 1 --save "$tmp/half.safetensors" >/dev/null 2>&1
"$dtnn" train "${common[@]}" --epochs 2 --resume "$tmp/half.safetensors" \
    --save "$tmp/resumed.safetensors" >/dev/null 2>&1
if cmp -s "$tmp/full.safetensors" "$tmp/resumed.safetensors"; then
    ok "resume after epoch 1 on shards: bitwise the uninterrupted run"
else
    fail "resumed run on shards differs"
fi
if grep -q "rank 0 of 1 read" "$tmp/full.err"; then
    ok "$(grep 'rank 0 of 1 read' "$tmp/full.err")"
else
    fail "no report of the bytes read"
fi

# ---- without an index, and hostile shards ----------------------------------------------------
cp -r "$tmp/s" "$tmp/noindex" && rm "$tmp/noindex/index.json"
if out=$("$dtnn" train --model cifarcnn --dataset shards --data-dir "$tmp/noindex" \
             --image-size 32 --steps 1 --epochs 1 --batch-size 12 2>&1) &&
   [[ $out == *"90 train / 24 test"* ]]; then
    ok "without index.json the shards are counted from their headers"
else
    fail "shards without an index: $out"
fi
hostile() { # label, expected message, command to spoil a copy in $tmp/h
    rm -rf "$tmp/h" && cp -r "$tmp/s" "$tmp/h"
    eval "$3"
    if out=$("$dtnn" train --model cifarcnn --dataset shards --data-dir "$tmp/h" --image-size 32 \
                 --epochs 1 --batch-size 12 --quiet 2>&1); then
        fail "$1: accepted"
    elif [[ $out == *"$2"* ]]; then
        ok "$1: $(echo "$out" | grep -v "MiB of shards" | tail -1)"
    else
        fail "$1: $out"
    fi
}
first="$tmp/h/train-000000.tar"
hostile "truncated shard" "truncated shard" \
    'truncate -s $(( $(stat -c %s "$first") / 2 + 100 )) "$first"'
hostile "corrupt header" "bad header" \
    'printf "\xff" | dd of="$first" bs=1 seek=700 conv=notrunc 2>/dev/null;
     printf "\x01" | dd of="$first" bs=1 seek=150 conv=notrunc 2>/dev/null'
hostile "miscounted index" "the index says otherwise" \
    'sed -i "s/\"train-000000.tar\": [0-9]*/\"train-000000.tar\": 3/" "$tmp/h/index.json"'
hostile "index of another format" "dtnn-shards-1" \
    'sed -i "s/dtnn-shards-1/dtnn-shards-9/" "$tmp/h/index.json"'

# ---- the webdataset package, both ways ---------------------------------------------------------
py=/usr/bin/python3
if ! "$py" -m venv --system-site-packages "$tmp/venv" >/dev/null 2>&1 ||
   ! timeout 300 "$tmp/venv/bin/pip" install -q webdataset >"$tmp/pip.log" 2>&1; then
    echo "skip: webdataset not installed in a venv (no python3-venv, or pip cannot reach PyPI):" \
         "$(tail -1 "$tmp/pip.log" 2>/dev/null)"
else
    "$tmp/venv/bin/python" - "$tmp" <<'PY' || failures=$((failures + 1))
import glob, hashlib, os, sys
import webdataset as wds
tmp = sys.argv[1]
want = sorted((hashlib.md5(open(p, "rb").read()).hexdigest(), int(p.split("/")[-2][5:]))
              for p in glob.glob(f"{tmp}/if/train/*/*"))
urls = sorted(glob.glob(f"{tmp}/s/train-*.tar"))
got = sorted((hashlib.md5(s["jpg"]).hexdigest(), int(s["cls"])) for s in wds.WebDataset(urls, shardshuffle=False))
print("ok: webdataset reads dtnn's shards: the same %d images and classes" % len(got)
      if got == want else "FAIL: webdataset read %d samples that differ" % len(got))
os.makedirs(f"{tmp}/wds")
paths = sorted(glob.glob(f"{tmp}/if/train/*/*"))
with wds.ShardWriter(f"{tmp}/wds/train-%06d.tar", maxcount=25, verbose=0) as sink:
    for i, p in enumerate(paths):
        sink.write({"__key__": "s%05d" % i, "jpg": open(p, "rb").read(),
                    "cls": int(p.split("/")[-2][5:])})
sys.exit(0 if got == want else 1)
PY
    if out=$("$dtnn" train --model cifarcnn --dataset shards --data-dir "$tmp/wds" \
                 --image-size 32 --epochs 1 --batch-size 12 2>&1) &&
       [[ $out == *"90 train"* ]]; then
        ok "dtnn trains on shards webdataset wrote ($(ls "$tmp/wds" | wc -l) shards, 90 samples)"
    else
        fail "shards written by webdataset: $out"
    fi
fi
[[ $failures -eq 0 ]]
