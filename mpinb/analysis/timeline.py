"""The cell's collectives on one time axis: who waited for whom.

Each rank's library records when each of its mpinb calls started and ended (``RankRecord.timeline``,
wall-clock seconds of the rank's host: on several hosts this assumes their clocks agree, as NTP
keeps them within about a millisecond). The k-th collective of one rank is matched with the k-th
of the others (point-to-point calls are not matched). mpinb.view.timeline_words says it in one
line; mpinb.view.timeline_svg draws it. Pure.
"""

from __future__ import annotations

import dataclasses

from ..mpi_ops import POINT_TO_POINT

#: waits shorter than this are not worth a sentence
NOTABLE_WAIT = 0.005  # seconds


def events(result) -> dict[int, list[tuple]]:
    """{rank: its calls} for every rank of the cell (empty: none, or no record: a rank still
    running or dead has none, and its row says so); {} when no rank made a call."""
    out = {r: list(rec.timeline) if (rec := result.records.get(r)) is not None else [] for r in result.ranks}
    return out if any(out.values()) else {}


def matched(result) -> list[tuple[str, int, dict[int, tuple]]]:
    """[(op, k, {rank: event})]: the k-th collective (not point-to-point) of every rank that
    has one, where all those ranks called the same op."""
    per_rank = {r: [e for e in evs if e[0] not in POINT_TO_POINT] for r, evs in events(result).items()
                if result.records.get(r) is not None}
    out = []
    for k in range(max((len(v) for v in per_rank.values()), default=0)):
        at = {r: evs[k] for r, evs in per_rank.items() if k < len(evs)}
        ops = {e[0] for e in at.values()}
        if len(at) > 1 and len(ops) == 1:
            out.append((ops.pop(), k + 1, at))
    return out


@dataclasses.dataclass(frozen=True)
class Wait:
    """A matched collective whose ranks entered it at different times: the last rank to arrive
    kept the first waiting ``seconds``."""

    seconds: float
    op: str
    k: int          # the op's place among the rank's collectives, from 1
    last: int
    first: int


def waits(result) -> list[Wait]:
    """Each matched collective whose ranks entered it at different times, longest first."""
    out = []
    for op, k, at in matched(result):
        first = min(at, key=lambda r: at[r][1])
        last = max(at, key=lambda r: at[r][1])
        gap = at[last][1] - at[first][1]
        if gap >= NOTABLE_WAIT:
            out.append(Wait(gap, op, k, last, first))
    return sorted(out, key=lambda w: (w.seconds, w.op, w.k, w.last, w.first), reverse=True)


def call_counts(result) -> tuple[int, int] | None:
    """The fewest and the most mpinb calls a rank with a record made; None when no rank made one."""
    per_rank = events(result)
    if not per_rank:
        return None
    counts = sorted({len(v) for r, v in per_rank.items() if result.records.get(r) is not None})
    return counts[0], counts[-1]


def dropped(result) -> int:
    """How many earlier calls the ranks' libraries did not keep."""
    return sum(rec.timeline_dropped for rec in result.records.values() if rec is not None)
