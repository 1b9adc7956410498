"""A cell ends on a rank only once the work it handed to XLA has run (engine side).

JAX dispatches a jitted call and returns before XLA has run it. A rank whose cell code returned
may still have mpinb collectives queued behind a long computation: were the rank reported as
having left the cell then, a rank waiting in that collective would be called deadlocked ("rank
1 left the cell without calling it", mpinb.analysis.deadlock) when it only waits for a slower
rank, and freeing it would break the collective the slower rank is about to call. So the end of
a cell waits for *fences*: a tiny jitted computation on each CPU device of this process,
dispatched last. XLA's CPU client runs the computations of a device in the order they were
dispatched, the same property that keeps mpinb's collectives in program order across jitted
calls, so a fence is done once everything dispatched to its device before it is. The wait polls;
the stop button (SIGINT) does not end it while that work still runs (the rank stays visible,
blocked where that work is, and can be freed there): the KeyboardInterrupt is raised once the
work is done. Meanwhile the rank still runs the cell, and its live state says so
(``STATE.settling``, read by mpinb.engine.stall). Nothing is waited for when JAX's backend was
never started (nothing can have been dispatched).
"""

from __future__ import annotations

import functools
import time

from .state import STATE

POLL_FIRST = 0.0002  # seconds between the first checks: queued work is usually done by then
POLL_MOST = 0.01
#: the fences' jitted function, as XLA names its module (left out of the cell's --hlo)
FENCE_MODULE = "jit_mpinb_fence"


@functools.cache
def _fences():
    """(the jitted fence, [its operand on each CPU device of this process]), made once; None
    without a CPU backend (no mpinb collective can have run)."""
    import jax
    import numpy as np

    try:
        devices = jax.local_devices(backend="cpu")
    except RuntimeError:
        return None

    def mpinb_fence(x):
        return x + 1

    return jax.jit(mpinb_fence), [jax.device_put(np.zeros((), np.int8), d) for d in devices]


def _dispatch_fences() -> list:
    """The fences' results, dispatched now; [] when nothing can have been dispatched (JAX's
    backend never started, or no CPU backend)."""
    from mpinb.mpi.jax_compat import backends_are_initialized

    if not backends_are_initialized():
        return []
    made = _fences()
    if made is None:
        return []
    fence, operands = made
    return [fence(x) for x in operands]


def _wait(dones: list, until: float | None = None) -> bool:
    """Poll ``dones`` (backing off) until all are ready or ``until`` (time.monotonic()) has
    passed; whether all are ready."""
    pause = POLL_FIRST
    while not all(d.is_ready() for d in dones):
        if until is not None and time.monotonic() >= until:
            return False
        time.sleep(pause)
        pause = min(pause * 2, POLL_MOST)
    return True


def dispatched_work(label: str) -> None:
    """Wait until the work this process dispatched to XLA's CPU client has run (see the module
    docstring); ``label``: the cell's, for the live state. A KeyboardInterrupt (the stop
    button) meanwhile, even while the fences are dispatched, is raised once that work has run."""
    dones, stopped = None, None
    try:
        while True:
            try:
                if dones is None:
                    dones = _dispatch_fences()
                if not all(d.is_ready() for d in dones):
                    STATE.settling = label
                    _wait(dones)
                break
            except KeyboardInterrupt as exc:  # the queued work still runs: wait on, visibly
                stopped = exc
    finally:
        STATE.settling = None
    if stopped is not None:
        raise stopped


def idle(wait: float) -> bool:
    """Whether every computation this process dispatched has run, waiting up to ``wait``
    seconds: before a rank joins a collective to free others, or drops messages left over. A
    cell ends only once its work has run, so an idle rank has none; this is the safety net."""
    dones = _dispatch_fences()
    return _wait(dones, time.monotonic() + wait)
