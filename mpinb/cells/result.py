"""The result of one cell on the ranks of a cluster (client side): assembled by
mpinb.cells.cell_run from the ranks' records, shown by mpinb.view.
"""

from __future__ import annotations

import dataclasses

from ..wire.records import RankRecord, State


@dataclasses.dataclass(frozen=True)
class Note:
    """A fact worth saying above a cell's view: its ``cause`` ("deadlock", "job_ended",
    "ended_outside", "watchdog_replaced", "way_out", "hlo_capture_off", "freed", "dropped",
    "restarted", "restart_failed") and the
    facts it is said from; mpinb.view.note_words words it."""

    cause: str
    facts: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class CellResult:
    """What one cell did on its ranks: each rank's record, output and state, the layout
    findings across ranks, notes on what to do next. Shown with the default view options
    (``mpinb.view.CellView`` shows it with others)."""

    code: str
    ranks: list[int]
    records: dict[int, RankRecord | None]
    stdout: dict[int, str]
    stderr: dict[int, str]
    states: dict[int, State]
    elapsed: float
    warnings: list = dataclasses.field(default_factory=list)
    timed_out: bool = False
    compare: bool = False
    notes: list[Note] = dataclasses.field(default_factory=list)
    inflight: dict[int, dict | None] = dataclasses.field(default_factory=dict)
    dead: dict[int, dict] = dataclasses.field(default_factory=dict)
    faults: dict[int, str] = dataclasses.field(default_factory=dict)
    interrupted: bool = False
    #: where each rank still running is (mpinb.engine.stall): its cell line, a jitted call
    where: dict[int, dict | None] = dataclasses.field(default_factory=dict)
    #: the proven deadlock that ended the cell (mpinb.analysis.deadlock.Deadlock), if any
    deadlock: object = None
    #: whether the engines were restarted after it (the next cell runs; their variables are gone)
    restarted: bool = False
    #: how long that restart took, setup cells replayed (part of ``elapsed``, the cell's whole time)
    restart_seconds: float | None = None
    #: the ranks freed where they waited after a proven deadlock, with where each waited
    #: (mpinb.engine.stall's record, None where unknown): their cells failed there
    freed: dict[int, dict | None] = dataclasses.field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(s == "finished" for s in self.states.values())

    @property
    def comparisons(self) -> list:
        out = []
        for rec in self.records.values():
            if rec:
                out.extend(rec.comparisons)
        return out

    def comparison_summary(self) -> str:
        """What --compare found, across ranks (mpinb.view.words)."""
        from ..view.words import comparison_summary

        return comparison_summary(self)

    def summary(self) -> str:
        """The view's one-line summary (mpinb.view.words)."""
        from ..view.words import summary_line

        return summary_line(self)

    def text(self) -> str:
        from ..view.text import render_text

        return render_text(self)

    def _repr_mimebundle_(self, include=None, exclude=None):
        from ..view.cell_view import mimebundle

        return mimebundle(self)

    def __repr__(self) -> str:
        return self.text()
