#!/usr/bin/env bash
# ONNX import (label onnx). (a) Round trip: lenet5, resnet20, models/onnx_all_layers.model
# (every layer type the exporter writes), models/split_attention.model (softmax and sums across
# channel groups), models/attention_blocks.model (permute, matmul, softmax, layernorm and linear
# over the last axis; opset 17) and models/mobile_blocks.model (hardswish,
# hardsigmoid, broadcasting mul / add / sub and their constant operands, constant padding,
# clamp, hardtanh, ceil-mode pools with asymmetric pads, dilated max pooling, global max
# pooling) trained 2 steps, written by `dtnn export`, run back with `dtnn predict --model
# F.onnx` and through `dtnn import`'s model file and weights: the original's logits within
# 1e-6 relative (max |a - b| / max |b|).
# (b) torchvision models written by torch.onnx.export (tools/torch_onnx_export.py: opset 13,
# eval mode, random weights and batch-norm statistics): `dtnn predict` on the file gives
# torchvision's logits within 1e-4 relative, among them mobilenet_v3_small (Hardswish is
# HardSigmoid + Mul at opset 13, HardSwish at 14; squeeze-and-excitation is a broadcast Mul) and
# efficientnet_b0 (SiLU is Sigmoid + Mul), convnext_tiny at opset 17 (LayerNorm2d and each
# block's Linear, GELU and Linear between permutes: a channels-last view whose MatMuls are
# 1x1 convolutions and whose element-wise operators keep the view) and at opset 14, torch
# 1.13's default, where each LayerNorm is written out in nine operators (one layernorm again,
# with torchvision's parameters), and MobileViT's block (tools/torch_onnx_export.py vit: patches
# unfolded by Reshape and Transpose, self-attention on permute, matmul and the last-axis
# softmax, layernorm and linear) and EfficientFormer's attention stage (meta3d: tokens from a
# flattened map, q, k and v split off the last axis, a gathered bias, the token mean); both
# also train 2 steps. (c) `dtnn train --model F.onnx` runs
# 2 steps from the initializers. (d) Graphs written with onnx.helper: Conv with asymmetric pads, GlobalMaxPool,
# HardSigmoid with ONNX's default alpha 0.2, Mul by a per-channel constant, Sub c - x, Add of a
# scalar, Div by a per-channel constant and by a computed value, Mul of a flat value by a
# [features] vector, Pad by 1.5 with asymmetric pads, Pad in
# opset 9's attribute form with channels, a zero Pad before a Relu, Erf, and GELU as Div, Erf,
# Add and Mul, channel Splits (sizes given, equal parts) and a channel Slice with negative
# bounds, ReduceMean over the channels, ReduceSum and ReduceL2 over H and W and over the
# channels, ConvNeXt-V2's channels-last global response normalisation, NFNets' weight
# standardisation folded (reductions and a training-mode BatchNormalization of a constant), a
# nearest Resize by sizes give NumPy's values within 1e-5 (a Split of rows, a channel mean
# without keepdims, a nearest Resize that does not repeat values and a cubic one are refused); Pad mode=reflect, Gemm transA = 1, a weight that
# does not fit its input, a corrupt and a truncated file each give one line and exit 1.
# Skipped (exit 77) without numpy or in a build without ONNX support; part (b) and (c) need
# Debian's python3-torch and python3-torchvision and say so when they are missing.
# Usage: cli_onnx_import.sh DTNN TMPDIR
set -eu
dtnn=$1
tmp=$2
. "$(dirname "$0")/onnx_common.sh"
onnx_test_start "$dtnn" "$tmp" numpy
fail=0

# compare A B TOL NAME: max |a - b| / max |b| <= TOL
compare() {
    $py - "$@" <<'P' || fail=1
import sys, numpy as np
a, b = np.load(sys.argv[1]).astype(np.float64), np.load(sys.argv[2]).astype(np.float64)
tol, name = float(sys.argv[3]), sys.argv[4]
if a.shape != b.shape:
    print(f"FAIL {name}: shapes {a.shape} and {b.shape}"); sys.exit(1)
rel = np.abs(a - b).max() / max(np.abs(b).max(), 1e-30)
print(f"{'ok  ' if rel <= tol else 'FAIL'} {name}: max|a-b|/max|b| = {rel:.3g} (tolerance {tol:g})")
sys.exit(0 if rel <= tol else 1)
P
}

