#!/bin/bash
# Device call 2 of helper i26d (issue 26): GPU tests (every GPU, GPU 0,
# GPUs 0-1, and every GPU with the copy batch on through the Config
# variable), gpu-bw with GASPI_GPU_BATCH_MIN 0 / 65536 (the variable now
# read by Config), then matvec-base (main b3e39cf) against matvec (i26d:
# wait at half a queue + one period of references), alternating, 4 each.
D=$(cd "$(dirname "$0")" && pwd)
cd "$D"
NV=$(dirname "$(ls /usr/local/cuda/lib64/libnvrtc.so* 2>/dev/null | head -1)")
export LD_LIBRARY_PATH="$NV:${LD_LIBRARY_PATH:-}"
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; nvidia-smi topo -m; } > "$OUT/env.txt" 2>&1
t0=$(date +%s)
{
  echo "GPU_TEST_SET all"; timeout 300 ./gaspi-gpu-tests 2>&1 | tail -16
  echo "GPU_TEST_SET CUDA_VISIBLE_DEVICES=0"; CUDA_VISIBLE_DEVICES=0 timeout 300 ./gaspi-gpu-tests 2>&1 | tail -16
  echo "GPU_TEST_SET CUDA_VISIBLE_DEVICES=0,1"; CUDA_VISIBLE_DEVICES=0,1 timeout 300 ./gaspi-gpu-tests 2>&1 | tail -16
  echo "GPU_TEST_SET all GASPI_GPU_BATCH_MIN=65536"; GASPI_GPU_BATCH_MIN=65536 timeout 300 ./gaspi-gpu-tests 2>&1 | tail -16
  echo "GPU_TEST_SET all GASPI_GPU_BATCH_MIN=16777216 (above the max: init must refuse)"; GASPI_GPU_BATCH_MIN=16777216 timeout 60 ./gaspi-gpu-tests 2>&1 | tail -3
} > "$OUT/tests.txt"
echo "tests took $(( $(date +%s) - t0 )) s"
grep -E '^GPU_TEST_SET|^GPU_TESTS' "$OUT/tests.txt"
for m in 0 65536 0 65536; do
  echo "# GASPI_GPU_BATCH_MIN=$m"
  CUDA_VISIBLE_DEVICES=0,1 GASPI_GPU_BATCH_MIN=$m timeout 120 ./gaspi-bench --json gpu-bw 2>&1 | grep -E '^\{|rror'
done > "$OUT/gpu-bw.txt"
python3 - "$OUT/gpu-bw.txt" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    if line.startswith('#'): print(line.strip()); continue
    try: r = json.loads(line)
    except ValueError: print(line.strip()[:200]); continue
    print(r.get('bench'), r.get('size'), round(r.get('gbps') or 0, 1), round(r.get('ref_gbps') or 0, 1))
PY
for rep in 1 2 3 4; do
  for v in base new; do
    cmd=./matvec; [ $v = base ] && cmd=./matvec-base
    echo "# rep=$rep variant=$v"
    timeout 120 $cmd --json --gpus 0 --cpu-ranks 1 --repeat 1 --seconds 1 --batch 7680,15360 2>&1 | grep -E '^\{|rror|panic'
  done
done > "$OUT/matvec-ab.txt"
echo "all took $(( $(date +%s) - t0 )) s"
python3 - "$OUT/matvec-ab.txt" <<'PY'
import json, sys, collections, statistics as st
d = collections.defaultdict(list); v = None
for line in open(sys.argv[1]):
    if line.startswith('# '): v = line.split('variant=')[1].strip(); continue
    try: r = json.loads(line)
    except ValueError: print(line.strip()[:200]); continue
    if r.get('mode') == 'gpu-multi': d[(v, r['gpus'], r['batch'])].append(r['mvecs_per_s'])
    elif r.get('mode') == 'ceiling-multi': d[(v, r['gpus'], 'ceil')].append(r['mvecs_per_s'])
for k in sorted(d, key=str): print(k, [round(x, 1) for x in d[k]], 'median', round(st.median(d[k]), 1))
PY
