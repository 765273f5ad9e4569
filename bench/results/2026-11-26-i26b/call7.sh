#!/bin/bash
# Device call 7 of helper i26 (issue 26): the batched copy kernel's launch
# point (GASPI_GPU_BATCH_FLUSH) and cap (GASPI_GPU_BATCH_MAX), beside the
# copy engine (batch off) and NVSHMEM; host-driven ping-pong with and without.
D=$(cd "$(dirname "$0")" && pwd)
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
NV=$(dirname "$(ls /usr/local/cuda/lib64/libnvrtc.so* 2>/dev/null | head -1)")
export LD_LIBRARY_PATH="$NV:${LD_LIBRARY_PATH:-}"
cd "$D"
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; } > "$OUT/env.txt" 2>&1
bash ./peers/nvshmem-run.sh ./peers /tmp/nvb > "$OUT/nvshmem1.txt" 2>&1
for rep in 1 2 3; do
    for v in off 0 1048576 2097152 4194304; do
        min=65536; [ $v = off ] && min=0
        f=$v; [ $v = 0 ] && f=
        echo "# $v rep $rep: gpu-bw GASPI_GPU_BATCH_MIN=$min GASPI_GPU_BATCH_MAX=16777216 GASPI_GPU_BATCH_FLUSH=$f"
        CUDA_VISIBLE_DEVICES=0,1 GASPI_GPU_BATCH_MIN=$min GASPI_GPU_BATCH_MAX=16777216 GASPI_GPU_BATCH_FLUSH=$f timeout 120 ./gaspi-bench --json gpu-bw --sizes 65536,262144,1048576,2097152,4194304,16777216,67108864 2>&1 | grep -E '^\{|rror'
    done
    for v in off on; do
        min=65536; [ $v = off ] && min=0
        echo "# hd$v rep $rep: gpu-pingpong host-driven GASPI_GPU_BATCH_MIN=$min"
        CUDA_VISIBLE_DEVICES=0,1 GASPI_GPU_BATCH_MIN=$min GASPI_GPU_BATCH_MAX=16777216 GASPI_GPU_BATCH_FLUSH=4194304 timeout 120 ./gaspi-bench --json gpu-pingpong --sizes 8,65536,262144,1048576,4194304 2>&1 | grep -E '^\{|rror'
    done
done > "$OUT/ab.txt" 2>&1
bash ./peers/nvshmem-run.sh ./peers /tmp/nvb > "$OUT/nvshmem2.txt" 2>&1
for t in "batch" "gpu0batch"; do
    case $t in batch) e="" ;; gpu0batch) e="CUDA_VISIBLE_DEVICES=0" ;; esac
    echo "# tests $t: $e GASPI_GPU_BATCH_MIN=65536 GASPI_GPU_BATCH_MAX=16777216 GASPI_GPU_BATCH_FLUSH=4194304"
    env $e GASPI_GPU_BATCH_MIN=65536 GASPI_GPU_BATCH_MAX=16777216 GASPI_GPU_BATCH_FLUSH=4194304 timeout 200 ./gaspi-gpu-tests 2>&1 | tail -40
done > "$OUT/tests.txt" 2>&1
grep -h '^GPU_TESTS\|^# tests' "$OUT/tests.txt"
