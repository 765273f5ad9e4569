#!/bin/bash
# call 6: matvec --gpus 0 on every GPU, settings swept (feeder threads per GPU, persistent blocks), alternating.
D=$(cd "$(dirname "$0")" && pwd); O=$OUT/call6.txt; start=$(date +%s)
NV=$(dirname "$(find /usr/local/cuda/lib64 /usr /opt -name 'libnvrtc.so*' 2>/dev/null | grep -v builtins | head -1)")
export LD_LIBRARY_PATH="$NV:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,pci.bus_id --format=csv,noheader >> "$O"; nproc >> "$O"
for run in 1 2; do
  for v in "DEF:" "S8:--slots 8" "S16:--slots 16" "B2:--gpu-blocks 49" "B4:--gpu-blocks 97" "C2:--cpu-ranks 2"; do
    tag=${v%%:*}; a=${v#*:}
    (cd "$D" && timeout 120 ./matvec --json --gpus 0 --repeat 1 --seconds 1 --batch 7680,15360 $a 2>&1) | grep -E '^\{' | sed "s/^/$tag$run /" >> "$O"
  done
done
echo "# total $(( $(date +%s) - start )) s" >> "$O"
