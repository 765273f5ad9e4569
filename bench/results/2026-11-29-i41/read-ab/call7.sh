#!/bin/bash
# Reads beside writes (bench/capi/readbw.c) on the quiet H200 host: ours
# before (prev: small read answers gathered) and after (large reads' Data
# answers gathered too), both over the TCP transport, and GPI-2 1.6's TCP
# device, 2 ranks, rounds rotating which goes first.
B=$(cd "$(dirname "$0")" && pwd)/gpi2cmp
R=$OUT/read-ab; mkdir -p $R
hostname > $B/machinefile; hostname >> $B/machinefile
run_lib() { env GASPI_TRANSPORT=tcp LD_LIBRARY_PATH=$B/$1 timeout 300 $B/gaspi-run -n 2 $B/ours/readbw; }
run_gpi2() {
  local pids=() rc=0
  for r in 0 1; do
    GASPI_MASTER=$(hostname) GASPI_SOCKET=$r GASPI_MFILE=$B/machinefile GASPI_RANK=$r GASPI_NRANKS=2 \
      GASPI_SET_NUMA_SOCKET=0 LD_LIBRARY_PATH=$B/gpi2lib timeout 300 $B/gpi2/readbw &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  sleep 1
  return $rc
}
for round in 1 2 3 4 5 6; do
  case $((round % 3)) in 0) order="prev new gpi2";; 1) order="new gpi2 prev";; 2) order="gpi2 prev new";; esac
  for v in $order; do
    case $v in
      prev) run_lib ourlib-prev > $R/prev-r$round.txt 2>&1 ;;
      new) run_lib ourlib > $R/new-r$round.txt 2>&1 ;;
      gpi2) run_gpi2 > $R/gpi2-r$round.txt 2>&1 ;;
    esac
  done
done
python3 - $R <<'P'
import glob, os, re, statistics as st, sys
d = {}
for f in glob.glob(os.path.join(sys.argv[1], "*.txt")):
    lib = os.path.basename(f).split("-")[0]
    for l in open(f):
        m = re.match(r"(\S+) size=(\d+) median_us=([\d.]+)", l)
        if m: d.setdefault((lib, m[1], int(m[2])), []).append(float(m[3]))
print("| bench | size | prev | new | GPI-2 | new/prev | GPI-2/new (>1 ours faster) | new read/write |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for b in ["read-one", "read-win", "write-one", "write-win"]:
    for s in [8, 4096, 65536, 1048576, 4194304]:
        f = lambda lib, bb=b: d.get((lib, bb, s))
        p, n, g = f("prev"), f("new"), f("gpi2")
        if not (p and n and g): print(b, s, "missing"); continue
        mp, mn, mg = st.median(p), st.median(n), st.median(g)
        fmt = lambda v, m: f"{m:.2f} [{min(v):.2f}-{max(v):.2f}]"
        rw = ""
        if b.startswith("read"):
            w = f("new", b.replace("read", "write"))
            rw = f"{mn / st.median(w):.3f}" if w else ""
        print(f"| {b} | {s} | {fmt(p, mp)} | {fmt(n, mn)} | {fmt(g, mg)} | {mn/mp:.3f} | {mg/mn:.2f} | {rw} |")
P
tar -C $OUT -czf $OUT/read-ab.tgz read-ab && rm -rf $R
