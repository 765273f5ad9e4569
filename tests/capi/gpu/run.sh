#!/bin/bash
# Compiles and runs the GPU programs of the C interface (tests/capi/gpu/) on
# a machine with an NVIDIA GPU, nvcc and no Rust toolchain:
#   bash run.sh DIR
# where DIR was filled by tests/capi/gpu/stage.sh (libGPI2.so, gaspi-run,
# the headers, the sources). Each program runs with 2 ranks under gaspi-run;
# prints one `CAPI_GPU <name> PASS|FAIL|SKIP` line per program and last
# `CAPI_GPU_TESTS passed=N failed=M skipped=K`. Exits non-zero on a failure.
set -uo pipefail
DIR=$(cd "${1:?usage: run.sh DIR}" && pwd) || exit 2
cd "$DIR" || exit 2
passed=0 failed=0 skipped=0
NVCC=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null | head -1)
if [ -z "$NVCC" ] || ! nvidia-smi -L >/dev/null 2>&1; then
    for p in bind_gpu device_kernel; do echo "CAPI_GPU $p SKIP (no nvcc or no GPU)"; done
    echo "CAPI_GPU_TESTS passed=0 failed=0 skipped=2"
    exit 0
fi
echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | paste -sd';') $("$NVCC" --version | tail -2 | head -1)"
# The soname is libGPI2.so.0, as GPI-2's.
ln -sf libGPI2.so libGPI2.so.0
FLAGS=(-O2 -I include -I src -I src/gpu -L . -lGPI2)
# libGPI2 from DIR; NVRTC (which the runtime loads for some GPU paths) from
# the CUDA toolkit.
NV=$(dirname "$(ls /usr/local/cuda/lib64/libnvrtc.so* 2>/dev/null | head -1)" 2>/dev/null)
export LD_LIBRARY_PATH="$DIR:${NV:-}:${LD_LIBRARY_PATH:-}"
build() { # name source [extra nvcc flags]
    local name=$1 src=$2; shift 2
    if ! "$NVCC" "$@" "src/gpu/$src" "${FLAGS[@]}" -o "$name" 2>"$name.build.log"; then
        cat "$name.build.log"
        echo "CAPI_GPU $name FAIL (compile)"
        failed=$((failed + 1))
        return 1
    fi
}
run() { # name needle
    local name=$1 needle=$2 out rc
    out=$(timeout 180 ./gaspi-run --timeout 150 -n 2 -t "./$name" 2>&1)
    rc=$?
    echo "$out"
    local hits
    hits=$(grep -c -- "$needle" <<<"$out")
    if [ "$rc" -eq 0 ] && [ "$hits" -eq 2 ]; then
        echo "CAPI_GPU $name PASS"
        passed=$((passed + 1))
    else
        echo "CAPI_GPU $name FAIL (rc $rc, '$needle' seen $hits times of 2)"
        failed=$((failed + 1))
        # Once more with the runtime's debug log, for the reason.
        echo "# $name again with GASPI_LOG=debug (last 80 lines)"
        GASPI_LOG=debug timeout 120 ./gaspi-run --timeout 100 -n 2 -t "./$name" 2>&1 | tail -80
    fi
}
# A C program: nvcc hands .c files to the host C compiler.
build bind_gpu bind_gpu.c -Xcompiler -std=c11 && run bind_gpu "GPU bind checked"
# The kernel needs sm_70 or newer; build for the GPU at hand.
build device_kernel device_kernel.cu -arch=native && run device_kernel "device kernel checked"
echo "CAPI_GPU_TESTS passed=$passed failed=$failed skipped=$skipped"
[ "$failed" -eq 0 ]
