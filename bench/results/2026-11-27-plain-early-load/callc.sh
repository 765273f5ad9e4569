#!/bin/bash
# One device call (issue 26, plain-call latency): ROUNDS launches each of
# gaspi-bench gpu-pingpong (words in GPU memory) per VARIANTS entry
# (TAG:BINARY[:HEADER], HEADER replacing the device header in the
# experiment build), then NVSHMEM's ping-pong per NVVARIANTS entry
# (TAG:PEERS_DIR), alternating; then the GPU tests (both GPUs, GPU 0).
set -uo pipefail
BIN=$(cd "${1:?}" && pwd); OUTF=${2:?}
NV=""
for f in /usr/local/cuda/lib64/libnvrtc.so.13 /usr/local/cuda/lib64/libnvrtc.so; do
    [ -e "$f" ] && { NV=$(dirname "$f"); break; }
done
[ -z "$NV" ] && NV=$(dirname "$(find /usr /opt -name 'libnvrtc.so*' 2>/dev/null | grep -v builtins | head -1)" 2>/dev/null)
export LD_LIBRARY_PATH="${NV:-}:${LD_LIBRARY_PATH:-}"
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
log() { echo "$@" >>"$OUTF"; }
log "# $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | paste -sd';')"
nvidia-smi topo -m | head -3 >>"$OUTF"
SIZES=${SIZES:-8,64,512,4096,32768,65536}
for pd in ${NVVARIANTS:-NV:peers}; do
    d=${pd#*:}
    sed 's/for prog in nvshmem_pingpong nvshmem_bw/for prog in nvshmem_pingpong/' "$BIN/$d/nvshmem-run.sh" >"$BIN/$d/nvpp.sh"
done
for run in $(seq "${ROUNDS:-3}"); do
    for v in ${VARIANTS:-OURS:gaspi-bench}; do
        IFS=: read -r tag b hdr <<<"$v"
        if [ -n "$hdr" ]; then export GASPI_EXP_DEVICE_HEADER="$BIN/$hdr"; else unset GASPI_EXP_DEVICE_HEADER; fi
        out=$(cd "$BIN" && CUDA_VISIBLE_DEVICES=0,1 GASPI_GPU_NOTIFICATIONS=device timeout 300 ./$b --json gpu-pingpong --device-driven --sizes "$SIZES" 2>&1)
        echo "rc=$? $tag $b ${hdr:-}" >>"$OUTF"
        grep -E '^\{' <<<"$out" | sed "s/^/$tag$run /" >>"$OUTF"
        grep -vE '^\{' <<<"$out" | tail -5 >>"$OUTF"
    done
    unset GASPI_EXP_DEVICE_HEADER
    for pd in ${NVVARIANTS:-NV:peers}; do
        tag=${pd%%:*}; d=${pd#*:}
        bash "$BIN/$d/nvpp.sh" "$BIN/$d" "/tmp/gnv-$d" --sizes "$SIZES" 2>&1 | sed "s/^/$tag$run /" >>"$OUTF"
    done
done
if [ -n "${TESTS:-}" ]; then
    cd "$BIN"
    log "GPU_TEST_SET all"; timeout 300 ./gaspi-gpu-tests >>"$OUTF" 2>&1; log "rc=$?"
    log "GPU_TEST_SET 0"; CUDA_VISIBLE_DEVICES=0 timeout 300 ./gaspi-gpu-tests >>"$OUTF" 2>&1; log "rc=$?"
    [ -x ./capi-gpu/run.sh ] && { bash ./capi-gpu/run.sh ./capi-gpu >>"$OUTF" 2>&1; log "capi rc=$?"; }
fi
# MATVEC="TAG:HEADER|- ...": matvec --gpus 0 (1 and 2 GPUs) with the
# experiment build's matvec-exp per entry, MATVEC_ROUNDS times, alternating.
for run in $(seq "${MATVEC_ROUNDS:-0}"); do
    for v in ${MATVEC:-}; do
        IFS=: read -r tag hdr <<<"$v"
        if [ "$hdr" != "-" ]; then export GASPI_EXP_DEVICE_HEADER="$BIN/$hdr"; else unset GASPI_EXP_DEVICE_HEADER; fi
        (cd "$BIN" && CUDA_VISIBLE_DEVICES=0,1 timeout 120 ./matvec-exp --json --gpus 0 --repeat 1 --seconds 1 --batch 7680,15360 2>&1) | grep -E '^\{' | sed "s/^/MV$tag$run /" >>"$OUTF"
    done
done
unset GASPI_EXP_DEVICE_HEADER
python3 "$BIN/summ.py" "$OUTF" >>"$OUTF" 2>&1
log "# done $(date -u +%FT%TZ)"
