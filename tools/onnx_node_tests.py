#!/usr/bin/python3
"""onnx_node_tests.py -- ONNX's backend node tests run through dtnn's importer.

    /usr/bin/python3 tools/onnx_node_tests.py DTNN WORKDIR [DATA_DIR] [--verbose]

DATA_DIR is the node folder of Debian's libonnx-testdata
(default /usr/share/libonnx-testdata/data/node). Each case there is one node with its inputs and
expected outputs in test_data_set_*/{input,output}_K.pb. The walk takes every case whose graph
is a single node of an operator dtnn imports (the list below; the "_expanded" cases, which are
several nodes of other operators, are not single-node cases) and, for each of its data sets:

  - keeps the node's first input as the model's input and turns every other input into an
    initializer holding that data set's values: a dtnn model has one input, the batch, so a
    second operand (a weight, a bias, the other addend) is a constant of the model;
  - runs `dtnn predict --model case.onnx` on input_0 and compares its output, flattened per
    sample, with output_0: |dtnn - expected| <= 1e-6 * max(1, max|expected|) + 1e-4 |expected|
    elementwise (ONNX's own runner allows rtol 1e-3);
  - counts the case as pass, fail (a wrong value, a crash, an exit other than 0 and 1, or an
    output of the wrong shape), or unsupported (dtnn refused the graph with its one-line
    message and exit 1; the cause is that message with names and numbers taken out).

It prints one line per case and data set (with --verbose) or per failure, then the counts by
operator and the unsupported causes by count, and exits 1 if any case failed, 77 (skip) when the
test data or numpy and onnx are missing.
"""
import collections
import os
import re
import subprocess
import sys

try:
    import numpy as np
    import onnx
    from onnx import numpy_helper
except ImportError as e:
    print(f"skipped: {e.name} is not installed (Debian's python3-numpy and python3-onnx)")
    sys.exit(77)

TESTDATA = "/usr/share/libonnx-testdata/data"
# The suites of single-operator cases; "real" holds whole networks with external weights.
SUITES = ("node", "pytorch-converted", "pytorch-operator", "simple")

# The operators of dtnn's importer (src/io/onnx_import_ops.c); the walk covers exactly these.
SUPPORTED = {
    "Conv", "Gemm", "MatMul", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool",
    "BatchNormalization", "Relu", "LeakyRelu", "Sigmoid", "Tanh", "Clip", "HardSigmoid",
    "HardSwish", "Softmax", "Add", "Mul", "Sub", "Div", "Erf", "Concat", "Flatten", "Reshape",
    "Squeeze", "Unsqueeze", "Dropout", "Identity", "Pad", "Constant", "Shape", "ReduceMean",
    "Sqrt", "Slice", "Split", "ReduceSum", "ReduceL2", "Resize", "Upsample",
}


