# slurm-node.sh - sourced, not run: a Slurm controller and one node on this
# machine for benchmarks (bench/init-scale.sh), configured from the same
# tests/slurm/slurm.conf.in as tests/tests/slurm.rs, started the same way:
# both daemons in a network namespace of their own (their fixed ports
# cannot meet a test's), entered with nsenter rather than `ip netns exec`
# (which mounts a sysfs of its own and hides /sys/fs/cgroup from slurmd),
# `auth/none`. Needs root, iproute2 and slurm-wlm.
#
#   slurm_node_start DIR CPUS   start them (DIR: their state, logs and
#                               slurm.conf; CPUS: the node's CPU count);
#                               returns 1, saying why, where it cannot
#   slurm_node CMD...           run CMD beside them (SLURM_CONF set);
#                               "${SLURM_NODE_RUN[@]}" CMD... the same,
#                               as a command (for timeout and the like)
#   slurm_node_stop             stop them and remove the namespace
#
# The caller removes DIR.

SLURM_NODE_NS=
SLURM_NODE_PIDS=()
SLURM_NODE_CONF=
SLURM_NODE_RUN=()

slurm_node_start() {
    local dir=$1 cpus=$2 tool state i
    for tool in /usr/sbin/slurmctld /usr/sbin/slurmd /usr/bin/srun /usr/bin/sinfo /usr/bin/nsenter; do
        [ -x $tool ] || { echo "slurm-node.sh: $tool is missing (apt-get install slurm-wlm)" >&2; return 1; }
    done
    [ "$(id -u)" = 0 ] || { echo "slurm-node.sh: the namespace needs root" >&2; return 1; }
    mkdir -p "$dir/state" "$dir/spool"
    SLURM_NODE_CONF=$dir/slurm.conf
    sed -e "s|@DIR@|$dir|g" -e "s|@CPUS@|$cpus|g" \
        "$(dirname "${BASH_SOURCE[0]}")/../tests/slurm/slurm.conf.in" >"$SLURM_NODE_CONF"
    SLURM_NODE_NS=gaspi-slurm-$$
    SLURM_NODE_RUN=(env "SLURM_CONF=$SLURM_NODE_CONF" nsenter "--net=/run/netns/$SLURM_NODE_NS")
    ip netns add $SLURM_NODE_NS || { echo "slurm-node.sh: ip netns add failed" >&2; SLURM_NODE_NS=; return 1; }
    ip -n $SLURM_NODE_NS link set lo up
    # Slurm binds its ports through getaddrinfo(AI_ADDRCONFIG), which
    # finds nothing where loopback is the only interface: a an interface with
    # an address of its own (a veth pair, both ends inside: this kernel may
    # have no dummy interfaces; the tests' namespaces have a veth too).
    ip -n $SLURM_NODE_NS link add gaspi0 type veth peer name gaspi1
    ip -n $SLURM_NODE_NS addr add 10.213.255.1/24 dev gaspi0
    ip -n $SLURM_NODE_NS link set gaspi1 up
    ip -n $SLURM_NODE_NS link set gaspi0 up
    # Simple commands, so that $! is the daemon itself (env and nsenter
    # exec it).
    "${SLURM_NODE_RUN[@]}" /usr/sbin/slurmctld -D -i -f "$SLURM_NODE_CONF" </dev/null >/dev/null 2>&1 &
    SLURM_NODE_PIDS+=($!)
    "${SLURM_NODE_RUN[@]}" /usr/sbin/slurmd -D -f "$SLURM_NODE_CONF" -N localhost </dev/null >/dev/null 2>&1 &
    SLURM_NODE_PIDS+=($!)
    for i in $(seq 1 300); do
        state=$(slurm_node /usr/bin/sinfo -h -o %T 2>/dev/null || true)
        [ "$state" = idle ] && return 0
        sleep 0.2
    done
    echo "slurm-node.sh: the node is '$state', not idle, after 60 s; see $dir/slurmctld.log and $dir/slurmd.log" >&2
    return 1
}

slurm_node() {
    "${SLURM_NODE_RUN[@]}" "$@"
}

slurm_node_stop() {
    local p
    for p in "${SLURM_NODE_PIDS[@]}"; do
        kill "$p" 2>/dev/null || true
    done
    for p in "${SLURM_NODE_PIDS[@]}"; do
        wait "$p" 2>/dev/null || true
    done
    SLURM_NODE_PIDS=()
    [ -z "$SLURM_NODE_NS" ] || ip netns del $SLURM_NODE_NS 2>/dev/null || true
    SLURM_NODE_NS=
    SLURM_NODE_RUN=()
}