# (a) round trip
for spec in lenet5:1x28x28 resnet20:3x32x32 models/onnx_all_layers.model:3x8x8 \
        models/mobile_blocks.model:3x32x32 models/split_attention.model:3x8x8 \
        models/attention_blocks.model:3x8x8; do
    model=${spec%%:*}
    shape=${spec#*:}
    d="$tmp/$(basename "$model" .model)"
    mkdir -p "$d"
    $py - "$d" "$shape" <<'P'
import sys, numpy as np
d, shape = sys.argv[1], tuple(int(v) for v in sys.argv[2].split("x"))
rng = np.random.default_rng(0)
np.save(f"{d}/train_x.npy", rng.standard_normal((16,) + shape).astype(np.float32))
np.save(f"{d}/train_y.npy", rng.integers(0, 10, 16).astype(np.int64))
np.save(f"{d}/x.npy", rng.standard_normal((5,) + shape).astype(np.float32))
P
    zoo=()
    [[ $model == *.model ]] || zoo=(--classes 10)
    "$dtnn" train --model $model "${zoo[@]}" --dataset npy --data-dir "$d" --steps 2 \
        --batch-size 8 --optimizer sgd --lr 0.05 --momentum 0.9 --threads 1 \
        --save "$d/ck.safetensors" --quiet >/dev/null
    "$dtnn" predict --model $model "${zoo[@]}" --load "$d/ck.safetensors" --input "$d/x.npy" \
        --output "$d/dtnn.npy" --threads 1 >/dev/null
    [[ $model == *.model ]] || zoo+=(--input $shape)
    opset=13
    [[ $model == *attention_blocks* ]] && opset=17   # its LayerNormalization
    "$dtnn" export --model $model "${zoo[@]}" --load "$d/ck.safetensors" \
        --output "$d/model.onnx" --opset $opset >/dev/null
    "$dtnn" predict --model "$d/model.onnx" --input "$d/x.npy" --output "$d/onnx.npy" \
        --threads 1 >/dev/null
    compare "$d/onnx.npy" "$d/dtnn.npy" 1e-6 "$model: dtnn export, predict --model F.onnx"
    "$dtnn" import "$d/model.onnx" --output-model "$d/imported.model" \
        --output-weights "$d/imported.safetensors" >/dev/null
    "$dtnn" predict --model "$d/imported.model" --load "$d/imported.safetensors" \
        --input "$d/x.npy" --output "$d/imported.npy" --threads 1 >/dev/null
    compare "$d/imported.npy" "$d/dtnn.npy" 1e-6 "$model: dtnn import's model file and weights"
done

# (d) errors: exit code 1 and one line naming the problem.
expect() {  # expect TEXT command...
    local text=$1 rc=0
    shift
    "$@" >"$tmp/out.txt" 2>&1 || rc=$?
    if [[ $rc -ne 1 ]] || ! grep -q -- "$text" "$tmp/out.txt" ||
            [[ $(wc -l <"$tmp/out.txt") -ne 1 ]]; then
        echo "FAIL: '$*' gave exit $rc (want 1, one line with '$text'):"; cat "$tmp/out.txt"
        fail=1
    else
        echo "error as expected (exit $rc): $(cat "$tmp/out.txt")"
    fi
}
printf 'this is not a protobuf message at all\377\377\377' >"$tmp/corrupt.onnx"
expect "is not an ONNX model file" "$dtnn" predict --model "$tmp/corrupt.onnx" \
    --input "$tmp/lenet5/x.npy" --output "$tmp/x.npy"
head -c 2000 "$tmp/lenet5/model.onnx" >"$tmp/truncated.onnx"
expect "truncated.onnx" "$dtnn" import "$tmp/truncated.onnx" --output-model "$tmp/t.model" \
    --output-weights "$tmp/t.safetensors"
expect "cannot open ONNX file" "$dtnn" info --model "$tmp/missing.onnx"

# Unsupported attributes and operators in graphs written with onnx.helper (Debian's
# python3-onnx): the line names the node, its operator and the attribute.
if $py -c "import onnx" 2>/dev/null; then
    $py - "$tmp" <<'P'
import math, sys, numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto
tmp = sys.argv[1]
def save(name, nodes, inits, out_shape, opset=13):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])
    g = helper.make_graph(nodes, name, [x],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)],
                          [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    onnx.save(m, f"{tmp}/{name}.onnx")
rng = np.random.default_rng(1)
x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
np.save(f"{tmp}/h_x.npy", x)
# Conv, pads [top 1, left 0, bottom 2, right 1], stride 2: rows (8 + 3 - 3) / 2 + 1 = 5,
# columns (8 + 1 - 3) / 2 + 1 = 4; NumPy's reference in float64.
wc = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 2), (0, 1)))
ref = np.zeros((1, 4, 5, 4))
for i in range(5):
    for j in range(4):
        ref[0, :, i, j] = np.tensordot(wc, xp[0, :, 2 * i:2 * i + 3, 2 * j:2 * j + 3], 3)
np.save(f"{tmp}/ref_asym.npy", ref)
save("asym", [helper.make_node("Conv", ["x", "w"], ["y"], name="asym_conv", pads=[1, 0, 2, 1],
                               strides=[2, 2])], {"w": wc}, [1, 4, 5, 4])
np.save(f"{tmp}/ref_gmax.npy", x.max(axis=(2, 3), keepdims=True))
save("gmax", [helper.make_node("GlobalMaxPool", ["x"], ["y"], name="gmp")], {}, [1, 3, 1, 1])
save("erf", [helper.make_node("Erf", ["x"], ["y"], name="erf")], {}, [1, 3, 8, 8])
np.save(f"{tmp}/ref_erf.npy", np.vectorize(math.erf)(x.astype(np.float64)))
# Sqrt of x * x + 1 (dtnn's sqrt after mul and add)
save("sqrt", [helper.make_node("Mul", ["x", "x"], ["sq"], name="sq"),
              helper.make_node("Add", ["sq", "one"], ["s"], name="plus1"),
              helper.make_node("Sqrt", ["s"], ["y"], name="sqrt")],
     {"one": np.array(1.0, np.float32)}, [1, 3, 8, 8])
np.save(f"{tmp}/ref_sqrt.npy", np.sqrt(x.astype(np.float64) ** 2 + 1))
# GELU as torch.onnx writes it before opset 20: x * 0.5 * (1 + Erf(x / sqrt 2))
save("gelu_ops", [helper.make_node("Div", ["x", "r2"], ["q"], name="div"),
                  helper.make_node("Erf", ["q"], ["e"], name="erf"),
                  helper.make_node("Add", ["e", "one"], ["s"], name="add"),
                  helper.make_node("Mul", ["x", "s"], ["m"], name="mul"),
                  helper.make_node("Mul", ["m", "half"], ["y"], name="half")],
     {"r2": np.array(1.4142135, np.float32), "one": np.array(1.0, np.float32),
      "half": np.array(0.5, np.float32)}, [1, 3, 8, 8])
