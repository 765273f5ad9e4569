#!/bin/bash
# Runs inside the RDMA test VM, chrooted into the host's / (read-only):
# makes a veth pair with an rxe device on each end, then runs the project's
# scenarios with GASPI_TRANSPORT=verbs, ranks alternating between rxe0 and
# rxe1. Prints "VMTEST PASS name" or "VMTEST FAIL name" per scenario.
# $1: the repository; $2: comma-separated scenario names to run (all if empty);
# $3: a script of the repository to run on the two devices instead of the
# scenarios (bench/fabric-vm.sh's figures), given the binaries' folder;
# $4: 0 when the binaries have no verbs transport (then only the libfabric
# scenarios run).
REPO=$1; ONLY=${2:-}; SCRIPT=${3:-}; VERBS=${4:-1}
BIN=$REPO/target/release
# The host's /proc seen over 9p is not a procfs: mount one here if /init
# could not.
[ -r /proc/uptime ] || mount -t proc proc /proc || echo "vm: cannot mount /proc"
up() { cut -d' ' -f1 /proc/uptime; }

ip link set lo up
# A 4 MiB RDMA READ is answered with 4096 packets at once; with the default
# backlog of 1000 the receiving end of the veth drops most of them, and
# rxe's retransmission of READ responses (1 s later) is where it has been
# seen to fail ("Work Request Flushed Error" on the requester). A real
# NIC's link-level flow control does not drop; give the emulated link room.
echo 65536 > /proc/sys/net/core/netdev_max_backlog
ip link add veth0 type veth peer name veth1 && ip link set veth0 up && ip link set veth1 up
rdma link add rxe0 type rxe netdev veth0 && rdma link add rxe1 type rxe netdev veth1
sleep 2   # IPv6 link-local addresses, hence the RoCE GIDs, appear
rdma link show
ibv_devinfo | grep -E 'hca_id|state|active_mtu|link_layer'
for d in rxe0 rxe1; do echo "  $d GID[0] $(cat /sys/class/infiniband/$d/ports/1/gids/0)"; done

if [ -n "$SCRIPT" ]; then
    echo "vm: [$(up)s] $SCRIPT starts"
    bash "$REPO/$SCRIPT" "$BIN"
    echo "vm: [$(up)s] $SCRIPT exit $?"
    exit 0
fi

export GASPI_TRANSPORT=verbs GASPI_NET_DEVICE=rxe0,rxe1 GASPI_LOG=info
OUT=/tmp/out; mkdir -p $OUT

# scenario NAME RANKS EXPECT_RC OK_PATTERN OK_COUNT -- COMMAND...
scenario() {
    name=$1 ranks=$2 want_rc=$3 pattern=$4 want_ok=$5; shift 6
    if [ -n "$ONLY" ] && ! echo ",$ONLY," | grep -q ",$name,"; then return; fi
    t0=$(up)
    timeout -s KILL 600 "$@" > $OUT/$name.out 2> $OUT/$name.err
    rc=$?
    ok=$(grep -c -- "$pattern" $OUT/$name.out)
    verbs=$(grep -c "${VIA:-tcp to 0 ranks, verbs to} $((ranks - 1)) ranks" $OUT/$name.err)
    if [ $rc = $want_rc ] && [ $ok -ge $want_ok ] && [ $verbs -ge $ranks ]; then
        echo "VMTEST PASS $name ($t0 -> $(up) s)"
    else
        echo "VMTEST FAIL $name rc=$rc (want $want_rc) ok-lines=$ok (want $want_ok) ranks-on-verbs=$verbs (want $ranks)"
        grep -v " INFO " $OUT/$name.err | grep -v "RUST_BACKTRACE\|^$" | head -n 20 | sed "s/^/  /"
        tail -n 5 $OUT/$name.out | sed 's/^/  /'
        # What the emulated NICs saw: retries and out-of-order packets
        # point at the link, not at the runtime.
        for d in rxe0 rxe1; do
            echo "  $d: $(rdma statistic show link $d/1 2>&1 | tr '\n' ' ')"
        done
    fi
}

