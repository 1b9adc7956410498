"""Every rank checked before the first cell: its account of itself (mpinb.engine.preflight)
compared with the others' and the notebook's (mpinb.analysis.preflight). A difference stops the
start with one message naming the ranks, hosts and values; more ranks than cores is a note.
"""

from __future__ import annotations

from ..analysis.preflight import differences, oversubscribed
from ..engine.preflight import package_versions, report
from ..errors import PreflightError


def check_ranks(view) -> tuple[list[dict], list[str]]:
    """(every rank's report, the notes) from the engines of ``view``; PreflightError on a
    difference (the caller tears the cluster down)."""
    reports = sorted(view.apply_sync(report), key=lambda r: r["rank"])
    found = differences(reports, package_versions())
    if found:
        raise PreflightError("the ranks cannot run together, they differ in\n  " + "\n  ".join(found)
                             + "\ninstall the same versions on every host (and in the notebook's environment)")
    return reports, oversubscribed(reports)
