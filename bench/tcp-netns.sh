#!/usr/bin/env bash
# tcp-netns.sh - gaspi-bench across two hosts made of network namespaces
# (a veth pair, 10.99.0.1 and 10.99.0.2), over the TCP transport: the
# write_notify ping-pong and the write bandwidth, each with its same-run
# raw-TCP floor (a busy-polling loopback socket ping-pong / stream measured
# by rank 0; see bench/src/floor.rs). Prints the --json lines of rank 0 and
# removes the namespaces. Needs root and iproute2; run from a built tree
# (cargo build --release -p gaspi-bench).
#
#   bench/tcp-netns.sh [ROUNDS]     (default 3 launches of each)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BENCH="$ROOT/target/release/gaspi-bench"
ROUNDS=${1:-3}
[ -x "$BENCH" ] || { echo "tcp-netns.sh: build gaspi-bench first" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "tcp-netns.sh: needs root (ip netns)" >&2; exit 2; }
A=gaspi-bench-a-$$ B=gaspi-bench-b-$$
cleanup() { ip netns del "$A" 2>/dev/null || true; ip netns del "$B" 2>/dev/null || true; }
trap cleanup EXIT
ip netns add "$A"; ip netns add "$B"
ip link add va netns "$A" type veth peer name vb netns "$B"
ip -n "$A" addr add 10.99.0.1/24 dev va; ip -n "$A" link set va up; ip -n "$A" link set lo up
ip -n "$B" addr add 10.99.0.2/24 dev vb; ip -n "$B" link set vb up; ip -n "$B" link set lo up
KEY=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
run() {
    local port=$1; shift
    ip netns exec "$B" env GASPI_RANK=1 GASPI_SIZE=2 GASPI_RENDEZVOUS=10.99.0.1:$port \
        GASPI_JOB_KEY="$KEY" "$BENCH" --json "$@" >/dev/null &
    ip netns exec "$A" env GASPI_RANK=0 GASPI_SIZE=2 GASPI_RENDEZVOUS=10.99.0.1:$port \
        GASPI_JOB_KEY="$KEY" "$BENCH" --json "$@"
    wait
}
port=47100
for _ in $(seq "$ROUNDS"); do
    run $((port++)) pingpong --sizes 8,4096,65536,1048576
    run $((port++)) write-bw --sizes 65536,1048576,4194304
done
