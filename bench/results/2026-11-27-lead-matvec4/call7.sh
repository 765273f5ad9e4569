#!/bin/bash
# Lead, issue 26 point 3, call 7: matvec with 2 blocks per slot (--gpu-blocks 49) and 3 (73) against the default (5), 3 launches each
D=$(cd "$(dirname "$0")" && pwd); cd "$D"
NV=$(dirname "$(ls /usr/local/cuda/lib64/libnvrtc.so* 2>/dev/null | head -1)")
export LD_LIBRARY_PATH="$NV:${LD_LIBRARY_PATH:-}"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; lscpu; nvidia-smi topo -m; free -g; cat /proc/cpuinfo | grep -m1 flags; } > "$OUT/env.txt" 2>&1
t0=$(date +%s)
for rep in 1 2 3; do
  for v in all b49 b73; do
    cmd=./matvec-diag; envs="X=1"; extra=""
    case $v in
      all) cmd=./matvec;;
      b49) cmd=./matvec; extra="--gpu-blocks 49";;
      b73) cmd=./matvec; extra="--gpu-blocks 73";;
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