np.save(f"{tmp}/ref_gelu_ops.npy",
        x * 0.5 * (1 + np.vectorize(math.erf)(x.astype(np.float64) / math.sqrt(2))))
# Pow by 2 and by 0.5: sqrt(x^2 + 1); by 3 refused
save("pow", [helper.make_node("Pow", ["x", "two"], ["sq"], name="square"),
             helper.make_node("Add", ["sq", "one"], ["s"], name="plus1"),
             helper.make_node("Pow", ["s", "half"], ["y"], name="root")],
     {"two": np.array(2.0, np.float32), "one": np.array(1.0, np.float32),
      "half": np.array(0.5, np.float32)}, [1, 3, 8, 8])
np.save(f"{tmp}/ref_pow.npy", np.sqrt(x.astype(np.float64) ** 2 + 1))
save("cube", [helper.make_node("Pow", ["x", "three"], ["y"], name="cube")],
     {"three": np.array(3.0, np.float32)}, [1, 3, 8, 8])
# A LayerNorm over the channels of [N, C, H, W] written out as opsets before 17 do (timm's
# LayerNorm2d in its NCHW form, weight and bias [C, 1, 1]): one layernorm
lg = (rng.random((3, 1, 1)) + 0.5).astype(np.float32)
lb = rng.standard_normal((3, 1, 1)).astype(np.float32)
save("lnc", [helper.make_node("ReduceMean", ["x"], ["mu"], name="mean", axes=[1]),
             helper.make_node("Sub", ["x", "mu"], ["d"], name="centre"),
             helper.make_node("Pow", ["d", "two"], ["d2"], name="square"),
             helper.make_node("ReduceMean", ["d2"], ["var"], name="var", axes=[1]),
             helper.make_node("Add", ["var", "eps"], ["ve"], name="plus_eps"),
             helper.make_node("Sqrt", ["ve"], ["sd"], name="sd"),
             helper.make_node("Div", ["d", "sd"], ["n"], name="normalise"),
             helper.make_node("Mul", ["n", "lnc.weight"], ["m"], name="scale"),
             helper.make_node("Add", ["m", "lnc.bias"], ["y"], name="shift")],
     {"two": np.array(2.0, np.float32), "eps": np.array(1e-6, np.float32),
      "lnc.weight": lg, "lnc.bias": lb}, [1, 3, 8, 8])
x64 = x.astype(np.float64)
xc = x64 - x64.mean(axis=1, keepdims=True)
np.save(f"{tmp}/ref_lnc.npy",
        xc / np.sqrt((xc ** 2).mean(axis=1, keepdims=True) + 1e-6) * lg + lb)
# Split attention as timm writes it on 5-D values. SKNet: two paths unsqueezed and
# concatenated on axis 1, summed over it, a gate from the plane means, reshaped to
# [N, 2, C, 1, 1], a softmax over the paths, the paths weighted and summed.
wg = rng.standard_normal((6, 3, 1, 1)).astype(np.float32)
save("skatt", [helper.make_node("Relu", ["x"], ["p0"], name="path0"),
               helper.make_node("Sigmoid", ["x"], ["p1"], name="path1"),
               helper.make_node("Unsqueeze", ["p0", "ax1"], ["u0"], name="stack0"),
               helper.make_node("Unsqueeze", ["p1", "ax1"], ["u1"], name="stack1"),
               helper.make_node("Concat", ["u0", "u1"], ["st"], name="stack", axis=1),
               helper.make_node("ReduceSum", ["st", "ax1"], ["s"], name="paths_sum",
                                keepdims=0),
               helper.make_node("ReduceMean", ["s"], ["m"], name="pool", axes=[2, 3]),
               helper.make_node("Conv", ["m", "wg"], ["g"], name="select"),
               helper.make_node("Reshape", ["g", "g5"], ["g5d"], name="view5"),
               helper.make_node("Softmax", ["g5d"], ["a"], name="attn", axis=1),
               helper.make_node("Mul", ["st", "a"], ["wt"], name="weight"),
               helper.make_node("ReduceSum", ["wt", "ax1"], ["y"], name="out_sum",
                                keepdims=0)],
     {"ax1": np.array([1], np.int64), "wg": wg,
      "g5": np.array([-1, 2, 3, 1, 1], np.int64)}, [1, 3, 8, 8])
x64 = x.astype(np.float64)
paths = np.stack([np.maximum(x64, 0), 1 / (1 + np.exp(-x64))], axis=1)
gate = np.tensordot(paths.sum(1).mean(axis=(2, 3)), wg[:, :, 0, 0], (1, 1)).reshape(1, 2, 3, 1, 1)
attn = np.exp(gate) / np.exp(gate).sum(1, keepdims=True)
np.save(f"{tmp}/ref_skatt.npy", (paths * attn).sum(1))
# ResNeSt's radix softmax of one cardinal group: [N, 2C, 1, 1] as [N, 1, 2, C], its
# Transpose [0, 2, 1, 3] (only a unit axis moves), Softmax over axis 1, back to [N, 2C, 1, 1];
# and a Softmax over the channels of a feature map
save("rsoftmax", [helper.make_node("ReduceMean", ["x"], ["m"], name="pool", axes=[2, 3]),
                  helper.make_node("Conv", ["m", "wg"], ["g"], name="fc"),
                  helper.make_node("Reshape", ["g", "r4"], ["r"], name="view"),
                  helper.make_node("Transpose", ["r"], ["t"], name="radix_first",
                                   perm=[0, 2, 1, 3]),
                  helper.make_node("Softmax", ["t"], ["sm"], name="rsm", axis=1),
                  helper.make_node("Reshape", ["sm", "r2"], ["y"], name="back")],
     {"wg": wg, "r4": np.array([-1, 1, 2, 3], np.int64),
      "r2": np.array([-1, 6, 1, 1], np.int64)}, [1, 6, 1, 1])
