"""Medians over launches of a benchmark script's result lines.

bench/fabric-netns.sh and bench/fabric-vm.sh write one line per
measurement and launch, ``KIND SIZE HALF_RTT_US MB_PER_S`` (``-`` where a
figure does not apply), and summarise them with this: the median of each
(kind, size, column) over the launches, with the lowest and highest.
"""

import statistics


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
