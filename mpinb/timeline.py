"""The cell's collectives on a time axis, one row per rank: who waited for whom.

Each rank's library records when each of its mpinb calls started and ended (``RankRecord.timeline``,
wall-clock seconds of the rank's host: on several hosts this assumes their clocks agree, as NTP
keeps them within about a millisecond). The k-th collective of one rank is matched with the k-th
of the others (point-to-point calls are drawn but not matched). ``svg(result)`` draws it for the
HTML view and the widget; ``summary(result)`` says the same in one line for text.
Pure: no IPython, no widgets.
"""

from __future__ import annotations

import html
import zlib

POINT_TO_POINT = ("send", "recv", "sendrecv")
PALETTE = ("#1565c0", "#2e7d32", "#ef6c00", "#6a1b9a", "#00838f", "#ad1457", "#5d4037", "#455a64")
ROW = 16     # px per rank
LEFT = 56    # px for the rank labels
#: waits shorter than this are not worth a sentence
NOTABLE_WAIT = 0.005  # seconds


def events(result) -> dict[int, list[tuple]]:
    """{rank: its calls} for every rank of the cell (empty: none, or no record: a rank still
    running or dead has none, and its row says so); {} when no rank made a call."""
    out = {r: list(rec.timeline) if (rec := result.records.get(r)) is not None else [] for r in result.ranks}
    return out if any(out.values()) else {}


def _color(op: str) -> str:
    return PALETTE[zlib.crc32(op.encode()) % len(PALETTE)]


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


def svg(result, width: int = 640) -> str:
    """An SVG picture: a row per rank, a bar per call from its start to its end (hover: op,
    call number, bytes, seconds), on one time axis from the first start to the last end."""
    per_rank = events(result)
    if not per_rank:
        return ""
    ranks = sorted(per_rank)
    t_first = min(e[1] for evs in per_rank.values() for e in evs)  # some rank has a call
    t_last = max(e[2] for evs in per_rank.values() for e in evs)
    span = max(t_last - t_first, 1e-6)
    plot = width - LEFT - 8
    height = ROW * len(ranks) + 22
    parts = [f"<svg class='mpinb-timeline' xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
             f"font-family='monospace' font-size='10'>"]
    for row, r in enumerate(ranks):
        y = row * ROW + 2
        parts.append(f"<text x='2' y='{y + 11}'>rank {r}</text>")
        parts.append(f"<line x1='{LEFT}' x2='{LEFT + plot}' y1='{y + 7}' y2='{y + 7}' stroke='#ddd'/>")
        if not per_rank[r]:
            why = "no mpinb call" if result.records.get(r) is not None else f"no record ({result.states.get(r)})"
            parts.append(f"<text x='{LEFT + 4}' y='{y + 11}' fill='#888'>{html.escape(why)}</text>")
        for k, (op, t0, t1, nbytes, peer) in enumerate(per_rank[r], 1):
            x = LEFT + (t0 - t_first) / span * plot
            w = max((t1 - t0) / span * plot, 1.5)
            tip = f"rank {r}: {op} (call {k}), {nbytes} B" + (f", peer {peer}" if peer >= 0 else "") + \
                f", {t1 - t0:.3g} s, from {t0 - t_first:.3g} s"
            parts.append(f"<rect x='{x:.1f}' y='{y}' width='{w:.1f}' height='{ROW - 4}' fill='{_color(op)}' "
                         f"data-op='{html.escape(op)}'><title>{html.escape(tip)}</title></rect>")
    axis_y = ROW * len(ranks) + 14
    parts.append(f"<text x='{LEFT}' y='{axis_y}'>0 s</text>")
    parts.append(f"<text x='{LEFT + plot}' y='{axis_y}' text-anchor='end'>{span:.3g} s</text>")
    ops = sorted({e[0] for evs in per_rank.values() for e in evs})
    legend = " ".join(f"<tspan fill='{_color(op)}'>&#9632; {html.escape(op)}</tspan>" for op in ops)
    parts.append(f"<text x='{LEFT + plot / 2:.0f}' y='{axis_y}' text-anchor='middle'>{legend}</text>")
    parts.append("</svg>")
    return "".join(parts)
