#!/usr/bin/env bash
# fabric-vm.sh - the runtime over the libfabric transport against the
# provider's own fi_pingpong on Soft-RoCE, with libfabric's verbs;ofi_rxm
# provider: the issue-28 comparison of bench/fabric-netns.sh, made inside
# the QEMU VM of tests/rdma-vm/ (two rxe devices on the two ends of a veth
# pair; both ends of both programs on rxe0, see below), in
# the same boot, launches interleaved.
#
# Measured (medians over ROUNDS launches, with min..max):
# - fi_pingpong -e rdm -p 'verbs;ofi_rxm': a SEND/RECEIVE ping-pong, its
#   usec/xfer the half round trip, its MB/sec size / half round trip. Its
#   control socket (name exchange only) runs over 127.0.0.1: the rxe
#   devices' only addresses are IPv6 link-local ones, which it does not take.
# - gaspi-bench --quick over GASPI_TRANSPORT=libfabric, two ranks started by
#   gaspi-run: the write_notify + notify_waitsome + notify_reset ping-pong
#   (8 B, 4 MiB) and the write bandwidth (windows of 16 writes of 4 MiB,
#   then wait); the 8 B ping-pong again with GASPI_NET_CQ_DATA=0 (every
#   notification's word written apart, as before decision 0052).
# Everything runs under software emulation (TCG, two virtual CPUs): the
# figures compare the two programs with each other, not with hardware.
#
# Needs root, what tests/rdma-vm/run.sh needs, and a build of
#   cargo build --release --workspace --features gaspi/verbs,gaspi/libfabric
#
#   bench/fabric-vm.sh            (4 rounds; the VM runs this same file
#                                  with the binaries' folder as argument)
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

if [ $# = 0 ]; then
    # On the host: boot the VM with this script instead of the scenarios.
    [[ $(ldd "$ROOT/target/release/gaspi-bench" 2>/dev/null) == *libfabric* ]] || {
        echo "fabric-vm.sh: build with --features gaspi/verbs,gaspi/libfabric first (see the header)" >&2
        exit 2
    }
    # Two virtual CPUs, one per program end: with one, both ends of every
    # ping-pong (fi_pingpong's busy-polling ones most) share it and the
    # figures measure the scheduler's time slices.
    RDMA_VM_SMP=${RDMA_VM_SMP:-2} RDMA_VM_SCRIPT=bench/fabric-vm.sh exec bash "$ROOT/tests/rdma-vm/run.sh"
fi

# In the VM (tests/rdma-vm/in-vm.sh made rxe0 on veth0 and rxe1 on veth1,
# whose only addresses are IPv6 link-local ones). Both programs run both
# ends on rxe0: fi_pingpong's client hands the server's address to
# fi_getinfo, whose verbs provider resolves it with librdmacm to the device
# that owns it (rxe0, the same host) and drops every other domain, so a
# client on rxe1 gets -61 (FI_ENODATA). Tried and left: an IPv4 pair with
# one end in a network namespace (rxe made inside it) reached TCP but no
# RDMA connection across (fi_pingpong hung, the runtime's ranks timed out).
# So the figures are of rxe's own loopback path, the same for both.
BIN=$1
ROUNDS=4
P='verbs;ofi_rxm'
# As the VM's scenarios: verbs;ofi_rxm pins memory beyond the default
# locked-memory limit, and its default message CQ is larger than rxe allows.
ulimit -l unlimited
export FI_OFI_RXM_MSG_CQ_SIZE=1024 FI_UNIVERSE_SIZE=8
OUT=$(mktemp -d)
port=47700
T=600

# fi_pingpong SIZE ITERS: "fi_pingpong SIZE half_rtt_us mb_per_s".
fi_pp() {
    local size=$1 iters=$2
    port=$((port + 1))
    timeout -s KILL $T fi_pingpong -p "$P" -e rdm -d rxe0 -B "$port" -S "$size" -I "$iters" >/dev/null 2>"$OUT/fi-server.err" &
    local server=$!
    sleep 1
    timeout -s KILL $T fi_pingpong -p "$P" -e rdm -d rxe0 -P "$port" -S "$size" -I "$iters" 127.0.0.1 2>"$OUT/fi-client.err" |
        awk -v s="$size" 'NR > 1 && NF >= 8 { print "fi_pingpong", s, $7, $6 }'
    # (Failures on stderr: the console shows them, the results file does not get them.)
    wait "$server" || {
        echo "BENCH fi_pingpong $size B: server failed"
        cat "$OUT/fi-server.err" "$OUT/fi-client.err" | grep -v "^$" | tail -n 20 | sed 's/^/BENCH   /'
    } >&2
}

# runtime ARGS...: one launch of gaspi-bench on two ranks, both on rxe0.
runtime() {
    GASPI_TRANSPORT=libfabric GASPI_NET_PROVIDER="$P" GASPI_NET_DEVICE=rxe0 GASPI_LOG=info \
        timeout -s KILL $T "$BIN/gaspi-run" -n 2 "$BIN/gaspi-bench" --json --quick "$@" 2>"$OUT/runtime.err" |
        python3 "$ROOT/bench/rounds.py" runtime-rows
    [ "$(grep -c "libfabric to 1 ranks" "$OUT/runtime.err")" = 2 ] ||
        { echo "BENCH gaspi-bench $1: not over libfabric, or failed"; grep -v INFO "$OUT/runtime.err" | head -n 5 | sed 's/^/BENCH   /'; } >&2
}

# Keeps a result line and shows it on the console (run.sh prints BENCH lines).
record() { tee -a "$OUT/all.txt" | sed 's/^/BENCH /'; }
for round in $(seq $ROUNDS); do
    echo "BENCH round $round"
    fi_pp 8 4000 | record
    fi_pp 4194304 40 | record
    runtime pingpong --sizes 8,4194304 | record
    runtime write-bw --sizes 4194304 | record
    GASPI_NET_CQ_DATA=0 runtime pingpong --sizes 8 | sed 's/^runtime-pingpong/runtime-apart-pingpong/' | record
done
echo "BENCH == $P on Soft-RoCE (both ends on rxe0) in the VM, $ROUNDS launches each: median [min..max]"
python3 - "$OUT/all.txt" "$ROOT/bench" <<'PY'
import sys
sys.path.insert(0, sys.argv[2])
from rounds import Rounds
r = Rounds(sys.argv[1], prefix="BENCH ")
col, show = r.col, r.show
f8 = show("fi_pingpong 8 B half round trip", col("fi_pingpong", 8, 2), "us")
r8 = show("runtime 8 B write_notify half round trip", col("runtime-pingpong", 8, 2), "us")
a8 = show("  the same, every word written apart", col("runtime-apart-pingpong", 8, 2), "us")
f4 = show("fi_pingpong 4 MiB ping-pong", col("fi_pingpong", 4194304, 3), "MB/s")
p4 = show("runtime 4 MiB ping-pong", col("runtime-pingpong", 4194304, 3), "MB/s")
b4 = show("runtime 4 MiB write bandwidth", col("runtime-bw", 4194304, 3), "MB/s")
if f8 and r8:
    print(f"BENCH ratio 8 B runtime / fi_pingpong: {r8 / f8:.2f} (goal <= 1.3)")
if f4 and b4:
    print(f"BENCH ratio 4 MiB runtime write bandwidth / fi_pingpong: {b4 / f4:.2f} (goal >= 0.9)")
if f4 and p4:
    print(f"BENCH ratio 4 MiB runtime ping-pong / fi_pingpong: {p4 / f4:.2f}")
PY
rm -rf "$OUT"
