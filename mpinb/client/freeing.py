"""Freeing ranks after a proven deadlock (client side), keeping what can be kept.

If every rank still running waits in a receive that can be withdrawn (mpinb's recv or
sendrecv, mpi4py's Recv/recv/Probe with the MPI watch: the in-flight record says
``withdrawable``), the ranks are sent the wake signal (mpinb.engine.withdraw): each takes its
receive back and fails with an error saying so, the cell ends, and the engines keep their
variables. Otherwise, or if a rank does not come back within ``WITHDRAW_WAIT`` (a sendrecv
whose large send cannot be taken back), the engines are restarted, replaying the setup cells.
"""

from __future__ import annotations

import time

from ..view.words import freed_words, restart_words
from .result import CellResult

#: seconds the woken ranks get to come back before the engines are restarted instead
WITHDRAW_WAIT = 3.0


def withdrawable(run) -> list[int]:
    """The ranks of ``run`` (a CellRun) still running, if each waits in a withdrawable receive
    and every engine can be woken; else an empty list."""
    running = [r for r, task in run.pending.items() if not task.ready()]
    records = {r: run.cluster.inflight(r) for r in running}
    if not running or not all(rec and rec.get("withdrawable") for rec in records.values()):
        return []
    return running if run.cluster.can_wake() else []


def withdraw_receives(run) -> list[int]:
    """Wake the deadlocked ranks of ``run`` where they wait in receives; the ranks freed (all the
    running ones, once each came back) or an empty list (none woken, or one did not come back)."""
    running = withdrawable(run)
    if not running:
        return []
    run.cluster.wake(running)
    end = time.perf_counter() + WITHDRAW_WAIT
    while time.perf_counter() < end and not run.all_ready():
        run.wait_a_little()
    return running if run.all_ready() else []


def say_freed(result: CellResult, freed: list[int]) -> None:
    """Say in the result's notes which ranks were freed in place, and what they dropped."""
    dropped = {r: rec.dropped for r, rec in result.records.items() if rec is not None and rec.dropped}
    result.notes.append(freed_words(freed, dropped))


def restart_after_deadlock(cluster, result: CellResult) -> None:
    """Restart the engines (replaying the setup cells): ranks blocked in a send or a collective
    cannot be freed otherwise, and the next cell must run. Says so in the result's notes."""
    replayed = len(cluster.setup_cells)
    try:
        cluster.restart(replay_setup=True)
    except Exception as exc:  # noqa: BLE001 - said in the view; the cell's own result stands
        result.notes.append(f"restarting the engines after the deadlock failed ({exc}): run %mpijax restart")
        return
    result.notes.append("to free them, " + restart_words(cluster.n, cluster.start_seconds or 0.0, replayed, True))
    result.restarted = True
