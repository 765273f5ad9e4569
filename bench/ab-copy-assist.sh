#!/usr/bin/env bash
# ab-copy-assist.sh - A/B of target-assisted copies (decision 0014): the
# same build with GASPI_COPY_ASSIST_MIN=0 (off) and with the default (on),
# launches alternating so that slow phases of the machine hit both sides.
#
#   bench/ab-copy-assist.sh [LAUNCHES]      (default 5 per side)
#
# Runs `gaspi-run -n 2 gaspi-bench {pingpong,write-bw} --sizes ... --json`
# and prints, per benchmark and size, the median over launches of each
# launch's median (ping-pong: half round trip in us; write-bw: GB/s), the
# spread of the launch medians, and on/off.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
N="${1:-5}"
SIZES="${SIZES:-131072,262144,1048576,4194304}"
cargo build -q --release -p gaspi-bench -p gaspi-launch
R="$ROOT/target/release"
OUT="$ROOT/target/ab-copy-assist.jsonl"
: >"$OUT"
for _ in $(seq "$N"); do
    for mode in off on; do
        for cmd in pingpong write-bw; do
            if [ "$mode" = off ]; then e=(env GASPI_COPY_ASSIST_MIN=0); else e=(env); fi
            "${e[@]}" "$R/gaspi-run" -n 2 "$R/gaspi-bench" "$cmd" --sizes "$SIZES" --json |
                sed "s/^{/{\"mode\":\"$mode\",/" >>"$OUT"
        done
    done
done
python3 - "$OUT" <<'P'
import collections, json, statistics as st, sys
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    r = json.loads(line)
    d[(r["bench"], r["size"], r["mode"])].append(r["gbps"] if r["bench"] == "write-bw" else r["median_us"])
for (b, s, m) in sorted(d):
    if m != "off":
        continue
    off, on = d[(b, s, "off")], d[(b, s, "on")]
    unit = "GB/s" if b == "write-bw" else "us"
    print(f"{b:9} {s:>8} off {st.median(off):8.3f} [{min(off):.3f}-{max(off):.3f}]"
          f"  on {st.median(on):8.3f} [{min(on):.3f}-{max(on):.3f}]"
          f"  on/off {st.median(on) / st.median(off):.3f} {unit}")
P
