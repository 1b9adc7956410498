"""What this rank waits in when the program calls MPI itself (engine side): mpi4py's
``comm.recv``, ``comm.Send``, ``comm.bcast``, ``comm.Barrier`` and the other blocking calls,
seen through the MPI watch (ext/mpi_watch.c, a library of the MPI profiling interface).

The watch must be in the process before mpi4py loads its MPI module, so that module's calls bind
to it: :func:`preload` loads it (the engine's entry point, ``python -m mpinb.engine``, calls it first),
:func:`start` watches the calling thread (the engine's main thread, at setup) and
:func:`inflight` reads, from any thread, the call in flight as mpinb's own collectives describe
theirs (``mpinb.mpi.inflight``), plus the MPI function's name. Where the watch cannot be loaded
(``MPINB_MPI_WATCH=0``, no ``MPINB_LIBMPI``, an MPI it was not built for (mpinb.variant.abi), mpi4py
imported first), nothing changes:
such calls are then invisible to it, and never part of a proven deadlock.
"""

from __future__ import annotations

import ctypes
import os
import sys

from .. import environment
from ..launch.mpi_impl import LIBMPI_ENV
from ..variant import abi

#: "0" turns the watch off
WATCH_ENV = environment.MPI_WATCH.name
#: ext/mpi_watch.c's words for a rank that is any rank, none, or any tag
PEER_NONE, PEER_ANY, TAG_ANY = -1, -2, -1
#: members of a communicator read at most (a bigger one reads as unknown)
MAX_MEMBERS = 1 << 16


class Record(ctypes.Structure):
    """ext/mpi_watch.c's mpinb_watch_record."""

    _fields_ = [
        ("call", ctypes.c_int64),
        ("bytes", ctypes.c_int64),
        ("t0", ctypes.c_double),
        ("active", ctypes.c_int),
        ("source", ctypes.c_int),
        ("dest", ctypes.c_int),
        ("sendtag", ctypes.c_int),
        ("recvtag", ctypes.c_int),
        ("root", ctypes.c_int),
        ("comm_size", ctypes.c_int),
        ("pending", ctypes.c_int),
        ("op", ctypes.c_char_p),
        ("function", ctypes.c_char_p),
    ]


_lib = None
_members = None
_following = False  # follow_wakes() was called: receives are withdrawable


def library_path() -> str | None:
    """The watch of the variant this process uses (mpinb.variant.abi; None if none fits or it was not built)."""
    try:
        return abi.library_file(abi.chosen(), "mpi_watch")
    except ImportError:
        return None


def preload() -> bool:
    """Load the watch with RTLD_GLOBAL, before mpi4py's MPI module; False (and nothing loaded)
    when it is off, missing, too late, not told which libmpi mpi4py loads (``MPINB_LIBMPI``),
    built for another MPI than that one, or unloadable. Its MPI goes into the process's global
    scope, so it must be the very library mpi4py loads."""
    global _lib
    if _lib is not None:
        return True
    path, libmpi = library_path(), os.environ.get(LIBMPI_ENV, "")
    if os.environ.get(WATCH_ENV, "1") == "0" or "mpi4py.MPI" in sys.modules or path is None or not libmpi:
        return False
    try:
        abi.check_fits(abi.chosen(), "mpi_watch", libmpi)
    except ImportError:
        return False
    try:
        ctypes.CDLL(libmpi, mode=os.RTLD_LAZY | os.RTLD_LOCAL)
        lib = ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_GLOBAL)
    except OSError:
        return False
    lib.mpinb_watch_start.argtypes = [ctypes.c_int]
    lib.mpinb_watch_read.argtypes = [ctypes.POINTER(Record), ctypes.POINTER(ctypes.c_int), ctypes.c_int]
    lib.mpinb_watch_follow_wakes.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    lib.mpinb_watch_withdrawn.argtypes = [ctypes.POINTER(ctypes.c_int64), ctypes.c_int,
                                          ctypes.POINTER(ctypes.c_int), ctypes.c_int]
    lib.mpinb_watch_withdrawn.restype = ctypes.c_int64
    _lib = lib
    return True


def start() -> bool:
    """Watch the calling thread (where cells run) from now on; False without the watch."""
    if _lib is None:
        return False
    _lib.mpinb_watch_start(1)
    return True


def follow_wakes(counter: int, base: int) -> bool:
    """Withdraw the watched thread's receives once the wake count at address ``counter`` differs
    from its value at the cell's start at ``base`` (the collective library's: ext/withdraw.pxi);
    False without the watch. MPI must be initialised."""
    global _following
    if _lib is None:
        return False
    _lib.mpinb_watch_follow_wakes(counter, base)
    _following = True
    return True


def _withdrawals(forget: bool) -> tuple[int, list[int]]:
    comms = (ctypes.c_int64 * 16)()
    n = ctypes.c_int(0)
    count = _lib.mpinb_watch_withdrawn(comms, 16, ctypes.byref(n), int(forget)) if _lib is not None else 0
    return count, list(comms[: n.value])


def withdrawn() -> int:
    """Receives the watch withdrew so far (0 without the watch)."""
    return _withdrawals(False)[0]


def take_withdrawn_comms() -> list[int]:
    """Handles of the communicators of the receives the watch withdrew since the last call."""
    return _withdrawals(True)[1]


def _peer(value: int):
    return "any" if value == PEER_ANY else None if value == PEER_NONE else value


def inflight(now: float) -> dict | None:
    """The watched call in flight, or None: op, call number, bytes, peer, seconds in it (``now``
    is MPI_Wtime), whom it waits for as world ranks, the MPI function, and ``pending`` (this
    process made a nonblocking call: it may be doing what another rank waits for). Whether a
    sendrecv's receive is done is unknown to the watch (``received`` None). ``withdrawable``: a
    receive that the wake signal would take back (mpinb.engine.rank_release)."""
    global _members
    if _lib is None:
        return None
    record = Record()
    if _members is None:
        _members = (ctypes.c_int * MAX_MEMBERS)()
    if _lib.mpinb_watch_read(ctypes.byref(record), _members, MAX_MEMBERS) != 1:
        return None
    op = record.op.decode()
    size = record.comm_size
    source, dest, root = _peer(record.source), _peer(record.dest), _peer(record.root)
    peer = {"recv": source, "send": dest}.get(op, root if root is not None else dest)
    return {
        "op": op,
        "call": f"mpi-{record.call}",
        "bytes": record.bytes,
        "peer": peer if isinstance(peer, int) else -1,
        "seconds": max(0.0, now - record.t0),
        "source": source,
        "dest": dest,
        "sendtag": None if record.sendtag == TAG_ANY else record.sendtag,
        "recvtag": None if record.recvtag == TAG_ANY else record.recvtag,
        "root": root,
        "comm": list(_members[:size]) if 0 < size <= MAX_MEMBERS else None,
        "received": None if op == "sendrecv" else False,
        "pending": bool(record.pending),
        "withdrawable": _following and op == "recv",
        "function": record.function.decode(),
    }