g = np.tensordot(x64.mean(axis=(2, 3)), wg[:, :, 0, 0], (1, 1)).reshape(1, 2, 3)
np.save(f"{tmp}/ref_rsoftmax.npy", (np.exp(g) / np.exp(g).sum(1, keepdims=True)).reshape(1, 6, 1, 1))
# A tensor's batch moved to axis 1 and the first of axis 0 taken (x.flatten(2).permute(2, 0, 1)
# [0]: its first pixel), and a Reshape whose sizes multiply past 2^64 (refused, no crash)
save("pixel0", [helper.make_node("Reshape", ["x", "s3"], ["r"], name="flat"),
                helper.make_node("Transpose", ["r"], ["t"], name="pixels_first", perm=[2, 0, 1]),
                helper.make_node("Gather", ["t", "i0"], ["y"], name="first", axis=0)],
     {"s3": np.array([-1, 3, 64], np.int64), "i0": np.array(0, np.int64)}, [1, 3])
np.save(f"{tmp}/ref_pixel0.npy", x.reshape(1, 3, 64).transpose(2, 0, 1)[0])
save("huge", [helper.make_node("Reshape", ["x", "s"], ["y"], name="huge")],
     {"s": np.array([65536] * 4 + [-1], np.int64)}, [1, 3, 8, 8])
# [N, C, L] (dtnn's C x L x 1) over its last axis: Softmax, then LayerNormalization of its
# rows, back to [N, C, H, W]
lw = (rng.random(64) + 0.5).astype(np.float32)
lbias = rng.standard_normal(64).astype(np.float32)
save("rows", [helper.make_node("Reshape", ["x", "s3"], ["r"], name="rows"),
              helper.make_node("Softmax", ["r"], ["s"], name="row_softmax", axis=-1),
              helper.make_node("LayerNormalization", ["s", "rw", "rb"], ["n"], name="row_norm",
                               axis=-1, epsilon=1e-5),
              helper.make_node("Reshape", ["n", "s4"], ["y"], name="back")],
     {"s3": np.array([-1, 3, 64], np.int64), "rw": lw, "rb": lbias,
      "s4": np.array([-1, 3, 8, 8], np.int64)}, [1, 3, 8, 8], opset=17)
r = x64.reshape(1, 3, 64)
r = np.exp(r - r.max(-1, keepdims=True))
r /= r.sum(-1, keepdims=True)
r = (r - r.mean(-1, keepdims=True)) / np.sqrt(r.var(-1, keepdims=True) + 1e-5) * lw + lbias
np.save(f"{tmp}/ref_rows.npy", r.reshape(1, 3, 8, 8))
save("softc", [helper.make_node("Softmax", ["x"], ["y"], name="softc", axis=1)], {}, [1, 3, 8, 8])
np.save(f"{tmp}/ref_softc.npy", np.exp(x64) / np.exp(x64).sum(1, keepdims=True))
save("softc11", [helper.make_node("Softmax", ["x"], ["y"], name="softc11", axis=1)], {},
     [1, 3, 8, 8], opset=11)
save("hsig", [helper.make_node("HardSigmoid", ["x"], ["y"], name="hs")], {}, [1, 3, 8, 8])
np.save(f"{tmp}/ref_hsig.npy", np.clip(0.2 * x.astype(np.float64) + 0.5, 0, 1))
# Constant operands: x * s per channel, c - x over C x H x W, x + a 0-d scalar, and a [192]
# vector times the flat [N, 192]; each is dtnn's one-input mul, sub or add.
s = rng.standard_normal((1, 3, 1, 1)).astype(np.float32)
save("mulc", [helper.make_node("Mul", ["x", "s"], ["y"], name="scale")], {"s": s},
     [1, 3, 8, 8])
np.save(f"{tmp}/ref_mulc.npy", x * s)
c = rng.standard_normal((3, 8, 8)).astype(np.float32)
save("rsub", [helper.make_node("Sub", ["c", "x"], ["y"], name="rsub")], {"c": c},
     [1, 3, 8, 8])
np.save(f"{tmp}/ref_rsub.npy", c - x)
save("adds", [helper.make_node("Add", ["x", "b"], ["y"], name="shift")],
     {"b": np.array(0.75, np.float32)}, [1, 3, 8, 8])
np.save(f"{tmp}/ref_adds.npy", x + np.float32(0.75))
# Div: x by a per-channel constant (GELU's x / sqrt(2) is this with a scalar), and x by a
# computed x * x + 1 (dtnn's two-input div).
d = (rng.random((1, 3, 1, 1)) + 0.5).astype(np.float32)
save("divc", [helper.make_node("Div", ["x", "d"], ["y"], name="divc")], {"d": d}, [1, 3, 8, 8])
np.save(f"{tmp}/ref_divc.npy", x / d)
save("div2", [helper.make_node("Mul", ["x", "x"], ["sq"], name="sq"),
              helper.make_node("Add", ["sq", "one"], ["den"], name="den"),
              helper.make_node("Div", ["x", "den"], ["y"], name="div2")],
     {"one": np.array(1.0, np.float32)}, [1, 3, 8, 8])
