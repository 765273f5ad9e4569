#!/bin/bash
# Device call 6 of helper i26 (issue 26): the batched copy kernel's grid
# (GASPI_GPU_BATCH_BLOCKS) and the waits' plain polling with one acquire on
# a hit, against the binaries of main ac23cc0 (../.device-bin-i26-base),
# beside NVSHMEM.
D=$(cd "$(dirname "$0")" && pwd)
B=$D/../.device-bin-i26-base
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
NV=$(dirname "$(ls /usr/local/cuda/lib64/libnvrtc.so* 2>/dev/null | head -1)")
export LD_LIBRARY_PATH="$NV:${LD_LIBRARY_PATH:-}"
cd "$D"
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; } > "$OUT/env.txt" 2>&1
bash ./peers/nvshmem-run.sh ./peers /tmp/nvb > "$OUT/nvshmem1.txt" 2>&1
PP=8,64,512,4096,32768,65536
for rep in 1 2; do
    for b in base new; do
        bin=./gaspi-bench; [ $b = base ] && bin=$B/gaspi-bench
        echo "# $b rep $rep: gpu-pingpong device words"
        CUDA_VISIBLE_DEVICES=0,1 GASPI_GPU_NOTIFICATIONS=device timeout 120 $bin --json gpu-pingpong --device-driven --sizes $PP 2>&1 | grep -E '^\{|rror' | grep -v host-driven
    done
    for v in base off 0 1 32 64; do
        bin=./gaspi-bench; [ $v = base ] && bin=$B/gaspi-bench
        min=65536; case $v in base|off) min=0;; esac
        echo "# $v rep $rep: gpu-bw GASPI_GPU_BATCH_MIN=$min GASPI_GPU_BATCH_BLOCKS=$v"
        CUDA_VISIBLE_DEVICES=0,1 GASPI_GPU_BATCH_MIN=$min GASPI_GPU_BATCH_BLOCKS=$v timeout 120 $bin --json gpu-bw --sizes 65536,262144,1048576,2097152,4194304,16777216,67108864 2>&1 | grep -E '^\{|rror'
    done
done > "$OUT/ab.txt" 2>&1
bash ./peers/nvshmem-run.sh ./peers /tmp/nvb > "$OUT/nvshmem2.txt" 2>&1
for t in "all" "batch"; do
    case $t in all) e="" ;; batch) e="GASPI_GPU_BATCH_MIN=65536" ;; esac
    echo "# tests $t: $e"
    env $e timeout 200 ./gaspi-gpu-tests 2>&1 | tail -40
done > "$OUT/tests.txt" 2>&1
grep -h '^GPU_TESTS\|^# tests' "$OUT/tests.txt"
