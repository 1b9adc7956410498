"""The divergence finding in words: the facts of mpinb.analysis.divergence (the ranks ran
different collectives in a cell) as the ``divergent`` finding the view lists with the layout
findings. Pure: no IPython.
"""

from __future__ import annotations

from ..analysis import hlo
from ..analysis.divergence import WORLD, Collective, Divergence

#: the finding's "module": what was compared (what each rank ran in the cell)
WHAT_RAN = "the cell's collectives"


def collective_words(c: Collective) -> str:
    """'allreduce float32[4] SUM', 'bcast float32[] root 0', 'alltoallv float32[*,3]', 'barrier'."""
    text = c.op
    if c.dtype is not None:
        dims = ",".join("*" if d is None else str(d) for d in (c.dims or ()))
        text += f" {c.dtype}[{dims}]"
    if c.root is not None:
        text += f" root {c.root}"
    if c.reduce:
        text += f" {c.reduce}"
    return text


def communicator_words(d: Divergence) -> str:
    """'the world communicator', 'a communicator of 2 ranks'."""
    return "the world communicator" if d.comm == WORLD else f"a communicator of {d.comm_size} ranks"


def divergence_message(d: Divergence) -> str:
    """The finding's sentence: who called what, where the ranks' sequences part."""
    where = f"collective #{d.position} on {communicator_words(d)}"
    if d.first_ran is not None and d.other_ran is not None:
        return (f"at {where}, rank {d.first} called {collective_words(d.first_ran)} but rank {d.other} called "
                f"{collective_words(d.other_ran)}: the ranks may deadlock or mix data")
    caller, ran, idle = ((d.first, d.first_ran, d.other) if d.first_ran is not None
                         else (d.other, d.other_ran, d.first))
    before = min(d.first_count, d.other_count)
    after = f"after {before} collective{'s' if before != 1 else ''} there" if before else "without calling it"
    return (f"rank {caller} called {collective_words(ran)} ({where} in this cell), rank {idle} finished the "
            f"cell {after}: the ranks may deadlock")


def divergence_finding(d: Divergence) -> hlo.HloWarning:
    """The ``divergent`` finding the view shows for ``d`` (with the layout findings)."""
    return hlo.HloWarning("divergent", None, WHAT_RAN, f"collective #{d.position}", d)