np.save(f"{tmp}/ref_div2.npy", x / (x * x + np.float32(1.0)))
# Arithmetic of constants folded at import (MobileViT's scale factors): Mul of [1,3,1,1] by a
# scalar, Sub of a [3,1,1], Sum of two, Div; then x times the result.
ca = rng.standard_normal((1, 3, 1, 1)).astype(np.float32)
cc = rng.standard_normal((3, 1, 1)).astype(np.float32)
save("cfold", [helper.make_node("Mul", ["ca", "two"], ["m"], name="cmul"),
               helper.make_node("Sub", ["m", "cc"], ["s"], name="csub"),
               helper.make_node("Sum", ["s", "cc"], ["t"], name="csum"),
               helper.make_node("Div", ["t", "two"], ["u"], name="cdiv"),
               helper.make_node("Mul", ["x", "u"], ["y"], name="xmul")],
     {"ca": ca, "cc": cc, "two": np.array(2.0, np.float32)}, [1, 3, 8, 8])
np.save(f"{tmp}/ref_cfold.npy", x * ((ca * np.float32(2) - cc + cc) / np.float32(2)))
v = rng.standard_normal(192).astype(np.float32)
save("featc", [helper.make_node("Flatten", ["x"], ["f"], name="flat"),
               helper.make_node("Mul", ["f", "v"], ["y"], name="feat_scale")], {"v": v},
     [1, 192])
np.save(f"{tmp}/ref_featc.npy", x.reshape(1, 192) * v)
# Pad by 1.5 with pads [top 1, left 0, bottom 2, right 3] (opset 13: pads and value are
# inputs), by -2 on channels and sides in opset 9's attribute form, and zeros before a Relu
# (no Conv to fold them into): dtnn's pad layer.
save("pad15", [helper.make_node("Pad", ["x", "p", "v"], ["y"], name="pad15", mode="constant")],
     {"p": np.array([0, 0, 1, 0, 0, 0, 2, 3], np.int64), "v": np.array(1.5, np.float32)},
     [1, 3, 11, 11])
np.save(f"{tmp}/ref_pad15.npy", np.pad(x, ((0, 0), (0, 0), (1, 2), (0, 3)),
                                       constant_values=1.5))
save("pad9", [helper.make_node("Pad", ["x"], ["y"], name="pad9", pads=[0, 1, 0, 2, 0, 0, 1, 1],
                               value=-2.0)], {}, [1, 4, 9, 11], opset=9)
np.save(f"{tmp}/ref_pad9.npy", np.pad(x, ((0, 0), (1, 0), (0, 1), (2, 1)),
                                      constant_values=-2.0))
save("padrelu", [helper.make_node("Pad", ["x", "p"], ["z"], name="padz"),
                 helper.make_node("Relu", ["z"], ["y"], name="relu")],
     {"p": np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64)}, [1, 3, 10, 10])
np.save(f"{tmp}/ref_padrelu.npy", np.maximum(np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1))), 0))
# ReduceMean over H and W: keepdims 0 (negative axes) is [N, C], global average pooling;
# over the channels (keepdims 1) the reduce layer; ReduceSum over H and W (opset 13: axes as
# an input, keepdims 0) and over the channels (opset 11: the attribute); over the channels
# without keepdims it is refused ([N, H, W] has no dtnn form).
save("rmean", [helper.make_node("ReduceMean", ["x"], ["y"], name="rmean", axes=[-1, -2],
                                keepdims=0)], {}, [1, 3])
np.save(f"{tmp}/ref_rmean.npy", x.astype(np.float64).mean(axis=(2, 3)))
save("rmeanc", [helper.make_node("ReduceMean", ["x"], ["y"], name="rmeanc", axes=[1])], {},
     [1, 1, 8, 8])
np.save(f"{tmp}/ref_rmeanc.npy", x.astype(np.float64).mean(axis=1, keepdims=True))
save("rsum", [helper.make_node("ReduceSum", ["x", "ax"], ["y"], name="rsum", keepdims=0)],
     {"ax": np.array([2, 3], np.int64)}, [1, 3])
np.save(f"{tmp}/ref_rsum.npy", x.astype(np.float64).sum(axis=(2, 3)))
save("rsumc", [helper.make_node("ReduceSum", ["x"], ["y"], name="rsumc", axes=[-3])], {},
     [1, 1, 8, 8], opset=11)
np.save(f"{tmp}/ref_rsumc.npy", x.astype(np.float64).sum(axis=1, keepdims=True))
# ReduceL2 over H and W (keepdims 0) and over the channels (opset 17); and
# ConvNeXt-V2's global response normalisation as timm writes it channels-last: the plane
# norms (axes 1, 2 of the view), their mean over the channels (axis -1), x * that ratio + x.
save("rl2", [helper.make_node("ReduceL2", ["x"], ["y"], name="rl2", axes=[2, 3], keepdims=0)],
     {}, [1, 3])
np.save(f"{tmp}/ref_rl2.npy", np.sqrt((x.astype(np.float64) ** 2).sum(axis=(2, 3))))
save("rl2c", [helper.make_node("ReduceL2", ["x"], ["y"], name="rl2c", axes=[1])], {},
     [1, 1, 8, 8], opset=17)
np.save(f"{tmp}/ref_rl2c.npy", np.sqrt((x.astype(np.float64) ** 2).sum(axis=1, keepdims=True)))
save("grn", [helper.make_node("Transpose", ["x"], ["t"], name="to_last", perm=[0, 2, 3, 1]),
             helper.make_node("ReduceL2", ["t"], ["g"], name="norms", axes=[1, 2]),
             helper.make_node("ReduceMean", ["g"], ["m"], name="mean", axes=[-1]),
             helper.make_node("Add", ["m", "eps"], ["me"], name="plus_eps"),
             helper.make_node("Div", ["g", "me"], ["r"], name="ratio"),
             helper.make_node("Mul", ["t", "r"], ["tr"], name="scaled"),
             helper.make_node("Add", ["tr", "t"], ["s"], name="residual"),
             helper.make_node("Transpose", ["s"], ["y"], name="to_first", perm=[0, 3, 1, 2])],
     {"eps": np.array(1e-6, np.float32)}, [1, 3, 8, 8])
