#!/usr/bin/env bash
# gpu-check.sh — the one command for a GPU machine: builds dtnn with the cuda backend, runs the
# gpu tests (ctest -L gpu), benchmarks training images/s of resnet50 (224x224, batch 256) and
# resnet20 (batch 512) on dtnn (--precision fp32 and bf16) and on PyTorch eager (channels_last;
# bf16 through autocast) on
# the same GPU, and prints one table: images/s, dtnn/PyTorch, and model FLOP utilisation
# against the H200's dense peak (fp32 67 TFLOP/s without tensor cores, bf16 790 measured).
#
# Written for a fresh H200 machine with nvcc, PyTorch and the Python wheels nvidia-cudnn-cu13
# and nvidia-nccl-cu13, cmake and ninja, but no MPI, no internet and none of the Debian
# packages a full build uses: it finds cuDNN (and NCCL) in the wheels' site-packages/nvidia/
# folders through Python, cuBLAS in the toolkit (or a wheel), and turns off what is missing
# (OpenBLAS: DTNN_BLAS=none; libjpeg / libpng: DTNN_IMAGES=OFF; zlib: DTNN_ZLIB=OFF; ONNX and
# MPI always off). Also usable on any CUDA machine. Each phase runs under its own time limit,
# so a failure or a hang in one still lets the others report, and no phase may run past the
# whole run's budget (GPU_CHECK_BUDGET, 530 s: under 9 minutes). The table, the summary and
# every log go to $OUT when set, else build-gpu/check/.
# Without a GPU it says so, still builds and runs the (then skipped) gpu tests, and exits 2.
#
# Usage: scripts/gpu-check.sh            exit 0: all phases ran and passed; 1: one failed
set -u
cd "$(dirname "$0")/.." || exit 1
root=$PWD
build=$root/build-gpu
out=${OUT:-$build/check}
mkdir -p "$out"
summary=$out/summary.txt
: >"$summary"
failed=0
start=$(date +%s)

say() { echo "gpu-check: $*" | tee -a "$summary"; }
elapsed() { echo $(($(date +%s) - start)); }

# phase NAME SECONDS CMD...: runs CMD with a time limit (SECONDS, or less so that the whole run
# ends within $budget seconds), its output to $out/NAME.log.
budget=${GPU_CHECK_BUDGET:-530}
phase() {
    local name=$1 limit=$2
    shift 2
    local t0 rc left
    left=$((budget - $(elapsed) - 10))
    if [ $left -lt 15 ]; then
        say "$name: not run, the run's $budget s are spent"
        return 1
    fi
    if [ "$limit" -gt $left ]; then limit=$left; fi
    t0=$(date +%s)
    timeout -k 10 "$limit" "$@" >"$out/$name.log" 2>&1
    rc=$?
    if [ $rc -eq 0 ]; then
        say "$name: ok ($(($(date +%s) - t0)) s)"
    elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        say "$name: TIMED OUT after $limit s (log: $out/$name.log)"
    else
        say "$name: FAILED, exit $rc (log: $out/$name.log; its end:)"
        tail -n 15 "$out/$name.log" | sed 's/^/    /' | tee -a "$summary"
    fi
    return $rc
}

# The folder of Python package $1 (a namespace package too), or nothing.
py_dir() {
    python3 - "$1" <<'EOF' 2>/dev/null
import importlib.util, sys
try:
    spec = importlib.util.find_spec(sys.argv[1])
except Exception:
    spec = None
if spec is not None and spec.submodule_search_locations:
    print(list(spec.submodule_search_locations)[0])
EOF
}

# The first file named $1 under the site-packages' nvidia/ folders, or nothing.
find_in_wheels() {
    local site
    for site in $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null); do
        if [ -d "$site/nvidia" ]; then
            find "$site/nvidia" -maxdepth 4 -name "$1" 2>/dev/null | head -n 1
        fi
    done | head -n 1
}

# 0 when the C compiler finds header $1.
have_header() { printf '#include <%s>\n' "$1" | cc -E -x c - >/dev/null 2>&1; }

# ---- 1. the machine ------------------------------------------------------------------------
gpu=0
if command -v nvidia-smi >/dev/null 2>&1 && timeout 30 nvidia-smi -L >"$out/gpus.txt" 2>&1 &&
    grep -q '^GPU ' "$out/gpus.txt"; then
    gpu=1
    say "GPU: $(head -n 1 "$out/gpus.txt")"
    timeout 30 nvidia-smi >"$out/nvidia-smi.txt" 2>&1
else
    say "no GPU found ($(command -v nvidia-smi >/dev/null 2>&1 && head -n 1 "$out/gpus.txt" ||
        echo 'no nvidia-smi')): building and running the gpu tests, which will skip; no benchmarks"
fi
arch=90
if [ $gpu -eq 1 ]; then
    cap=$(timeout 30 nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null |
        head -n 1 | tr -d ' .')
    case $cap in '' | *[!0-9]*) ;; *) arch=$cap ;; esac
