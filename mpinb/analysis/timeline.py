"""The cell's collectives on one time axis: who waited for whom.

Each rank's library records when each of its mpinb calls started and ended (``RankRecord.timeline``,
wall-clock seconds of the rank's host: on several hosts this assumes their clocks agree, as NTP
keeps them within about a millisecond). The k-th collective of one rank is matched with the k-th
of the others (point-to-point calls are not matched). ``summary(result)`` says it in one line;
mpinb.view.timeline_svg draws it. Pure.
"""

from __future__ import annotations

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


def waits(result) -> list[tuple[float, str]]:
    """(seconds, sentence) for each matched collective whose ranks entered it at different
    times, longest first: the last rank to arrive kept the others waiting."""
    out = []
    for op, k, at in matched(result):
        first = min(at, key=lambda r: at[r][1])
        last = max(at, key=lambda r: at[r][1])
        gap = at[last][1] - at[first][1]
        if gap >= NOTABLE_WAIT:
            out.append((gap, f"{op} #{k}: rank {last} entered {gap:.3g} s after rank {first}"))
    return sorted(out, reverse=True)


def summary(result) -> str:
    """'timeline: 48 mpinb calls per rank; longest wait: alltoall #25: rank 0 entered ...'"""
    per_rank = events(result)
    if not per_rank:
        return ""
    counts = sorted({len(v) for r, v in per_rank.items() if result.records.get(r) is not None})
    count = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
    text = f"timeline: {count} mpinb call{'s' if counts[-1] != 1 else ''} per rank"
    longest = waits(result)
    if longest:
        text += f"; longest wait: {longest[0][1]}"
    dropped = sum(rec.timeline_dropped for rec in result.records.values() if rec is not None)
    if dropped:
        text += f" ({dropped} earlier calls not kept)"
    return text