x64 = x.astype(np.float64)
gx = np.sqrt((x64 ** 2).sum(axis=(2, 3), keepdims=True))
np.save(f"{tmp}/ref_grn.npy", x64 * (gx / (gx.mean(axis=1, keepdims=True) + 1e-6)) + x64)
# NFNets' weight standardisation, folded: a 1x1 weight reshaped to [1, 4, 3], its mean and
# variance per output channel (ReduceMean, Sub, Mul, ReduceMean of constants), a
# BatchNormalization in training mode of the constant (its own statistics), reshaped back
# for the Conv (opset 15).
wsw = rng.standard_normal((4, 3, 1, 1)).astype(np.float32)
gain = rng.uniform(0.5, 2, 4).astype(np.float32)
save("wstd", [helper.make_node("Reshape", ["w", "s3"], ["wr"], name="w_rows"),
              helper.make_node("ReduceMean", ["wr"], ["m"], name="w_mean", axes=[0, 2],
                               keepdims=0),
              helper.make_node("ReduceMean", ["wr"], ["mk"], name="w_mean_k", axes=[0, 2]),
              helper.make_node("Sub", ["wr", "mk"], ["d"], name="w_dev"),
              helper.make_node("Mul", ["d", "d"], ["d2"], name="w_dev2"),
              helper.make_node("ReduceMean", ["d2"], ["v"], name="w_var", axes=[0, 2],
                               keepdims=0),
              helper.make_node("BatchNormalization", ["wr", "g", "b0", "m", "v"], ["wn"],
                               name="w_std", training_mode=1, epsilon=1e-5),
              helper.make_node("Reshape", ["wn", "s4"], ["ws"], name="w_back"),
              helper.make_node("Conv", ["x", "ws"], ["y"], name="conv_std")],
     {"w": wsw, "g": gain, "b0": np.zeros(4, np.float32),
      "s3": np.array([1, 4, -1], np.int64), "s4": np.array([4, 3, 1, 1], np.int64)},
     [1, 4, 8, 8], opset=15)
w64 = wsw.astype(np.float64).reshape(4, 3)
wn = (w64 - w64.mean(1, keepdims=True)) / np.sqrt(w64.var(1, keepdims=True) + 1e-5) * gain[:, None]
np.save(f"{tmp}/ref_wstd.npy", np.einsum("kc,nchw->nkhw", wn, x.astype(np.float64)))
save("rmeanc0", [helper.make_node("ReduceMean", ["x"], ["y"], name="rmeanc0", axes=[1],
                                  keepdims=0)], {}, [1, 8, 8])
# Channel slices: Split with sizes (opset 13's input), Split into equal parts (opset 11), a
# Slice with negative bounds, each branch through its own operator, concatenated.
save("split13", [helper.make_node("Split", ["x", "sz"], ["a", "b"], name="split", axis=1),
                 helper.make_node("Sigmoid", ["b"], ["sb"], name="sig"),
                 helper.make_node("Concat", ["sb", "a"], ["y"], name="cat", axis=1)],
     {"sz": np.array([1, 2], np.int64)}, [1, 3, 8, 8])
sig = lambda v: 1 / (1 + np.exp(-v.astype(np.float64)))
np.save(f"{tmp}/ref_split13.npy", np.concatenate([sig(x[:, 1:]), x[:, :1]], axis=1))
save("split11", [helper.make_node("Split", ["x"], ["a", "b", "c"], name="thirds", axis=-3),
                 helper.make_node("Concat", ["c", "a"], ["y"], name="cat", axis=1)], {},
     [1, 2, 8, 8], opset=11)
np.save(f"{tmp}/ref_split11.npy", np.concatenate([x[:, 2:], x[:, :1]], axis=1))
save("slicec", [helper.make_node("Slice", ["x", "s", "e", "a"], ["y"], name="mid")],
     {"s": np.array([-2], np.int64), "e": np.array([-1], np.int64),
      "a": np.array([1], np.int64)}, [1, 1, 8, 8])
np.save(f"{tmp}/ref_slicec.npy", x[:, -2:-1])
# Resize: nearest 2x by sizes (half_pixel, round_prefer_floor: the default, which repeats
# each value), refused where it would not repeat them (floor of half_pixel) or is cubic.
save("resize", [helper.make_node("Resize", ["x", "", "", "sz"], ["y"], name="resize")],
     {"sz": np.array([1, 3, 16, 24], np.int64)}, [1, 3, 16, 24])
np.save(f"{tmp}/ref_resize.npy", x.repeat(2, axis=2).repeat(3, axis=3))
save("resizefl", [helper.make_node("Resize", ["x", "", "s"], ["y"], name="resize_floor",
                                   nearest_mode="floor")],
     {"s": np.array([1, 1, 2, 2], np.float32)}, [1, 3, 16, 16])
save("cubic", [helper.make_node("Resize", ["x", "", "s"], ["y"], name="bicubic", mode="cubic")],
     {"s": np.array([1, 1, 2, 2], np.float32)}, [1, 3, 16, 16])
# 300 Identities of a constant in a chain (torch 2's exporter writes Identity for a shared
# initializer): each copies its input's dims while making its output value, which can move
# the value array (a use after free the importer once had; timm's mixnet and res2net).
chain = [helper.make_node("Identity", ["k0" if i == 0 else f"k{i}"], [f"k{i + 1}"],
                          name=f"id{i}") for i in range(300)]
