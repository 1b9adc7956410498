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


def dispatched_work(label: str) -> None:
    """Wait until the work this process dispatched to XLA's CPU client has run (see the module
    docstring); ``label``: the cell's, for the live state. KeyboardInterrupt (the stop button)
    ends the wait and propagates."""
    from mpinb.mpi.jax_compat import backends_are_initialized

    if not backends_are_initialized():
        return
    made = _fence()
    if made is None:
        return
    fence, operand = made
    done = fence(operand)
    if done.is_ready():
        return
    STATE.settling = label
    try:
        pause = POLL_FIRST
        while not done.is_ready():
            time.sleep(pause)
            pause = min(pause * 2, POLL_MOST)
    finally:
        STATE.settling = None
