#!/bin/bash
# Runs every GPU test and benchmark in one go, on a machine with NVIDIA
# GPUs and no Rust toolchain: `bash bench/gpu/run-all.sh DIR`, where DIR holds
# the binaries built elsewhere by `bash bench/gpu/stage.sh DIR` (gaspi-bench,
# gaspi-gpu-tests, matvec, gaspi-run, peers/ with the NVSHMEM programs,
# tables.py). On whatever GPUs the machine has:
# - the GPU tests with every GPU, and also on GPU 0 alone and on GPUs 0 and 1
#   where there are more;
# - the benchmarks; with two GPUs or more, gpu-pingpong (words in GPU
#   memory, 8 B to 64 MiB) and gpu-bw (host and device API) beside NVSHMEM's ping-pong and
#   bandwidth programs (bench/peers/nvshmem-run.sh, built here with nvcc),
#   GPUs 0 and 1 for both;
# - the matvec job: the two-rank job, and `--gpus 0` (every GPU, scaling
#   from one GPU up);
# then prints the tables (bench/gpu/tables.py: ours beside NVSHMEM, the
# scaling), one line per test case, and last `GPU_TESTS passed=N failed=M
# skipped=K` (all test runs summed). RUNS=n repeats the NVSHMEM comparison
# and the scaling launches n times (default 1). Exits non-zero when a test
# failed.
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
# NVLink multicast stays off (the device machines' rule), also for NVSHMEM.
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
ngpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | paste -sd';') gpus=$ngpus cores=$(nproc)"
[ "$ngpus" -ge 2 ] && nvidia-smi topo -m 2>/dev/null | head -$((ngpus + 1)) | sed 's/^/# /'
# TESTS_LOG: where the test output also goes as it comes (it is printed last).
tests=${TESTS_LOG:-$(mktemp)}
all_json=$(mktemp)
tests_rc=0
# The GPU tests with every GPU, then on one GPU and on two where there are more.
test_sets=("")
[ "$ngpus" -ge 2 ] && test_sets+=("0")
[ "$ngpus" -ge 3 ] && test_sets+=("0,1")
for set in "${test_sets[@]}"; do
    if [ -n "$set" ]; then
        echo "GPU_TEST_SET CUDA_VISIBLE_DEVICES=$set" >>"$tests"
        out=$(CUDA_VISIBLE_DEVICES=$set timeout 900 ./gaspi-gpu-tests 2>&1)
    else
        echo "GPU_TEST_SET all $ngpus GPUs" >>"$tests"
        out=$(timeout 900 ./gaspi-gpu-tests 2>&1)
    fi
    rc=$?
    echo "$out" >>"$tests"
    grep -q '^GPU_TESTS' <<<"$out" || echo "GPU_TESTS passed=0 failed=1 skipped=0 (the test program did not finish: rc $rc)" >>"$tests"
    [ "$rc" -ne 0 ] && tests_rc=$rc
done
# A benchmark that fails after printing some records still says so.
bench() {
    local out rc
    out=$(timeout 300 ./gaspi-bench --json "$@" 2>&1)
    rc=$?
    grep -E '^\{' <<<"$out" | tee -a "$all_json"
    [ "$rc" -eq 0 ] || { echo "{\"bench\":\"$1\",\"note\":\"failed (rc $rc)\"}"; grep -v '^{' <<<"$out" | tail -5; }
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
# Ours beside NVSHMEM, on GPUs 0 and 1 (issue 26), RUNS times.
PP_SIZES=8,64,512,4096,16384,32768,65536,262144,1048576,4194304,16777216,67108864
if [ "$ngpus" -ge 2 ]; then
    for run in $(seq "${RUNS:-1}"); do
        CUDA_VISIBLE_DEVICES=0,1 GASPI_GPU_NOTIFICATIONS=device bench gpu-pingpong --device-driven --sizes $PP_SIZES
        CUDA_VISIBLE_DEVICES=0,1 bench gpu-bw --device-driven
        # Once NVSHMEM failed (no build, a PE stuck), it is not tried again.
        if [ -d ./peers ] && [ "${nvshmem_failed:-0}" = 0 ]; then
            bash ./peers/nvshmem-run.sh ./peers "${NVSHMEM_BUILD:-/tmp/gaspi-nvshmem}" | tee -a "$all_json"
            [ "${PIPESTATUS[0]}" -eq 0 ] || nvshmem_failed=1
        fi
    done
fi
if [ -x ./matvec ]; then
    # PLOT_DIR: where matvec's --plot PNG goes (default DIR).
    timeout 300 ./matvec --json --plot "${PLOT_DIR:-.}/matvec.png" 2>&1 | grep -E '^\{' || echo '{"bench":"matvec","note":"failed"}'
    # Every GPU of the host fed by one CPU rank, from one GPU up.
    if [ "$ngpus" -ge 1 ]; then
        for run in $(seq "${RUNS:-1}"); do
            # One CPU rank feeding every GPU, then (the option) one CPU rank per GPU.
            for cpus in 1 $([ "$ngpus" -ge 2 ] && echo "$ngpus"); do
                out=$(timeout 300 ./matvec --json --gpus 0 --cpu-ranks "$cpus" --repeat "${MATVEC_REPEAT:-3}" --seconds 1 --batch 480,7680,15360 2>&1)
                rc=$?
                grep -E '^\{' <<<"$out" | tee -a "$all_json"
                [ "$rc" -eq 0 ] || { echo "{\"bench\":\"matvec --gpus 0 --cpu-ranks $cpus\",\"note\":\"failed (rc $rc)\"}"; grep -v '^{' <<<"$out" | tail -5; }
            done
        done
    fi
fi
# The C interface's GPU programs (tests/capi/gpu/run.sh), where staged.
capi_rc=0
if [ -x ./capi-gpu/run.sh ]; then
    bash ./capi-gpu/run.sh ./capi-gpu
    capi_rc=$?
fi
[ -f ./tables.py ] && python3 ./tables.py "$all_json"
grep -v '^GPU_TESTS' "$tests"
grep '^GPU_TESTS' "$tests"
# The sum over the test runs.
grep '^GPU_TESTS' "$tests" | awk '{for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[2] ~ /^[0-9]+$/) n[kv[1]] += kv[2] } }
    END { printf "GPU_TESTS passed=%d failed=%d skipped=%d\n", n["passed"], n["failed"], n["skipped"] }'
[ -z "${TESTS_LOG:-}" ] && rm -f "$tests"
rm -f "$all_json"
[ "$tests_rc" -ne 0 ] && exit $tests_rc
exit $capi_rc
