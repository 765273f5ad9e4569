#!/bin/bash
# Issue 26, call 5: the device API's gaspi_write (decision 0059): the GPU
# tests (all GPUs, GPU 0), then ROUNDS rounds of gpu-bw --device-driven
# beside NVSHMEM's bandwidth program, 1-64 MiB, and the table.
set -uo pipefail
BIN=$(cd "${1:?}" && pwd); OUTF=${2:?}
NV=""
for f in /usr/local/cuda/lib64/libnvrtc.so.13 /usr/local/cuda/lib64/libnvrtc.so; do
    [ -e "$f" ] && { NV=$(dirname "$f"); break; }
done
export LD_LIBRARY_PATH="${NV:-}:${LD_LIBRARY_PATH:-}"
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
log() { echo "$@" >>"$OUTF"; }
log "# $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version,pci.bus_id --format=csv,noheader | paste -sd';')"
cd "$BIN"
log "GPU_TEST_SET all"; timeout 300 ./gaspi-gpu-tests >>"$OUTF" 2>&1; log "rc=$?"
log "GPU_TEST_SET 0"; CUDA_VISIBLE_DEVICES=0 timeout 300 ./gaspi-gpu-tests >>"$OUTF" 2>&1; log "rc=$?"
sed 's/for prog in nvshmem_pingpong nvshmem_bw/for prog in nvshmem_bw/' "$BIN/peers/nvshmem-run.sh" >"$BIN/peers/nvbw.sh"
SIZES=${SIZES:-1048576,4194304,16777216,67108864}
for r in $(seq "${ROUNDS:-3}"); do
    out=$(CUDA_VISIBLE_DEVICES=0,1 timeout 200 ./gaspi-bench --json gpu-bw --device-driven --sizes $SIZES 2>&1)
    echo "rc=$? G$r" >>"$OUTF"
    grep -E '^\{' <<<"$out" >>"$OUTF"
    grep -vE '^\{' <<<"$out" | tail -3 >>"$OUTF"
    bash "$BIN/peers/nvbw.sh" "$BIN/peers" /tmp/gnv --sizes $SIZES >>"$OUTF" 2>&1
done
python3 "$BIN/tables.py" "$OUTF" >>"$OUTF" 2>&1
log "# done $(date -u +%FT%TZ)"
