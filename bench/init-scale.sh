#!/usr/bin/env bash
# init-scale.sh - start-up at scale on this machine (issue 43): for each job
# size, `gaspi-bench --json init` under gaspi-run with the rendezvous of
# decision 0065 ("tree"), the same binary with the star and whole table of
# before ("star": GASPI_STARTUP_FANOUT and GASPI_ENDPOINTS_EAGER_MAX above
# the size), gaspi-bench under mpirun with our own rendezvous
# ("tree-mpirun", GASPI_BOOTSTRAP=own) and with the PMIx bootstrap
# ("pmix-mpirun": endpoints through the PMIx server of Open MPI's daemon,
# decision 0084; needs gaspi-bench built with --features pmix), and Open
# MPI's MPI_Init + MPI_Finalize of as many processes under mpirun
# (bench/peers/mpi_init.c, "mpi", with MPI_OPTS); and the same three under
# Slurm's `srun --mpi=pmix` ("pmix-srun", "tree-srun": our own rendezvous
# from Slurm's variables, "mpi-srun": MPI_OPTS as OMPI_MCA_* variables),
# on a slurmctld + slurmd this script starts (bench/slurm-node.sh, the
# tests' configuration with a node of SLURM_CPUS CPUs); interleaved,
# ROUNDS rounds each. Every JSON line carries the 1-minute load average
# at the job's start ("load").
#
#   bench/init-scale.sh [SIZE...]        (default: 64 256 1024)
#
# Environment: ROUNDS (default 3); STAR_MAX (largest size the star runs at,
# default 1024); JOB_TIMEOUT (seconds per job, default 300); VARIANTS
# (default "tree star tree-mpirun pmix-mpirun mpi"; add "pmix-srun
# tree-srun mpi-srun" for Slurm); MPI_OPTS (extra options of the "mpi"
# variants, `--mca NAME VALUE` pairs, default "--mca pml ob1 --mca btl
# self,tcp --mca mpi_yield_when_idle 1 --mca mtl ^ofi,psm,psm2 --mca osc
# ^ucx,pt2pt --mca coll ^hcoll": Open MPI's defaults probe UCX and
# libfabric in every process and spin; see BENCHMARKS.md); SLURM_CPUS
# (the Slurm node's CPU count, default 1024: `srun -O` still needs
# MaxTasksPerNode, set in tests/slurm/slurm.conf.in);
# MPI_ROUNDS (rounds of the "mpi" variants, the first ones of ROUNDS;
# default ROUNDS: Open MPI's start-up of 1,024 processes on 2 cores takes
# many minutes); GASPI_INIT_TIMEOUT_MS (passed to the ranks; 1,024 ranks on 2 loaded
# cores can need more than the default 60 s).
#
# Build: cargo build --release -p gaspi-bench --features pmix
#        cargo build --release -p gaspi-launch --features cli
#
# Prints one JSON line per job (gaspi-bench's or the MPI peer's, with
# "variant", "round" and "wall_s", the launcher's whole run, added), then a
# table of medians over rounds. Run it under the test lock on a shared
# machine: flock /tmp/gaspi-tests.lock bench/init-scale.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
SIZES=("$@")
[ ${#SIZES[@]} -gt 0 ] || SIZES=(64 256 1024)
ROUNDS=${ROUNDS:-3}
STAR_MAX=${STAR_MAX:-1024}
JOB_TIMEOUT=${JOB_TIMEOUT:-300}
VARIANTS=${VARIANTS:-"tree star tree-mpirun pmix-mpirun mpi"}
MPI_OPTS=${MPI_OPTS:---mca pml ob1 --mca btl self,tcp --mca mpi_yield_when_idle 1 --mca mtl ^ofi,psm,psm2 --mca osc ^ucx,pt2pt --mca coll ^hcoll}
SLURM_CPUS=${SLURM_CPUS:-1024}
MPI_ROUNDS=${MPI_ROUNDS:-$ROUNDS}
OUT=target/bench-peers/init-scale
mkdir -p "$OUT"
B=target/release
[ -x $B/gaspi-bench ] && [ -x $B/gaspi-run ] || {
    echo "init-scale.sh: build first: cargo build --release -p gaspi-bench --features pmix; cargo build --release -p gaspi-launch --features cli" >&2
    exit 2
}
HAVE_MPI=1
if command -v mpicc >/dev/null && command -v mpirun >/dev/null; then
    mpicc -O2 -Wall -o "$OUT/mpi_init" bench/peers/mpi_init.c
else
    echo "init-scale.sh: no mpicc/mpirun (apt-get install libopenmpi-dev openmpi-bin): MPI variants skipped" >&2
    HAVE_MPI=0
fi
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --bind-to none)
# The start-up deadline (default 60 s) reaches the ranks under mpirun too.
[ -z "${GASPI_INIT_TIMEOUT_MS:-}" ] || MPIRUN+=(-x GASPI_INIT_TIMEOUT_MS)
ulimit -n 65536 2>/dev/null || true
RESULTS=${RESULTS:-$OUT/results-$(date +%Y%m%d-%H%M%S).jsonl}
: >"$RESULTS"
SRUN=()
if [[ " $VARIANTS " == *-srun\ * ]]; then
    # shellcheck source=bench/slurm-node.sh
    . bench/slurm-node.sh
    SLURM_DIR=$(mktemp -d /tmp/gaspi-init-slurm.XXXXXX)
    trap 'slurm_node_stop; rm -rf "$SLURM_DIR"' EXIT
    if slurm_node_start "$SLURM_DIR" "$SLURM_CPUS"; then
        # -O: more tasks than the node's CPUs; --mpi=pmix: Slurm's PMIx
        # server in the step's slurmstepd.
        SRUN=("${SLURM_NODE_RUN[@]}" srun -O --mpi=pmix --kill-on-bad-exit=1)
    else
        echo "init-scale.sh: no Slurm node (above): srun variants skipped" >&2
    fi
    # MPI_OPTS as Open MPI's environment variables, for srun.
    MPI_ENV=()
    set -- $MPI_OPTS
    while [ $# -ge 3 ] && [ "$1" = --mca ]; do
        MPI_ENV+=("OMPI_MCA_$2=$3")
        shift 3
    done
    [ $# = 0 ] || { echo "init-scale.sh: MPI_OPTS must be --mca NAME VALUE pairs for srun: $*" >&2; exit 2; }
fi
run() { # variant n round command...
    local variant=$1 n=$2 round=$3
    shift 3
    local t0 t1 line load
    load=$(cut -d' ' -f1 /proc/loadavg)
    t0=$(date +%s.%N)
    if line=$(timeout -k 30 "$JOB_TIMEOUT" "$@" 2>"$OUT/$variant-$n-$round.err" | grep '^{' | tail -1); then :; fi
    t1=$(date +%s.%N)
    if [ -z "$line" ]; then
        line="{\"bench\":\"init\",\"ranks\":$n,\"note\":\"failed or timed out; see $OUT/$variant-$n-$round.err\"}"
    fi
    python3 -c 'import json,sys; r=json.loads(sys.argv[1]); r.update(variant=sys.argv[2], round=int(sys.argv[3]), wall_s=round(float(sys.argv[5])-float(sys.argv[4]),3), load=float(sys.argv[6])); print(json.dumps(r))' \
        "$line" "$variant" "$round" "$t0" "$t1" "$load" | tee -a "$RESULTS"
}
for n in "${SIZES[@]}"; do
    for round in $(seq 1 "$ROUNDS"); do
        for v in $VARIANTS; do
            case $v in
            tree) run tree "$n" "$round" $B/gaspi-run -n "$n" $B/gaspi-bench --json init ;;
            star)
                [ "$n" -le "$STAR_MAX" ] || continue
                run star "$n" "$round" env GASPI_STARTUP_FANOUT=$((n + 1)) GASPI_ENDPOINTS_EAGER_MAX=$((n + 1)) \
                    $B/gaspi-run -n "$n" $B/gaspi-bench --json init
                ;;
            tree-mpirun)
                [ $HAVE_MPI = 1 ] || continue
                run tree-mpirun "$n" "$round" "${MPIRUN[@]}" -x GASPI_BOOTSTRAP=own -np "$n" $B/gaspi-bench --json init
                ;;
            pmix-mpirun)
                [ $HAVE_MPI = 1 ] || continue
                # GASPI_BOOTSTRAP=pmix: a gaspi-bench built without the
                # feature fails rather than measure the fallback.
                run pmix-mpirun "$n" "$round" "${MPIRUN[@]}" -x GASPI_BOOTSTRAP=pmix -np "$n" $B/gaspi-bench --json init
                ;;
            mpi)
                [ $HAVE_MPI = 1 ] && [ "$round" -le "$MPI_ROUNDS" ] || continue
                # shellcheck disable=SC2086 # MPI_OPTS is a list of options
                run mpi "$n" "$round" "${MPIRUN[@]}" $MPI_OPTS -np "$n" "$OUT/mpi_init"
                ;;
            pmix-srun | tree-srun)
                [ ${#SRUN[@]} -gt 0 ] || continue
                boot=pmix
                [ $v = pmix-srun ] || boot=own
                run $v "$n" "$round" "${SRUN[@]}" -n "$n" \
                    env GASPI_BOOTSTRAP=$boot ${GASPI_INIT_TIMEOUT_MS:+GASPI_INIT_TIMEOUT_MS=$GASPI_INIT_TIMEOUT_MS} \
                    $B/gaspi-bench --json init
                ;;
            mpi-srun)
                [ $HAVE_MPI = 1 ] && [ ${#SRUN[@]} -gt 0 ] && [ "$round" -le "$MPI_ROUNDS" ] || continue
                run mpi-srun "$n" "$round" "${SRUN[@]}" -n "$n" env "${MPI_ENV[@]}" "$OUT/mpi_init"
                ;;
            esac
        done
    done
done
python3 - "$RESULTS" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
keys = sorted({(r["ranks"], r["variant"]) for r in rows})
print(f"\n{'ranks':>6} {'variant':<12} {'rounds':>6} {'init median s':>13} {'init slowest s':>14} {'wall s':>12} {'rank0 sent B':>13} {'rank0 recv B':>13} {'conn r0':>7} {'conn max':>8}")
for n, v in keys:
    rs = [r for r in rows if r["ranks"] == n and r["variant"] == v and "median_us" in r]
    if not rs:
        print(f"{n:>6} {v:<12} failed"); continue
    med = lambda k: statistics.median(r[k] for r in rs) if all(k in r for r in rs) else None
    walls = sorted(r["wall_s"] for r in rs)
    f = lambda x, d=0: "-" if x is None else f"{x:.{d}f}"
    print(f"{n:>6} {v:<12} {len(rs):>6} {f(med('median_us')/1e6,3):>13} {f(med('max_us')/1e6,3):>14} "
          f"{f(statistics.median(walls),2):>5} ({f(walls[0],1)}-{f(walls[-1],1)}) {f(med('rank0_sent_bytes')):>13} "
          f"{f(med('rank0_received_bytes')):>13} {f(med('rank0_connections')):>7} {f(med('connections_max')):>8}")
PY
