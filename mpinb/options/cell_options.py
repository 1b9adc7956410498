"""The options of one cell, in one object each, from the magic (or the Python API) to the client,
the engines and the view.

* :class:`CellOptions`: how a cell runs (which ranks, compare, HLO, timeout, --show, ...). The
  magic builds it from its arguments, ``MPICluster.run_cell`` from its keywords; the client
  reads ``ranks``/``timeout``/``setup`` and sends the object itself to every engine.
* :class:`ViewOptions`: how a result is shown (grouped or by rank, lines per stream); given to
  the renderer with the result (:class:`mpinb.view.CellView`), never stored on the result.

Pure: no IPython, no JAX.
"""

from __future__ import annotations

import dataclasses

#: what a proven deadlock does (CellOptions.deadlock, %%mpijax --deadlock)
DEADLOCK_CHOICES = ("restart", "keep", "off")


@dataclasses.dataclass(frozen=True)
class CellOptions:
    """How one cell runs.

    ranks: ``"all"``/None, ``"0"``, ``"0,2"``, ``"1-3"`` or a sequence of ints.
    compare: run the cell eagerly (``jax.disable_jit()``, bindings rolled back), then jitted,
        and compare what it assigned, its value and what it printed.
    hlo: capture and analyse the optimized HLO of the modules compiled during the cell.
    timeout: seconds to wait (None: no limit); then the ranks still running are reported.
    show: names of variables to summarise per rank.
    images: draw the 2-D values among the shown ones.
    setup: replay the cell after a restart (kept only if it ran on every rank without error).
    deadlock: what a proven deadlock does (mpinb.analysis.deadlock): ``"restart"`` ends the cell
        and frees the ranks, so that the next cell runs: where every blocked rank waits in a
        receive or in an mpinb collective's checked exchange on COMM_WORLD or mpinb's own
        communicator, they are freed there and the engines keep their variables
        (mpinb.cells.freeing), else the engines restart, replaying the setup cells;
        ``"keep"`` ends the cell and leaves the ranks blocked (to look at them, then
        ``%mpijax restart``); ``"off"``: no proof is sought, the cell waits (for its timeout).
    label, header: how tracebacks name the cell (``In[5]``: ``Cell In[5], line 4``) and the
        cell's text above the code (the ``%%mpijax`` line), so that line numbers are the notebook's.
    """

    ranks: object = None
    compare: bool = False
    hlo: bool = True
    timeout: float | None = None
    show: tuple[str, ...] = ()
    images: bool = False
    setup: bool = False
    deadlock: str = "restart"
    label: str | None = None
    header: str = ""

    def __post_init__(self):
        if self.timeout is not None and self.timeout <= 0:
            raise ValueError(f"timeout must be positive, got {self.timeout}")
        if self.deadlock not in DEADLOCK_CHOICES:
            raise ValueError(f"deadlock must be one of {', '.join(DEADLOCK_CHOICES)}, got {self.deadlock!r}")
        object.__setattr__(self, "show", tuple(self.show))


@dataclasses.dataclass(frozen=True)
class ViewOptions:
    """How a cell's result is shown: ranks with the same output grouped (``by_rank=False``) or
    every rank in full; at most ``max_lines`` lines of each stream per rank (head and tail;
    None or 0: all)."""

    by_rank: bool = False
    max_lines: int | None = 200


def parse_ranks(spec, size: int) -> list[int]:
    """'all', '0', '0,2', '1-3', '0,2-3' or a sequence of ints -> sorted ranks within [0, size)."""
    if spec is None or (isinstance(spec, str) and spec.strip().lower() in ("", "all", "*")):
        return list(range(size))
    if isinstance(spec, int):
        spec = [spec]
    if isinstance(spec, str):
        ranks = set()
        for part in spec.split(","):
            part = part.strip()
            if not part:
                continue
            try:
                if "-" in part:
                    lo, hi = part.split("-", 1)
                    ranks.update(range(int(lo), int(hi) + 1))
                else:
                    ranks.add(int(part))
            except ValueError:
                raise ValueError(f"--ranks: cannot parse {part!r} in {spec!r} (use e.g. 0,2-3)") from None
        spec = ranks
    ranks = sorted({int(r) for r in spec})
    bad = [r for r in ranks if not 0 <= r < size]
    if bad:
        raise ValueError(f"--ranks: rank(s) {bad} out of range for {size} ranks")
    if not ranks:
        raise ValueError("--ranks: no rank selected")
    return ranks

