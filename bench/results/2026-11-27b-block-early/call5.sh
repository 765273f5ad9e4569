#!/bin/bash
# Call 5 (nvidia-h100-x4): matvec --gpus 0 with an experimental "both-ways"
# ceiling (exp-both-ways-ceiling.diff: each GPU copying host->device and
# device->host at once on two streams), 3 repeats; not kept.
D=$(cd "$(dirname "$0")" && pwd); O=$OUT/call5.txt; start=$(date +%s)
NV=$(dirname "$(find /usr/local/cuda/lib64 /usr /opt -name 'libnvrtc.so*' 2>/dev/null | grep -v builtins | head -1)")
export LD_LIBRARY_PATH="$NV:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,pci.bus_id --format=csv,noheader >> "$O"
(cd "$D" && timeout 300 ./matvec --json --gpus 0 --repeat 3 --seconds 1 --batch 7680,15360 2>&1) >> "$O"
(cd "$D" && timeout 200 ./matvec --gpus 0 --repeat 1 --seconds 1 --batch 7680,15360 2>&1) | tail -12 >> "$O"
echo "# total $(( $(date +%s) - start )) s" >> "$O"
