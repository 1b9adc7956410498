"""A cell ends on a rank only once the work it handed to XLA has run (engine side).

JAX dispatches a jitted call and returns before XLA has run it. A rank whose cell code returned
may still have mpinb collectives queued behind a long computation: were the rank reported as
having left the cell then, a rank waiting in that collective would be called deadlocked ("rank
1 left the cell without calling it", mpinb.analysis.deadlock) when it only waits for a slower
rank, and freeing it would break the collective the slower rank is about to call. So the end of
a cell waits for a *fence*: a tiny jitted computation on this process's first CPU device,
dispatched last. XLA's CPU client runs the computations of a process in the order they were
dispatched, the same property that keeps mpinb's collectives in program order across jitted
calls, so the fence is done once everything dispatched before it is. The wait polls, so that
the stop button (SIGINT) interrupts it; meanwhile the rank still runs the cell, and its live
state says so (``STATE.settling``, read by mpinb.engine.stall). Nothing is waited for when JAX's backend
was never started (nothing can have been dispatched).
"""

from __future__ import annotations

import functools
import time

from .state import STATE

POLL_FIRST = 0.0002  # seconds between the first checks: queued work is usually done by then
POLL_MOST = 0.01


@functools.cache
def _fence():
    """(the jitted fence, its operand on the first CPU device), made once; None without a CPU
    backend (no mpinb collective can have run)."""
    import jax
    import numpy as np

    try:
        device = jax.devices("cpu")[0]
    except RuntimeError:
        return None

    def mpinb_fence(x):
        return x + 1

    return jax.jit(mpinb_fence), jax.device_put(np.zeros((), np.int8), device)


def _dispatch_fence():
    """The fence's result, dispatched now; None when nothing can have been dispatched (JAX's
    backend never started, or no CPU backend)."""
    from mpinb.mpi.jax_compat import backends_are_initialized

    if not backends_are_initialized():
        return None
    made = _fence()
    if made is None:
        return None
    fence, operand = made
    return fence(operand)


def _wait(done, until: float | None = None) -> bool:
    """Poll ``done`` (backing off) until it is ready or ``until`` (time.monotonic()) has passed;
    whether it is ready."""
    pause = POLL_FIRST
    while not done.is_ready():
        if until is not None and time.monotonic() >= until:
            return False
        time.sleep(pause)
        pause = min(pause * 2, POLL_MOST)
    return True


def dispatched_work(label: str) -> None:
    """Wait until the work this process dispatched to XLA's CPU client has run (see the module
    docstring); ``label``: the cell's, for the live state. KeyboardInterrupt (the stop button)
    ends the wait and propagates."""
    done = _dispatch_fence()
    if done is None or done.is_ready():
        return
    STATE.settling = label
    try:
        _wait(done)
    finally:
        STATE.settling = None


def idle(wait: float) -> bool:
    """Whether every computation this process dispatched has run, waiting up to ``wait``
    seconds: before a rank joins a collective to free others, or drops messages left over (a
    cell stopped while its queued work ran would still call that collective, or receive them)."""
    done = _dispatch_fence()
    return done is None or _wait(done, time.monotonic() + wait)
