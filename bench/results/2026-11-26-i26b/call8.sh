#!/bin/bash
# Device call 8 of helper i26 (issue 26): the batched copy kernel with the
# first write of a window (and a lone write_notify) on the copy engine,
# writes of 64 KiB - 8 MiB batched, against the copy engine alone
# (GASPI_GPU_BATCH_MIN=0) and NVSHMEM; host-driven ping-pong; GPU tests.
D=$(cd "$(dirname "$0")" && pwd)
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
NV=$(dirname "$(ls /usr/local/cuda/lib64/libnvrtc.so* 2>/dev/null | head -1)")
export LD_LIBRARY_PATH="$NV:${LD_LIBRARY_PATH:-}"
cd "$D"
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; } > "$OUT/env.txt" 2>&1
bash ./peers/nvshmem-run.sh ./peers /tmp/nvb > "$OUT/nvshmem1.txt" 2>&1
for rep in 1 2 3; do
    for v in off on; do
        min=65536; [ $v = off ] && min=0
        echo "# $v rep $rep: gpu-bw GASPI_GPU_BATCH_MIN=$min"
        CUDA_VISIBLE_DEVICES=0,1 GASPI_GPU_BATCH_MIN=$min timeout 120 ./gaspi-bench --json gpu-bw --sizes 65536,262144,1048576,2097152,4194304,8388608,16777216,67108864 2>&1 | grep -E '^\{|rror'
    done
    for v in off on; do
        min=65536; [ $v = off ] && min=0
        echo "# hd$v rep $rep: gpu-pingpong host-driven GASPI_GPU_BATCH_MIN=$min"
        CUDA_VISIBLE_DEVICES=0,1 GASPI_GPU_BATCH_MIN=$min timeout 120 ./gaspi-bench --json gpu-pingpong --sizes 8,65536,1048576,4194304 2>&1 | grep -E '^\{|rror'
    done
done > "$OUT/ab.txt" 2>&1
bash ./peers/nvshmem-run.sh ./peers /tmp/nvb > "$OUT/nvshmem2.txt" 2>&1
for t in "all" "gpu0"; do
    case $t in all) e="" ;; gpu0) e="CUDA_VISIBLE_DEVICES=0" ;; esac
    for min in 65536 0; do
        echo "# tests $t: $e GASPI_GPU_BATCH_MIN=$min"
        env $e GASPI_GPU_BATCH_MIN=$min timeout 200 ./gaspi-gpu-tests 2>&1 | tail -40
    done
done > "$OUT/tests.txt" 2>&1
grep -h '^GPU_TESTS\|^# tests' "$OUT/tests.txt"
