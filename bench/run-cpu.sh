#!/usr/bin/env bash
# Runs every CPU benchmark of gaspi-bench on this machine, and the Open MPI
# comparison, and keeps the JSON lines in bench/results/<date>-<host>.jsonl.
# Usage: bench/run-cpu.sh [--quick]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
QUICK="${1:-}"
cargo build --release -p gaspi-bench -p gaspi-launch >/dev/null
BENCH="$ROOT/target/release/gaspi-bench"
mkdir -p bench/results
OUT="bench/results/$(date -u +%Y-%m-%d)-$(hostname -s).jsonl"
: >"$OUT"
run() {
    echo "== gaspi-bench $* $QUICK" >&2
    "$BENCH" "$@" --json $QUICK | tee -a "$OUT"
}
run floor
run pingpong
run write-bw
run notify-rate
for n in 2 4 8; do run barrier --ranks "$n"; done
for n in 2 4 8; do run allreduce --ranks "$n"; done
run atomic
echo "== Open MPI comparison (bench/compare-mpi.sh)" >&2
bash bench/compare-mpi.sh ${QUICK:+--quick} | tee "bench/results/compare-mpi-$(date -u +%Y-%m-%d).txt" || true
cat target/bench-peers/mpi-*.jsonl >>"$OUT" 2>/dev/null || true
echo "results in $OUT" >&2
