#!/bin/bash
# Call 2 (nvidia-h100-x2): gpu-bw with the copy engine's batch launched
# once it holds 2 / 4 / 8 MiB (GASPI_GPU_ENGINE_BATCH; 16 MiB is the
# default), beside NVSHMEM's bandwidth program, 3 rounds.
D=$(cd "$(dirname "$0")" && pwd); O=$OUT/call2.txt; start=$(date +%s)
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
sed 's/for prog in nvshmem_pingpong nvshmem_bw/for prog in nvshmem_bw/' "$D/peers/nvshmem-run.sh" > "$D/peers/nvbw.sh"
nvidia-smi --query-gpu=name,pci.bus_id --format=csv,noheader >> "$O"
for run in 1 2 3; do
  for eb in 16777216 2097152 4194304 8388608; do
    (cd "$D" && CUDA_VISIBLE_DEVICES=0,1 GASPI_GPU_ENGINE_BATCH=$eb timeout 120 ./gaspi-bench --json gpu-bw --sizes 1048576,2097152,4194304,16777216 2>&1) | grep -E '^\{' | sed "s/^/EB$eb-$run /" >> "$O"
  done
  bash "$D/peers/nvbw.sh" "$D/peers" /tmp/gnv-peers --sizes 1048576,2097152,4194304,16777216 2>&1 | sed "s/^/NVBW-$run /" >> "$O"
done
echo "# total $(( $(date +%s) - start )) s" >> "$O"
