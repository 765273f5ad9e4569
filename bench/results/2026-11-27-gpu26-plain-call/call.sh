#!/bin/bash
# One device call (gpu26, issue 26): the descriptor-latency microbenchmark
# (lat.cu), then ROUNDS launches each of gaspi-bench gpu-pingpong (words in
# GPU memory, experiment styles when GASPI_PINGPONG_EXP is set) and NVSHMEM's
# ping-pong, alternating. bash call.sh BIN_DIR OUT_FILE [tests]
set -uo pipefail
BIN=$(cd "${1:?}" && pwd); OUTF=${2:?}; TESTS=${3:-}
HERE=$(cd "$(dirname "$0")" && pwd)
NV=""
for f in /usr/local/cuda/lib64/libnvrtc.so.13 /usr/local/cuda/lib64/libnvrtc.so; do
    [ -e "$f" ] && { NV=$(dirname "$f"); break; }
done
[ -z "$NV" ] && NV=$(dirname "$(find /usr /opt -name 'libnvrtc.so*' 2>/dev/null | grep -v builtins | head -1)" 2>/dev/null)
export LD_LIBRARY_PATH="${NV:-}:${LD_LIBRARY_PATH:-}"
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
log() { echo "$@" >>"$OUTF"; }
log "# $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | paste -sd';')"
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
if [ -z "${SKIP_LAT:-}" ]; then
    "$NVCC" -O2 -arch=sm_90 -o /tmp/lat "$HERE/lat.cu" >>"$OUTF" 2>&1 && CUDA_VISIBLE_DEVICES=0 /tmp/lat >>"$OUTF" 2>&1
fi
SIZES=${SIZES:-8,64,512,4096,32768,65536}
sed 's/for prog in nvshmem_pingpong nvshmem_bw/for prog in nvshmem_pingpong/' "$BIN/peers/nvshmem-run.sh" >/tmp/nvpp.sh
for run in $(seq "${ROUNDS:-3}"); do
    # BASE="gaspi-bench-base ..." (binaries before the change) alternate with the new one.
    for b in ${BASE:-} gaspi-bench; do
        out=$(cd "$BIN" && CUDA_VISIBLE_DEVICES=0,1 GASPI_GPU_NOTIFICATIONS=device timeout 300 ./$b --json gpu-pingpong --device-driven --sizes "$SIZES" 2>&1)
        echo "rc=$? $b" >>"$OUTF"
        # gaspi-bench: OURS; gaspi-bench-base: BASE; gaspi-bench-v1: V1.
        tag=OURS; [ "$b" = gaspi-bench ] || tag=$(tr a-z A-Z <<<"${b#gaspi-bench-}")
        grep -E '^\{' <<<"$out" | sed "s/^/$tag$run /" >>"$OUTF"
        grep -vE '^\{' <<<"$out" | tail -5 >>"$OUTF"
    done
    bash /tmp/nvpp.sh "$BIN/peers" /tmp/gnv --sizes "$SIZES" 2>&1 | sed "s/^/NV$run /" >>"$OUTF"
done
if [ -n "$TESTS" ]; then
    cd "$BIN"
    log "GPU_TEST_SET all"; timeout 600 ./gaspi-gpu-tests >>"$OUTF" 2>&1; log "rc=$?"
    log "GPU_TEST_SET 0"; CUDA_VISIBLE_DEVICES=0 timeout 600 ./gaspi-gpu-tests >>"$OUTF" 2>&1; log "rc=$?"
    [ -x ./capi-gpu/run.sh ] && { bash ./capi-gpu/run.sh ./capi-gpu >>"$OUTF" 2>&1; log "capi rc=$?"; }
fi
log "# done $(date -u +%FT%TZ)"
