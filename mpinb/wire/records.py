"""The records that cross from the engines to the notebook: typed, picklable, built by keyword.

An engine returns one :class:`RankRecord` per cell; the client turns the ranks' records, their
output and their states into a :class:`~mpinb.cells.result.CellResult`. Values (``result``, ``show``)
are the summaries of :func:`mpinb.wire.values.summarize`; comparisons are
:class:`mpinb.analysis.compare.Comparison`. Pure: no JAX, no IPython.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

#: what a rank did with a cell: ran it to the end, raised, is still in it, its process ended,
#: or its engine was restarted while in it (after a proven deadlock: the cell's work is gone)
State = Literal["finished", "failed", "running", "dead", "restarted"]


@dataclasses.dataclass(frozen=True)
class ErrorInfo:
    """An exception raised on a rank, as text (exceptions themselves may not unpickle here)."""

    ename: str
    evalue: str
    traceback: str = ""

    def __str__(self) -> str:
        return f"{self.ename}: {self.evalue}"


@dataclasses.dataclass
class RankRecord:
    """What one rank reports about one cell."""

    rank: int
    ok: bool
    elapsed: float = 0.0
    error: ErrorInfo | None = None
    result: dict | None = None                                  # summary of the cell's value
    show: dict[str, dict] = dataclasses.field(default_factory=dict)  # --show summaries by name
    comparisons: list = dataclasses.field(default_factory=list)  # compare.Comparison, --compare
    eager_error: ErrorInfo | None = None                        # the eager pass of --compare raised
    hlo: list[tuple[str, str]] = dataclasses.field(default_factory=list)  # (module, optimized HLO)
    hlo_capture: bool = False                                   # HLO dumps work on this rank
    # the cell's mpinb calls, oldest first: (op, start, end, bytes, peer), wall-clock seconds
    # (time.time() of this rank's host); and how many more the library's ring no longer held
    timeline: list[tuple[str, float, float, int, int]] = dataclasses.field(default_factory=list, kw_only=True)
    timeline_dropped: int = dataclasses.field(default=0, kw_only=True)
    # the collectives this rank called in the cell, as its library kept them (mpinb._ffi.ran(),
    # ext/ran.pxi), compared across ranks by mpinb.analysis.divergence; None: not known
    ran: dict | None = dataclasses.field(default=None, kw_only=True)
    # --compare --images: jit - eager of 2-D values that differ, sampled (values.sample)
    diff_images: dict = dataclasses.field(default_factory=dict, kw_only=True)
    # --compare: likely causes of its differences, as facts (mpinb.engine.traces.hints)
    hints: list[dict] = dataclasses.field(default_factory=list, kw_only=True)
    # the engine process went away while running the cell (no record of the cell: the client
    # made this one from ipyparallel's EngineError)
    engine_died: bool = dataclasses.field(default=False, kw_only=True)
