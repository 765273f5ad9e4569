#!/bin/bash
# Issue 26, 1 MiB bimodal launches, call 3: ce_window (raw CUDA, one
# process, the same window by 3 ways of submitting) beside main's gpu-bw,
# alternating, ROUNDS rounds.
set -uo pipefail
BIN=$(cd "${1:?}" && pwd); OUTF=${2:?}
NV=""
for f in /usr/local/cuda/lib64/libnvrtc.so.13 /usr/local/cuda/lib64/libnvrtc.so; do
    [ -e "$f" ] && { NV=$(dirname "$f"); break; }
done
export LD_LIBRARY_PATH="${NV:-}:${LD_LIBRARY_PATH:-}"
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
log() { echo "$@" >>"$OUTF"; }
log "# $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version,pci.bus_id --format=csv,noheader | paste -sd';')"
$NVCC -O2 -std=c++17 "$BIN/ce_window.cu" -o /tmp/ce_window -lcuda >>"$OUTF" 2>&1 || log "build failed"
cd "$BIN"
for r in $(seq "${ROUNDS:-8}"); do
    log "== round $r"
    CUDA_VISIBLE_DEVICES=0,1 timeout 60 /tmp/ce_window 1048576 >>"$OUTF" 2>&1
    out=$(CUDA_VISIBLE_DEVICES=0,1 timeout 120 ./gaspi-bench --json gpu-bw --sizes 1048576 2>&1)
    grep -E '^\{' <<<"$out" | sed "s/^/M$r /" >>"$OUTF"
done
CUDA_VISIBLE_DEVICES=0,1 timeout 60 /tmp/ce_window 4194304 >>"$OUTF" 2>&1
log "# done $(date -u +%FT%TZ)"
