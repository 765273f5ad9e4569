#!/bin/bash
# Runs every GPU test and benchmark in one go, on a machine with an NVIDIA
# GPU and no Rust toolchain: `bash bench/gpu/run-all.sh DIR`, where DIR holds
# the binaries built elsewhere by `bash bench/gpu/stage.sh DIR` (gaspi-bench,
# gaspi-gpu-tests, matvec, gaspi-run). Prints the benchmarks' JSON lines,
# then one line per test case, and last `GPU_TESTS passed=N failed=M skipped=K`.
# Exits non-zero when a test failed.
set -uo pipefail
DIR=${1:?usage: run-all.sh DIR}
cd "$DIR" || exit 2
# NVRTC is loaded at run time: find the CUDA toolkit's copy.
NV=""
for f in /usr/local/cuda/lib64/libnvrtc.so.13 /usr/local/cuda/lib64/libnvrtc.so; do
    [ -e "$f" ] && { NV=$(dirname "$f"); break; }
done
[ -z "$NV" ] && NV=$(dirname "$(find /usr /opt -name 'libnvrtc.so*' 2>/dev/null | grep -v builtins | head -1)" 2>/dev/null)
export LD_LIBRARY_PATH="${NV:-}:${LD_LIBRARY_PATH:-}"
echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | paste -sd';') cores=$(nproc)"
tests=$(mktemp)
timeout 900 ./gaspi-gpu-tests >"$tests" 2>&1
tests_rc=$?
# A benchmark that fails after printing some records still says so.
bench() {
    local out rc
    out=$(timeout 300 ./gaspi-bench --json "$@" 2>&1)
    rc=$?
    grep -E '^\{' <<<"$out"
    [ "$rc" -eq 0 ] || echo "{\"bench\":\"$1\",\"note\":\"failed (rc $rc)\"}"
}
bench notify-rtt
bench gpu-pingpong --device-driven
GASPI_GPU_NOTIFICATIONS=device bench gpu-pingpong --device-driven
bench gpu-bw
bench host-gpu-bw
# Where gdrcopy's driver is present, the round trip with the words mapped
# through it (elsewhere the placement falls back to host-mapped).
if [ -e /dev/gdrdrv ]; then
    GASPI_GPU_NOTIFICATIONS=gdrcopy bench notify-rtt
fi
if [ -x ./matvec ]; then
    # PLOT_DIR: where matvec's --plot PNG goes (default DIR).
    timeout 300 ./matvec --json --plot "${PLOT_DIR:-.}/matvec.png" 2>&1 | grep -E '^\{' || echo '{"bench":"matvec","note":"failed"}'
fi
# The C interface's GPU programs (tests/capi/gpu/run.sh), where staged.
capi_rc=0
if [ -x ./capi-gpu/run.sh ]; then
    bash ./capi-gpu/run.sh ./capi-gpu
    capi_rc=$?
fi
grep -v '^GPU_TESTS' "$tests"
grep '^GPU_TESTS' "$tests" || echo "GPU_TESTS passed=0 failed=1 skipped=0 (the test program did not finish: rc $tests_rc)"
rm -f "$tests"
[ "$tests_rc" -ne 0 ] && exit $tests_rc
exit $capi_rc
