#!/bin/bash
# Issue 26, call 4: gpu-bw --device-driven (the device API's block write,
# grid sharing each write; and an experiment with one fence per block per
# window) beside NVSHMEM's bandwidth program, 1-64 MiB, ROUNDS rounds.
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
sed 's/for prog in nvshmem_pingpong nvshmem_bw/for prog in nvshmem_bw/' "$BIN/peers/nvshmem-run.sh" >"$BIN/peers/nvbw.sh"
SIZES=${SIZES:-1048576,4194304,16777216,67108864}
cd "$BIN"
for r in $(seq "${ROUNDS:-3}"); do
    out=$(CUDA_VISIBLE_DEVICES=0,1 GASPI_EXP_BW_ONEFENCE=1 timeout 200 ./gaspi-bench --json gpu-bw --device-driven --sizes $SIZES 2>&1)
    echo "rc=$? G$r" >>"$OUTF"
    grep -E '^\{' <<<"$out" | sed "s/^/G$r /" >>"$OUTF"
    grep -vE '^\{' <<<"$out" | tail -3 >>"$OUTF"
    bash "$BIN/peers/nvbw.sh" "$BIN/peers" /tmp/gnv --sizes $SIZES 2>&1 | sed "s/^/NV$r /" >>"$OUTF"
done
log "# done $(date -u +%FT%TZ)"
