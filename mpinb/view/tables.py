"""What the line magic shows: ``%mpijax status`` as a table, ``%mpijax hlo`` as compiled HLO
with its layouts marked. Both keep the data they show (a dict; the per-rank texts). Pure.
"""

from __future__ import annotations

import html
import re
import typing

from ..analysis import hlo
from ..analysis.grouping import group_by
from ..analysis.hlo_text import marked_lines
from .outside_end_words import ended_words, what_to_do
from .rank_words import label
from .start_words import standby_words
from .words import finding_text, lost_job_words


def jax_runtime_words(runtime: dict) -> str:
    """How JAX runs on the engines (``MPICluster.status()["jax"]``): 'jax.distributed: 2
    processes, 3 CPU devices each', 'one process per rank, 1 CPU device each'."""
    devices = runtime["devices"]
    each = f"{devices} {runtime['platform'].upper()} device{'s' if devices != 1 else ''} each"
    if runtime["processes"] is not None:
        return f"jax.distributed: {runtime['processes']} processes, {each}"
    return f"one process per rank, {each}"


class StatusTable(dict):
    """``%mpijax status``: the cluster's state as a small table; still the dict of
    ``MPICluster.status()`` (plus the default timeout) for code that reads it."""

    LABELS: typing.ClassVar[dict[str, str]] = {
        "running": "running", "n": "ranks", "launcher": "launcher", "engines": "engines", "hosts": "hosts",
        "lost": "MPI job lost", "ended": "ended", "blocked_ranks": "ranks still in a cell", "checked": "checked mode",
        "jax": "JAX runtime",
        "hlo_capture": "HLO capture", "uptime_s": "up (s)", "start_s": "start took (s)",
        "setup_cells": "setup cells", "default_timeout": "default timeout (s)", "pids": "engine PIDs (their hosts)",
        "standby": "standby for restarts"}

    #: rank lists, shown as "rank 0" / "ranks 0-3"; other lists (PIDs, hosts) are shown as they are
    RANK_LISTS = ("engines", "blocked_ranks")

    def rows(self) -> list[tuple[str, str]]:
        def show(key, value):
            if key == "jax":
                return jax_runtime_words(value)
            if key == "lost" and value:
                return lost_job_words(value) + ("" if self.get("running") else f"; {what_to_do(replayed)}")
            if key == "ended":
                return ended_words(value, replayed)
            if key == "standby":
                return standby_words(**value)
            if isinstance(value, list):
                if not value:
                    return "none"
                return label(value) if key in self.RANK_LISTS else ", ".join(map(str, value))
            return "none" if value is None else str(value)

        replayed = self.get("setup_cells", 0)
        # a stopped cluster: how it ended, if it did not end by a stop from the notebook
        quiet = {"ended"} if self.get("running") else {k for k in ("lost", "ended") if not self.get(k)}
        return [(self.LABELS.get(key, key), show(key, value)) for key, value in self.items() if key not in quiet]

    def text(self) -> str:
        rows = self.rows()
        width = max(len(k) for k, _ in rows)
        return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)

    def _repr_pretty_(self, p, cycle):
        p.text(self.text())

    def _repr_mimebundle_(self, include=None, exclude=None):
        cells = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th><td style='text-align:left'>"
                        f"{html.escape(v)}</td></tr>" for k, v in self.rows())
        return {"text/plain": self.text(), "text/html": f"<table class='mpinb-status'>{cells}</table>"}


class HloView:
    """Compiled HLO with non-row-major layouts marked ``<<...>>``: once for ranks that compiled
    the same text (``[ranks 0-3]``), each layout finding once with its ranks."""

    def __init__(self, per_rank: dict[int, list[tuple[str, str]]]):
        self.per_rank = per_rank
        self.warnings = hlo.analyze(per_rank)

    def lines(self) -> list[tuple[str, bool]]:
        """(line, whether it has a non-row-major layout): the findings, then per group of ranks
        each module's entry computation."""
        def entries(modules):
            out = []
            for _, text in modules:
                entry = text[text.find("ENTRY"):] if "ENTRY" in text else text
                # MPI handles are per process (equal communicators, other numbers): not a difference
                entry = re.sub(r"comm = -?\d+ : i64", "comm = <MPI handle> : i64", entry)
                out.append(tuple(marked_lines(entry)))
            return tuple(out)

        lines = [(finding_text(w, ranks), False) for w, ranks in hlo.distinct(self.warnings)]
        for ranks, texts in group_by({r: entries(m) for r, m in self.per_rank.items()}):
            lines.append((f"[{label(ranks)}]", False))
            names = [name for name, _ in self.per_rank[ranks[0]]]
            for name, text in zip(names, texts, strict=True):
                lines.append((f"  module {name}:", False))
                lines.extend(("    " + line, marked) for line, marked in text)
        return lines

    def text(self) -> str:
        return "\n".join(line for line, _ in self.lines())

    def _repr_mimebundle_(self, include=None, exclude=None):
        def line_html(line: str, marked: bool) -> str:
            if marked:  # a non-row-major layout: the line to look at
                return f"<span class='mpinb-marked' style='background:#ffcdd2;color:#212121'>{html.escape(line)}</span>"
            return html.escape(line)

        body = "\n".join(line_html(line, marked) for line, marked in self.lines())
        # white-space: pre: a front end's output style would wrap long HLO lines inside tokens
        # ("custom_call_t / arget="); the box scrolls sideways instead
        style = "white-space:pre;overflow-x:auto;word-wrap:normal;overflow-wrap:normal"
        return {"text/plain": self.text(), "text/html": f"<pre class='mpinb-hlo' style='{style}'>{body}</pre>"}
