#!/usr/bin/env bash
# ab-builds.sh - two builds of the runtime side by side (a change's
# "before" and "after"), launches alternating so that slow phases of the
# machine hit both: the figures issue 27 asks to stay within 3%.
#
#   bench/ab-builds.sh BEFORE_DIR AFTER_DIR [LAUNCHES]   (default 5 each)
#
# Each DIR holds `gaspi-bench` and `gaspi-run` of one build (copy them from
# target/release after `cargo build --release -p gaspi-bench -p
# gaspi-launch`). Per launch and build:
#   - shm: `gaspi-run -n 2 gaspi-bench pingpong --sizes 8` (write_notify
#     half round trip over shared memory) and `write-bw --sizes 4194304`;
#   - tcp: the same ping-pong at 8 B between two network namespaces (a
#     veth pair, as bench/tcp-netns.sh), when run as root with iproute2.
# Prints per figure the median over launches of each launch's median, the
# spread of the launch medians, and after/before (for bandwidth,
# before/after, so that below 1.03 is "within 3%" for every row).
set -euo pipefail
[ $# -ge 2 ] || { sed -n 2,17p "$0"; exit 2; }
BEFORE=$(cd "$1" && pwd) AFTER=$(cd "$2" && pwd) N=${3:-5}
for d in "$BEFORE" "$AFTER"; do
    [ -x "$d/gaspi-bench" ] && [ -x "$d/gaspi-run" ] || { echo "ab-builds.sh: $d lacks gaspi-bench or gaspi-run" >&2; exit 2; }
done
OUT=$(mktemp /tmp/ab-builds.XXXXXX.jsonl)
NETNS=0
if [ "$(id -u)" = 0 ] && command -v ip >/dev/null; then
    NETNS=1
    A=gaspi-ab-a-$$ B=gaspi-ab-b-$$
    cleanup() { ip netns del "$A" 2>/dev/null || true; ip netns del "$B" 2>/dev/null || true; }
    trap cleanup EXIT
    ip netns add "$A"; ip netns add "$B"
    ip link add va netns "$A" type veth peer name vb netns "$B"
    ip -n "$A" addr add 10.99.1.1/24 dev va; ip -n "$A" link set va up; ip -n "$A" link set lo up
    ip -n "$B" addr add 10.99.1.2/24 dev vb; ip -n "$B" link set vb up; ip -n "$B" link set lo up
else
    echo "ab-builds.sh: not root or no iproute2: the TCP row is skipped" >&2
fi
KEY=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
port=47300
tag() { sed "s/^{/{\"build\":\"$1\",\"where\":\"$2\",/"; }
for _ in $(seq "$N"); do
    for build in before after; do
        if [ $build = before ]; then D=$BEFORE; else D=$AFTER; fi
        "$D/gaspi-run" -n 2 "$D/gaspi-bench" --json pingpong --sizes 8 | tag $build shm >>"$OUT"
        "$D/gaspi-run" -n 2 "$D/gaspi-bench" --json write-bw --sizes 4194304 | tag $build shm >>"$OUT"
        if [ $NETNS = 1 ]; then
            port=$((port + 1))
            ip netns exec "$B" env GASPI_RANK=1 GASPI_SIZE=2 GASPI_LOCAL_RANK=0 GASPI_LOCAL_SIZE=1 \
                GASPI_RENDEZVOUS=10.99.1.1:$port GASPI_JOB_KEY="$KEY" "$D/gaspi-bench" --json pingpong --sizes 8 >/dev/null &
            ip netns exec "$A" env GASPI_RANK=0 GASPI_SIZE=2 GASPI_LOCAL_RANK=0 GASPI_LOCAL_SIZE=1 \
                GASPI_RENDEZVOUS=10.99.1.1:$port GASPI_JOB_KEY="$KEY" "$D/gaspi-bench" --json pingpong --sizes 8 | tag $build tcp >>"$OUT"
            wait
        fi
    done
done
python3 - "$OUT" <<'P'
import collections, json, statistics as st, sys
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    r = json.loads(line)
    bw = r["bench"] == "write-bw"
    d[(r["where"], r["bench"], r["size"], bw, r["build"])].append(r["gbps"] if bw else r["median_us"])
print(f"{'figure':34} {'before':>22} {'after':>22} {'ratio':>6}")
for (w, b, s, bw, build) in sorted(d):
    if build != "before":
        continue
    a, z = d[(w, b, s, bw, "before")], d[(w, b, s, bw, "after")]
    unit = "GB/s" if bw else "us"
    ma, mz = st.median(a), st.median(z)
    ratio = ma / mz if bw else mz / ma
    f = lambda v, m: f"{m:.3f} [{min(v):.3f}-{max(v):.3f}]"
    print(f"{w + ' ' + b + ' ' + str(s) + ' B (' + unit + ')':34} {f(a, ma):>22} {f(z, mz):>22} {ratio:6.3f}")
P
echo "raw: $OUT"
