#!/bin/bash
# Device call 4 of helper i26d (issue 26): the committed binaries (6d289b0;
# matvec built after the doc edit, same code as call 2) against
# matvec-base (main b3e39cf), alternating, 4 each, on a fresh machine.
D=$(cd "$(dirname "$0")" && pwd)
cd "$D"
NV=$(dirname "$(ls /usr/local/cuda/lib64/libnvrtc.so* 2>/dev/null | head -1)")
export LD_LIBRARY_PATH="$NV:${LD_LIBRARY_PATH:-}"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; lscpu | grep -E 'Model name|Thread|Core|Socket|NUMA node'; nvidia-smi topo -m; } > "$OUT/env.txt" 2>&1
t0=$(date +%s)
for rep in 1 2 3 4; do
  for v in base new; do
    cmd=./matvec; extra=""; envs=""
    case $v in
      base) cmd=./matvec-base;;
      new8) extra="--slots 8";;
      spin20) envs="GASPI_SPIN_US=20";;
      cpu2) extra="--cpu-ranks 2";;
    esac
    echo "# rep=$rep variant=$v"
    env $envs timeout 120 $cmd --json --gpus 0 --repeat 1 --seconds 1 --batch 7680,15360 $extra 2>&1 | grep -E '^\{|rror|panic'
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
