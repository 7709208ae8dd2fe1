# onnx_common.sh — the start every ONNX test shares, sourced by tests/cli_onnx_*.sh: a fresh
# folder, Debian's python3 with the modules the test needs, and a dtnn built with ONNX support;
# otherwise the test is skipped (exit 77) with one line saying why.
# Usage: onnx_test_start DTNN TMPDIR MODULE...  (sets py)
onnx_test_start() {
    local dtnn=$1 tmp=$2
    shift 2
    rm -rf "$tmp" && mkdir -p "$tmp"
    py=/usr/bin/python3
    local imports
    imports=$(IFS=,; echo "$*")
    if ! [[ -x $py ]] || ! $py -c "import $imports" 2>/dev/null; then
        echo "skipped: Debian's python3 lacks one of: $* (python3-numpy, python3-onnx)"
        exit 77
    fi
    if "$dtnn" import /nonexistent.onnx --output-model "$tmp/m" --output-weights "$tmp/w" 2>&1 |
            grep -q "without ONNX support"; then
        echo "skipped: this dtnn was built without ONNX support (DTNN_ONNX)"
        exit 77
    fi
}
