"""Freeing a rank that waits in a receive without killing its engine (engine side).

At setup the engine installs a handler for ``WAKE_SIGNAL``; the notebook sends that signal
through ipyparallel (``MPICluster.wake``) after a proven deadlock and at the stop button. A
rank waiting in one of mpinb's receives (recv, sendrecv's receive half: ext/withdraw.pxi), or,
with the MPI watch, in mpi4py's ``Recv``/``recv``/``Probe`` (ext/mpi_watch.c), then takes the
receive back and fails with an error saying so: the cell ends there and the engine keeps its
variables. Sends and collectives cannot be taken back in MPI; a rank blocked in one still
needs a restart.

A message that a withdrawn receive was waiting for may come later, and a later cell's receive
would take it for its own: at the end of a cell in which a receive was withdrawn, this rank
drops what is waiting on the communicators involved (``drop_stale``), and the record says what
was dropped.

``MPINB_WITHDRAW=0`` leaves receives blocking in MPI as before (a deadlock then restarts).
"""

from __future__ import annotations

import os
import signal

ENV = "MPINB_WITHDRAW"
#: the signal that withdraws a waiting receive: a real-time one, which neither MPI, Python nor
#: ipyparallel uses (None where the platform has none: receives are then never withdrawn)
WAKE_SIGNAL: int | None = int(signal.SIGRTMIN) + 4 if hasattr(signal, "SIGRTMIN") else None
#: seconds without a new message before dropping stops
QUIET = 0.2


def install() -> int | None:
    """Make this process's receives withdrawable; the signal that does it, or None (turned off,
    or no such signal here)."""
    if os.environ.get(ENV, "1") == "0" or WAKE_SIGNAL is None:
        return None
    from mpinb.mpi import library

    library.load().install_wake(WAKE_SIGNAL)
    from . import mpi_watch

    mpi_watch.follow_wakes(library.load().wake_counter_address())
    return WAKE_SIGNAL


def withdrawn() -> int:
    """Receives withdrawn in this process so far (mpinb's own and, with the watch, mpi4py's)."""
    from mpinb.mpi import library

    from . import mpi_watch

    return library.load().withdrawals()["count"] + mpi_watch.withdrawn()


def drop_stale(before: int) -> list[dict]:
    """If receives were withdrawn since the count was ``before``, drop the messages waiting on
    COMM_WORLD, mpinb's default communicator and the withdrawn receives' communicators; what
    was dropped ({"source", "tag", "bytes"} each). Nothing when none was withdrawn."""
    if withdrawn() == before:
        return []
    from mpi4py import MPI

    from mpinb.mpi import library
    from mpinb.mpi.validation import default_comm, handle_of

    from . import mpi_watch

    lib = library.load()
    handles = {handle_of(MPI.COMM_WORLD), handle_of(default_comm())}
    handles.update(lib.withdrawals()["comms"])
    handles.update(mpi_watch.withdrawn_comms())
    return lib.drop_stale(sorted(handles), QUIET)
