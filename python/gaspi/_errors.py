"""The exceptions of the runtime's calls.

Every call raises ``gaspi.Error`` (or a subclass) with the runtime's
message. ``kind`` names the runtime's error (``"OutOfBounds"``,
``"QueueFull"``, ``"UnknownSegment"``, ...), ``rank`` the dead peer of a
``PeerDeadError`` (``None`` otherwise).
"""

import builtins
from typing import Optional


class Error(Exception):
    """A GASPI call failed; ``str(e)`` is the runtime's message."""

    #: The runtime's name for the error (its ``gaspi::Error`` variant).
    kind: str = "Error"
    #: The rank a ``PeerDeadError`` names; ``None`` for other errors.
    rank: Optional[int] = None


class TimeoutError(Error, builtins.TimeoutError):
    """A blocking call did not complete within its timeout; it may be
    repeated (a barrier, allreduce or wait resumes where it stopped)."""


class PeerDeadError(Error):
    """A peer the call needed died or became unreachable; ``rank`` names it."""
