#!/usr/bin/env bash
# compare-mpi.sh - run gaspi-bench and an Open MPI one-sided reference in the
# same run on this machine and compare them point by point.
#
#   bench/compare-mpi.sh [--mpi-only] [--quick]
#
#   --mpi-only  only build and run the MPI reference (no cargo build, no
#               comparison); prints its JSON lines.
#   --quick     fewer iterations for the MPI reference (smoke test only; the
#               comparison then is not meaningful).
#
# Environment:
#   COMPARE_TOLERANCE  allowed relative slack before a point counts as worse
#                      (default 0: ours must not be worse at all; e.g. 0.05).
#   OMPI_MCA_osc       one-sided component for the reference (default sm).
#
# Steps: (a) install Open MPI if mpicc is missing (Debian, as root),
# (b) build bench/peers/mpi_put_pingpong.c with mpicc -O2 into
# target/bench-peers/, (c) run it under mpirun with 2 ranks for "pingpong" and
# "write-bw", (d) build and run target/release/gaspi-bench pingpong/write-bw
# --json, (e) join both by (bench, size) and print ours vs MPI. Exit status:
# 0 if none of our points is worse than MPI's (pingpong: higher median_us;
# write-bw: lower gbps), 1 if any is worse or missing, 2 on setup errors.
# All outputs are kept in target/bench-peers/.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

MPI_ONLY=0
QUICK=()
for arg in "$@"; do
    case "$arg" in
        --mpi-only) MPI_ONLY=1 ;;
        --quick) QUICK=(--quick) ;;
        -h | --help)
            sed -n '2,25p' "$0"
            exit 0
            ;;
        *)
            echo "compare-mpi.sh: unknown argument '$arg' (try --help)" >&2
            exit 2
            ;;
    esac
done

OUT="$ROOT/target/bench-peers"
mkdir -p "$OUT"

# (a) Open MPI toolchain and launcher.
if ! command -v mpicc >/dev/null 2>&1 || ! command -v mpirun >/dev/null 2>&1; then
    echo "== installing Open MPI (libopenmpi-dev openmpi-bin)" >&2
    SUDO=()
    if [[ $(id -u) -ne 0 ]]; then
        if command -v sudo >/dev/null 2>&1; then
            SUDO=(sudo)
        else
            echo "compare-mpi.sh: mpicc missing and not root; install libopenmpi-dev openmpi-bin" >&2
            exit 2
        fi
    fi
    export DEBIAN_FRONTEND=noninteractive
    "${SUDO[@]}" apt-get update -q
    "${SUDO[@]}" apt-get install -y -q libopenmpi-dev openmpi-bin
fi

# (b) Build the reference program.
PEER="$OUT/mpi_put_pingpong"
echo "== building $PEER" >&2
mpicc -O2 -Wall -Wextra -std=c11 -o "$PEER" bench/peers/mpi_put_pingpong.c

# (c) Run it. Settings, all checked on the Debian 12 VM (Open MPI 4.1.4):
# * --allow-run-as-root: Open MPI refuses to start as root otherwise; harmless
#   as a normal user.
# * --oversubscribe: lets 2 ranks start even where Open MPI counts fewer than
#   2 slots (cgroup-limited containers); on a 2-core machine it changes nothing.
# * --bind-to none: gaspi-bench does not pin its processes, so neither does
#   the reference (same scheduler conditions; pinning made no measurable
#   difference here).
# * OMPI_MCA_osc=sm: MPI_Win_allocate on one node then uses the shared-memory
#   one-sided component (puts are plain stores into the peer's mapping), the
#   fair counterpart of our "shm" transport. It is Open MPI's default choice
#   here anyway; pinning it makes the run fail loudly instead of silently
#   falling back to osc/pt2pt (active messages, ~10x slower here), which would
#   flatter us.
# * OMPI_MCA_btl_vader_single_copy_mechanism=none: the run works here with the
#   default (CMA, process_vm_readv) because we are root without Yama, but in
#   containers without CAP_SYS_PTRACE CMA fails on large two-sided messages.
#   This program's only two-sided traffic is barriers and one allreduce
#   (small, copied through vader's shared-memory fast boxes), and osc/sm
#   never uses the single-copy path, so disabling it costs nothing and avoids
#   that failure.
export OMPI_MCA_osc="${OMPI_MCA_osc:-sm}"
export OMPI_MCA_btl_vader_single_copy_mechanism=none
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2)