save("idchain", chain + [helper.make_node("Mul", ["x", "k300"], ["y"], name="scale")],
     {"k0": d}, [1, 3, 8, 8])
np.save(f"{tmp}/ref_idchain.npy", x * d)
# Element-wise operators of constants folded at import (TF-"same" padding computes its pads
# so): Neg, Ceil, Clip with bounds as inputs, Abs, then x times the result; Ceil of a
# computed value is refused.
cu = np.array([-1.5, 0.2, 2.7], np.float32).reshape(3, 1, 1)
save("cunary", [helper.make_node("Neg", ["cu"], ["n"], name="neg"),
                helper.make_node("Ceil", ["n"], ["c"], name="ceil"),
                helper.make_node("Clip", ["c", "lo", "hi"], ["k"], name="clip"),
                helper.make_node("Abs", ["k"], ["a"], name="abs"),
                helper.make_node("Mul", ["x", "a"], ["y"], name="scale")],
     {"cu": cu, "lo": np.array(-1.0, np.float32), "hi": np.array(1.5, np.float32)},
     [1, 3, 8, 8])
np.save(f"{tmp}/ref_cunary.npy", x * np.abs(np.clip(np.ceil(-cu), -1.0, 1.5)))
save("ceilx", [helper.make_node("Ceil", ["x"], ["y"], name="ceil_x")], {}, [1, 3, 8, 8])
# Pads computed in float and concatenated before a Cast (timm's TF-"same" padding): a Concat
# of float constants folded.
save("fpads", [helper.make_node("Concat", ["pa", "pb"], ["pf"], name="cat_pads", axis=0),
               helper.make_node("Cast", ["pf"], ["pi"], name="to_int", to=TensorProto.INT64),
               helper.make_node("Pad", ["x", "pi"], ["y"], name="same_pad")],
     {"pa": np.array([0, 0, 1, 0], np.float32), "pb": np.array([0, 0, 0, 1], np.float32)},
     [1, 3, 9, 9])
np.save(f"{tmp}/ref_fpads.npy", np.pad(x, ((0, 0), (0, 0), (1, 0), (0, 1))))
save("splith", [helper.make_node("Split", ["x"], ["a", "b"], name="rows", axis=2),
                helper.make_node("Add", ["a", "b"], ["y"], name="sum")], {}, [1, 3, 4, 8])
save("reflect", [helper.make_node("Pad", ["x", "p"], ["y"], name="refl", mode="reflect")],
     {"p": np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64)}, [1, 3, 10, 10])
save("alpha", [helper.make_node("Flatten", ["x"], ["f"], name="flat"),
               helper.make_node("Gemm", ["g", "f"], ["y"], name="fc", transA=1)],
     {"g": np.ones((192, 10), np.float32)}, [1, 10])
save("wdims", [helper.make_node("Conv", ["x", "w"], ["y"], name="conv_w")],
     {"w": np.ones((4, 2, 3, 3), np.float32)}, [1, 4, 6, 6])
P
    for g in asym gmax hsig mulc rsub adds divc div2 erf gelu_ops sqrt pow lnc cfold featc pad15 pad9 \
             padrelu rmean rmeanc rsum rsumc rl2 rl2c grn wstd split13 split11 slicec resize \
             idchain \
             cunary skatt rsoftmax softc pixel0 rows \
             fpads; do
        "$dtnn" predict --model "$tmp/$g.onnx" --input "$tmp/h_x.npy" --output "$tmp/o_$g.npy" \
            --threads 1 >/dev/null || { echo "FAIL: predict $g.onnx"; fail=1; continue; }
        # dtnn writes [N, features] where ONNX has [N, C, 1, 1]: compare the values
        $py -c "import sys, numpy as np; a = np.load(sys.argv[1]); b = np.load(sys.argv[2])
np.save(sys.argv[1], a.reshape(b.shape) if a.size == b.size else a)" \
            "$tmp/o_$g.npy" "$tmp/ref_$g.npy"
        compare "$tmp/o_$g.npy" "$tmp/ref_$g.npy" 1e-5 "onnx.helper graph $g against NumPy"
    done
    # GELU's five nodes become one gelu layer (onnx_import_fuse.c), and nothing else
    layers=$("$dtnn" info --model "$tmp/gelu_ops.onnx" |
             awk '$2 ~ /^(gelu|div|erf|add|mul)$/ {print $2}' | tr '\n' ' ')
    if [[ $layers != "gelu " ]]; then
        echo "FAIL: gelu_ops imports as '$layers', expected one gelu"
        fail=1
    fi
    # ... and LayerNorm's nine, one layernorm with the weight's module name
    layers=$("$dtnn" info --model "$tmp/lnc.onnx" | awk '$3 ~ /^[0-9]+x/ {print $1 ":" $2}' |
             tr '\n' ' ')
    if [[ $layers != "lnc:layernorm " ]]; then
        echo "FAIL: lnc imports as '$layers', expected one layernorm called lnc"
        fail=1
    fi
    expect "node 'cube' (Pow): exponent 3" "$dtnn" info --model "$tmp/cube.onnx"
    expect "node 'softc11' (Softmax): attribute axis" "$dtnn" info --model "$tmp/softc11.onnx"
    expect "node 'huge' (Reshape): target shape" "$dtnn" info --model "$tmp/huge.onnx"
    expect "node 'refl' (Pad): attribute mode='reflect'" "$dtnn" info --model "$tmp/reflect.onnx"
    expect "node 'rmeanc0' (ReduceMean): only the mean over H and W" "$dtnn" info \
        --model "$tmp/rmeanc0.onnx"
    expect "node 'fc' (Gemm): attribute transA=1" "$dtnn" info --model "$tmp/alpha.onnx"
    expect "node 'rows' (Split): only a Split of channels" "$dtnn" info \
        --model "$tmp/splith.onnx"
    expect "node 'resize_floor' (Resize): nearest with coordinate_transformation_mode='half_pixel' and nearest_mode='floor' does not repeat" \
        "$dtnn" info --model "$tmp/resizefl.onnx"
    expect "node 'bicubic' (Resize): mode='cubic'" "$dtnn" info --model "$tmp/cubic.onnx"
    expect "node 'ceil_x' (Ceil): Ceil of a computed value is not supported" "$dtnn" info \
        --model "$tmp/ceilx.onnx"
    expect "node 'conv_w' (Conv): weight 'w' \[4, 2, ...\] does not fit 3 input channels" \
        "$dtnn" info --model "$tmp/wdims.onnx"
