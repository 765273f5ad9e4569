#!/bin/bash
# Issue 26, 1 MiB gpu-bw bimodal launches, call 2: does the other rank's
# spinning (barrier, 2 ms spin budget) or the CPUs the ranks run on decide
# the group? ROUNDS rounds of: main gpu-bw 1 MiB (M), the same with
# GASPI_SPIN_US=0 (S0), ranks pinned to CPUs "0 1" (A), "0 16" (B), "0 8" (D).
set -uo pipefail
BIN=$(cd "${1:?}" && pwd); OUTF=${2:?}
NV=""
for f in /usr/local/cuda/lib64/libnvrtc.so.13 /usr/local/cuda/lib64/libnvrtc.so; do
    [ -e "$f" ] && { NV=$(dirname "$f"); break; }
done
export LD_LIBRARY_PATH="${NV:-}:${LD_LIBRARY_PATH:-}"
log() { echo "$@" >>"$OUTF"; }
log "# $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version,pci.bus_id --format=csv,noheader | paste -sd';')"
lscpu >>"$OUTF"; lscpu -e >>"$OUTF"
for c in 0 1 8 16; do log "cpu$c siblings $(cat /sys/devices/system/cpu/cpu$c/topology/thread_siblings_list)"; done
cd "$BIN"
run() { tag=$1; shift
    out=$(CUDA_VISIBLE_DEVICES=0,1 timeout 120 "$@" 2>&1)
    echo "rc=$? $tag" >>"$OUTF"
    grep -E '^\{' <<<"$out" | sed "s/^/$tag /" >>"$OUTF"
    grep -vE '^\{' <<<"$out" | tail -3 >>"$OUTF"
}
for r in $(seq "${ROUNDS:-6}"); do
    run "M$r" ./gaspi-bench --json gpu-bw --sizes 1048576
    GASPI_SPIN_US=0 run "S$r" ./gaspi-bench --json gpu-bw --sizes 1048576
    PIN="0 1" run "A$r" ./gaspi-run -n 2 ./pin.sh ./gaspi-bench --json gpu-bw --sizes 1048576
    PIN="0 16" run "B$r" ./gaspi-run -n 2 ./pin.sh ./gaspi-bench --json gpu-bw --sizes 1048576
    PIN="0 8" run "D$r" ./gaspi-run -n 2 ./pin.sh ./gaspi-bench --json gpu-bw --sizes 1048576
done
log "# done $(date -u +%FT%TZ)"
