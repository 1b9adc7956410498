"""The collectives' timeline as an SVG picture: a row per rank, a bar per call (mpinb.analysis.timeline
matches them). Pure.
"""

from __future__ import annotations

import html
import zlib

from ..analysis.timeline import events

#: the calls' colours: mid tones, which read on a light and a dark background alike
PALETTE = ("#2196f3", "#4caf50", "#ff9800", "#ab47bc", "#00acc1", "#ec407a", "#a1887f", "#78909c")
ROW = 16     # px per rank
LEFT = 56    # px for the rank labels


def _color(op: str) -> str:
    return PALETTE[zlib.crc32(op.encode()) % len(PALETTE)]


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
    # the labels in the front end's text colour (JupyterLab's theme; dark grey elsewhere)
    parts = [f"<svg class='mpinb-timeline' xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
             f"font-family='monospace' font-size='10' style='fill:var(--jp-ui-font-color1, #212121)'>"]
    for row, r in enumerate(ranks):
        y = row * ROW + 2
        parts.append(f"<text x='2' y='{y + 11}'>rank {r}</text>")
        parts.append(f"<line x1='{LEFT}' x2='{LEFT + plot}' y1='{y + 7}' y2='{y + 7}' stroke='#9e9e9e' "
                     "stroke-opacity='0.4'/>")
        if not per_rank[r]:
            why = "no mpinb call" if result.records.get(r) is not None else f"no record ({result.states.get(r)})"
            parts.append(f"<text x='{LEFT + 4}' y='{y + 11}' fill='#9e9e9e'>{html.escape(why)}</text>")
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
