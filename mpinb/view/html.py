"""The per-rank view as HTML (``text/html``): the summary and notes, a
card per group of ranks (or per rank), the layout findings, the collectives' timeline. Pure.
"""

from __future__ import annotations

import html

from ..options.cell_options import ViewOptions
from . import images, links, timeline_svg
from .hlo_words import REFERENCES
from .note_words import notes_of
from .rank_words import label
from .text import DEFAULT_VIEW, Folded, findings, groups, rank_block
from .timeline_words import timeline_summary
from .words import finding_text, state_line, summary_line

GRID_FROM = 16  # ranks: from here on the states are a grid of cells
#: colours from JupyterLab's theme (its mid tones read on the light and the dark theme alike),
#: with the light theme's value where no theme defines it (GitHub, nbconvert, the docs)
STATE_COLORS = {"finished": "var(--jp-success-color1, #4caf50)", "failed": "var(--jp-error-color1, #f44336)",
                "running": "var(--jp-warn-color1, #ff9800)", "dead": "#ab47bc",
                "restarted": "var(--jp-brand-color1, #2196f3)"}
SEVERITY_COLORS = {"error": "var(--jp-error-color1, #f44336)", "warning": "var(--jp-warn-color1, #ff9800)",
                   "info": "var(--jp-brand-color1, #2196f3)"}
#: neither state: a group of ranks in several states, and borders
NEUTRAL, BORDER = "var(--jp-ui-font-color2, #757575)", "var(--jp-border-color2, #ccc)"


_STYLE = ("font-family:monospace;font-size:12px;white-space:pre-wrap;word-break:normal;overflow-wrap:normal;margin:0;"
          "max-height:24em;overflow:auto")


def _body(lines: list[str]) -> str:
    """A card's lines: runs of plain lines as text, each Folded block behind its summary."""
    parts, plain = [], []
    for line in [*lines, None]:
        if line is not None and not isinstance(line, Folded):
            plain.append(line)
            continue
        if plain:
            parts.append(f"<pre style='{_STYLE}'>{html.escape(chr(10).join(plain))}</pre>")
            plain = []
        if line is not None:
            parts.append(f"<details class='mpinb-folded'><summary>{html.escape(line.summary)}</summary>"
                         f"<pre style='{_STYLE}'>{html.escape(line)}</pre></details>")
    return "".join(parts)


def _card(title: str, color: str, body_lines: list[str], extra: str = "", rank: str = "") -> str:
    data = f" data-rank='{rank}'" if rank else ""
    return (f"<div class='mpinb-rank'{data} style='flex:1;min-width:18em;border:1px solid {BORDER};"
            f"padding:4px;margin:2px'><div style='font-weight:bold;color:{color}'>{html.escape(title)}</div>"
            f"{_body(body_lines)}{extra}</div>")


def rank_html(result, rank: int, view: ViewOptions = DEFAULT_VIEW, scales=None) -> str:
    """One rank in full (the --by-rank view)."""
    state = result.states.get(rank, "?")
    scales = images.scales(result) if scales is None else scales
    return _card(f"rank {rank} ({state})", STATE_COLORS.get(state, NEUTRAL), rank_block(result, rank, view, scales),
                 images.tags(result, rank, scales), str(rank))


def group_html(result, ranks: list[int], lines: list[str], scales=None) -> str:
    """A group of ranks with the same output, and the pictures of its first rank when the group
    holds the pictures' lines (equal lines: equal pictures, see images.lines)."""
    states = {result.states.get(r, "?") for r in ranks}
    color = STATE_COLORS.get(states.pop(), NEUTRAL) if len(states) == 1 else NEUTRAL
    scales = images.scales(result) if scales is None else scales
    own = images.lines(result, ranks[0], scales)
    pictures = images.tags(result, ranks[0], scales) if own and set(own) <= set(lines) else ""
    return _card(label(ranks), color, lines, pictures, ",".join(map(str, ranks)))


def state_grid_html(result) -> str:
    """The ranks' states: one line, or from GRID_FROM ranks on a grid of small cells (time on hover)."""
    if len(result.ranks) < GRID_FROM:
        return f"<div class='mpinb-states'>{html.escape(state_line(result))}</div>"
    cells = []
    for r in result.ranks:
        state = result.states.get(r, "?")
        rec = result.records.get(r)
        tip = f"rank {r}: {state}" + (f" in {rec.elapsed:.3f} s" if rec else "")
        cells.append(f"<span title='{html.escape(tip)}' style='display:inline-block;width:2.6em;margin:1px;"
                     f"text-align:center;color:white;background:{STATE_COLORS.get(state, NEUTRAL)}'>{r}</span>")
    return (f"<div class='mpinb-states' data-grid='1'>{''.join(cells)}</div>"
            f"<div style='font-size:11px'>{html.escape(state_line(result))}</div>")


def header_html(result, view: ViewOptions = DEFAULT_VIEW) -> str:
    """The summary line and every note (restart advice, lost job, HLO capture): shown above the
    ranks by the HTML view as the text view shows them."""
    summary = html.escape(summary_line(result, view.max_lines))
    head = f"<div class='mpinb-summary' style='font-weight:bold'>{summary}</div>"
    red = SEVERITY_COLORS["error"]
    notes = "".join(f"<div class='mpinb-note' style='color:{red}'>note: {html.escape(n)}</div>"
                    for n in notes_of(result))
    return head + notes + ("" if view.by_rank else state_grid_html(result))


def _finding_html(w, ranks, count: int = 1) -> str:
    reference = REFERENCES[w.kind]
    target = links.href(reference)
    anchor = (f" See <a href='{html.escape(target)}' target='_blank'>{html.escape(reference.title)}</a>"
              if target else " " + html.escape(links.words(reference)))
    style = f"color:{SEVERITY_COLORS[w.severity]}"
    full = html.escape(finding_text(w, ranks, link=False, brief=False))
    if w.small:  # one line; the whole finding one click away
        return (f"<details class='mpinb-finding' data-severity='{w.severity}' style='{style}'><summary>"
                f"{html.escape(finding_text(w, ranks, count=count))}</summary>{full}{anchor}</details>")
    return f"<div class='mpinb-finding' data-severity='{w.severity}' style='{style}'>{full}{anchor}</div>"


def timeline_html(result) -> str:
    """The collectives' timeline: the picture, with its one-line summary."""
    picture = timeline_svg.svg(result)
    if not picture:
        return ""
    return (f"<div class='mpinb-timeline-block'><div>{html.escape(timeline_summary(result))}</div>"
            f"{picture}</div>")


def footer_html(result, view: ViewOptions = DEFAULT_VIEW) -> str:
    """The layout findings, each once (in the --by-rank view: those found across ranks), and
    the timeline of the cell's collectives."""
    items = findings(result, by_rank=view.by_rank)
    return "".join(_finding_html(w, ranks, n) for w, ranks, n in items) + timeline_html(result)


def body_html(result, view: ViewOptions = DEFAULT_VIEW, grouped=None) -> str:
    scales = images.scales(result)
    if view.by_rank:
        return "".join(rank_html(result, r, view, scales) for r in result.ranks)
    if grouped is None:
        grouped = groups(result, view, scales)
    return "".join(group_html(result, ranks, lines, scales) for ranks, lines in grouped)


def render_html(result, view: ViewOptions = DEFAULT_VIEW, grouped=None) -> str:
    """The whole view as HTML; ``grouped``: as for render_text."""
    return (f"<div class='mpinb-view'>{header_html(result, view)}<div style='display:flex;flex-wrap:wrap'>"
            f"{body_html(result, view, grouped)}</div>{footer_html(result, view)}</div>")
