"""Python ping-pong and bandwidth: gaspi against mpi4py, on 2 ranks.

    gaspi-run -n 2 python3 bench/python/pingpong.py gaspi   [--quick]
    mpirun -n 2 python3 bench/python/pingpong.py mpi-put    [--quick]
    mpirun -n 2 python3 bench/python/pingpong.py mpi-sendrecv [--quick]

Rank 0 prints one JSON object per (bench, size): ``pingpong`` is the half
round trip in microseconds at 8 B and 4 KiB, ``write-bw`` the bandwidth of
4 MiB writes in GB/s; each is the median of ``samples`` batches with the
smallest and largest batch beside it.

- ``gaspi``: ``write_notify`` + ``notify_waitsome`` + ``notify_reset`` (the
  Rust ``gaspi-bench pingpong`` loop, from Python); bandwidth: windows of 16
  ``write`` then ``wait``, then a ``write_notify`` the peer answers.
- ``mpi-put``: MPI one-sided ``Put`` + ``Flush`` into a window
  (``Win.Allocate``, ``Lock_all``), the data announced by a 0-byte
  ``Send`` / ``Recv`` (MPI has no notification); bandwidth: 16 ``Put`` then
  one ``Flush`` and the announcement.
- ``mpi-sendrecv``: plain ``Send`` / ``Recv`` of the data; bandwidth: 16
  ``Send`` then a 0-byte answer.

``bench/python/compare.sh`` runs all three and the Rust benchmark in
interleaved rounds and prints the table of BENCHMARKS.md.
"""

import argparse
import json
import sys
import time

import numpy as np

SIZES = (8, 4096)
BW_SIZE = 4 << 20
WINDOW = 16


def stats(values):
    v = sorted(values)
    return {"median": v[len(v) // 2], "min": v[0], "max": v[-1], "samples": len(v)}


def report(rank, impl, bench, size, unit, values, iters):
    if rank == 0:
        print(json.dumps({"impl": impl, "bench": bench, "size": size, "unit": unit, "iters": iters, **stats(values)}), flush=True)


def gaspi_side(a):
    import gaspi

    with gaspi.init() as g:
        me = g.rank()
        peer = 1 - me
        g.segment_create(0, 2 * BW_SIZE)
        write_notify, waitsome, reset = g.write_notify, g.notify_waitsome, g.notify_reset
        for size in SIZES:
            # A batch fits a queue (1024 requests); its wait is timed.
            batch, samples = (1000, 40) if not a.quick else (200, 5)
            g.barrier()
            times = []
            for s in range(samples + 1):
                t0 = time.perf_counter()
                for _ in range(batch):
                    if me == 0:
                        write_notify(0, 0, peer, 0, 0, size, 0, 1)
                        reset(0, waitsome(0, 1, 1))
                    else:
                        reset(0, waitsome(0, 0, 1))
                        write_notify(0, 0, peer, 0, 0, size, 1, 1)
                g.wait()
                dt = time.perf_counter() - t0
                if s:  # the first batch warms up
                    times.append(dt / batch / 2 * 1e6)
            g.wait()
            report(me, "gaspi-python", "pingpong", size, "us", times, batch * samples)
        # Bandwidth: rank 0 writes, rank 1 answers each window's notification.
        windows, samples = (8, 10) if not a.quick else (2, 3)
        g.barrier()
        rates = []
        for s in range(samples + 1):
            t0 = time.perf_counter()
            for _ in range(windows):
                if me == 0:
                    for _ in range(WINDOW - 1):
                        g.write(0, 0, peer, 0, 0, BW_SIZE)
                    g.write_notify(0, 0, peer, 0, 0, BW_SIZE, 0, 1)
                    g.wait()
                    reset(0, waitsome(0, 1, 1))
                else:
                    reset(0, waitsome(0, 0, 1))
                    g.notify(peer, 0, 1, 1)
            g.wait()
            dt = time.perf_counter() - t0
            if s:
                rates.append(windows * WINDOW * BW_SIZE / dt / 1e9)
        report(me, "gaspi-python", "write-bw", BW_SIZE, "GB/s", rates, windows * WINDOW * samples)
        g.barrier()


def mpi_side(a, put):
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    me = comm.Get_rank()
    peer = 1 - me
    buf = np.ones(2 * BW_SIZE, dtype=np.uint8)
    empty = np.empty(0, dtype=np.uint8)
    impl = "mpi4py-put" if put else "mpi4py-sendrecv"
    win = MPI.Win.Allocate(2 * BW_SIZE, comm=comm) if put else None
    if put:
        win.Lock_all()
    Send, Recv = comm.Send, comm.Recv
    for size in SIZES:
        batch, samples = (1000, 40) if not a.quick else (200, 5)
        data = buf[:size]
        comm.Barrier()
        times = []
        for s in range(samples + 1):
            t0 = time.perf_counter()
            if put:
                Put, Flush = win.Put, win.Flush
                for _ in range(batch):
                    if me == 0:
                        Put(data, peer)
                        Flush(peer)
                        Send(empty, peer)
                        Recv(empty, peer)
                    else:
                        Recv(empty, peer)
                        Put(data, peer)
                        Flush(peer)
                        Send(empty, peer)
            else:
                for _ in range(batch):
                    if me == 0:
                        Send(data, peer)
                        Recv(data, peer)
                    else:
                        Recv(data, peer)
                        Send(data, peer)
            dt = time.perf_counter() - t0
            if s:
                times.append(dt / batch / 2 * 1e6)
        report(me, impl, "pingpong", size, "us", times, batch * samples)
    windows, samples = (8, 10) if not a.quick else (2, 3)
    data = buf[:BW_SIZE]
    comm.Barrier()
    rates = []
    for s in range(samples + 1):
        t0 = time.perf_counter()
        for _ in range(windows):
            if me == 0:
                for _ in range(WINDOW):
                    if put:
                        win.Put(data, peer)
                    else:
                        Send(data, peer)
                if put:
                    win.Flush(peer)
                    Send(empty, peer)
                Recv(empty, peer)
            else:
                if put:
                    Recv(empty, peer)
                else:
                    for _ in range(WINDOW):
                        Recv(data, peer)
                Send(empty, peer)
        dt = time.perf_counter() - t0
        if s:
            rates.append(windows * WINDOW * BW_SIZE / dt / 1e9)
    report(me, impl, "write-bw", BW_SIZE, "GB/s", rates, windows * WINDOW * samples)
    if put:
        win.Unlock_all()
        win.Free()
    comm.Barrier()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("impl", choices=["gaspi", "mpi-put", "mpi-sendrecv"])
    p.add_argument("--quick", action="store_true", help="fewer iterations (a smoke run)")
    a = p.parse_args()
    if a.impl == "gaspi":
        gaspi_side(a)
    else:
        mpi_side(a, a.impl == "mpi-put")


if __name__ == "__main__":
    sys.exit(main())