fi

# ---- 2. the toolkit and libraries -----------------------------------------------------------
nvcc=$(command -v nvcc || true)
for c in /usr/local/cuda/bin/nvcc "$(find_in_wheels nvcc)"; do
    if [ -z "$nvcc" ] && [ -n "$c" ] && [ -x "$c" ]; then nvcc=$c; fi
done
cudnn_root=""
for d in "$(py_dir nvidia.cudnn)" "$(dirname "$(dirname "$(find_in_wheels cudnn.h)")" 2>/dev/null)"; do
    if [ -z "$cudnn_root" ] && [ -n "$d" ] && [ -f "$d/include/cudnn.h" ]; then cudnn_root=$d; fi
done
nccl_root=""
for d in "$(py_dir nvidia.nccl)" "$(dirname "$(dirname "$(find_in_wheels nccl.h)")" 2>/dev/null)"; do
    if [ -z "$nccl_root" ] && [ -n "$d" ] && [ -f "$d/include/nccl.h" ]; then nccl_root=$d; fi
done
cublas_root=""
if [ -n "$nvcc" ] && [ ! -f "$(dirname "$(dirname "$nvcc")")/include/cublas_v2.h" ]; then
    h=$(find_in_wheels cublas_v2.h)
    if [ -n "$h" ]; then cublas_root=$(dirname "$(dirname "$h")"); fi
fi
say "nvcc: ${nvcc:-not found}; cuDNN: ${cudnn_root:-from the toolkit};" \
    "cuBLAS: ${cublas_root:-from the toolkit}; NCCL: ${nccl_root:-from the toolkit, or none}; arch sm_$arch"

flags=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DDTNN_CUDA=ON "-DDTNN_CUDA_ARCH=$arch"
    -DDTNN_ONNX=OFF -DDTNN_MPI=OFF)
if [ -n "$nvcc" ]; then flags+=("-DCMAKE_CUDA_COMPILER=$nvcc"); fi
libpath=""
# the toolkit's own libraries too: cuDNN 9 loads libnvrtc and libcublasLt at run time
if [ -n "$nvcc" ]; then
    toolkit=$(dirname "$(dirname "$nvcc")")
    libpath=$toolkit/lib64:$toolkit/lib:
fi
for d in "$cudnn_root" "$nccl_root" "$cublas_root"; do
    if [ -n "$d" ]; then libpath=$d/lib:$libpath; fi
done
if [ -n "$cudnn_root" ]; then flags+=("-DCUDNN_ROOT=$cudnn_root"); fi
if [ -n "$nccl_root" ]; then flags+=("-DNCCL_ROOT=$nccl_root"); fi
if [ -n "$cublas_root" ]; then flags+=("-DCUBLAS_ROOT=$cublas_root"); fi
if ! compgen -G '/usr/include/*/openblas-pthread/cblas.h' >/dev/null &&
    [ ! -f /usr/include/openblas/cblas.h ]; then
    flags+=(-DDTNN_BLAS=none)
    say "no OpenBLAS: DTNN_BLAS=none (the CPU reference of the tests runs on plain C loops)"
else
    flags+=(-DDTNN_BLAS=openblas)  # said every time: the build folder's cache may hold another
fi
if ! have_header jpeglib.h || ! have_header png.h; then
    flags+=(-DDTNN_IMAGES=OFF)
    say "no libjpeg / libpng headers: DTNN_IMAGES=OFF"
else
    flags+=(-DDTNN_IMAGES=ON)
fi
if ! have_header zlib.h; then
    flags+=(-DDTNN_ZLIB=OFF)
    say "no zlib header: DTNN_ZLIB=OFF"
else
    flags+=(-DDTNN_ZLIB=ON)
fi
export LD_LIBRARY_PATH=${libpath}${LD_LIBRARY_PATH:-}

# ---- 3. build, 4. gpu tests ------------------------------------------------------------------
built=0
if phase configure 60 cmake -S "$root" -B "$build" "${flags[@]}" &&
    phase build 200 cmake --build "$build" -j "$(nproc)" --target dtnn_cli test_backend_parity \
        test_gpu_train test_gpu_nccl test_bf16 test_prefetch test_half_transport test_e2e \
        test_fusion test_checkpoint; then
    built=1
    grep -E 'dtnn (CUDA|BLAS|images|zlib)' "$out/configure.log" | sed 's/^-- /    /' | tee -a "$summary"
    "$build/dtnn" devices 2>&1 | sed 's/^/    /' | tee -a "$summary"
else
    failed=1
