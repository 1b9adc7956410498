"""Freeing ranks that wait forever (client side), keeping what can be kept: after a proven
deadlock, and at the stop button.

Two ways free a rank where it waits, so that its cell fails there and the engine keeps its
variables (mpinb.engine.rank_release):
- a rank waiting in a receive (mpinb's recv or sendrecv; mpi4py's Recv, recv or Probe with the
  MPI watch; its in-flight record says ``withdrawable``) is sent the wake signal and takes the
  receive back;
- a rank waiting in checked mode's signature exchange of an mpinb collective on COMM_WORLD or
  mpinb's clone (``joinable``) is freed by the communicator's other ranks, once idle, joining
  that exchange to say that they will not call it: the collective fails before it ran.
After a deadlock this is done only if every rank still running can be freed so; otherwise, or
if a rank does not come back within ``WITHDRAW_WAIT`` (a sendrecv whose large send cannot be
taken back), the engines are restarted, replaying the setup cells. At the stop button the
ranks waiting in a receive are woken first; once the others have stopped, those waiting in an
exchange are joined (a joiner refuses while work it queued has not run: it may be that
collective), and ranks that cannot be freed stay as they are.
"""

from __future__ import annotations

import time

from .result import CellResult, Note

#: seconds the freed ranks get to come back before the engines are restarted instead
WITHDRAW_WAIT = 3.0
#: seconds after the stop button's SIGINT before ranks still waiting in a receive are woken
#: (two signals at once can make Python miss the SIGINT: MPICluster.wake)
WAKE_AFTER = 0.3
#: seconds the ranks get to drop what was left unreceived (mpinb.engine.rank_release.LIMIT, and more)
DROP_WAIT = 15.0


def _running(run) -> list[int]:
    return [r for r, task in run.pending.items() if not task.ready()]


def plan(run) -> tuple[list[int], dict[tuple, list[int]]] | None:
    """How the ranks of ``run`` (a CellRun) still running can all be freed where they wait: (the
    ranks to wake, {(communicator, its world ranks): the ranks waiting in its exchange}), or
    None if one of them cannot be, or an engine cannot be woken."""
    running = _running(run)
    if not running or not run.cluster.can_wake():
        return None
    receivers, groups = [], {}
    for r in running:
        record = run.cluster.inflight(r) or {}
        if record.get("withdrawable"):
            receivers.append(r)
        elif record.get("joinable") and record.get("comm"):
            groups.setdefault((record["joinable"], tuple(record["comm"])), []).append(r)
        else:
            return None
    return receivers, groups


def _come_back(run, ranks, joins=()) -> bool:
    """Wait up to WITHDRAW_WAIT for ``ranks`` to finish their cell and ``joins`` to be done."""
    end = time.perf_counter() + WITHDRAW_WAIT
    while time.perf_counter() < end:
        if all(run.pending[r].ready() for r in ranks) and all(j.ready() for j in joins):
            return all(all(j.get(0)) for j in joins)  # one per joiner; one that refused freed no one
        unfinished = [j for j in joins if not j.ready()]
        if unfinished and run.all_ready():
            unfinished[0].wait(run.poll)
        else:
            run.wait_a_little()
    return False


def join_collectives(run, groups: dict[tuple, list[int]]) -> bool:
    """Have the idle ranks of each communicator join the exchange its waiting ranks are in, if
    every one of them can (a joiner alone would wait in the exchange forever); whether every
    waiting rank came back."""
    joiners = {}
    for (comm, members), ranks in groups.items():
        joiners[comm, members] = [m for m in members if m not in ranks]
        if any(m in run.pending and not run.pending[m].ready() for m in joiners[comm, members]):
            return False  # a member still runs something else: it cannot join
    if not run.cluster.at_rest({m for group in joiners.values() for m in group}):
        return False  # one has a call of its own under way or queued: none joins
    joins, waiting = [], []
    for (comm, members), ranks in groups.items():
        joins.append(run.cluster.join(joiners[comm, members], comm))
        waiting += ranks
    return _come_back(run, waiting, joins)


def free_in_place(run) -> list[int]:
    """Free every rank of ``run`` still running where it waits (see the module docstring); the
    ranks freed, or an empty list when that cannot be done for all of them."""
    planned = plan(run)
    if planned is None:
        return []
    receivers, groups = planned
    running = _running(run)
    if receivers:
        run.cluster.wake(receivers)
        if not _come_back(run, receivers):
            return []
    if groups and not join_collectives(run, groups):
        return []
    return running if run.all_ready() else []


