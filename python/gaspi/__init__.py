"""gaspi: one-sided PGAS communication (GASPI / GPI-2 style) from Python.

A job is N ranks (processes), started by ``gaspi-run -n N python3 app.py``
(or ``python -m gaspi.run -n N app.py``, ``mpirun``, ``srun``; alone, a
script is a job of one). Each rank creates *segments*, memory the other
ranks write into and read from without the owner taking part;
``write_notify`` puts data into a peer's segment and then sets a
notification word there, which the peer finds with ``notify_waitsome`` and
clears with ``notify_reset``. The data is always visible before the word.

    import gaspi, numpy as np

    with gaspi.init() as g:
        seg = g.segment_create(0, 1 << 20)           # every rank, then a barrier
        a = seg.array(np.uint64)                     # the segment itself, no copy
        a[:512] = 42
        peer = (g.rank() + 1) % g.size()
        g.write_notify(0, 0, peer, 0, 8192, 4096, 7, 1)
        g.wait()
        nid = g.notify_waitsome(0, 0, 64, timeout=10_000)
        g.notify_reset(0, nid)
        assert (a[1024:1536] == 42).all()

The calls are the methods of ``Gaspi``, named and ordered as the Rust
crate's (ids, offsets, ranks and sizes are ints; queues default to 0,
timeouts to blocking). Every blocking call releases the GIL and can be
interrupted with Ctrl-C. Errors raise ``gaspi.Error`` (``TimeoutError``,
``PeerDeadError`` with the dead ``rank``).
"""

import atexit
from typing import NamedTuple

from ._errors import Error, PeerDeadError, TimeoutError
from ._gaspi import ALLREDUCE_ELEM_MAX, PASSIVE_MAX, Gaspi, Segment, Timeout
from ._gaspi import init as _init
from ._arrays import DeviceArray, device_view

__all__ = [
    "ALLREDUCE_ELEM_MAX",
    "BLOCK",
    "GROUP_ALL",
    "PASSIVE_MAX",
    "TEST",
    "DeviceArray",
    "Error",
    "Gaspi",
    "ListElem",
    "PeerDeadError",
    "Segment",
    "Timeout",
    "TimeoutError",
    "device_view",
    "init",
]

#: The group of every rank.
GROUP_ALL = 0
#: Wait as long as it takes (``Timeout.BLOCK``; also ``timeout=None``).
BLOCK = Timeout.BLOCK
#: Look once, never wait (``Timeout.TEST``; also ``timeout=0``).
TEST = Timeout.TEST


class ListElem(NamedTuple):
    """One element of ``write_list`` / ``read_list``: ``size`` bytes between
    this rank's ``local_seg`` at ``local_offset`` and the peer's
    ``remote_seg`` at ``remote_offset``."""

    local_seg: int
    local_offset: int
    remote_seg: int
    remote_offset: int
    size: int


def init(**config: int) -> Gaspi:
    """Starts this rank: under ``gaspi-run``, ``mpirun`` (Open MPI, PMI) or
    ``srun`` it joins the launcher's job; alone it is a job of one rank.

    The configuration comes from the ``GASPI_*`` variables; keywords change
    it: ``queue_num``, ``queue_size_max``, ``notification_num``,
    ``segment_max``, ``transfer_size_max``, ``init_timeout_ms``,
    ``peer_timeout_ms``. The context terminates at the end of a ``with``
    block, on ``term()``, or when the interpreter exits.
    """
    g = _init(**config)
    atexit.register(g.term)
    return g
