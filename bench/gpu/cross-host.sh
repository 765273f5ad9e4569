#!/usr/bin/env bash
# Issue 41's one call: GPU segments across hosts, every figure from the same
# run. Hosts are network namespaces of one GPU machine joined by veth pairs:
# ga (10.99.0.1, 10.99.1.1) -- gb (10.99.0.2) and ga -- gc (10.99.1.2), ga
# forwarding between the two links. Rank 0 in ga, rank 1 in gb on GPU 1
# (rank 1 of a three-rank job in gb, rank 2 in gc). RUNS times (default 3):
# - our GPU-segment ping-pong, host-driven and device-driven
#   (`gaspi-bench gpu-pingpong --device-driven`), 8 B to 4 MiB;
# - our host-segment ping-pong (`gaspi-bench pingpong`, with the raw TCP
#   ping-pong between the same namespaces measured in the same job);
# - NCCL's send/recv of GPU tensors over its socket transport
#   (bench/peers/nccl_sendrecv.py, torch from the machine's Python);
# - write bandwidth: host segments (`write-bw`, with the raw TCP stream),
#   GPU to GPU (`gpu-bw`) and CPU to GPU (`host-gpu-bw`), 1 and 4 MiB;
# - reads beside writes of host segments (`read-bw`), 8 B to 4 MiB;
# - raw TCP both ways at once (bench/peers/tcp_duplex.py), the limit of a
#   job that moves as many bytes back as it sends;
# - the mixed job: `matvec --mode gpu` and `--mode host` across ga and gb,
#   and `matvec --gpus 2` with one CPU rank in ga feeding GPU ranks in gb
#   and gc (each over its own link), batches 7680 and 15360.
# Then bench/gpu/cross_host_table.py prints the table with the goals.
#
# Staging (this machine has no `ip`): `bash bench/gpu/stage-cross-host.sh
# DIR` copies the binaries, this script, the table, the NCCL program,
# Debian's ip and its libraries into DIR; carry DIR and run
# `bash DIR/cross-host.sh` with OUT set (the device tool sets it).
set -u
B=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$(mktemp -d)}
RUNS=${RUNS:-3}
IP="$B/ip"
NV=""
for f in /usr/local/cuda/lib64/libnvrtc.so.13 /usr/local/cuda/lib64/libnvrtc.so; do
    [ -e "$f" ] && { NV=$(dirname "$f"); break; }
