#!/bin/bash
# Device call 5 of helper i26 (issue 26): the batched copy kernel
# (GASPI_GPU_BATCH_MIN) and the warp path's single fence, against the
# binaries of main ac23cc0 (../.device-bin-i26-base), beside NVSHMEM.
D=$(cd "$(dirname "$0")" && pwd)
B=$D/../.device-bin-i26-base
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
NV=$(dirname "$(ls /usr/local/cuda/lib64/libnvrtc.so* 2>/dev/null | head -1)")
export LD_LIBRARY_PATH="$NV:${LD_LIBRARY_PATH:-}"
cd "$D"
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nvidia-smi topo -m; nproc; } > "$OUT/env.txt" 2>&1
# NVSHMEM build in the background while ours run? No: it would disturb. Build first.
( time bash ./peers/nvshmem-run.sh ./peers /tmp/nvb ) > "$OUT/nvshmem1.txt" 2>&1
PP=8,64,512,4096,32768,65536
for rep in 1 2; do
    for b in base new; do
        bin=./gaspi-bench; [ $b = base ] && bin=$B/gaspi-bench
        echo "# $b rep $rep: gpu-pingpong device words"
        CUDA_VISIBLE_DEVICES=0,1 GASPI_GPU_NOTIFICATIONS=device timeout 120 $bin --json gpu-pingpong --device-driven --sizes $PP 2>&1 | grep -E '^\{|rror' | grep -v host-driven
    done
    for v in base off 262144 65536; do
        bin=./gaspi-bench; [ $v = base ] && bin=$B/gaspi-bench
        min=0; case $v in base|off) ;; *) min=$v;; esac
        echo "# $v rep $rep: gpu-bw GASPI_GPU_BATCH_MIN=$min"
        CUDA_VISIBLE_DEVICES=0,1 GASPI_GPU_BATCH_MIN=$min timeout 120 $bin --json gpu-bw --sizes 65536,262144,1048576,4194304,16777216,67108864 2>&1 | grep -E '^\{|rror'
    done
done > "$OUT/ab.txt" 2>&1
bash ./peers/nvshmem-run.sh ./peers /tmp/nvb > "$OUT/nvshmem2.txt" 2>&1
for t in "all" "batch" "gpu0" "gpu0batch"; do
    case $t in
        all) e="" ;; batch) e="GASPI_GPU_BATCH_MIN=262144" ;;
        gpu0) e="CUDA_VISIBLE_DEVICES=0" ;; gpu0batch) e="CUDA_VISIBLE_DEVICES=0 GASPI_GPU_BATCH_MIN=262144" ;;
    esac
    echo "# tests $t: $e"
    env $e timeout 200 ./gaspi-gpu-tests 2>&1 | tail -40
done > "$OUT/tests.txt" 2>&1
grep -h '^GPU_TESTS\|^# tests' "$OUT/tests.txt"
python3 - "$OUT/ab.txt" "$OUT/nvshmem1.txt" "$OUT/nvshmem2.txt" <<'PY'
import json, sys
for f in sys.argv[1:]:
    print("##", f.split('/')[-1])
    for line in open(f):
        if line.startswith('#'): print(line.strip()); continue
        try: r = json.loads(line)
        except ValueError: print(line.strip()[:160]); continue
        print(r.get('bench'), r.get('transport'), r.get('size'), round(r.get('median_us') or 0, 2), round(r.get('p10_us') or 0, 2), round(r.get('p90_us') or 0, 2), round(r.get('gbps') or 0, 1), round(r.get('ref_gbps') or 0, 1), (r.get('note') or '')[:60])
PY
