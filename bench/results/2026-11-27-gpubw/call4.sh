#!/bin/bash
# Call 4: the kept binaries (r/): GPU tests on GPU 0 alone,
# and the cases gpu-gpu-sms-held and gpu-gpu on both.
set -uo pipefail
BIN=$(cd "$(dirname "$0")" && pwd); OUTF=${1:?}
NV=""
for f in /usr/local/cuda/lib64/libnvrtc.so.13 /usr/local/cuda/lib64/libnvrtc.so; do [ -e "$f" ] && { NV=$(dirname "$f"); break; }; done
[ -z "$NV" ] && NV=$(dirname "$(find /usr /opt -name 'libnvrtc.so*' 2>/dev/null | grep -v builtins | head -1)" 2>/dev/null)
export LD_LIBRARY_PATH="${NV:-}:${LD_LIBRARY_PATH:-}"
log() { echo "$@" >>"$OUTF"; }
log "# $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | paste -sd';')"
cd "$BIN/r"
log "GPU_TEST_SET 0"; CUDA_VISIBLE_DEVICES=0 timeout 200 ./gaspi-gpu-tests >>"$OUTF" 2>&1; log "rc=$?"
for c in gpu-gpu-sms-held gpu-gpu; do
    log "CASE $c both GPUs"; CUDA_VISIBLE_DEVICES=0,1 timeout 60 ./gaspi-gpu-tests --case $c >>"$OUTF" 2>&1; log "rc=$?"
done
log "# done $(date -u +%FT%TZ)"