def tidy_after(run, result: CellResult, freed: list[int], woken: list[int]) -> None:
    """After a cell whose ranks were freed in place (``freed``: a deadlock's, all of them) or
    woken by the stop button (``woken``), once every rank is idle: drop what was left
    unreceived, and say it."""
    if not (freed or woken) or not run.all_ready():
        return
    dropped = drop_left(run)
    if freed:
        say_freed(result, freed, dropped)
    else:
        say_dropped(result, dropped)


def after_stop(run, elapsed: float, steps: set[str]) -> None:
    """One poll of the stop button's grace period, ``elapsed`` seconds after the SIGINT
    (``steps`` keeps what was done): after WAKE_AFTER, wake the ranks waiting in a receive (also
    one whose queued work reaches a receive later); then, once every rank still running has
    waited a while in a collective's exchange (a fresh report: it stays there), have the idle
    ranks join it, once. The ranks freed go to ``run.woken``. Nothing more once ``steps``
    holds "given up" (freeing failed: the report says what still runs)."""
    if elapsed <= WAKE_AFTER or "given up" in steps:
        return
    woken = wake_receivers(run, skip=run.woken)
    if woken:
        run.woken += woken
        return
    if "join" in steps:
        return
    planned = plan(run)
    if planned is None or planned[0] or not planned[1]:
        return  # a rank still stops, computes or waits elsewhere (a woken receive comes back)
    now = time.perf_counter()
    running = _running(run)
    stays = [run.settled(r, run.cluster.inflight(r) or {}, now) for r in running]
    if all(stays):
        steps.add("join")  # tried once: a refused join leaves the ranks as they are
        if join_collectives(run, planned[1]):
            run.woken += running


def wake_receivers(run, skip=()) -> list[int]:
    """The stop button's first part: wake the ranks still waiting in a receive, but those in
    ``skip`` (woken already); the others may stop by themselves, or wait in an exchange that
    after_stop then joins. The ranks woken."""
    waiting = [r for r in _running(run) if r not in skip and (run.cluster.inflight(r) or {}).get("withdrawable")]
    if waiting and run.cluster.wake(waiting):
        return waiting
    return []


def drop_left(run) -> dict[int, tuple[list[dict], int]]:
    """Once ranks were freed and every rank of ``run`` is idle, have each drop the messages left
    unreceived (mpinb.engine.rank_release.drop_left); {rank: (messages, how many more)} for the
    ranks that dropped any."""
    ranks = sorted(run.pending)
    try:
        results = run.cluster.drop_left(ranks).get(timeout=DROP_WAIT)
    except Exception:  # noqa: BLE001 - a rank that cannot drop keeps them: said nowhere, as before
        return {}
    return {r: (list(messages), more) for r, (messages, more) in zip(ranks, results, strict=True)
            if messages or more}


def say_freed(result: CellResult, freed: list[int], dropped: dict) -> None:
    """Say in the result's notes which ranks were freed in place, and what was dropped."""
    result.notes.append(Note("freed", {"freed": freed, "dropped": dropped}))


def say_dropped(result: CellResult, dropped: dict) -> None:
    """Say in the result's notes what the ranks dropped after the stop button freed some."""
    if dropped:
        result.notes.append(Note("dropped", {"dropped": dropped}))


def restart_after_deadlock(cluster, result: CellResult) -> None:
    """Restart the engines (replaying the setup cells): ranks blocked in a send or a collective
    cannot be freed otherwise, and the next cell must run. Says so in the result's notes; the
    ranks that were still running are "restarted" from then on (what they were blocked in
    stays in ``result.inflight``), and the start's progress bar leaves the cell's output."""
    replayed = len(cluster.setup_cells)
    t0 = time.perf_counter()
    try:
        cluster.restart(replay_setup=True, keep_progress=False)
    except Exception as exc:  # noqa: BLE001 - said in the view; the cell's own result stands
        result.notes.append(Note("restart_failed", {"problem": str(exc)}))
        return
    result.notes.append(Note("restarted", {"n": cluster.n, "seconds": cluster.start_seconds or 0.0,
                                           "replayed": replayed, "cells": list(cluster.replayed)}))
    result.restarted = True
    result.restart_seconds = time.perf_counter() - t0
    for rank, state in result.states.items():
        if state == "running":
            result.states[rank] = "restarted"
