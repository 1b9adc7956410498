"""The ranks' accounts of themselves (mpinb.engine.self_account) compared before the first cell:
what differs between ranks or from the notebook stops the start (mpinb.view.start_words says
it); more ranks than cores on a host is a note (pure: no engines, no IPython).
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict

#: what every rank must share, in the order the start's message names them
FIELDS = ("python", "mpinb", "jax", "jaxlib", "mpi4py", "mpi_library", "mpinb_library")


@dataclasses.dataclass(frozen=True)
class Difference:
    """A field that is not the same on every rank (or in the notebook): each value, with the
    ranks and hosts that have it, lowest rank first."""

    field: str                                               # one of FIELDS
    values: tuple[tuple[object, tuple[int, ...], tuple[str, ...]], ...]  # (value, ranks, hosts)
    notebook: object = None                                  # the notebook's value, where it differs


def _hosts(reports: list[dict], ranks: list[int]) -> tuple[str, ...]:
    return tuple(sorted({r["host"] for r in reports if r["rank"] in ranks}))


def differences(reports: list[dict], notebook: dict) -> list[Difference]:
    """One Difference per field that is not the same on every rank (and in the notebook, for the
    fields the notebook has); a library that does not load on some rank counts too."""
    found = []
    for field in FIELDS:
        by_value = defaultdict(list)
        for report in reports:
            by_value[report.get(field)].append(report["rank"])
        mine = notebook.get(field)
        differs_from_notebook = mine is not None and set(by_value) != {mine}
        broken = field == "mpinb_library" and set(by_value) != {"ok"}
        if len(by_value) > 1 or differs_from_notebook or broken:
            values = tuple((value, tuple(sorted(ranks)), _hosts(reports, ranks))
                           for value, ranks in sorted(by_value.items(), key=lambda kv: min(kv[1])))
            found.append(Difference(field, values, mine if differs_from_notebook else None))
    return found


def oversubscribed(reports: list[dict]) -> list[dict]:
    """A note per host that runs more ranks than it has cores: its ``host``, ``ranks`` and
    ``cores`` (mpinb.view.start_words words it)."""
    per_host = defaultdict(list)
    for report in reports:
        per_host[report["host"]].append(report)
    notes = []
    for host, here in sorted(per_host.items()):
        cores = min(r.get("cores") or 1 for r in here)
        if len(here) > cores:
            notes.append({"host": host, "ranks": len(here), "cores": cores})
    return notes
