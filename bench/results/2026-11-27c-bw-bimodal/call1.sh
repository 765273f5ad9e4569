#!/bin/bash
# Issue 26, 1 MiB gpu-bw bimodal launches: what decides a launch's group.
# ROUNDS rounds; each: the experiment bench (4 queues x 2 buffer slots in
# one launch), the same with CUDA_DEVICE_MAX_COPY_CONNECTIONS=1, the same
# pinned to CPUs 0-3, main's gpu-bw, NVSHMEM's bw at 1 MiB.
set -uo pipefail
BIN=$(cd "${1:?}" && pwd); OUTF=${2:?}
NV=""
for f in /usr/local/cuda/lib64/libnvrtc.so.13 /usr/local/cuda/lib64/libnvrtc.so; do
    [ -e "$f" ] && { NV=$(dirname "$f"); break; }
done
export LD_LIBRARY_PATH="${NV:-}:${LD_LIBRARY_PATH:-}"
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
log() { echo "$@" >>"$OUTF"; }
log "# $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version,pci.bus_id --format=csv,noheader | paste -sd';')"
nvidia-smi topo -m >>"$OUTF" 2>&1
lscpu | grep -E 'Model name|^CPU\(s\)|NUMA|Socket' >>"$OUTF"
sed 's/for prog in nvshmem_pingpong nvshmem_bw/for prog in nvshmem_bw/' "$BIN/peers/nvshmem-run.sh" >"$BIN/peers/nvbw.sh"
cd "$BIN"
run() { tag=$1; shift
    out=$(CUDA_VISIBLE_DEVICES=0,1 timeout 120 "$@" 2>&1)
    echo "rc=$? $tag" >>"$OUTF"
    grep -E '^\{' <<<"$out" | sed "s/^/$tag /" >>"$OUTF"
    grep -vE '^\{' <<<"$out" | tail -3 >>"$OUTF"
}
for r in $(seq "${ROUNDS:-6}"); do
    GASPI_EXP_BW_QUEUES=4 GASPI_EXP_BW_SLOTS=2 run "X$r" ./gaspi-bench-bwexp --json gpu-bw --sizes 1048576
    CUDA_DEVICE_MAX_COPY_CONNECTIONS=1 GASPI_EXP_BW_QUEUES=4 GASPI_EXP_BW_SLOTS=2 run "C$r" ./gaspi-bench-bwexp --json gpu-bw --sizes 1048576
    GASPI_EXP_BW_QUEUES=4 GASPI_EXP_BW_SLOTS=2 run "P$r" taskset -c 0-3 ./gaspi-bench-bwexp --json gpu-bw --sizes 1048576
    run "M$r" ./gaspi-bench --json gpu-bw --sizes 1048576,4194304
    bash "$BIN/peers/nvbw.sh" "$BIN/peers" /tmp/gnv --sizes 1048576 2>&1 | sed "s/^/NV$r /" >>"$OUTF"
done
log "# done $(date -u +%FT%TZ)"
