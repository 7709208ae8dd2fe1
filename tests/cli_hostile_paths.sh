#!/usr/bin/env bash
# Hostile files and careless paths, each refused with one line that names the file, link, tensor
# or flag, before any work, and nothing destroyed: inputs that are FIFOs, devices or folders
# (never waited on); two options naming one file that the command writes; outputs checked
# before the first step, never replacing a device node, never left half-written; an ONNX file
# nested too deep for the decoder's recursion; graphs of 100,000 nodes (loaded, in linear
# time); image folders whose links loop or give images a second label. Each command runs under
# a time limit, so one that blocks fails here instead of hanging the suite.
# Usage: cli_hostile_paths.sh DTNN TMPDIR
set -u
dtnn=$1
tmp=$2
rm -rf "$tmp" && mkdir -p "$tmp"
failures=0

# expect CODE PATTERN -- ARGS... (tests/cli_common.sh), each under a 30 s limit here.
expect_timeout=30
source "$(dirname "$0")/cli_common.sh"

small=(--dataset synthetic --synthetic-shape 1x28x28 --synthetic-samples 64 --batch-size 32
       --threads 1 --quiet)
"$dtnn" train --model lenet5 "${small[@]}" --steps 1 --save "$tmp/good.safetensors" >/dev/null ||
    { echo "FAIL: could not train the checkpoint the cases start from"; exit 1; }
