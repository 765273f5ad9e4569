"""Medians over launches of a benchmark script's result lines.

bench/fabric-netns.sh and bench/fabric-vm.sh write one line per
measurement and launch, ``KIND SIZE HALF_RTT_US MB_PER_S`` (``-`` where a
figure does not apply), and summarise them with this: the median of each
(kind, size, column) over the launches, with the lowest and highest.

Run as a program, it turns gaspi-bench's JSON records on standard input
into such lines: ``python3 bench/rounds.py runtime-rows``.
"""

import json
import statistics
import sys

# The write bandwidth the scripts compare (fi_pingpong's largest size).
BW_SIZE = 4194304


def runtime_rows(lines):
    """gaspi-bench --json records as result lines: the ping-pong's half
    round trip and rate (runtime-pingpong), the 4 MiB write bandwidth
    (runtime-bw)."""
    for line in lines:
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        if r["bench"] == "pingpong":
            yield f'runtime-pingpong {r["size"]} {r["median_us"]} {round(r["size"] / r["median_us"], 1)}'
        elif r["bench"] == "write-bw" and r["size"] == BW_SIZE:
            yield f'runtime-bw {r["size"]} - {round(r["gbps"] * 1000, 1)}'


class Rounds:
    def __init__(self, path, prefix=""):
        self.rows = [line.split() for line in open(path) if line.strip()]
        self.prefix = prefix

    def col(self, kind, size, i):
        """Column i (2: half round trip, 3: MB/s) of every launch of kind at size."""
        return [float(r[i]) for r in self.rows if r[0] == kind and r[1] == str(size) and r[i] != "-"]

    def show(self, name, xs, unit):
        """Prints the median [min..max] of xs and returns the median (None without any)."""
        if not xs:
            print(f"{self.prefix}{name:48s} (no result)")
            return None
        m = statistics.median(xs)
        print(f"{self.prefix}{name:48s} {m:10.2f} {unit}  [{min(xs):.2f}..{max(xs):.2f}]")
        return m


if __name__ == "__main__":
    if sys.argv[1:] != ["runtime-rows"]:
        sys.exit("usage: rounds.py runtime-rows < gaspi-bench JSON")
    for row in runtime_rows(sys.stdin):
        print(row, flush=True)
