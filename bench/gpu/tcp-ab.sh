#!/usr/bin/env bash
# A/B of the TCP transport across two network namespaces: two builds of
# gaspi-bench alternate, ROUNDS times; JSON lines to $OUT/ab.jsonl, each
# with "build":"before"|"after". Where the folder holds a staged Open MPI
# (ompi/, from bench/gpu/stage-openmpi.sh), each round also runs Open MPI's
# send/receive ping-pong over its TCP transport between the same two
# namespaces ("build":"mpi"). With PIN0 and PIN1 set (taskset core lists),
# rank 0 and rank 1 of every job (ours, the raw floors, Open MPI's) run on
# those cores; each line then carries "pinned":true. With MATVEC=1 and a
# matvec binary beside it,
# the matrix-vector job then runs across the namespaces once per mode, its
# products checked (GPU segments reached over TCP).
#
# For the GPU machine (no `ip` there): put this script in a folder with the
# two stripped binaries as bench-before and bench-after (e.g. one built from
# a git worktree of the old commit), Debian's /usr/sbin/ip, and ip's
# libraries but libc in lib/; carry the folder and run it with OUT set (the
# device tool sets it).
set -u
B=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$B/lib
IP="$B/ip"
ROUNDS=${ROUNDS:-4}
nproc; nvidia-smi -L 2>/dev/null | head -2
lscpu 2>/dev/null | grep -E "^(Model name|Socket|Core|Thread|NUMA node[0-9]* CPU)" 
T0=""; T1=""; TAG=""
if [ -n "${PIN0:-}" ] && [ -n "${PIN1:-}" ]; then
  T0="taskset -c $PIN0"; T1="taskset -c $PIN1"; TAG='"pinned":true,'
fi
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
     timeout 200 $T1 $B/bench-$which --json "$@" > /dev/null 2>&1 &
  $IP netns exec ga env GASPI_RANK=0 GASPI_SIZE=2 GASPI_LOCAL_RANK=0 GASPI_LOCAL_SIZE=1 \
     GASPI_RENDEZVOUS=10.99.0.1:$port GASPI_JOB_KEY=$KEY \
     timeout 200 $T0 $B/bench-$which --json "$@" 2>$OUT/err-$which.txt | sed "s/^{/{$TAG\"build\":\"$which\",/" | tee -a $OUT/ab.jsonl
  wait
}
# Open MPI's point-to-point ping-pong between the same namespaces: mpirun in
# the first starts the second rank through an "rsh" agent that enters the
# namespace of the address it is given.
AGENT=$B/netns-rsh
cat > $AGENT <<EOF
#!/bin/sh
host=\$1; shift
case \$host in 10.99.0.1) ns=ga; t="$T0" ;; 10.99.0.2) ns=gb; t="$T1" ;; *) echo "netns-rsh: unknown host \$host" >&2; exit 1 ;; esac
exec $IP netns exec \$ns \$t sh -c "\$*"
EOF
chmod +x $AGENT
mpi() {
  [ -f $B/ompi/env.sh ] || return 0
  # --bind-to none: each namespace looks like a host to Open MPI, which
  # would bind both ranks to core 0.
  # A batch system's variables (a GPU machine may run commands inside a
  # Slurm job) would make mpirun take that allocation instead of --host.
  ( env | grep -E '^(SLURM|PBS|OMPI|PMI|PMIX)' > $OUT/env-mpi.txt
    for v in $(env | grep -oE '^(SLURM|PBS|OMPI_MCA|PMI|PMIX)[A-Za-z0-9_]*'); do unset $v; done
    . $B/ompi/env.sh
    $IP netns exec ga timeout 200 $T0 mpirun --allow-run-as-root -np 2 --bind-to none \
      --host 10.99.0.1:1,10.99.0.2:1 --map-by node --display-map \
      --mca plm_rsh_agent $AGENT --mca btl self,tcp \
      --mca btl_tcp_if_include 10.99.0.0/24 --mca oob_tcp_if_include 10.99.0.0/24 \
      $B/ompi/mpi_sendrecv_pingpong --sizes 8,4096,65536,1048576 2>>$OUT/err-mpi.txt ) \
    | tee -a $OUT/mpi-out.txt | grep '^{' | sed "s/^{/{$TAG\"build\":\"mpi\",/" | tee -a $OUT/ab.jsonl
}
BUILDS=${BUILDS:-before after}
for r in $(seq $ROUNDS); do
  for w in $BUILDS; do bench $w pingpong --sizes 8,4096,65536,1048576; done
  mpi
  for w in $(echo $BUILDS | tr ' ' '\n' | tac); do bench $w write-bw --sizes 65536,1048576,4194304; done
done
if [ "${MATVEC:-0}" = 1 ] && [ -x $B/matvec ]; then
  for mode in host gpu; do
    port=$((port+1))
    echo "=== matvec --mode $mode across the namespaces"
    $IP netns exec gb env GASPI_RANK=1 GASPI_SIZE=2 GASPI_LOCAL_RANK=0 GASPI_LOCAL_SIZE=1 \
       GASPI_RENDEZVOUS=10.99.0.1:$port GASPI_JOB_KEY=$KEY \
       timeout 120 $B/matvec --mode $mode --seconds 1 > $OUT/matvec-$mode-r1.txt 2>&1 &
    $IP netns exec ga env GASPI_RANK=0 GASPI_SIZE=2 GASPI_LOCAL_RANK=0 GASPI_LOCAL_SIZE=1 \
       GASPI_RENDEZVOUS=10.99.0.1:$port GASPI_JOB_KEY=$KEY \
       timeout 120 $B/matvec --mode $mode --seconds 1 > $OUT/matvec-$mode-r0.txt 2>&1
    echo "rank 0 exit $?"; wait $!; echo "rank 1 exit $?"
    tail -12 $OUT/matvec-$mode-r0.txt
  done
fi
$IP netns del ga; $IP netns del gb
