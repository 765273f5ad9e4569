#!/bin/bash
# Lead, final check of main 3b83362 (issue 26): GPU tests with both GPUs
# and GPU 0 alone, the C GPU tests, then one launch each of the plain
# device ping-pong (words in GPU memory) and gpu-bw (default: the copy
# engine's batch, decision 0054) beside NVSHMEM's programs, and the tables.
D=$(cd "$(dirname "$0")" && pwd); cd "$D"
NV=$(dirname "$(ls /usr/local/cuda/lib64/libnvrtc.so* 2>/dev/null | head -1)")
export LD_LIBRARY_PATH="$NV:${LD_LIBRARY_PATH:-}"
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
t0=$(date +%s)
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; nvidia-smi topo -m; } > "$OUT/env.txt" 2>&1
timeout 240 ./gaspi-gpu-tests > "$OUT/tests-all.txt" 2>&1; echo "rc=$?" >> "$OUT/tests-all.txt"
CUDA_VISIBLE_DEVICES=0 timeout 200 ./gaspi-gpu-tests > "$OUT/tests-gpu0.txt" 2>&1; echo "rc=$?" >> "$OUT/tests-gpu0.txt"
grep -h "GPU_TESTS\|FAIL\|SKIP\|rc=" "$OUT"/tests-*.txt
echo "tests took $(( $(date +%s) - t0 )) s"
bash ./capi-gpu/run.sh ./capi-gpu > "$OUT/capi.txt" 2>&1; echo "capi rc=$?"; grep -h "CAPI_GPU_TESTS" "$OUT/capi.txt"
j="$OUT/bench.jsonl"
CUDA_VISIBLE_DEVICES=0,1 GASPI_GPU_NOTIFICATIONS=device timeout 120 ./gaspi-bench --json gpu-pingpong --device-driven --sizes 8,64,512,4096,32768,65536 2>&1 | grep '^{' >> "$j"
CUDA_VISIBLE_DEVICES=0,1 timeout 120 ./gaspi-bench --json gpu-bw 2>&1 | grep '^{' >> "$j"
timeout 200 bash ./peers/nvshmem-run.sh ./peers /tmp/gaspi-nvshmem 2>&1 | grep '^{' >> "$j"
python3 ./tables.py "$j" 2>&1 | tail -40
echo "all took $(( $(date +%s) - t0 )) s"
