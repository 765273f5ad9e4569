#!/bin/bash
# Device call of helper i26 (issue 26): A/B of the words-in-GPU-memory
# ping-pong before (main 16d6dfb) and after, then run-all.sh with RUNS.
D=$(cd "$(dirname "$0")" && pwd)
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
NV=$(dirname "$(ls /usr/local/cuda/lib64/libnvrtc.so* 2>/dev/null | head -1)")
export LD_LIBRARY_PATH="$NV:${LD_LIBRARY_PATH:-}"
cd "$D"
ngpus=$(nvidia-smi -L | grep -c '^GPU')
{
    python3 -c 'import nvidia.nvshmem,os;print(os.path.dirname(nvidia.nvshmem.__file__))'
    python3 -m pip show nvidia-nvshmem-cu13 2>/dev/null | head -3
    nvcc --version | tail -2
    nvidia-smi topo -m
} > "$OUT/env.txt" 2>&1
if [ "$ngpus" -ge 2 ] && [ "${AB:-1}" = 1 ]; then
    for b in gaspi-bench-base gaspi-bench; do
        echo "# $b: device-driven, words in GPU memory"
        CUDA_VISIBLE_DEVICES=0,1 GASPI_GPU_NOTIFICATIONS=device timeout 120 ./$b --json gpu-pingpong --device-driven --sizes 8,4096,32768,65536 2>&1 | grep -E '^\{|rror'
    done > "$OUT/ab.txt" 2>&1
fi
start=$(date +%s)
TESTS_LOG="$OUT/tests.txt" RUNS=${RUNS:-2} NVSHMEM_BUILD=/tmp/nvb bash ./run-all.sh . > "$OUT/run-all.txt" 2>&1
echo "run-all rc=$? in $(( $(date +%s) - start )) s" >> "$OUT/run-all.txt"
tar czf "$OUT/nvshmem-logs.tgz" -C /tmp/nvb . 2>/dev/null
[ -f "$OUT/ab.txt" ] && python3 - "$OUT/ab.txt" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    if line.startswith('#'): print(line.strip()); continue
    try: r = json.loads(line)
    except ValueError: print(line.strip()[:200]); continue
    print(r.get('bench'), r.get('transport'), r.get('size'), round(r.get('median_us', 0), 2), round(r.get('p10_us', 0), 2), round(r.get('p90_us', 0), 2), round(r.get('gbps') or 0, 1), round(r.get('ref_gbps') or 0, 1))
PY
python3 ./tables.py "$OUT/run-all.txt"
grep -E '^(GPU_TESTS|GPU_TEST_SET|run-all rc)|FAIL|failed' "$OUT/run-all.txt" | cut -c1-300
