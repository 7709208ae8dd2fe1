#!/usr/bin/env bash
# ONNX's backend node tests (label onnx): tools/onnx_node_tests.py walks the single-operator
# cases of Debian's libonnx-testdata (node, pytorch-converted, pytorch-operator, simple) whose
# operator dtnn imports, runs each data set through `dtnn predict --model case.onnx` (the
# node's other inputs become initializers) and compares with the expected output. It prints
# pass / fail / unsupported by suite and operator and the causes of the unsupported cases, and
# fails on any failure: a wrong value, a crash, or a refusal that is not dtnn's one-line
# message with exit 1. Every case and data set gets a line (--verbose).
# Skipped (exit 77) without numpy and onnx, without the test data, or in a build without ONNX.
# Usage: cli_onnx_node_tests.sh DTNN TMPDIR
set -eu
dtnn=$1
tmp=$2
. "$(dirname "$0")/onnx_common.sh"
onnx_test_start "$dtnn" "$tmp" numpy onnx
exec $py "$(dirname "$0")/../tools/onnx_node_tests.py" "$dtnn" "$tmp" --verbose
