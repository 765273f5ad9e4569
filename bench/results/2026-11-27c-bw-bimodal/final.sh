#!/bin/bash
# Final call of the session (issue 26): run-all.sh with RUNS, outputs in $OUT.
D=$(cd "$(dirname "$0")" && pwd)
start=$(date +%s)
TESTS_LOG="$OUT/tests.txt" RUNS=${RUNS:-3} NVSHMEM_BUILD=/tmp/nvb PLOT_DIR="$OUT" bash "$D/run-all.sh" "$D" > "$OUT/run-all.txt" 2>&1
echo "run-all rc=$? in $(( $(date +%s) - start )) s" >> "$OUT/run-all.txt"
