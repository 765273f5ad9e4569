#!/usr/bin/env bash
# Two network namespaces joined by a veth pair (two hosts on one machine);
# the matvec job's CPU node in one, its GPU node in the other, over TCP;
# then gaspi-bench pingpong and write-bw between them, and matvec on one
# host for reference. For the GPU machine, which has no `ip`: put this
# script in a folder with stripped copies of target/release/examples/matvec
# and target/release/gaspi-bench, Debian's /usr/sbin/ip, and ip's libraries
# (ldd /usr/sbin/ip) in lib/, carry the folder and run it; outputs go to $OUT.
set -u
B=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$B/lib
IP="$B/ip"
nvidia-smi -L
$IP netns add ga || { echo "NETNS: ip netns add failed"; exit 0; }
$IP netns add gb
$IP link add va netns ga type veth peer name vb netns gb
$IP -n ga addr add 10.99.0.1/24 dev va; $IP -n ga link set va up; $IP -n ga link set lo up
$IP -n gb addr add 10.99.0.2/24 dev vb; $IP -n gb link set vb up; $IP -n gb link set lo up
KEY=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
run() {  # mode
  local mode=$1
  echo "=== matvec --mode $mode across two namespaces"
  $IP netns exec ga env GASPI_RANK=0 GASPI_SIZE=2 GASPI_LOCAL_RANK=0 GASPI_LOCAL_SIZE=1 \
     GASPI_RENDEZVOUS=10.99.0.1:47000 GASPI_JOB_KEY=$KEY GASPI_LOG=info \
     timeout 120 $B/matvec --mode $mode --seconds 1 > $OUT/matvec-$mode-r0.txt 2>&1 &
  local p0=$!
  $IP netns exec gb env GASPI_RANK=1 GASPI_SIZE=2 GASPI_LOCAL_RANK=0 GASPI_LOCAL_SIZE=1 \
     GASPI_RENDEZVOUS=10.99.0.1:47000 GASPI_JOB_KEY=$KEY GASPI_LOG=info \
     timeout 120 $B/matvec --mode $mode --seconds 1 > $OUT/matvec-$mode-r1.txt 2>&1
  echo "rank 1 exit $?"; wait $p0; echo "rank 0 exit $?"
  tail -15 $OUT/matvec-$mode-r0.txt; tail -5 $OUT/matvec-$mode-r1.txt
}
run host
run gpu
bench() {  # args...
  echo "=== gaspi-bench $* across two namespaces (tcp)"
  $IP netns exec ga env GASPI_RANK=0 GASPI_SIZE=2 GASPI_LOCAL_RANK=0 GASPI_LOCAL_SIZE=1 \
     GASPI_RENDEZVOUS=10.99.0.1:47001 GASPI_JOB_KEY=$KEY \
     timeout 200 $B/gaspi-bench "$@" > $OUT/bench-r0.txt 2>&1 &
  local p0=$!
  $IP netns exec gb env GASPI_RANK=1 GASPI_SIZE=2 GASPI_LOCAL_RANK=0 GASPI_LOCAL_SIZE=1 \
     GASPI_RENDEZVOUS=10.99.0.1:47001 GASPI_JOB_KEY=$KEY \
     timeout 200 $B/gaspi-bench "$@" > /dev/null 2>&1
  wait $p0; cat $OUT/bench-r0.txt
}
for i in 1 2 3; do bench pingpong --sizes 8,4096,65536,1048576; done
for i in 1 2 3; do bench write-bw --sizes 65536,1048576,4194304; done
echo "=== same host, shm (reference)"
timeout 120 $B/matvec --mode all --seconds 1 2>&1 | tail -15
$IP netns del ga; $IP netns del gb
