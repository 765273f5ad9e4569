#!/bin/bash
# Call 4 (nvidia-h100-x4): matvec --gpus 0 (1, 2, 4 GPUs) through the
# experiment build (matvec-exp, GASPI_EXP_DEVICE_HEADER) with the device
# header before this change (old.cuh = 8b5126c's), with it (e4.cuh), and
# with it and GASPI_BLOCK_EARLY 1 (e1.cuh), alternating, 3 rounds.
D=$(cd "$(dirname "$0")" && pwd); O=$OUT/call4.txt; start=$(date +%s)
NV=$(dirname "$(find /usr/local/cuda/lib64 /usr /opt -name 'libnvrtc.so*' 2>/dev/null | grep -v builtins | head -1)")
export LD_LIBRARY_PATH="$NV:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,pci.bus_id --format=csv,noheader >> "$O"
for run in 1 2 3; do
  for v in old e4 e1; do
    (cd "$D" && GASPI_EXP_DEVICE_HEADER="$D/$v.cuh" timeout 150 ./matvec-exp --json --gpus 0 --repeat 1 --seconds 1 --batch 7680,15360 2>&1) | grep -E '^\{' | sed "s/^/$v$run /" >> "$O"
  done
done
echo "# total $(( $(date +%s) - start )) s" >> "$O"
