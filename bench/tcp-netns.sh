#!/usr/bin/env bash
# tcp-netns.sh - gaspi-bench across two hosts made of network namespaces
# (a veth pair, 10.99.0.1 and 10.99.0.2), over the TCP transport: the
# write_notify ping-pong and the write bandwidth, each with its same-run
# raw-TCP floor (a busy-polling socket ping-pong / stream between the same
# two namespaces; see bench/src/floor.rs), and, when Open MPI is installed,
# Open MPI's point-to-point ping-pong over its TCP transport between the
# same namespaces (bench/peers/mpi_sendrecv_pingpong.c, --mca btl
# self,tcp; mpirun in the first namespace starts the second rank through
# `ip netns exec`). Prints the --json lines of rank 0 and removes the
# namespaces. Needs root and iproute2; run from a built tree (cargo build
# --release -p gaspi-bench); the MPI peer needs mpicc (libopenmpi-dev).
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
    ip netns exec "$B" env GASPI_RANK=1 GASPI_SIZE=2 GASPI_LOCAL_RANK=0 GASPI_LOCAL_SIZE=1 GASPI_RENDEZVOUS=10.99.0.1:$port \
        GASPI_JOB_KEY="$KEY" "$BENCH" --json "$@" >/dev/null &
    ip netns exec "$A" env GASPI_RANK=0 GASPI_SIZE=2 GASPI_LOCAL_RANK=0 GASPI_LOCAL_SIZE=1 GASPI_RENDEZVOUS=10.99.0.1:$port \
        GASPI_JOB_KEY="$KEY" "$BENCH" --json "$@"
    wait
}
# Open MPI's send/receive ping-pong between the same two namespaces.
MPI_PEER=""
if command -v mpicc >/dev/null && command -v mpirun >/dev/null; then
    OUTDIR="$ROOT/target/bench-peers"; mkdir -p "$OUTDIR"
    if mpicc -O2 -o "$OUTDIR/mpi_sendrecv_pingpong" "$ROOT/bench/peers/mpi_sendrecv_pingpong.c"; then
        MPI_PEER="$OUTDIR/mpi_sendrecv_pingpong"
        # mpirun's "rsh": the host is a namespace's address.
        AGENT="$OUTDIR/netns-rsh-$$"
        cat > "$AGENT" <<AGENT_EOF
#!/bin/sh
host=\$1; shift
case \$host in 10.99.0.1) ns=$A ;; 10.99.0.2) ns=$B ;; *) echo "netns-rsh: unknown host \$host" >&2; exit 1 ;; esac
exec ip netns exec \$ns sh -c "\$*"
AGENT_EOF
        chmod +x "$AGENT"
        trap 'cleanup; rm -f "$AGENT"' EXIT
    fi
else
    echo "tcp-netns.sh: no mpicc/mpirun (Debian: libopenmpi-dev, openmpi-bin): the Open MPI peer is skipped" >&2
fi
mpi_peer() {
    [ -n "$MPI_PEER" ] || return 0
    # --bind-to none: each namespace looks like a host of its own to Open
    # MPI, which would bind both ranks to core 0 (measured: 4 ms per
    # message, a scheduler time slice, instead of 13 us).
    ip netns exec "$A" mpirun --allow-run-as-root -np 2 --bind-to none --host 10.99.0.1,10.99.0.2 \
        --mca plm_rsh_agent "$AGENT" --mca btl self,tcp \
        --mca btl_tcp_if_include 10.99.0.0/24 --mca oob_tcp_if_include 10.99.0.0/24 \
        "$MPI_PEER" --sizes 8,4096,65536,1048576 \
        || echo "tcp-netns.sh: the Open MPI peer failed" >&2
}
port=47100
for _ in $(seq "$ROUNDS"); do
    run $((port++)) pingpong --sizes 8,4096,65536,1048576
    mpi_peer
    run $((port++)) write-bw --sizes 65536,1048576,4194304
done