def load_tensor(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def case_model(model, inputs):
    """The case's model with inputs[1:] as initializers; None where an input is not a tensor."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    keep = []
    for k, vi in enumerate(g.input):
        if k == 0 or k >= len(inputs):
            keep.append(vi)
            continue
        g.initializer.append(numpy_helper.from_array(inputs[k], vi.name))
    del g.input[:]
    g.input.extend(keep[:1])
    return m


def cause_of(message):
    """dtnn's refusal without the file, node name and numbers: one cause per kind of refusal."""
    line = message.strip().splitlines()[-1] if message.strip() else "(no message)"
    line = re.sub(r"^.*?\.onnx: ", "", line)
    line = re.sub(r"node '[^']*' \(([A-Za-z]+)\): ", r"\1: ", line)
    line = re.sub(r"'[^']*'", "'…'", line)
    # Numbers vary from case to case, but for the rank of an input and the opset of a model.
    line = re.sub(r"(?<![\w.])(?<!opset )(?<!set )-?\d+(\.\d+)?(e-?\d+)?(?! dimensions)(?!-D)(?!\d)",
                  "N", line)
    return line


def run(cmd):
    """(exit code, output); a sanitizer's report counts as a crash whatever the exit code
    (AddressSanitizer exits 1, as a refusal does)."""
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out = p.stdout + p.stderr
    if "Sanitizer" in out or "runtime error:" in out:
        return 134, out
    return p.returncode, out


def walk_case(dtnn, work, case_dir, name, verbose):
    """[(data set, verdict, detail)] for one case; verdict is pass / fail / unsupported."""
    model = onnx.load(os.path.join(case_dir, "model.onnx"))
    results = []
    sets = sorted(d for d in os.listdir(case_dir) if d.startswith("test_data_set_"))
    for ds in sets:
        dsd = os.path.join(case_dir, ds)
        n_in = len([f for f in os.listdir(dsd) if f.startswith("input_")])
        n_out = len([f for f in os.listdir(dsd) if f.startswith("output_")])
        d = os.path.join(work, name, ds)
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, "case.onnx")
        try:
            inputs = [load_tensor(os.path.join(dsd, f"input_{k}.pb")) for k in range(n_in)]
            expected = [load_tensor(os.path.join(dsd, f"output_{k}.pb")) for k in range(n_out)]
            onnx.save(case_model(model, inputs), path)
        except (ValueError, onnx.onnx_cpp2py_export.checker.ValidationError):
            # Sequences and optionals are not tensors: the case's own file goes to dtnn, which
            # must refuse it.
            inputs, expected = [], []
            path = os.path.join(case_dir, "model.onnx")
        rc, out = run([dtnn, "import", path, "--output-model", os.path.join(d, "m"),
                       "--output-weights", os.path.join(d, "w.safetensors")])
        if rc == 1:
            results.append((ds, "unsupported", cause_of(out)))
            continue
        if rc != 0:
            results.append((ds, "fail", f"dtnn import exited {rc}: {out.strip()[-300:]}"))
            continue
        if not inputs or inputs[0].dtype != np.float32:
            results.append((ds, "fail", "dtnn accepted a graph whose input is not float32"))
            continue
        x = inputs[0]
        # [N, C, L] is dtnn's [N, C, L, 1] (the same memory); predict reads 3-D as [N, H, W].
        np.save(os.path.join(d, "x.npy"), x.reshape(x.shape + (1,)) if x.ndim == 3 else x)
        rc, out = run([dtnn, "predict", "--model", path, "--input", os.path.join(d, "x.npy"),
                       "--output", os.path.join(d, "y.npy"), "--threads", "1"])
        if rc == 1:
            results.append((ds, "unsupported", cause_of(out)))
            continue
        if rc != 0:
            results.append((ds, "fail", f"dtnn predict exited {rc}: {out.strip()[-300:]}"))
            continue
        got = np.load(os.path.join(d, "y.npy")).astype(np.float64)
        want = expected[0].astype(np.float64)
        n = want.shape[0] if want.ndim >= 2 else 1
        if got.size != want.size or got.shape[0] != n:
            results.append((ds, "fail", f"output shape {got.shape}, expected {want.shape}"))
            continue
        got, want = got.reshape(n, -1), want.reshape(n, -1)
        # NaN where the reference has NaN (sqrt of a negative) matches; anywhere else it fails
        nan_want = np.isnan(want)
        if not np.array_equal(np.isnan(got), nan_want):
            results.append((ds, "fail", "NaN where the reference has a number, or the reverse"))
            continue
        got, want = np.where(nan_want, 0.0, got), np.where(nan_want, 0.0, want)
        scale = max(1.0, float(np.abs(want).max()) if want.size else 1.0)
        err = np.abs(got - want)
        ok = bool(np.all(err <= 1e-6 * scale + 1e-4 * np.abs(want)))
        rel = float(err.max() / scale) if err.size else 0.0
        results.append((ds, "pass" if ok else "fail", f"max |a-b| / max(1, max|b|) = {rel:.2g}"))
    for ds, verdict, detail in results:
        if verbose or verdict == "fail":
            print(f"{verdict:11s} {name}/{ds}: {detail}")
    return results


def main():
    args = [a for a in sys.argv[1:] if a != "--verbose"]
    verbose = "--verbose" in sys.argv[1:]
    if len(args) < 2:
        print(__doc__)
        return 2
    dtnn, work = args[0], args[1]
    suites = args[2:] or [os.path.join(TESTDATA, s) for s in SUITES]
    suites = [d for d in suites if os.path.isdir(d)]
    if not suites:
        print(f"skipped: {TESTDATA} is missing (Debian's libonnx-testdata)")
        return 77
    by_op = collections.defaultdict(collections.Counter)
    by_suite = collections.defaultdict(collections.Counter)
    causes = collections.Counter()
    for suite in suites:
        sname = os.path.basename(os.path.normpath(suite))
        for name in sorted(os.listdir(suite)):
            case_dir = os.path.join(suite, name)
            if not os.path.isfile(os.path.join(case_dir, "model.onnx")):
                continue
            ops = [nd.op_type for nd in onnx.load(os.path.join(case_dir, "model.onnx")).graph.node]
            if len(ops) != 1 or ops[0] not in SUPPORTED:
                continue
            for _, verdict, detail in walk_case(dtnn, os.path.join(work, sname), case_dir,
                                                f"{sname}/{name}", verbose):
                by_op[ops[0]][verdict] += 1
                by_suite[sname][verdict] += 1
                if verdict == "unsupported":
                    causes[detail if detail.startswith(ops[0] + ":") else f"{ops[0]}: {detail}"] += 1
    print(f"\n{'suite / operator':24s} {'pass':>5s} {'fail':>5s} {'unsupported':>12s}")
    for key, table in (("suite", by_suite), ("operator", by_op)):
        for k in sorted(table):
            c = table[k]
            print(f"{k:24s} {c['pass']:5d} {c['fail']:5d} {c['unsupported']:12d}")
        print()
    total = sum(by_suite.values(), collections.Counter())
    print(f"{'total':24s} {total['pass']:5d} {total['fail']:5d} {total['unsupported']:12d}")
    print("\nunsupported, by cause:")
    for cause, k in causes.most_common():
        print(f"{k:4d}  {cause}")
    return 1 if total["fail"] else 0


if __name__ == "__main__":
    sys.exit(main())