run_mpi() {
    local mode=$1
    echo "== ${MPIRUN[*]} $PEER $mode --json ${QUICK[*]}" >&2
    if ! timeout 600 "${MPIRUN[@]}" "$PEER" "$mode" --json "${QUICK[@]}" >"$OUT/mpi-$mode.jsonl"; then
        echo "compare-mpi.sh: MPI reference '$mode' failed" >&2
        exit 2
    fi
}
run_mpi pingpong
run_mpi write-bw

if [[ $MPI_ONLY -eq 1 ]]; then
    cat "$OUT/mpi-pingpong.jsonl" "$OUT/mpi-write-bw.jsonl"
    exit 0
fi

# (d) Our benchmark, same machine, same run.
echo "== cargo build --release -p gaspi-bench" >&2
cargo build --release -p gaspi-bench >&2
OURS="$ROOT/target/release/gaspi-bench"
for mode in pingpong write-bw; do
    echo "== $OURS $mode --json" >&2
    if ! timeout 600 "$OURS" "$mode" --json >"$OUT/ours-$mode.jsonl"; then
        echo "compare-mpi.sh: gaspi-bench $mode failed" >&2
        exit 2
    fi
done

# (e) Join by (bench, size) and compare.
python3 - "$OUT" "${COMPARE_TOLERANCE:-0}" <<'PY'
import json
import sys
from pathlib import Path

out, tol = Path(sys.argv[1]), float(sys.argv[2])


def load(path, transport):
    """(bench, size) -> record, for records of the given transport."""
    recs = {}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        line = line.strip()
        if not line.startswith("{"):
            if line:
                print(f"{path.name}:{n}: ignoring non-JSON line: {line[:80]}", file=sys.stderr)
            continue
        r = json.loads(line)
        if r.get("transport") == transport and "size" in r:
            recs[(r["bench"], r["size"])] = r
    return recs


def gbps(r):
    if "gbps" in r:
        return r["gbps"]
    return r["size"] / (r["median_us"] * 1e3)


def human(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:g} {unit}"
        n /= 1024


ours, mpi = {}, {}
for mode in ("pingpong", "write-bw"):
    ours.update(load(out / f"ours-{mode}.jsonl", "shm"))
    mpi.update(load(out / f"mpi-{mode}.jsonl", "mpi-osc"))

rows, worse, missing = [], 0, 0
for key in sorted(mpi, key=lambda k: (k[0] != "pingpong", k[0], k[1])):
    bench, size = key
    m = mpi[key]
    o = ours.get(key)
    if o is None:
        rows.append((bench, human(size), "missing", "-", "-", "-", "MISSING"))
        missing += 1
        continue
    if bench == "write-bw":
        ov, mv, unit = gbps(o), gbps(m), "GB/s"
        ratio = ov / mv
        faster = ov > mv
        bad = ov < mv * (1 - tol)
    else:
        ov, mv, unit = o["median_us"], m["median_us"], "us"
        ratio = ov / mv
        faster = ov < mv
        bad = ov > mv * (1 + tol)
    worse += bad
    verdict = "yes" if faster else ("no (WORSE)" if bad else "no (within tolerance)")
    rows.append((bench, human(size), f"{ov:.4g} {unit}", f"{mv:.4g} {unit}", f"{ratio:.3f}", unit, verdict))

head = ("bench", "size", "ours median", "mpi-osc median", "ours/mpi", "unit", "faster")
widths = [max(len(str(r[i])) for r in rows + [head]) for i in range(len(head))]
for r in [head] + rows:
    print("  ".join(str(c).rjust(w) if i in (1, 2, 3, 4) else str(c).ljust(w)
                    for i, (c, w) in enumerate(zip(r, widths))).rstrip())
print(f"\n{len(rows) - missing} points compared, {worse} worse than MPI, {missing} missing"
      f" (tolerance {tol:g}; pingpong: half round trip, lower is better;"
      f" write-bw: GB/s from the median, higher is better)")
sys.exit(1 if worse or missing or not rows else 0)
PY
