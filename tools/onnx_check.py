"""Checks an ONNX file written by `dtnn export` (tests/cli_onnx_export.sh).

  onnx_check.py check FILE.onnx CHECKPOINT.safetensors
      onnx.checker.check_model with full_check (shape inference too); every tensor of the
      checkpoint but num_batches_tracked is an initializer of the same name and shape; every
      Conv / Gemm / BatchNormalization node is named as the layer its weight belongs to; no
      Dropout node; input and output have the symbolic batch dimension N. Needs python3-onnx.
  onnx_check.py run FILE.onnx X.npy DTNN_LOGITS.npy [TOL]
      runs the file in onnxruntime on X (all of it, then the first sample alone, which
      checks the dynamic batch) and compares with dtnn's logits: max |a - b| / max |b| <= TOL
      (default 1e-5). Needs onnxruntime and numpy.
Exits 1 on any mismatch, printing what differs.
"""
import json
import struct
import sys


def safetensors_shapes(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    return {k: v["shape"] for k, v in header.items() if k != "__metadata__"}


def check(onnx_path, ckpt_path):
    import onnx

    model = onnx.load(onnx_path)
    onnx.checker.check_model(model, full_check=True)
    g = model.graph
    problems = []
    inits = {t.name: list(t.dims) for t in g.initializer}
    for name, shape in safetensors_shapes(ckpt_path).items():
        if name.endswith("num_batches_tracked") or name.startswith("optimizer."):
            continue
        if name not in inits:
            problems.append(f"checkpoint tensor {name} is not an initializer")
        elif inits[name] != list(shape):
            problems.append(f"{name}: initializer {inits[name]} but checkpoint {shape}")
    for node in g.node:
        if node.op_type == "Dropout":
            problems.append(f"node {node.name} is a Dropout")
        if node.op_type in ("Conv", "Gemm", "BatchNormalization"):
            weight = node.input[1]
            if weight != node.name + ".weight":
                problems.append(f"{node.op_type} node {node.name} reads {weight}")
    for v in list(g.input) + list(g.output):
        d0 = v.type.tensor_type.shape.dim[0]
        if d0.dim_param != "N":
            problems.append(f"{v.name}: first dimension is not the symbol N")
    ops = sorted({n.op_type for n in g.node})
    print(f"{onnx_path}: checker (full) ok, opset {model.opset_import[0].version}, "
          f"IR {model.ir_version}, {len(g.node)} nodes, {len(g.initializer)} initializers, "
          f"ops {' '.join(ops)}")
    for p in problems:
        print("  " + p)
    return 1 if problems else 0


def run(onnx_path, x_path, ref_path, tol):
    import numpy as np
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1     # the test shares the machine
    sess = ort.InferenceSession(onnx_path, so, providers=["CPUExecutionProvider"])
    x = np.load(x_path).astype(np.float32)
    if x.ndim == 3:
        x = x[:, None]
    ref = np.load(ref_path)
    out = sess.run(["output"], {"input": x})[0]
    one = sess.run(["output"], {"input": x[:1]})[0]
    bad = 0
    for what, a, b in (("batch", out, ref), ("first sample alone", one, ref[:1])):
        if a.shape != b.shape:
            print(f"{onnx_path}: {what}: onnxruntime shape {a.shape} but dtnn {b.shape}")
            bad = 1
            continue
        err = float(np.abs(a - b).max()) / max(float(np.abs(b).max()), 1e-30)
        ok = err <= tol
        bad |= not ok
        print(f"{onnx_path}: onnxruntime {ort.__version__} vs dtnn, {what} {list(a.shape)}: "
              f"max|a-b|/max|b| = {err:.3g} (tol {tol:g}) {'ok' if ok else 'MISMATCH'}")
    return bad


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "check":
        sys.exit(check(sys.argv[2], sys.argv[3]))
    if len(sys.argv) in (5, 6) and sys.argv[1] == "run":
        tol = float(sys.argv[5]) if len(sys.argv) == 6 else 1e-5
        sys.exit(run(sys.argv[2], sys.argv[3], sys.argv[4], tol))
    sys.exit(__doc__)
