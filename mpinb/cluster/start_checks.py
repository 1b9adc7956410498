"""The start's questions to the engines, each bounded: every rank checked before the first cell
(its account of itself, mpinb.engine.self_account, compared with the others' and the notebook's by
mpinb.analysis.rank_accounts; a difference stops the start with one message naming the ranks, hosts
and values, more ranks than cores is a note), and ``ask_every_engine``, which the setup uses too.
"""

from __future__ import annotations

import time

from ..analysis.rank_accounts import differences, oversubscribed
from ..engine.self_account import package_versions, report
from ..errors import EngineSetupError, PreflightError

#: seconds between looks at the MPI launcher while the engines answer (an answer ends the wait at once)
POLL = 0.05
#: seconds the other ranks get to fail too once one failed, so that the lowest one is named
FAILED_WAIT = 1.0


def ask_every_engine(cluster, what: str, fn, *args) -> list:
    """``fn(*args)`` on every engine at once for the start's task ``what`` ("check", "setup"),
    the answers in rank order (engine ids are the MPI ranks). EngineSetupError when an engine
    raises (with its words), when the MPI launcher ends first, or when some engine has not
    answered within the cluster's start_timeout: naming the ranks that did not answer. Never
    waits longer than that."""
    asks = {rank: cluster.on_engines(fn, *args, ranks=rank) for rank in sorted(cluster.client.ids)}
    end = time.monotonic() + cluster.start_timeout
    while True:
        if any(ask.ready() and not ask.successful() for ask in asks.values()):
            _raise_first_failure(what, asks)  # at once: the others may wait for this one forever
        pending = [ask for ask in asks.values() if not ask.ready()]
        if not pending:
            return [ask.get() for ask in asks.values()]
        ended = cluster.launcher_ended()
        if ended is not None or time.monotonic() > end:
            silent = [rank for rank, ask in asks.items() if not ask.ready()]
            raise EngineSetupError(cause="no_answer", task=what, silent=silent, asked=len(asks), status=ended,
                                   waited=cluster.start_timeout)
        pending[0].wait(POLL)


def _raise_first_failure(what: str, asks: dict) -> None:
    """EngineSetupError with the words of the lowest rank that failed, once the others had a
    moment (FAILED_WAIT) to fail too: ranks that fail alike fail together, and the lowest one
    is named whichever reply came first."""
    end = time.monotonic() + FAILED_WAIT
    for ask in asks.values():
        ask.wait(max(0.0, end - time.monotonic()))
    failed = [rank for rank, ask in asks.items() if ask.ready() and not ask.successful()]
    try:
        asks[failed[0]].get()
    except Exception as exc:  # noqa: BLE001 - a RemoteError, or the engine's death: said as such
        raise EngineSetupError(cause="failed", task=what, rank=failed[0], others=failed[1:],
                               name=getattr(exc, "ename", type(exc).__name__),
                               words=getattr(exc, "evalue", str(exc))) from None
    raise EngineSetupError(cause="failed", task=what, rank=failed[0])  # its result said so, its get did not raise


def check_ranks(cluster) -> tuple[list[dict], list[str]]:
    """(every rank's report, the notes) from the engines of ``cluster``; PreflightError on a
    difference, EngineSetupError when a rank does not answer (the caller tears the cluster down)."""
    reports = sorted(ask_every_engine(cluster, "check", report), key=lambda r: r["rank"])
    found = differences(reports, package_versions())
    if found:
        raise PreflightError(cause="ranks_differ", differences=found)
    return reports, oversubscribed(reports)
