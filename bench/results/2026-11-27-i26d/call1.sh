#!/bin/bash
# Device call 1 of helper i26d (issue 26): GPU tests on every GPU and on
# GPU 0, then the matvec scaling A/B: matvec-base (main b3e39cf, a wait
# before every post) against matvec (i26d, a wait only at half a queue),
# alternating launch by launch, and the new one with 8 and 16 feeder
# threads per GPU.
D=$(cd "$(dirname "$0")" && pwd)
cd "$D"
NV=$(dirname "$(ls /usr/local/cuda/lib64/libnvrtc.so* 2>/dev/null | head -1)")
export LD_LIBRARY_PATH="$NV:${LD_LIBRARY_PATH:-}"
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; nvidia-smi topo -m; } > "$OUT/env.txt" 2>&1
t0=$(date +%s)
{
  echo "GPU_TEST_SET all"; timeout 300 ./gaspi-gpu-tests 2>&1 | tail -20
  echo "GPU_TEST_SET CUDA_VISIBLE_DEVICES=0"; CUDA_VISIBLE_DEVICES=0 timeout 300 ./gaspi-gpu-tests 2>&1 | tail -20
} > "$OUT/tests.txt"
echo "tests took $(( $(date +%s) - t0 )) s"
grep '^GPU_TESTS' "$OUT/tests.txt"
for rep in 1 2 3; do
  for v in "base" "new" "new8" "new16"; do
    case $v in
      base) cmd="./matvec-base"; extra="";;
      new) cmd="./matvec"; extra="";;
      new8) cmd="./matvec"; extra="--slots 8";;
      new16) cmd="./matvec"; extra="--slots 16";;
    esac
    echo "# rep=$rep variant=$v"
    timeout 120 $cmd --json --gpus 0 --cpu-ranks 1 --repeat 1 --seconds 1 --batch 7680,15360 $extra 2>&1 | grep -E '^\{|rror|panic'
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
