#!/bin/bash
# Session 2 call 5 (one H200 host, 16 cores): what two namespaces' veth
# carries both ways (iperf3 --bidir against tcp_duplex.py), and the wire
# encoder's A/B (decision 0075) on a quiet machine.
B=$(cd "$(dirname "$0")" && pwd)
IP="$B/ip"; ipc() { LD_LIBRARY_PATH=$B/lib "$IP" "$@"; }
IPF() { LD_LIBRARY_PATH=$B/iperf "$B/iperf/iperf3" "$@"; }
cleanup() { for n in xa xb; do ipc netns del $n 2>/dev/null; done; }
cleanup
ipc netns add xa; ipc netns add xb
ipc link add va netns xa type veth peer name vb netns xb
ipc -n xa addr add 10.98.0.1/24 dev va; ipc -n xb addr add 10.98.0.2/24 dev vb
for n in xa xb; do ipc -n $n link set lo up; done
ipc -n xa link set va up; ipc -n xb link set vb up
ipc netns exec xb env LD_LIBRARY_PATH=$B/iperf $B/iperf/iperf3 -s -D -p 5201
sleep 1
for r in 1 2 3; do
  for mode in one bidir p2 p4; do
    case $mode in one) a="";; bidir) a="--bidir";; p2) a="-P 2";; p4) a="-P 4";; esac
    ipc netns exec xa env LD_LIBRARY_PATH=$B/iperf $B/iperf/iperf3 -c 10.98.0.2 -p 5201 -t 4 -J $a > $OUT/iperf-$mode-$r.json 2>&1
    python3 - $OUT/iperf-$mode-$r.json $mode $r <<'P'
import json,sys
d=json.load(open(sys.argv[1])); e=d["end"]
s=e.get("sum_sent",{}).get("bits_per_second",0)/8e9
rv=e.get("sum_received",{}).get("bits_per_second",0)/8e9
bs=e.get("sum_sent_bidir_reverse",{}).get("bits_per_second",0)/8e9
print(f"iperf3 {sys.argv[2]} run {sys.argv[3]}: sent {s:.2f} GB/s received {rv:.2f} GB/s reverse {bs:.2f} GB/s total {rv+bs if bs else rv:.2f}")
P
  done
  ipc netns exec xb timeout 30 python3 "$B/tcp_duplex.py" serve 5301 2 > /dev/null 2>&1 &
  sleep 0.5
  ipc netns exec xa timeout 30 python3 "$B/tcp_duplex.py" connect 10.98.0.2 5301 2 2>&1 | grep -E '^\{' | sed "s/^/tcp_duplex.py run $r: /"
  wait
done
pkill -f "iperf3 -s" 2>/dev/null
# The wire A/B: before = ef98142 (bincode, add6e80^), after = add6e80 (postcard), alternating.
if [ -d $B/abw/before ] && [ -d $B/abw/after ]; then
  KEY=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n'); port=47700
  for i in 1 2 3 4 5 6 7; do
    for build in before after; do
      D=$B/abw/$build
      GASPI_TRANSPORT=tcp $D/gaspi-run -n 2 $D/gaspi-bench --json pingpong --sizes 8,4096 2>/dev/null | sed "s/^{/{\"build\":\"$build\",\"where\":\"tcp-loopback\",/" >> $OUT/abw.jsonl
      port=$((port+1))
      ipc netns exec xb env GASPI_RANK=1 GASPI_SIZE=2 GASPI_LOCAL_RANK=0 GASPI_LOCAL_SIZE=1 GASPI_RENDEZVOUS=10.98.0.1:$port GASPI_JOB_KEY=$KEY $D/gaspi-bench --json pingpong --sizes 8 > /dev/null 2>&1 &
      ipc netns exec xa env GASPI_RANK=0 GASPI_SIZE=2 GASPI_LOCAL_RANK=0 GASPI_LOCAL_SIZE=1 GASPI_RENDEZVOUS=10.98.0.1:$port GASPI_JOB_KEY=$KEY $D/gaspi-bench --json pingpong --sizes 8 2>/dev/null | sed "s/^{/{\"build\":\"$build\",\"where\":\"tcp-netns\",/" >> $OUT/abw.jsonl
      wait
    done
  done
  python3 - $OUT/abw.jsonl <<'P'
import collections, json, statistics as st, sys
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    try: r = json.loads(line)
    except Exception: continue
    if r.get("bench") != "pingpong": continue
    d[(r["where"], r["size"], r["build"])].append(r["median_us"])
for (w, s, b) in sorted(d):
    if b != "before": continue
    a, z = d[(w, s, "before")], d.get((w, s, "after"), [float('nan')])
    print(f"{w} {s} B: before {st.median(a):.3f} [{min(a):.3f}-{max(a):.3f}] after {st.median(z):.3f} [{min(z):.3f}-{max(z):.3f}] after/before {st.median(z)/st.median(a):.3f} ({len(a)}/{len(z)} launches)")
P
fi
cleanup
