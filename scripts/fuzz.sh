#!/usr/bin/env bash
# Builds the libFuzzer harnesses of fuzz/ with clang (ASan + UBSan) into build-fuzz/ and runs
# each for SECONDS (default 20) from its committed seed corpus (fuzz/corpus/<harness>/; new
# finds go to a scratch copy, so the committed corpus only changes by hand), after replaying
# every kept crash input (fuzz/regressions/<harness>/). Prints executions per harness; exits
# non-zero on any crash, leak or sanitizer report (the input is kept in build-fuzz/artifacts).
# Without the cuda backend: the harnesses feed parsers, which never reach a device.
#   scripts/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
scripts/install-deps.sh clang
cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DDTNN_FUZZ=ON -DDTNN_MPI=OFF -DDTNN_CUDA=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >build-fuzz.cmake.log 2>&1 || { cat build-fuzz.cmake.log; exit 1; }
cmake --build build-fuzz -j "$(nproc)" >/dev/null
mkdir -p build-fuzz/artifacts
status=0
printf "%-18s %12s %10s %8s  %s\n" harness executions seconds corpus result
harnesses=(fuzz_idx fuzz_npy fuzz_checkpoint fuzz_model_file fuzz_cli fuzz_cifar fuzz_image fuzz_paths
           fuzz_shards)
# fuzz_onnx exists where the build found protobuf-c and onnx.proto (DTNN_ONNX).
[[ -x build-fuzz/fuzz/fuzz_onnx ]] && harnesses+=(fuzz_onnx)
for harness in "${harnesses[@]}"; do
    bin=build-fuzz/fuzz/$harness
    opts=(-rss_limit_mb=2048 -timeout=10 -artifact_prefix=build-fuzz/artifacts/$harness-)
    if compgen -G "fuzz/regressions/$harness/*" >/dev/null; then
        if ! "$bin" "${opts[@]}" fuzz/regressions/"$harness"/* >build-fuzz/$harness.regress.log 2>&1; then
            echo "$harness: a kept crash input fails again:"; tail -30 build-fuzz/$harness.regress.log
            status=1
        fi
    fi
    work=build-fuzz/corpus-$harness
    rm -rf "$work" && mkdir -p "$work"
    # fuzz_cli's target prints a usage error for most inputs: its stderr is closed (crash
    # reports still reach the log through libFuzzer's own output).
    extra=()
    [[ $harness == fuzz_cli ]] && extra=(-close_fd_mask=2)
    if "$bin" "${opts[@]}" "${extra[@]}" -max_total_time="$seconds" -print_final_stats=1 \
        "$work" "fuzz/corpus/$harness" >build-fuzz/$harness.log 2>&1; then
        result=ok
    else
        result="FAILED (build-fuzz/$harness.log)"
        status=1
    fi
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' build-fuzz/$harness.log | grep -o '[0-9]*$' || echo "?")
    printf "%-18s %12s %10s %8s  %s\n" "$harness" "$runs" "$seconds" "$(ls "$work" | wc -l)" "$result"
    [[ $result == ok ]] || tail -40 build-fuzz/$harness.log
done
exit $status
