#!/usr/bin/env bash
# ONNX's backend node tests (label onnx): tools/onnx_node_tests.py walks the single-operator
# cases of Debian's libonnx-testdata (node, pytorch-converted, pytorch-operator, simple) whose
# operator dtnn imports, runs each data set through `dtnn predict --model case.onnx` (the
# node's other inputs become initializers) and compares with the expected output. It prints
# pass / fail / unsupported by suite and operator and the causes of the unsupported cases, and
# fails on any failure: a wrong value, a crash, or a refusal that is not dtnn's one-line
# message with exit 1.
# Skipped (exit 77) without numpy and onnx, without the test data, or in a build without ONNX.
# Usage: cli_onnx_node_tests.sh DTNN TMPDIR
set -eu
dtnn=$1
tmp=$2
rm -rf "$tmp" && mkdir -p "$tmp"
py=/usr/bin/python3
if ! [[ -x $py ]] || ! $py -c "import numpy, onnx" 2>/dev/null; then
    echo "skipped: Debian's python3-numpy and python3-onnx are not installed"
    exit 77
fi
if "$dtnn" import /nonexistent.onnx --output-model "$tmp/m" --output-weights "$tmp/w" 2>&1 |
        grep -q "without ONNX support"; then
    echo "skipped: this dtnn was built without ONNX support (DTNN_ONNX)"
    exit 77
fi
exec $py "$(dirname "$0")/../tools/onnx_node_tests.py" "$dtnn" "$tmp"
