#!/bin/bash
# Device check of the GPU layer: unit tests on a real GPU, then gpu_smoke.
cd "$(dirname "$0")"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
echo "== host"
nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.width.current --format=csv,noheader
uname -r; nproc
echo "== libraries"
ldconfig -p | grep -E 'libcuda\.so|libnvrtc|gdrapi' | head -8
ls -la /dev/gdrdrv 2>&1 | head -1
NV=""
for f in /usr/local/cuda/lib64/libnvrtc.so.13 /usr/local/cuda/lib64/libnvrtc.so; do [ -e "$f" ] && { NV=$(dirname "$f"); break; }; done
[ -z "$NV" ] && NV=$(dirname "$(find /usr /opt -name 'libnvrtc.so*' 2>/dev/null | grep -v builtins | head -1)")
echo "nvrtc dir: $NV"; ls "$NV" | grep nvrtc | head -5
export LD_LIBRARY_PATH="$NV:$LD_LIBRARY_PATH"
echo "== unit tests on the GPU"
timeout 60 ./seg_tests --nocapture 2>&1 | grep -vE "^\s+[0-9]+:|^\s+at " | tail -12
timeout 90 ./gk_tests --nocapture 2>&1 | grep -vE "^\s+[0-9]+:|^\s+at " | tail -16
timeout 30 ./notify_tests --nocapture 2>&1 | tail -8
echo "== gpu_smoke"
timeout 200 ./gpu_smoke 2>&1 | tee "$OUT/smoke.jsonl"
echo "gpu_smoke rc=${PIPESTATUS[0]}"
