"""Whether the ranks ran the same collectives in a cell. Pure: no JAX, no IPython, no words.

Input: what each rank's library kept of the collectives it called in the cell
(``mpinb._ffi.ran()``, ext/ran.pxi: each call's signature, which the ranks of its communicator
must agree on, and that communicator, run-length encoded). What ran is compared, not what was
compiled: a computation that one rank compiled in the cell and another took from JAX's cache
runs the same collectives on both.

Output: :class:`Divergence` facts, at most one per communicator: the first place where a rank's
sequence on that communicator differs from its lowest rank's, by a collective that differs, or
by one that a rank called and a rank that finished the cell did not call.
mpinb.view.divergence_words puts them into words.

What cannot be compared is left alone: a rank that failed before a collective (its error says
why), collectives beyond the kept runs, and the members of a sub-communicator that called
nothing on it (only its size is known). Point-to-point calls are not kept.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

#: the communicator key of every world rank (ext/ran.pxi RAN_WORLD)
WORLD = 0


@dataclasses.dataclass(frozen=True)
class Collective:
    """One collective as its communicator's ranks must agree on it."""

    op: str
    dtype: str | None = None                 # None: no data buffer (barrier)
    dims: tuple[int | None, ...] | None = None  # None inside: a dimension that may differ by rank
    root: int | None = None
    reduce: str | None = None                # the reduction op's name (SUM, ...)

    @classmethod
    def from_run(cls, run: Mapping) -> Collective:
        dims = run.get("dims")
        return cls(run["op"], run.get("dtype"), tuple(dims) if dims is not None else None,
                   run.get("root"), run.get("reduce"))


@dataclasses.dataclass(frozen=True)
class Divergence:
    """The first collective where rank ``other``'s sequence on a communicator differs from
    rank ``first``'s (the lowest rank that called anything on it)."""

    comm: int                      # WORLD, or the key of a sub-communicator (ext/ran.pxi)
    comm_size: int
    position: int                  # the collective's place on that communicator in the cell, from 1
    first: int
    other: int
    first_ran: Collective | None   # None: the rank called no further collective there (it finished)
    other_ran: Collective | None
    first_count: int               # collectives each called on that communicator in the cell
    other_count: int


def runs_on(runs: Iterable[Mapping], comm: int) -> list[tuple[Collective, int]]:
    """The collectives of ``runs`` on communicator ``comm`` in the order called, as (collective,
    how many times in a row); equal neighbours merged (calls on another communicator between
    them split them in the record)."""
    out: list[tuple[Collective, int]] = []
    for run in runs:
        if run["comm"] != comm:
            continue
        one = Collective.from_run(run)
        if out and out[-1][0] == one:
            out[-1] = (one, out[-1][1] + run["count"])
        else:
            out.append((one, run["count"]))
    return out


def find(ran: Mapping[int, Mapping | None], finished: Iterable[int]) -> list[Divergence]:
    """Divergences between the ranks' ``ran`` records ({rank: mpinb._ffi.ran() or None}, None:
    nothing known of that rank); ``finished``: the ranks that ran the whole cell. A rank that
    stopped early is compared only as far as it got."""
    known = {r: rec for r, rec in ran.items() if rec is not None}
    finished = set(finished)
    comms: dict[int, int] = {}
    for rec in known.values():
        for run in rec["runs"]:
            if run["comm"] != -1:
                comms.setdefault(run["comm"], run["comm_size"])
    out = []
    for comm, size in sorted(comms.items()):
        members = sorted(known) if comm == WORLD else sorted(
            r for r, rec in known.items() if any(run["comm"] == comm for run in rec["runs"]))
        found = _first_difference(comm, size, members, known, finished)
        if found is not None:
            out.append(found)
    return out


def _first_difference(comm: int, size: int, members: list[int], known: Mapping[int, Mapping],
                      finished: set[int]) -> Divergence | None:
    """Each member against the lowest member that called something on ``comm``."""
    seqs = {r: runs_on(known[r]["runs"], comm) for r in members}
    callers = [r for r in members if seqs[r]]
    if not callers:
        return None
    first = callers[0]
    for other in members:
        if other == first:
            continue
        pos, a, b = _compare(seqs[first], seqs[other])
        if pos is None:
            continue
        complete = known[first].get("complete", True) and known[other].get("complete", True)
        if (a is None or b is None) and not complete:
            continue  # one sequence ends where the kept runs end: nothing known beyond
        if (a is None and first not in finished) or (b is None and other not in finished):
            continue  # the rank that called no more stopped early: its own error says why
        return Divergence(comm, size, pos, first, other, a, b,
                          sum(n for _, n in seqs[first]), sum(n for _, n in seqs[other]))
    return None


def _compare(a: list[tuple[Collective, int]], b: list[tuple[Collective, int]]
             ) -> tuple[int | None, Collective | None, Collective | None]:
    """(place from 1, a's, b's) of the first collective where two run-length sequences differ,
    one of them None where that sequence ended; (None, None, None) when they are equal."""
    i = j = done = 0
    left_a = a[0][1] if a else 0
    left_b = b[0][1] if b else 0
    while i < len(a) and j < len(b):
        if a[i][0] != b[j][0]:
            return done + 1, a[i][0], b[j][0]
        step = min(left_a, left_b)
        done, left_a, left_b = done + step, left_a - step, left_b - step
        if not left_a:
            i += 1
            left_a = a[i][1] if i < len(a) else 0
        if not left_b:
            j += 1
            left_b = b[j][1] if j < len(b) else 0
    if i == len(a) and j == len(b):
        return None, None, None
    return done + 1, a[i][0] if i < len(a) else None, b[j][0] if j < len(b) else None


def said_by_deadlock(found: Divergence, left: Iterable[int]) -> bool:
    """Whether a proven deadlock whose waits end at the ranks ``left`` (that left the cell)
    already says what ``found`` says: a rank among them finished without calling the
    collective another rank waits in."""
    left = set(left)
    return (found.first_ran is None and found.first in left) or (found.other_ran is None and found.other in left)
