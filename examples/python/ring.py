"""The 4 KiB ring, in Python: every rank writes 4 KiB into the next rank's
segment and notifies it, then waits for the notification its neighbour sent
it and checks the data.

    gaspi-run -n 4 python3 examples/python/ring.py
    python3 examples/python/ring.py            # alone: a job of one rank
"""

import sys

import numpy as np

import gaspi


def main() -> int:
    # Under a launcher, the launcher's ranks; started directly, one rank.
    with gaspi.init() as g:
        seg = g.segment_create(0, 1 << 20)  # 1 MiB on every rank, then a barrier
        peer = (g.rank() + 1) % g.size()

        words = seg.array(np.uint64)  # the segment itself, no copy
        words[:512] = 42  # fill 4 KiB of the local segment
        # Put them at offset 8192 of the peer's segment 0, then set its notification 7 to 1.
        g.write_notify(0, 0, peer, 0, 8192, 4096, 7, 1)
        g.wait()  # local completion: the source may be reused

        # Whatever the peer wrote: wait for a notification among the first 64, take it.
        nid = g.notify_waitsome(0, 0, 64, timeout=10_000)
        value = g.notify_reset(0, nid)
        got = words[1024:1536]  # offset 8192: the data is there before the notification
        assert (got == 42).all()
        # One write per line (end=""): the ranks share the terminal.
        print(f"rank {g.rank()} of {g.size()}: notification {nid} = {value}, 4 KiB intact\n", end="", flush=True)
        g.barrier()
    return 0


if __name__ == "__main__":
    sys.exit(main())