else
    echo "onnx.helper graphs skipped: Debian's python3-onnx is not installed"
fi

# (b) torchvision, (c) training from the initializers
if ! $py -c "import torch, torchvision" 2>/dev/null; then
    echo "torchvision part skipped: Debian's python3-torch / python3-torchvision not installed"
else
    # "ops": tools/torch_onnx_export.py's net of the other operators, in four opsets (Clip,
    # Pad, Squeeze/Unsqueeze and Softmax change between them).
    for spec in resnet18:64 mobilenet_v2:64 densenet121:64 squeezenet1_1:64 alexnet:224 \
            vgg11_bn:224 mobilenet_v3_small:64 mobilenet_v3_small:64:14 efficientnet_b0:64 \
            convnext_tiny:64:17 convnext_tiny:64:14 \
            ops:16:9 ops:16:11 ops:16:13 ops:16:17 vit:8:17 meta3d:8:17; do
        model=${spec%%:*}
        size=${spec#*:}
        opset=13
        if [[ $size == *:* ]]; then
            opset=${size#*:}
            size=${size%%:*}
        fi
        d="$tmp/tv_$model$opset"
        mkdir -p "$d"
        $py ../tools/torch_onnx_export.py $model "$d" $size $opset >"$d/export.log" 2>&1 || {
            echo "FAIL: torch.onnx.export of $model:"; tail -3 "$d/export.log"; fail=1; continue
        }
        "$dtnn" predict --model "$d/model.onnx" --input "$d/x.npy" --output "$d/dtnn.npy" \
            --threads 2 >/dev/null || { echo "FAIL: predict $model"; fail=1; continue; }
        compare "$d/dtnn.npy" "$d/torch.npy" 1e-4 "torch $model (${size}x$size, opset $opset)"
        if [[ $model == vit || $model == meta3d ]]; then
            # the attention blocks train: permutes, matmuls and the last-axis layers backward
            "$dtnn" train --model "$d/model.onnx" --dataset synthetic --synthetic-shape 3x8x8 \
                --steps 2 --batch-size 4 --threads 1 --quiet >/dev/null ||
                { echo "FAIL: train vit.onnx 2 steps"; fail=1; }
        fi
        if [[ $model == convnext_tiny ]]; then
            # No batch norm for the export to fold: every parameter of torchvision's model is a
            # trained dtnn parameter, the layer scales and the Linears' biases included.
            want=$($py -c "import torchvision
print(sum(p.numel() for p in torchvision.models.convnext_tiny(num_classes=10).parameters()))")
            got=$("$dtnn" info --model "$d/model.onnx" |
                  sed -n 's/^total: \([0-9]*\) parameters.*/\1/p')
            if [[ $got != "$want" ]]; then
                echo "FAIL: convnext_tiny imports $got trainable parameters, torchvision has $want"
                fail=1
            fi
        fi
    done

    # (c) 2 SGD steps from resnet18's initializers at a tiny learning rate: every parameter
    # stays within 1e-4 of what `dtnn import` writes (the initializers under dtnn's names),
    # which random initialisation would not.
    d="$tmp/tv_resnet1813"
    $py -c "
import numpy as np; r = np.random.default_rng(0)
np.save('$d/train_x.npy', r.standard_normal((8, 3, 64, 64)).astype(np.float32))
np.save('$d/train_y.npy', r.integers(0, 10, 8).astype(np.int64))"
    "$dtnn" import "$d/model.onnx" --output-model "$d/imported.model" \
        --output-weights "$d/init.safetensors" >/dev/null
    if "$dtnn" train --model "$d/model.onnx" --dataset npy --data-dir "$d" --steps 2 \
            --batch-size 4 --optimizer sgd --lr 1e-7 --threads 2 --save "$d/ck.safetensors" \
            --quiet >"$d/train.log" 2>&1; then
        $py - "$d/init.safetensors" "$d/ck.safetensors" <<'P' || fail=1
import json, struct, sys, numpy as np
def load(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    return {k: np.frombuffer(b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]],
                             dtype=np.float32) for k, v in h.items()
            if k != "__metadata__" and v["dtype"] == "F32"}
a, b = load(sys.argv[1]), load(sys.argv[2])
worst = max(np.abs(a[k] - b[k]).max() for k in a)
ok = set(a) <= set(b) and worst <= 1e-4
print(f"{'ok  ' if ok else 'FAIL'} train --model resnet18.onnx: 2 steps, {len(a)} tensors "
      f"from the initializers, max change {worst:.3g}")
sys.exit(0 if ok else 1)
P
    else
        echo "FAIL: dtnn train --model resnet18.onnx:"; cat "$d/train.log"; fail=1
    fi
fi

if [[ $fail -ne 0 ]]; then
    echo "0 passed, 1 failed"
    exit 1
fi
echo "1 passed, 0 failed"
