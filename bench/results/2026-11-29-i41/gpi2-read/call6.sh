#!/bin/bash
# Reads beside writes, ours (TCP transport) against GPI-2 1.6 (its TCP
# device), 2 ranks on the quiet H200 host, rounds alternating which goes
# first: bench/capi/readbw.c built against both (bench/compare-gpi2.sh's
# steps (e) and (f) with the binaries built on the build box).
B=$(cd "$(dirname "$0")" && pwd)/gpi2cmp
R=$OUT/gpi2-read; mkdir -p $R
hostname > $B/machinefile; hostname >> $B/machinefile
run_ours() { env GASPI_TRANSPORT=tcp LD_LIBRARY_PATH=$B/ourlib timeout 300 $B/gaspi-run -n 2 $B/ours/$1; }
run_gpi2() {
  local pids=() rc=0
  for r in 0 1; do
    GASPI_MASTER=$(hostname) GASPI_SOCKET=$r GASPI_MFILE=$B/machinefile GASPI_RANK=$r GASPI_NRANKS=2 \
      GASPI_SET_NUMA_SOCKET=0 LD_LIBRARY_PATH=$B/gpi2lib timeout 300 $B/gpi2/$1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  sleep 1
  return $rc
}
for round in 1 2 3 4 5; do
  order="ours gpi2"; [ $((round % 2)) = 0 ] && order="gpi2 ours"
  for lib in $order; do
    run_$lib readbw > $R/$lib-r$round-readbw.txt 2>&1 || echo "$lib round $round failed: $(tail -2 $R/$lib-r$round-readbw.txt)"
  done
done
JOIN_ONLY=$R bash $B/compare-gpi2.sh
