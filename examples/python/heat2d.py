"""A 2-D heat equation with NumPy, rows split over the ranks, halo rows
exchanged with write_notify.

The grid (N x N, the top edge held at 1, the other edges at 0) is cut into
bands of rows, one per rank. Each rank keeps its band with a halo row above
and below in a segment, twice (the grid of even steps and that of odd
steps). Every step it writes its first and last rows into its neighbours'
halo rows of the current grid with write_notify, waits for the two halos it
is sent, and computes the next grid from the current one (Jacobi). The two
grids make the exchange safe without a barrier: a neighbour can write into
a grid again only two steps later, after it received this rank's next
halos. At the end every rank compares its band with a serial NumPy solution
and prints the largest difference (0: the same arithmetic).

    gaspi-run -n 4 python3 examples/python/heat2d.py [--n 256] [--steps 500]
"""

import argparse
import sys
import time

import numpy as np

import gaspi

#: Notification ids: (grid parity, from above or from below).
FROM_ABOVE, FROM_BELOW = 0, 1


def serial(n: int, steps: int) -> np.ndarray:
    u = np.zeros((n, n))
    u[0, :] = 1.0
    v = u.copy()
    for _ in range(steps):
        v[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
        u, v = v, u
    return u


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=256, help="grid points per side")
    p.add_argument("--steps", type=int, default=500)
    a = p.parse_args()
    with gaspi.init() as g:
        me, size = g.rank(), g.size()
        n = a.n
        # This rank's rows of the global grid: [lo, hi).
        lo, hi = me * n // size, (me + 1) * n // size
        rows = hi - lo
        row_bytes = n * 8
        grid_bytes = (rows + 2) * row_bytes  # with the halo rows 0 and rows+1
        seg = g.segment_create(0, 2 * grid_bytes)
        grids = [seg.array(np.float64, k * grid_bytes, (rows + 2) * n).reshape(rows + 2, n) for k in (0, 1)]
        for u in grids:
            if lo == 0:
                u[1, :] = 1.0  # the hot top edge (global row 0)
        up = me - 1 if me > 0 else None
        down = me + 1 if me < size - 1 else None
        # Rows the update may change: not the global edges.
        first = 2 if lo == 0 else 1
        last = rows - 1 if hi == n else rows  # inclusive, in local numbering
        g.barrier()
        t0 = time.perf_counter()
        for step in range(a.steps):
            k = step % 2
            u, v = grids[k], grids[1 - k]
            base = k * grid_bytes
            # My first row -> the upper neighbour's bottom halo; my last -> the lower's top halo.
            if up is not None:
                g.write_notify(0, base + row_bytes, up, 0, base + (rows_of(up, n, size) + 1) * row_bytes, row_bytes, 2 * k + FROM_BELOW, step + 1)
            if down is not None:
                g.write_notify(0, base + rows * row_bytes, down, 0, base, row_bytes, 2 * k + FROM_ABOVE, step + 1)
            for nb, nid in ((up, 2 * k + FROM_ABOVE), (down, 2 * k + FROM_BELOW)):
                if nb is not None:
                    g.notify_waitsome(0, nid, 1, timeout=60_000)
                    assert g.notify_reset(0, nid) == step + 1
            if first <= last:
                v[first : last + 1, 1:-1] = 0.25 * (
                    u[first - 1 : last, 1:-1] + u[first + 1 : last + 2, 1:-1] + u[first : last + 1, :-2] + u[first : last + 1, 2:]
                )
            g.wait()  # the rows sent are read before they change two steps on
        elapsed = time.perf_counter() - t0
        result = grids[a.steps % 2][1 : rows + 1]
        diff = float(np.abs(result - serial(n, a.steps)[lo:hi]).max())
        heat = g.allreduce(np.array([result.sum()]), "sum")[0]
        sys.stdout.write(
            f"rank {me} of {size}: rows {lo}..{hi - 1}, {a.steps} steps in {elapsed:.2f} s, "
            f"largest difference from the serial solution {diff:.1e}, total heat {heat:.6f}\n"
        )
        sys.stdout.flush()
        g.barrier()
        return 0 if diff <= 1e-12 else 1


def rows_of(rank: int, n: int, size: int) -> int:
    return (rank + 1) * n // size - rank * n // size


if __name__ == "__main__":
    sys.exit(main())