done
[ -z "$NV" ] && NV=$(dirname "$(find /usr /opt -name 'libnvrtc.so*' 2>/dev/null | grep -v builtins | head -1)" 2>/dev/null)
IPLIB="$B/lib"
export LD_LIBRARY_PATH="${NV:-}:${LD_LIBRARY_PATH:-}"
ipc() { LD_LIBRARY_PATH=$IPLIB "$IP" "$@"; }
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0
echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | paste -sd';') cores=$(nproc)"
cleanup() { for n in ga gb gc; do ipc netns del $n 2>/dev/null; done; }
cleanup
# One GPU: two ranks' kernels run side by side on it only under NVIDIA's
# Multi-Process Service (otherwise in time slices): a private MPS daemon
# for this run, stopped at the end; the GPU benchmarks then run with both
# ranks on GPU 0 (GASPI_BENCH_SHARE_GPU=1) and NCCL is skipped.
MPS=""
if [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')" = 1 ] && command -v nvidia-cuda-mps-control >/dev/null; then
    CUDA_MPS_PIPE_DIRECTORY=$(mktemp -d) CUDA_MPS_LOG_DIRECTORY=$(mktemp -d)
    export CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
    if nvidia-cuda-mps-control -d; then
        MPS=1
        export GASPI_BENCH_SHARE_GPU=1
        echo "# one GPU: both ranks on GPU 0 under MPS"
    fi
fi
stop_mps() { [ -z "$MPS" ] || { echo quit | nvidia-cuda-mps-control; sleep 1; }; }
ipc netns add ga || { echo "NETNS: ip netns add failed"; stop_mps; exit 0; }
ipc netns add gb; ipc netns add gc
ipc link add va netns ga type veth peer name vb netns gb
ipc link add vc0 netns ga type veth peer name vc netns gc
ipc -n ga addr add 10.99.0.1/24 dev va; ipc -n ga addr add 10.99.1.1/24 dev vc0
ipc -n gb addr add 10.99.0.2/24 dev vb; ipc -n gc addr add 10.99.1.2/24 dev vc
for n in ga gb gc; do ipc -n $n link set lo up; done
ipc -n ga link set va up; ipc -n ga link set vc0 up; ipc -n gb link set vb up; ipc -n gc link set vc up
ipc netns exec ga sh -c 'echo 1 > /proc/sys/net/ipv4/ip_forward'
ipc -n gb route add 10.99.1.0/24 via 10.99.0.1
ipc -n gc route add 10.99.0.0/24 via 10.99.1.1
KEY=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
port=47100
J=$OUT/cross.jsonl
: > "$J"
ns_of() { case $1 in 0) echo ga ;; 1) echo gb ;; 2) echo gc ;; esac; }
# job NAME SIZE CMD...: ranks 0..SIZE-1 in their namespaces; rank 0's JSON
# lines go to $J tagged with the case and the run.
job() {
    local name=$1 size=$2; shift 2
    port=$((port + 1))
    local pids="" r
    for r in $(seq $((size - 1)) -1 1); do
        ipc netns exec "$(ns_of $r)" env GASPI_RANK=$r GASPI_SIZE=$size GASPI_LOCAL_RANK=0 GASPI_LOCAL_SIZE=1 \
            GASPI_RENDEZVOUS=10.99.0.1:$port GASPI_JOB_KEY=$KEY \
            timeout 300 "$@" > "$OUT/$name-r$r-$run.txt" 2>&1 &
        pids="$pids $!"
    done
    ipc netns exec ga env GASPI_RANK=0 GASPI_SIZE=$size GASPI_LOCAL_RANK=0 GASPI_LOCAL_SIZE=1 \
        GASPI_RENDEZVOUS=10.99.0.1:$port GASPI_JOB_KEY=$KEY \
        timeout 300 "$@" > "$OUT/$name-r0-$run.txt" 2>&1
    local rc=$?
    for p in $pids; do wait $p || rc=$((rc ? rc : 1)); done
    grep -E '^\{' "$OUT/$name-r0-$run.txt" | sed "s/^{/{\"case\":\"$name\",\"run\":$run,/" >> "$J"
    echo "$name run $run: rc $rc, $(grep -cE '^\{' "$OUT/$name-r0-$run.txt") records"
    [ $rc -eq 0 ] || tail -5 "$OUT/$name-r0-$run.txt" "$OUT/$name-r1-$run.txt" 2>/dev/null
}
PY=${PYTHON:-python3}
# GASPI_BENCH=PATH: another gaspi-bench in its place (an A/B of two builds).
GB=${GASPI_BENCH:-$B/gaspi-bench}
NGPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
nccl() {
    # NCCL refuses two ranks on one GPU (and waits for the peer meanwhile).
    if [ "$NGPUS" -lt 2 ]; then
        echo "nccl run $run: skipped, one GPU"
        return
    fi
    port=$((port + 1))
    local common="MASTER_ADDR=10.99.0.1 MASTER_PORT=$port WORLD_SIZE=2 NCCL_IB_DISABLE=1 NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket"
    ipc netns exec gb env $common RANK=1 LOCAL_GPU=1 NCCL_SOCKET_IFNAME=vb \
        timeout ${NCCL_T:-150} $PY "$B/nccl_sendrecv.py" "$SIZES" > "$OUT/nccl-r1-$run.txt" 2>&1 &
    local p1=$!
    ipc netns exec ga env $common RANK=0 LOCAL_GPU=0 NCCL_SOCKET_IFNAME=va \
        timeout ${NCCL_T:-150} $PY "$B/nccl_sendrecv.py" "$SIZES" > "$OUT/nccl-r0-$run.txt" 2>&1
    local rc=$?
    wait $p1
    grep -E '^\{' "$OUT/nccl-r0-$run.txt" | sed "s/^{/{\"case\":\"nccl\",\"run\":$run,/" >> "$J"
    echo "nccl run $run: rc $rc"
    [ $rc -eq 0 ] || tail -5 "$OUT/nccl-r0-$run.txt"
}
# Raw TCP both ways at once (the matvec job moves as many bytes back).
duplex() {
    port=$((port + 1))
    ipc netns exec gb timeout 30 python3 "$B/tcp_duplex.py" serve $port 2 > /dev/null 2>&1 &
    local p=$!
    ipc netns exec ga timeout 30 python3 "$B/tcp_duplex.py" connect 10.99.0.2 $port 2 2>&1 \
        | grep -E '^\{' | sed "s/^{/{\"case\":\"duplex\",\"run\":$run,/" >> "$J"
    wait $p
    echo "duplex run $run: $(tail -1 "$J" | cut -c1-160)"
}
SIZES=${SIZES:-8,4096,65536,1048576,4194304}
# ONLY="a b": run only those parts (gpu-pingpong pingpong nccl write-bw
# gpu-bw host-gpu-bw read-bw duplex matvec).
want() { [ -z "${ONLY:-}" ] || [[ " $ONLY " == *" $1 "* ]]; }
for run in $(seq "$RUNS"); do
    want gpu-pingpong && job gpu-pingpong 2 "$GB" --json gpu-pingpong --device-driven --sizes $SIZES
    want pingpong && job pingpong 2 "$GB" --json pingpong --sizes $SIZES
    want nccl && nccl
    want write-bw && job write-bw 2 "$GB" --json write-bw --sizes 1048576,4194304
    want gpu-bw && job gpu-bw 2 "$GB" --json gpu-bw --sizes 1048576,4194304
    want host-gpu-bw && job host-gpu-bw 2 "$GB" --json host-gpu-bw --sizes 1048576,4194304
    want read-bw && job read-bw 2 "$GB" --json read-bw --sizes $SIZES
    want duplex && duplex
    if want matvec && [ -x "$B/matvec" ]; then
        job matvec-gpu 2 "$B/matvec" --mode gpu --json --seconds 1 --batch 7680,15360
        job matvec-host 2 "$B/matvec" --mode host --json --seconds 1 --batch 7680,15360
        job matvec-2gpu-nodes 3 "$B/matvec" --gpus 2 --json --seconds 1 --batch 7680,15360
    fi
done
cleanup
stop_mps
cp "$J" "$OUT/" 2>/dev/null
python3 "$B/cross_host_table.py" "$J"
