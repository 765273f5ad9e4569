#!/bin/bash
# Call 1 (nvidia-h100-x2): block write_notify variants (A/B, `callc.sh` of
# ../2026-11-27-plain-early-load/ with the experiment build gaspi-bench-exp
# reading GASPI_EXP_DEVICE_HEADER), then gpu-bw beside NVSHMEM's bandwidth
# program at 1 - 16 MiB, alternating, 3 rounds.
D=$(cd "$(dirname "$0")" && pwd)
O=$OUT/call1.txt
start=$(date +%s)
VARIANTS="BASE:gaspi-bench V2E2:gaspi-bench-exp:v2e2.cuh V2E4:gaspi-bench-exp:v2e4.cuh W:gaspi-bench-exp:w.cuh" \
NVVARIANTS="NV:peers" ROUNDS=3 SIZES=8,64,512,4096,16384,32768,65536 \
MATVEC="B:- E2:v2e2.cuh E4:v2e4.cuh" MATVEC_ROUNDS=2 bash "$D/callc.sh" "$D" "$O"
echo "# pingpong part $(( $(date +%s) - start )) s" >> "$O"
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
sed 's/for prog in nvshmem_pingpong nvshmem_bw/for prog in nvshmem_bw/' "$D/peers/nvshmem-run.sh" > "$D/peers/nvbw.sh"
for run in 1 2 3; do
  (cd "$D" && CUDA_VISIBLE_DEVICES=0,1 timeout 120 ./gaspi-bench --json gpu-bw --sizes 1048576,4194304,16777216 2>&1) | grep -E '^\{' | sed "s/^/BW$run /" >> "$O"
  bash "$D/peers/nvbw.sh" "$D/peers" /tmp/gnv-peers --sizes 1048576,4194304,16777216 2>&1 | sed "s/^/NVBW$run /" >> "$O"
done
echo "# total $(( $(date +%s) - start )) s" >> "$O"
