"""The start's questions to the engines, each bounded: every rank checked before the first cell
(its account of itself, mpinb.engine.preflight, compared with the others' and the notebook's by
mpinb.analysis.preflight; a difference stops the start with one message naming the ranks, hosts
and values, more ranks than cores is a note), and ``ask_every_engine``, which the setup uses too.
"""

from __future__ import annotations

import time

from ..analysis.compare import format_ranks
from ..analysis.preflight import differences, oversubscribed
from ..engine.preflight import package_versions, report
from ..errors import EngineSetupError, PreflightError

#: seconds between looks at the engines' answers (and at the MPI launcher) during the start
POLL = 0.05


def ask_every_engine(cluster, what: str, fn, *args) -> list:
    """``fn(*args)`` on every engine at once, the answers in rank order (engine ids are the MPI
    ranks). EngineSetupError when an engine raises (with its words), when the MPI launcher ends
    first, or when some engine has not answered within the cluster's start_timeout: naming the
    ranks that did not answer. Never waits longer than that."""
    asks = {rank: cluster.client[rank].apply_async(fn, *args) for rank in sorted(cluster.client.ids)}
    end = time.monotonic() + cluster.start_timeout
    while True:
        failed = [rank for rank, ask in asks.items() if ask.ready() and not ask.successful()]
        if failed:  # at once: the others may wait for this one forever
            try:
                asks[failed[0]].get()
            except Exception as exc:  # noqa: BLE001 - a RemoteError, or the engine's death: said as such
                name, words = getattr(exc, "ename", type(exc).__name__), getattr(exc, "evalue", str(exc))
                raise EngineSetupError(f"{what} failed on rank {failed[0]}: {name}: {words}") from None
        if all(ask.ready() for ask in asks.values()):
            return [ask.get() for ask in asks.values()]
        ended = cluster.launcher_ended()
        if ended is not None or time.monotonic() > end:
            silent = [rank for rank, ask in asks.items() if not ask.ready()]
            why = (f"the MPI launcher ended (exit status {ended})" if ended is not None
                   else f"waited {cluster.start_timeout:.0f} s (start_timeout)")
            raise EngineSetupError(f"{what}: {format_ranks(silent)} of {len(asks)} did not answer ({why}); "
                                   "a rank that never answers is stuck before the cell could run (its MPI, a "
                                   "coordinator it waits for); a slow one needs a larger start_timeout")
        time.sleep(POLL)


def check_ranks(cluster) -> tuple[list[dict], list[str]]:
    """(every rank's report, the notes) from the engines of ``cluster``; PreflightError on a
    difference, EngineSetupError when a rank does not answer (the caller tears the cluster down)."""
    reports = sorted(ask_every_engine(cluster, "the ranks' check", report), key=lambda r: r["rank"])
    found = differences(reports, package_versions())
    if found:
        raise PreflightError("the ranks cannot run together, they differ in\n  " + "\n  ".join(found)
                             + "\ninstall the same versions on every host (and in the notebook's environment)")
    return reports, oversubscribed(reports)