# fetch-add with 2,000 adds per rank instead of 10,000: atomics go
# through the owner (a round trip each), and under this emulation, with a
# build beside it, 44,000 of them outlasted the scenario's 60 s barrier
# (46 s alone, 67 s beside a build).
export FETCH_ADD_N=2000
T=$BIN/gaspi-test-rank M=$BIN/gaspi-model-rank RUN=$BIN/gaspi-run
if [ "$VERBS" = 0 ]; then
    echo "vm: SKIPPED the verbs scenarios: the binaries have no verbs transport"
else
    echo "vm: [$(up)s] scenarios start"
    scenario all-to-all   4 0 " ok" 4 -- $RUN -n 4 $T all-to-all --rounds 3
    scenario ordering     4 0 " ok" 4 -- $RUN -n 4 $T ordering --iters 20
    scenario ping-pong    2 0 " ok" 2 -- $RUN -n 2 $T ping-pong --rounds 50
    scenario notify-order 4 0 " ok" 4 -- env GASPI_NOTIFICATION_NUM=70000 $RUN -n 4 $T notify-order --rounds 20
    for s in read-notify lists fetch-add compare-swap passive allreduce groups; do
        scenario $s       4 0 " ok" 4 -- $RUN -n 4 $M $s
    done
    # A rank killed mid-job: the others get errors naming it, no hang.
    scenario killed-rank  4 137 "ok survivor" 3 -- $RUN -n 4 --keep-going $T dead-peer --victim 2 --keep-going
    echo "vm: [$(up)s] scenarios done"
fi

# The same over the libfabric transport with libfabric's verbs provider
# (verbs;ofi_rxm), where the binaries have it: ranks alternate between the
# two rxe devices (GASPI_NET_DEVICE names the libfabric domain too).
# verbs;ofi_rxm registers memory (and librdmacm pins) beyond the default
# locked-memory limit; its default message CQ is larger than rxe allows.
if ldd $M | grep -q libfabric; then
    ulimit -l unlimited
    export GASPI_TRANSPORT=libfabric GASPI_NET_PROVIDER='verbs;ofi_rxm'
    export FI_OFI_RXM_MSG_CQ_SIZE=1024 FI_UNIVERSE_SIZE=8
    # The start-up line names every network transport of the build, verbs
    # before libfabric: a libfabric-only build's has no "verbs to".
    if [ "$VERBS" = 0 ]; then
        VIA="tcp to 0 ranks, libfabric to"
    else
        VIA="verbs to 0 ranks, libfabric to"
    fi
    echo "vm: [$(up)s] libfabric scenarios start"
    scenario fabric-all-to-all 4 0 " ok" 4 -- $RUN -n 4 $T all-to-all --rounds 3
    scenario fabric-ordering   4 0 " ok" 4 -- $RUN -n 4 $T ordering --iters 20
    scenario fabric-ping-pong  2 0 " ok" 2 -- $RUN -n 2 $T ping-pong --rounds 50
    # verbs;ofi_rxm carries 4 bytes of CQ data: notifications in the
    # compact form where they fit, the rest written apart (decision 0052).
    scenario fabric-notify-order 4 0 " ok" 4 -- env GASPI_NOTIFICATION_NUM=70000 $RUN -n 4 $T notify-order --rounds 20
    if [ -f $OUT/fabric-notify-order.err ] && ! grep -q "on their write (4 bytes;" $OUT/fabric-notify-order.err; then
        echo "VMTEST FAIL fabric-compact-form: notifications did not ride on their writes as 4 bytes of CQ data"
    fi
    for s in read-notify lists fetch-add compare-swap passive allreduce groups; do
        scenario fabric-$s     4 0 " ok" 4 -- $RUN -n 4 $M $s
    done
    scenario fabric-killed-rank 4 137 "ok survivor" 3 -- $RUN -n 4 --keep-going $T dead-peer --victim 2 --keep-going
    echo "vm: [$(up)s] libfabric scenarios done"
    unset VIA
fi
# Traffic crossed the link: both devices sent packets.
for d in rxe0 rxe1; do
    echo "  $d: $(rdma statistic show link $d/1 2>/dev/null | grep -oE 'sent_pkts [0-9]+')"
done