fi
if [ $built -eq 1 ]; then
    (cd "$build" && phase gpu-tests 150 ctest -L gpu --output-on-failure) || failed=1
    grep -E 'tests passed|tests failed|Skipped|Failed|Passed' "$out/gpu-tests.log" | sed 's/^/    /' |
        tee -a "$summary"
    if [ $gpu -eq 1 ] && grep -q 'Skipped' "$out/gpu-tests.log"; then
        say "gpu tests SKIPPED on a machine with a GPU: see $out/gpu-tests.log"
        failed=1
    fi
fi

# ---- 5. benchmarks ---------------------------------------------------------------------------
# PyTorch first: its numbers stand even if a dtnn run hangs until the run's time is spent.
if [ $gpu -eq 1 ]; then
    phase torch 120 python3 "$root/tools/torch_bench.py" || failed=1
fi
# The convolutions may take 2 GiB of workspace (dtnn's default is 64 MiB, a CPU's scratch):
# cuDNN's fastest algorithms need more, and PyTorch's benchmark mode lets them have it.
if [ $gpu -eq 1 ] && [ $built -eq 1 ]; then
    phase dtnn-resnet50-fp32 90 "$build/dtnn" bench --device cuda --model resnet50 \
        --batch-size 256 --steps 10 --warmup 3 --workspace-mb 2048 || failed=1
    # bf16 measures every geometry in two layouts (NCHW and channels-last) at build
    phase dtnn-resnet50-bf16 150 "$build/dtnn" bench --device cuda --model resnet50 \
        --precision bf16 --batch-size 256 --steps 10 --warmup 3 --workspace-mb 2048 || failed=1
    phase dtnn-resnet20-fp32 45 "$build/dtnn" bench --device cuda --model resnet20 \
        --batch-size 512 --steps 20 --warmup 3 --workspace-mb 2048 || failed=1
fi

# Last, with what time is left: model-running tests of the suite on the cuda backend, as the
# guarded pass runs them on cpu-guarded (DTNN_DEVICE; the tests' own tolerances).
if [ $gpu -eq 1 ] && [ $built -eq 1 ]; then
    (cd "$build" && export DTNN_DEVICE=cuda && phase suite-on-cuda 150 ctest -R \
        '^(test_e2e|test_fusion|test_checkpoint|test_bf16|test_prefetch|test_half_transport)$' \
        --output-on-failure) ||
        failed=1
fi

# ---- 6. the table ----------------------------------------------------------------------------
python3 - "$out" "$gpu" <<'EOF' | tee "$out/table.txt" | tee -a "$summary"
import json, os, sys
out, gpu = sys.argv[1], sys.argv[2] == "1"
PEAK = {"fp32": 67e12, "bf16": 790e12}   # H200 dense: fp32 without tensor cores; bf16 measured
# training FLOPs per image (3 x forward, 2 per multiply-add) when dtnn's own count is missing
FLOPS = {"resnet50": 3 * 8.18e9, "resnet20": 3 * 8.16e7}

def last_json(path):
    try:
        lines = [l for l in open(path) if l.startswith("{")]
        return json.loads(lines[-1]) if lines else None
    except OSError:
        return None

torch = {}
t = last_json(os.path.join(out, "torch.log"))
if t:
    torch = t
rows = [("resnet50", "224x224 b256", "fp32"), ("resnet50", "224x224 b256", "bf16"),
        ("resnet20", "32x32 b512", "fp32")]
print("%-10s %-13s %-5s %16s %16s %9s %9s %9s" % ("model", "input", "prec", "dtnn img/s",
      "pytorch img/s", "dtnn/pt", "dtnn MFU", "pt MFU"))
for model, shape, prec in rows:
    d = last_json(os.path.join(out, "dtnn-%s-%s.log" % (model, prec)))
    flops = FLOPS[model]
    if d and d.get("images_per_sec"):
        flops = d["gflops"] * 1e9 / d["images_per_sec"] or flops
    pt = torch.get("%s-%s" % (model, prec))
    if not gpu:
        ds = ps = "no GPU"
    else:
        ds = "%.1f" % d["images_per_sec"] if d else "failed"
        ps = "%.1f" % pt if pt else "failed"
    ratio = "%.2f" % (d["images_per_sec"] / pt) if d and pt else "-"
    dm = "%.1f%%" % (100 * d["images_per_sec"] * flops / PEAK[prec]) if d else "-"
    pm = "%.1f%%" % (100 * pt * flops / PEAK[prec]) if pt else "-"
    print("%-10s %-13s %-5s %16s %16s %9s %9s %9s" % (model, shape, prec, ds, ps, ratio, dm, pm))
print("MFU: training FLOPs (3 x forward) x images/s over the H200's dense peak (fp32 67, bf16 790"
      " TFLOP/s). fp32 rows: no TF32 on either side. bf16: PyTorch autocast; dtnn --precision bf16"
      " (bf16 convolutions and GEMMs on fp32 activations).")
EOF
say "done in $(elapsed) s; table, summary and logs in $out"
if [ $failed -ne 0 ]; then exit 1; fi
if [ $gpu -eq 0 ]; then exit 2; fi
exit 0
