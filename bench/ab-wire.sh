#!/usr/bin/env bash
# ab-wire.sh - the wire encoder's A/B (decision 0075): the 8-byte write_notify
# ping-pong over the TCP transport, built from BASE (bincode, before the
# "wire:" commit) and from the working tree (postcard), launches alternating
# so that slow phases of the machine hit both.
#
#   bench/ab-wire.sh [BASE] [LAUNCHES]   (default: merge-base with main, 7)
#
# Rows: TCP over loopback (GASPI_TRANSPORT=tcp, gaspi-run -n 2) at 8 B and
# 4 KiB; TCP between two network namespaces (a veth pair) at 8 B when run as
# root with iproute2 (else that row is skipped, said so). Per row: the
# median over launches of each launch's median half round trip, the spread
# of the launch medians [min-max], and after/before (below 1.00: faster).
# Builds BASE in a temporary worktree under target/ab-wire (removed after).
# The measurement (not the builds) holds /tmp/gaspi-tests.lock, the lock
# test runs that start processes or namespaces take on a shared machine.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BASE=${1:-$(git merge-base HEAD main)}
N=${2:-7}
W="$ROOT/target/ab-wire"
mkdir -p "$W/before" "$W/after"
SRC=$(mktemp -d /tmp/ab-wire-src.XXXXXX)
cleanup() {
    git worktree remove --force "$SRC" 2>/dev/null || rm -rf "$SRC"
    [ -z "${A:-}" ] || ip netns del "$A" 2>/dev/null || true
    [ -z "${B:-}" ] || ip netns del "$B" 2>/dev/null || true
}
trap cleanup EXIT
git worktree add -q --detach "$SRC" "$BASE"
echo "ab-wire.sh: before = $(git rev-parse --short "$BASE"), after = working tree"
# The base build reuses the registry crates already built here.
[ -d "$W/target/release" ] || { mkdir -p "$W/target" && cp -a target/release "$W/target/release"; }
(cd "$SRC" && CARGO_TARGET_DIR="$W/target" nice -n 10 cargo build -q --release -p gaspi-bench -p gaspi-launch)
cp "$W/target/release/gaspi-bench" "$W/target/release/gaspi-run" "$W/before/"
nice -n 10 cargo build -q --release -p gaspi-bench -p gaspi-launch
cp target/release/gaspi-bench target/release/gaspi-run "$W/after/"
exec 9>/tmp/gaspi-tests.lock
flock 9
OUT=$(mktemp /tmp/ab-wire.XXXXXX.jsonl)
NETNS=0
if [ "$(id -u)" = 0 ] && command -v ip >/dev/null; then
    NETNS=1
    A=gaspi-abw-a-$$ B=gaspi-abw-b-$$
    ip netns add "$A"; ip netns add "$B"
    ip link add va netns "$A" type veth peer name vb netns "$B"
    ip -n "$A" addr add 10.99.3.1/24 dev va; ip -n "$A" link set va up; ip -n "$A" link set lo up
    ip -n "$B" addr add 10.99.3.2/24 dev vb; ip -n "$B" link set vb up; ip -n "$B" link set lo up
else
    echo "ab-wire.sh: not root or no iproute2: the namespace row is skipped" >&2
fi
KEY=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
port=47600
tag() { sed "s/^{/{\"build\":\"$1\",\"where\":\"$2\",/"; }
for _ in $(seq "$N"); do
    for build in before after; do
        D="$W/$build"
        GASPI_TRANSPORT=tcp "$D/gaspi-run" -n 2 "$D/gaspi-bench" --json pingpong --sizes 8,4096 | tag $build tcp-loopback >>"$OUT"
        if [ $NETNS = 1 ]; then
            port=$((port + 1))
            ip netns exec "$B" env GASPI_RANK=1 GASPI_SIZE=2 GASPI_LOCAL_RANK=0 GASPI_LOCAL_SIZE=1 \
                GASPI_RENDEZVOUS=10.99.3.1:$port GASPI_JOB_KEY="$KEY" "$D/gaspi-bench" --json pingpong --sizes 8 >/dev/null &
            ip netns exec "$A" env GASPI_RANK=0 GASPI_SIZE=2 GASPI_LOCAL_RANK=0 GASPI_LOCAL_SIZE=1 \
                GASPI_RENDEZVOUS=10.99.3.1:$port GASPI_JOB_KEY="$KEY" "$D/gaspi-bench" --json pingpong --sizes 8 | tag $build tcp-netns >>"$OUT"
            wait
        fi
    done
done
python3 - "$OUT" <<'P'
import collections, json, statistics as st, sys
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("bench") != "pingpong":
        continue
    d[(r["where"], r["size"], r["build"])].append(r["median_us"])
print(f"{'half round trip (us)':26} {'before (bincode)':>22} {'after (postcard)':>22} {'after/before':>12}")
for (w, s, build) in sorted(d):
    if build != "before":
        continue
    a, z = d[(w, s, "before")], d[(w, s, "after")]
    ma, mz = st.median(a), st.median(z)
    f = lambda v, m: f"{m:.3f} [{min(v):.3f}-{max(v):.3f}]"
    print(f"{w + ' ' + str(s) + ' B':26} {f(a, ma):>22} {f(z, mz):>22} {mz / ma:12.3f}")
print(f"launches per build: {len(a)}")
P
echo "raw: $OUT"
