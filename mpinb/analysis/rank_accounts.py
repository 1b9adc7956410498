"""The ranks' accounts of themselves (mpinb.engine.self_account) compared before the first cell:
what differs between ranks or from the notebook stops the start with one message; more ranks
than cores on a host is a note (pure: no engines, no IPython).
"""

from __future__ import annotations

from collections import defaultdict

from .grouping import label

#: what every rank must share, in the order the message names them
FIELDS = ("python", "mpinb", "jax", "jaxlib", "mpi4py", "mpi_library", "mpinb_library")
WORDS = {"python": "Python", "mpinb": "mpinb", "jax": "JAX", "jaxlib": "jaxlib", "mpi4py": "mpi4py",
         "mpi_library": "the MPI library", "mpinb_library": "mpinb's compiled library"}


def _hosts(reports: list[dict], ranks: list[int]) -> str:
    hosts = sorted({r["host"] for r in reports if r["rank"] in ranks})
    return ", ".join(hosts)


def differences(reports: list[dict], notebook: dict) -> list[str]:
    """One line per field that is not the same on every rank (and in the notebook, for the
    fields the notebook has), naming the ranks and hosts of each value; a library that does
    not load on some rank counts too."""
    lines = []
    for field in FIELDS:
        by_value = defaultdict(list)
        for report in reports:
            by_value[report.get(field)].append(report["rank"])
        mine = notebook.get(field)
        differs_from_notebook = mine is not None and set(by_value) != {mine}
        broken = field == "mpinb_library" and set(by_value) != {"ok"}
        if len(by_value) > 1 or differs_from_notebook or broken:
            parts = [f"{value} on {label(sorted(ranks))} ({_hosts(reports, ranks)})"
                     for value, ranks in sorted(by_value.items(), key=lambda kv: min(kv[1]))]
            if differs_from_notebook:
                parts.append(f"{mine} in the notebook")
            lines.append(f"{WORDS[field]}: {'; '.join(parts)}")
    return lines


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