python3 - "$tmp/x.npy" <<'PY' || { echo "FAIL: could not write x.npy"; exit 1; }
import struct, sys
header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 1, 28, 28), }"
header += " " * (118 - len(header)) + "\n"
with open(sys.argv[1], "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
    f.write(b"\0" * (2 * 28 * 28 * 4))
PY

# FIFOs with no writer: opening one for reading the ordinary way blocks forever.
mkfifo "$tmp/fifo.model" "$tmp/fifo.onnx" "$tmp/fifo.safetensors" "$tmp/fifo.npy"
fifo="is not a regular file \(a FIFO\)"
expect 1 "model file '$tmp/fifo.model' $fifo" -- train --model "$tmp/fifo.model" "${small[@]}" --steps 1
expect 1 "ONNX file '$tmp/fifo.onnx' $fifo" -- info --model "$tmp/fifo.onnx"
expect 1 "'$tmp/fifo.safetensors' $fifo" -- eval --model lenet5 --load "$tmp/fifo.safetensors" \
    --dataset synthetic --threads 1
expect 1 "'$tmp/fifo.safetensors' $fifo" -- train --model lenet5 "${small[@]}" --steps 1 \
    --init "$tmp/fifo.safetensors"
expect 1 "'$tmp/fifo.npy' $fifo" -- predict --model lenet5 --load "$tmp/good.safetensors" \
    --input "$tmp/fifo.npy" --output "$tmp/y.npy"
[[ -e $tmp/y.npy ]] && { echo "FAIL: predict wrote an output after refusing its input"; failures=$((failures + 1)); }

# A dataset folder whose images file is a FIFO.
mkdir -p "$tmp/idx"
mkfifo "$tmp/idx/train-images-idx3-ubyte"
printf '\x00\x00\x08\x01\x00\x00\x00\x01\x01' >"$tmp/idx/train-labels-idx1-ubyte"
expect 1 "train-images-idx3-ubyte' $fifo" -- train --model lenet5 --dataset mnist \
    --data-dir "$tmp/idx" --steps 1 --threads 1 --quiet

# A character device and a directory where a file is expected.
expect 1 "'/dev/zero' is not a regular file \(a character device\)" -- eval --model lenet5 \
    --load /dev/zero --dataset synthetic --threads 1
expect 1 "'$tmp' is not a regular file \(a directory\)" -- predict --model lenet5 \
    --load "$tmp/good.safetensors" --input "$tmp" --output "$tmp/y.npy"

# One file named twice where the command writes one of them: refused before any work, by
# device and inode (a link, "dir/../name") and, for an output not yet written, by its folder's
# real path; the file is left as it was. --resume and --save are one file by design.
cp "$tmp/good.safetensors" "$tmp/before.safetensors"
ln -s good.safetensors "$tmp/link.safetensors"
same="name the same file"
expect 2 "--load '$tmp/good.safetensors' and --output '$tmp/./good.safetensors' $same" -- \
    export --model lenet5 --load "$tmp/good.safetensors" --output "$tmp/./good.safetensors"
expect 2 "--load '$tmp/link.safetensors' and --output '$tmp/good.safetensors' $same" -- \
    predict --model lenet5 --load "$tmp/link.safetensors" --input "$tmp/x.npy" \
    --output "$tmp/good.safetensors"
expect 2 "--save '$tmp/new.safetensors' and --trace '$tmp/idx/../new.safetensors' $same.*write twice" -- \
    train --model lenet5 "${small[@]}" --steps 1 --save "$tmp/new.safetensors" \
    --trace "$tmp/idx/../new.safetensors"
expect 2 "--init '$tmp/good.safetensors' and --save '$tmp/link.safetensors' $same" -- \
    train --model lenet5 "${small[@]}" --steps 1 --init "$tmp/good.safetensors" \
    --save "$tmp/link.safetensors"
expect 2 "--resume '$tmp/good.safetensors' and --log '$tmp/good.safetensors' $same" -- \
    train --model lenet5 "${small[@]}" --steps 2 --resume "$tmp/good.safetensors" \
    --log "$tmp/good.safetensors"
if "$dtnn" import --help >/dev/null 2>&1; then
    "$dtnn" export --model lenet5 --load "$tmp/good.safetensors" --output "$tmp/m.onnx" >/dev/null
    cp "$tmp/m.onnx" "$tmp/m.onnx.before"
    expect 2 "the ONNX file '$tmp/m.onnx' and --output-model '$tmp/m.onnx' $same" -- \
        import "$tmp/m.onnx" --output-model "$tmp/m.onnx" --output-weights "$tmp/w.safetensors"
    cmp -s "$tmp/m.onnx" "$tmp/m.onnx.before" ||
        { echo "FAIL: a refused import changed its ONNX file"; failures=$((failures + 1)); }
fi
cmp -s "$tmp/good.safetensors" "$tmp/before.safetensors" ||
    { echo "FAIL: a refused command changed the checkpoint"; failures=$((failures + 1)); }
[[ -e $tmp/new.safetensors ]] && { echo "FAIL: a refused train wrote its --save"; failures=$((failures + 1)); }
if timeout 60 "$dtnn" train --model lenet5 "${small[@]}" --steps 2 --resume "$tmp/good.safetensors" \
    --save "$tmp/good.safetensors" >/dev/null 2>"$tmp/err"; then
    echo "ok: --resume X --save X continues its own checkpoint"
else
    echo "FAIL: --resume X --save X was refused:"; sed 's/^/    /' "$tmp/err"
    failures=$((failures + 1))
fi

# Outputs: every one is checked before the first step (a trace that cannot be written, a
# --save naming a folder failed only after training), and a device node by an output's name
# is refused and left in place (replacing a mknod copy of /dev/null deleted the node).
late() { # PATTERN ARGS...: refused with PATTERN, and no epoch ran
    local pattern=$1
    shift
    timeout 60 "$dtnn" "$@" >"$tmp/out" 2>&1
    local rc=$?
    if [[ $rc -eq 1 ]] && grep -qE -e "$pattern" "$tmp/out" && ! grep -q "epoch 1" "$tmp/out"; then
        echo "ok: before the first step: $(tail -n1 "$tmp/out")"
    else
        echo "FAIL: dtnn $* -> exit $rc, want 1 with '$pattern' before any epoch:"
        sed 's/^/    /' "$tmp/out"
        failures=$((failures + 1))
    fi
}
train=(train --model lenet5 --dataset synthetic --synthetic-shape 1x28x28 --synthetic-samples 64
       --batch-size 32 --threads 1 --epochs 1)
late "cannot write the trace '$tmp/no/such/t.json': No such file" "${train[@]}" \
    --trace "$tmp/no/such/t.json"
mkdir -p "$tmp/folder"
late "cannot write the checkpoint '$tmp/folder': it is a folder" "${train[@]}" --save "$tmp/folder"
late "cannot write the log '$tmp/folder': it is a folder" "${train[@]}" --log "$tmp/folder"
if mknod "$tmp/null" c 1 3 2>/dev/null; then
    device="it exists and is a character device, and dtnn replaces only regular files"
    late "'$tmp/null': $device" "${train[@]}" --save "$tmp/null"
    expect 1 "cannot write the .npy file '$tmp/null': $device" -- predict --model lenet5 \
        --load "$tmp/before.safetensors" --input "$tmp/x.npy" --output "$tmp/null"
    expect 1 "cannot write the ONNX file '$tmp/null': $device" -- export --model lenet5 \
        --load "$tmp/before.safetensors" --output "$tmp/null"
    [[ -c $tmp/null ]] || { echo "FAIL: the device node was replaced"; failures=$((failures + 1)); }
else
    echo "skip: cannot mknod here (not root?): the device-node cases are not run"
fi
# A predict that fails after its checks (a wrong input shape) leaves the old output as it was.
echo "old logits" >"$tmp/y.npy"
python3 - "$tmp/x3.npy" <<'PY'
import struct, sys
header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 5, 5), }"
header += " " * (118 - len(header)) + "\n"
with open(sys.argv[1], "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
    f.write(b"\0" * (2 * 3 * 5 * 5 * 4))
PY
timeout 60 "$dtnn" predict --model lenet5 --load "$tmp/before.safetensors" --input "$tmp/x3.npy" \
    --output "$tmp/y.npy" >/dev/null 2>&1
[[ $(cat "$tmp/y.npy") == "old logits" ]] ||
    { echo "FAIL: a failed predict changed its --output"; failures=$((failures + 1)); }
leftover=$(find "$tmp" -name '*.tmp.*' | head -n 3)
[[ -z $leftover ]] || { echo "FAIL: temporaries left behind: $leftover"; failures=$((failures + 1)); }

# An ONNX file nested 5000 levels deep (an attribute's graph whose node has an attribute with a
# graph, ...; 118 KB) ran protobuf-c's recursion out of stack (SIGSEGV). It is refused before
# decoding; 20 nested subgraphs (61 levels) still decode.
if "$dtnn" import --help >/dev/null 2>&1; then
    python3 - "$tmp" <<'PY'
import sys
def varint(v):
    out = bytearray()
    while True:
        b, v = v & 0x7f, v >> 7
        out.append(b | 0x80 if v else b)
        if not v:
            return bytes(out)
def field(num, payload):
    return varint(num << 3 | 2) + varint(len(payload)) + payload
for name, levels in (("deep", 5000), ("nested20", 20)):
    graph = field(2, b"g")
    for _ in range(levels):
        attribute = field(1, b"body") + field(6, graph)
        graph = field(1, field(4, b"Loop") + field(5, attribute))
    with open(f"{sys.argv[1]}/{name}.onnx", "wb") as f:
        f.write(varint(1 << 3) + varint(8) + field(7, graph))
PY
    expect 1 "ONNX file '$tmp/deep.onnx' nests its messages more than 64 levels deep" -- \
        info --model "$tmp/deep.onnx"
    expect 1 "nested20.onnx: operator set -1 of the default domain" -- \
        info --model "$tmp/nested20.onnx"
fi

# Graphs of 100,000 nodes: name checks and lookups were scans, so an ONNX chain of 100,000 Relu
# nodes took 207 s in dtnn info and a model file of 100,000 layers 56 s; hashed, each takes
# about a second (1x1x1 tensors here, so the build's memory is small). The timeout only keeps a
# quadratic regression from hanging the suite: it is 50 times what a linear load takes.
loads() { # LABEL FILE: dtnn info loads FILE, within the guard
    if timeout 120 "$dtnn" info --model "$2" --batch-size 1 >"$tmp/out" 2>&1 &&
        grep -q "total:" "$tmp/out"; then
        echo "ok: $1 loads: $(grep 'total:' "$tmp/out")"
    else
        echo "FAIL: $1 (exit $?):"; tail -n 3 "$tmp/out" | sed 's/^/    /'
        failures=$((failures + 1))
    fi
}
python3 -c "open('$tmp/chain.model', 'w').write('[input]\nshape = 1x1x1\n\n' + '[relu]\n\n' * 100000)"
loads "a model file of 100,000 layers" "$tmp/chain.model"
if "$dtnn" import --help >/dev/null 2>&1 && /usr/bin/python3 -c "import onnx" 2>/dev/null; then
    /usr/bin/python3 - "$tmp/chain.onnx" <<'PY'
import sys
from onnx import TensorProto, helper, save
n = 100000
nodes = [helper.make_node("Relu", [f"t{i}" if i else "x"], [f"t{i + 1}" if i < n - 1 else "y"],
                          name=f"r{i}") for i in range(n)]
io = [helper.make_tensor_value_info(v, TensorProto.FLOAT, [1, 1, 1, 1]) for v in ("x", "y")]
graph = helper.make_graph(nodes, "chain", io[:1], io[1:])
save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), sys.argv[1])
PY
    loads "an ONNX chain of 100,000 nodes" "$tmp/chain.onnx"
