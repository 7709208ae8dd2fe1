#!/usr/bin/env bash
# python_package.sh — the Python package (python/) over this build's libdtnn.so: its pytest
# suite (which compares with this build's dtnn and its MPI launcher), then `pip install` of
# the package into a fresh virtual environment, bundling that library, and a short training
# run from there. Skipped (77) without Debian's python3-cffi, python3-pytest or
# python3-numpy, or without libdtnn.so.
# Usage: python_package.sh SOURCE_DIR BUILD_DIR SCRATCH_DIR
set -euo pipefail
src=$1 build=$2 tmp=$3
py=/usr/bin/python3
for module in cffi pytest numpy; do
    if ! "$py" -c "import $module" 2>/dev/null; then
        echo "skipped: Debian's python3-$module is not installed (make test installs it)"
        exit 77
    fi
done
if [[ ! -f $build/libdtnn.so ]]; then
    echo "skipped: $build/libdtnn.so was not built (DTNN_SHARED=OFF, or CMake older than 3.24)"
    exit 77
fi
export DTNN_LIBRARY=$build/libdtnn.so DTNN_CLI=$build/dtnn DTNN_MPIRUN=$build/tests/mpirun
export DTNN_MAKE_IMAGEFOLDER=$build/make-imagefolder
export PYTHONDONTWRITEBYTECODE=1
(cd "$src/python" && "$py" -m pytest -q -p no:cacheprovider tests)

rm -rf "$tmp"
mkdir -p "$tmp"
if ! "$py" -m venv --system-site-packages "$tmp/venv" >"$tmp/venv.log" 2>&1; then
    echo "python_package: pytest passed; pip install not tried: no venv (python3-venv)"
    exit 0
fi
# A copy, so the in-tree build leaves nothing in the source folder.
cp -r "$src/python" "$tmp/package"
# ... without what an earlier build in the source folder left (a stale build/lib would be
# installed in place of the current sources).
rm -rf "$tmp/package/build" "$tmp/package/build-cmake" "$tmp/package"/*.egg-info \
    "$tmp/package/dtnn/libdtnn.so"
"$tmp/venv/bin/python" -m pip install -q --no-build-isolation --no-index "$tmp/package"
unset DTNN_LIBRARY PYTHONPATH
cd "$tmp"
"$tmp/venv/bin/python" - "$tmp/venv" <<'PY'
import sys
import dtnn
assert dtnn.LIBRARY_PATH.startswith(sys.argv[1]), dtnn.LIBRARY_PATH
data = dtnn.datasets.synthetic(samples=256, shape=(1, 28, 28))
model = dtnn.Model("lenet5")
history = model.fit(data, epochs=1, batch_size=32, verbose=0)
print(f"pip-installed dtnn ({dtnn.LIBRARY_PATH}): 1 epoch, train loss "
      f"{history.history['train_loss'][0]:.4f}")
PY
