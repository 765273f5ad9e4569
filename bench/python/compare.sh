#!/usr/bin/env bash
# compare.sh - the Python package against mpi4py and against the Rust
# benchmark, in the same run on this machine, 2 ranks on shared memory.
#
#   bash bench/python/compare.sh [--quick]
#
# Needs the package and mpi4py installed (pip install ./python mpi4py; Open
# MPI: apt-get install openmpi-bin libopenmpi-dev). Builds
# target/release/gaspi-bench, then runs COMPARE_ROUNDS rounds (default 5),
# each of: bench/python/pingpong.py under gaspi-run (gaspi-python), under
# mpirun with Put + Flush (mpi4py-put) and with Send / Recv
# (mpi4py-sendrecv), and gaspi-bench pingpong / write-bw (gaspi-rust).
# Prints, per benchmark and implementation, the median over rounds of each
# round's median, and the smallest and largest round median; the raw JSON
# lines are in target/bench-python/results.jsonl.
set -euo pipefail
cd "$(dirname "$0")/../.."
quick=()
[[ ${1:-} == --quick ]] && quick=(--quick)
rounds=${COMPARE_ROUNDS:-5}
out=target/bench-python
mkdir -p "$out"
: >"$out/results.jsonl"
py=${PYTHON:-python3}
if ! $py -c "import gaspi, mpi4py" 2>/dev/null; then
    echo "compare.sh: needs the gaspi package and mpi4py (pip install ./python mpi4py)" >&2
    exit 2
fi
cargo build --release -q -p gaspi-bench
mpirun=(mpirun -n 2)
[[ $(id -u) == 0 ]] && mpirun+=(--allow-run-as-root)
# 2 ranks on a 2-core machine: Open MPI would refuse more ranks than slots
# only with fewer cores; --oversubscribe also stops it from binding them.
mpirun+=(--oversubscribe)
tag() { sed "s/^{/{\"round\": $1, \"impl\": \"$2\", /"; }
for r in $(seq "$rounds"); do
    echo "round $r of $rounds" >&2
    $py -m gaspi.run -n 2 $py bench/python/pingpong.py gaspi "${quick[@]}" >>"$out/results.jsonl"
    "${mpirun[@]}" $py bench/python/pingpong.py mpi-put "${quick[@]}" >>"$out/results.jsonl"
    "${mpirun[@]}" $py bench/python/pingpong.py mpi-sendrecv "${quick[@]}" >>"$out/results.jsonl"
    target/release/gaspi-bench pingpong --json --sizes 8,4096 "${quick[@]}" | tag "$r" gaspi-rust >>"$out/results.jsonl"
    target/release/gaspi-bench write-bw --json --sizes 4194304 "${quick[@]}" | tag "$r" gaspi-rust >>"$out/results.jsonl"
done
$py - "$out/results.jsonl" <<'PY'
import json, sys
from collections import defaultdict
runs = defaultdict(list)
for line in open(sys.argv[1]):
    line = line.strip()
    if not line.startswith("{"):
        continue
    d = json.loads(line)
    if d.get("bench") not in ("pingpong", "write-bw"):
        continue
    if "median" in d:
        v = d["median"]
    elif d["bench"] == "pingpong":
        v = d.get("median_us")
    else:
        v = d.get("gbps")
    if v is not None:
        runs[(d["bench"], d["size"], d["impl"])].append(v)
def med(v):
    v = sorted(v)
    return v[len(v) // 2]
order = ["gaspi-python", "gaspi-rust", "mpi4py-put", "mpi4py-sendrecv"]
print("| bench | size | " + " | ".join(order) + " |")
print("|---|---|" + "---|" * len(order))
for bench, size in sorted({(b, s) for b, s, _ in runs}, key=lambda k: (k[0] != "pingpong", k[1])):
    unit = "us" if bench == "pingpong" else "GB/s"
    cells = []
    for impl in order:
        v = runs.get((bench, size, impl))
        cells.append(f"{med(v):.2f} {unit} ({min(v):.2f} - {max(v):.2f})" if v else "-")
    name = f"{size} B" if size < 1024 else (f"{size // 1024} KiB" if size < 1 << 20 else f"{size >> 20} MiB")
    print(f"| {bench} | {name} | " + " | ".join(cells) + " |")
for size in (8, 4096):
    p, r = runs.get(("pingpong", size, "gaspi-python")), runs.get(("pingpong", size, "gaspi-rust"))
    if p and r:
        print(f"the Python call adds {med(p) - med(r):.2f} us to the Rust half round trip at {size} B")
PY