fi

# Image folders: links to folders are followed, but each folder may be reached once; a link
# back to an ancestor (a loop) or to another class's folder (a second label) is refused.
mkimf=$(dirname "$dtnn")/make-imagefolder
if [[ -x $mkimf ]] && "$mkimf" "$tmp/imf" --classes 2 --train 2 --val 1 >/dev/null 2>&1; then
    imf=(train --model resnet20 --dataset imagefolder --data-dir "$tmp/imf" --image-size 32
         --batch-size 2 --steps 1 --threads 1 --loader-threads 0)
    mkdir -p "$tmp/imf-extra/c1"
    cp "$(find "$tmp/imf/train" -name '*.jpg' | head -n 1)" "$tmp/imf-extra/c1/linked.jpg"
    ln -s "$tmp/imf-extra/c1" "$tmp/imf/train/$(ls "$tmp/imf/train" | tail -n 1)/more"
    if timeout 120 "$dtnn" "${imf[@]}" >"$tmp/out" 2>&1; then
        echo "ok: a link to a folder outside the split is followed"
    else
        echo "FAIL: a link to a folder outside the split was refused:"; sed 's/^/    /' "$tmp/out"
        failures=$((failures + 1))
    fi
    first=$(ls "$tmp/imf/train" | head -n 1)
    ln -s . "$tmp/imf/train/$first/self"
    late "train/$first/self is the folder .*train/$first again \(a symbolic link back to its own parent, a loop\)" \
        "${imf[@]}"
    rm "$tmp/imf/train/$first/self"
    ln -s "../$first" "$tmp/imf/train/$(ls "$tmp/imf/train" | tail -n 1)/stolen"
    late "stolen is the folder .*train/$first again \(a symbolic link\)" "${imf[@]}"
    rm "$tmp/imf/train/$(ls "$tmp/imf/train" | tail -n 1)/stolen"
    ln -s .. "$tmp/imf/train/$first/up"
    late "train/$first/up is the folder .*train again" "${imf[@]}"
else
    echo "skip: no make-imagefolder in this build: the image-folder cases are not run"
fi

if [[ $failures -ne 0 ]]; then
    echo "cli_hostile_paths: $failures case(s) FAILED"
    exit 1
fi
echo "cli_hostile_paths: all cases passed"
