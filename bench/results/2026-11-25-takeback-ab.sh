#!/usr/bin/env bash
set -euo pipefail
OUT=/tmp/wtcopy-ab.jsonl; : > $OUT
for i in $(seq ${N:-8}); do
  for side in base new; do
    for cmd in write-bw pingpong; do
      /tmp/wtcopy-$side/gaspi-run -n 2 /tmp/wtcopy-$side/gaspi-bench $cmd --sizes 1048576,4194304 --json | sed "s/^{/{\"side\":\"$side\",/" >> $OUT
    done
  done
done
python3 - $OUT <<'P'
import collections, json, statistics as st, sys
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    r = json.loads(line)
    d[(r["bench"], r["size"], r["side"])].append(r["gbps"] if r["bench"] == "write-bw" else r["median_us"])
for (b, s, m) in sorted(d):
    if m != "base": continue
    a, n = d[(b, s, "base")], d[(b, s, "new")]
    u = "GB/s" if b == "write-bw" else "us"
    print(f"{b:9} {s:>8} base {st.median(a):8.3f} [{min(a):.3f}-{max(a):.3f}]  new {st.median(n):8.3f} [{min(n):.3f}-{max(n):.3f}]  new/base {st.median(n)/st.median(a):.3f} {u}")
P
