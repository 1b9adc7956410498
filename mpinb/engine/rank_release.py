"""Freeing a rank that waits in a receive without killing its engine (engine side).

At setup the engine installs a handler for ``WAKE_SIGNAL``; the notebook sends that signal
through ipyparallel (``MPICluster.wake``) after a proven deadlock and at the stop button. A
rank waiting in one of mpinb's receives (recv, sendrecv's receive half: ext/withdraw.pxi), or,
with the MPI watch, in mpi4py's ``Recv``/``recv``/``Probe`` (ext/mpi_watch.c), then takes the
receive back and fails with an error saying so: the cell ends there and the engine keeps its
variables. A rank waiting in checked mode's signature exchange of an mpinb collective on
COMM_WORLD or mpinb's clone of it, for ranks that left the cell without calling it, is freed by
those ranks joining that exchange to say so (``join``), after a proven deadlock and at the
stop button: the collective then fails on it before it ran. Every joiner is asked first
(``at_rest``): none joins unless all can, and none can while a call of its own is under way
or queued (mpinb.engine.settle): it might be this very collective. Sends under
way and collectives past the exchange cannot be taken back in MPI; a rank blocked in one still
needs a restart.

A freed cell can leave messages that no receive took, and a later cell's receive would take
them for its own: once the ranks are free, the notebook has every rank of the cell drop what
waits on COMM_WORLD, mpinb's clone of it and the communicators of withdrawn receives
(``drop_left``), and says what was dropped.

``MPINB_WITHDRAW=0`` leaves receives unwithdrawable: a deadlock then restarts the engines.
"""

from __future__ import annotations

import os
import signal

from .. import environment
from . import settle

ENV = environment.WITHDRAW.name
#: the signal that withdraws a waiting receive: a real-time one, which neither MPI, Python nor
#: ipyparallel uses (None where the platform has none: receives are then never withdrawn)
WAKE_SIGNAL: int | None = int(signal.SIGRTMIN) + 4 if hasattr(signal, "SIGRTMIN") else None
#: seconds without a new message before dropping stops, and at most in all
QUIET, LIMIT = 0.2, 5.0
#: seconds a rank asked whether it is at rest waits for work it queued before it says no (a cell
#: ends only once its work ran, so an idle rank has none: mpinb.engine.settle)
IDLE_WAIT = 1.0


def install() -> int | None:
    """Make this process's receives withdrawable; the signal that does it, or None (turned off,
    or no such signal here)."""
    if os.environ.get(ENV, "1") == "0" or WAKE_SIGNAL is None:
        return None
    from mpinb.mpi import library
    from mpinb.mpi.validation import default_comm, handle_of

    from . import mpi4py_waits

    lib = library.load()
    lib.install_wake(WAKE_SIGNAL)
    lib.set_default_comm(handle_of(default_comm()))
    mpi4py_waits.follow_wakes(*lib.wake_addresses())
    return WAKE_SIGNAL


def begin_cell() -> None:
    """A cell starts here: only a wake from now on withdraws its receives."""
    from mpinb.mpi import library

    library.load().begin_cell()


def freed() -> int:
    """Calls of this process freed where they waited so far: mpinb's receives and collectives,
    and, with the watch, mpi4py's receives."""
    from mpinb.mpi import library

    from . import mpi4py_waits

    return library.load().freed() + mpi4py_waits.withdrawn()


def drop_left() -> tuple[list[dict], int]:
    """Drop the messages waiting on COMM_WORLD, mpinb's clone of it and the communicators of the
    receives withdrawn since the last call, with those a withdrawn sendrecv drained: ({"source",
    "tag", "bytes"} each, how many more were dropped than listed). Nothing while a call of this
    rank's own is under way or queued (see ``join``)."""
    from mpi4py import MPI

    from mpinb.mpi import library
    from mpinb.mpi.validation import default_comm, handle_of

    from . import mpi4py_waits

    lib = library.load()
    if not at_rest():  # a call of its own under way or queued: the messages may be that call's
        return [], 0
    handles = {handle_of(MPI.COMM_WORLD), handle_of(default_comm())}
    handles.update(lib.withdrawn_comms())
    handles.update(mpi4py_waits.take_withdrawn_comms())
    return lib.drop_stale(sorted(handles), QUIET, LIMIT)


def at_rest() -> bool:
    """Whether no call of this rank's own is under way or queued: then it may join an exchange
    or drop messages left over. Asked of every joiner before any joins (a joiner alone would
    wait forever in the exchange); an idle engine starts nothing in between."""
    from mpinb.mpi import library

    return library.load().inflight() is None and settle.idle(IDLE_WAIT)


def join(comm: str) -> bool:
    """Join the signature exchange that ranks of ``comm`` ("world" or "default": mpinb's clone)
    wait in for this rank, to free them (ext/withdraw.pxi), once every joiner said it is
    ``at_rest``. True once done; False, joining nothing, while a call of its own is under way."""
    from mpi4py import MPI

    from mpinb.mpi import library
    from mpinb.mpi.validation import default_comm, handle_of

    lib = library.load()
    if lib.inflight() is not None:  # at_rest was asked of every joiner just before, and an idle
        return False  # engine starts nothing since: a second timed check could refuse alone
    handle = handle_of(MPI.COMM_WORLD if comm == "world" else default_comm())
    lib.join_agreement(handle)
    return True
