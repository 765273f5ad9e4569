#!/usr/bin/env bash
# A/B of the TCP transport across two network namespaces: two builds of
# gaspi-bench alternate, ROUNDS times; JSON lines to $OUT/ab.jsonl, each
# with "build":"before"|"after". For the GPU machine (no `ip` there): put
# this script in a folder with the two stripped binaries as bench-before
# and bench-after (e.g. one built from a git worktree of the old commit),
# Debian's /usr/sbin/ip, and ip's libraries but libc in lib/; carry the
# folder and run it with OUT set (the device tool sets it).
set -u
B=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$B/lib
IP="$B/ip"
ROUNDS=${ROUNDS:-4}
nproc; nvidia-smi -L 2>/dev/null | head -2
$IP netns add ga || { echo "NETNS: ip netns add failed"; exit 0; }
$IP netns add gb
$IP link add va netns ga type veth peer name vb netns gb
$IP -n ga addr add 10.99.0.1/24 dev va; $IP -n ga link set va up; $IP -n ga link set lo up
$IP -n gb addr add 10.99.0.2/24 dev vb; $IP -n gb link set vb up; $IP -n gb link set lo up
KEY=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
port=47000
bench() {  # which args...
  local which=$1; shift; port=$((port+1))
  $IP netns exec gb env GASPI_RANK=1 GASPI_SIZE=2 GASPI_LOCAL_RANK=0 GASPI_LOCAL_SIZE=1 \
     GASPI_RENDEZVOUS=10.99.0.1:$port GASPI_JOB_KEY=$KEY \
     timeout 200 $B/bench-$which --json "$@" > /dev/null 2>&1 &
  $IP netns exec ga env GASPI_RANK=0 GASPI_SIZE=2 GASPI_LOCAL_RANK=0 GASPI_LOCAL_SIZE=1 \
     GASPI_RENDEZVOUS=10.99.0.1:$port GASPI_JOB_KEY=$KEY \
     timeout 200 $B/bench-$which --json "$@" 2>$OUT/err-$which.txt | sed "s/^{/{\"build\":\"$which\",/" | tee -a $OUT/ab.jsonl
  wait
}
for r in $(seq $ROUNDS); do
  for w in before after; do bench $w pingpong --sizes 8,4096,65536,1048576; done
  for w in after before; do bench $w write-bw --sizes 65536,1048576,4194304; done
done
$IP netns del ga; $IP netns del gb
