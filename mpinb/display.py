"""Per-rank, side-by-side view of a cell's result: ipywidgets where the front end has them,
with the same content always present as text/plain (one block per rank headed ``[rank N]``)
and text/html, so nbconvert, terminals and tests can read it.

``render_text(result)`` and ``render_html(result)`` are pure; widgets are imported lazily.
"""

from __future__ import annotations

import base64
import html
import sys

from .values import describe

RANKS_PER_PAGE = 8


# ------------------------------------------------------------------------------ text

def _indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line for line in text.rstrip("\n").splitlines())


def _value_lines(label: str, summary: dict) -> list[str]:
    if summary.get("kind") == "tree":
        lines = [f"{label}: pytree"]
        lines += [f"  {label}{path}: {describe(s)}" for path, s in summary["leaves"]]
        if summary.get("more"):
            lines.append(f"  ... {summary['more']} more leaves")
        return lines
    return [f"{label}: {describe(summary)}"]


def rank_block(result, rank: int) -> list[str]:
    """The text lines describing one rank (without the [rank N] header)."""
    rec = result.records.get(rank)
    state = result.states.get(rank, "?")
    lines = []
    if rec is None:
        if state == "running":
            from .cell import describe_inflight

            lines.append(f"state: still running, {describe_inflight(result.inflight.get(rank))}")
        elif state == "dead":
            lines.append(f"state: dead, {result.dead.get(rank, 'process ended')}")
            fault = result.faults.get(rank, "").strip()
            if fault:
                lines += ["fault report:", _indent(fault)]
        else:
            lines.append(f"state: {state}")
    else:
        lines.append(f"state: {state} in {rec.elapsed:.3f} s")
    out = result.stdout.get(rank, "")
    err = result.stderr.get(rank, "")
    if out:
        lines += ["stdout:", _indent(out)]
    if err:
        lines += ["stderr:", _indent(err)]
    if rec:
        if rec.result is not None:
            lines += _value_lines("Out", rec.result)
        for name, summary in rec.show.items():
            lines += _value_lines(name, summary)
        if rec.error:
            lines += [f"error: {rec.error}", _indent(rec.error.traceback)]
        if rec.eager_error:
            lines += [f"eager run failed: {rec.eager_error}"]
        for c in rec.comparisons:
            lines.append(f"compare: {c}")
    for w in result.warnings:
        if w.rank == rank:
            lines.append(f"warning: {w}")
    return lines


def render_text(result) -> str:
    lines = [result.summary()]
    for note in result.notes:
        lines.append(f"note: {note}")
    for rank in result.ranks:
        lines.append(f"[rank {rank}]")
        lines += [_indent(line, "  ") if line else "" for line in rank_block(result, rank)]
    shared = [w for w in result.warnings if w.rank is None]
    if shared:
        lines.append("[all ranks]")
        lines += [f"  warning: {w}" for w in shared]
    return "\n".join(lines)


# ------------------------------------------------------------------------------ html

_STYLE = ("font-family:monospace;font-size:12px;white-space:pre-wrap;margin:0;"
          "max-height:24em;overflow:auto")


def _png_tags(rec) -> str:
    tags = []
    items = []
    if rec is None:
        return ""
    if rec.result:
        items.append(("Out", rec.result))
    items += list(rec.show.items())
    for name, s in items:
        if s.get("png"):
            data = base64.b64encode(s["png"]).decode()
            tags.append(f"<div>{html.escape(name)}<br><img src='data:image/png;base64,{data}'></div>")
    return "".join(tags)


def rank_html(result, rank: int) -> str:
    rec = result.records.get(rank)
    state = result.states.get(rank, "?")
    color = {"finished": "#2e7d32", "failed": "#c62828", "running": "#ef6c00", "dead": "#6a1b9a"}.get(state, "#555")
    body = html.escape("\n".join(rank_block(result, rank)))
    return (f"<div class='mpinb-rank' data-rank='{rank}' style='flex:1;min-width:14em;border:1px solid #ccc;"
            f"padding:4px;margin:2px'><div style='font-weight:bold;color:{color}'>rank {rank} ({state})</div>"
            f"<pre style='{_STYLE}'>{body}</pre>{_png_tags(rec)}</div>")


def header_html(result) -> str:
    """The summary line and every note (restart advice, lost job, HLO capture): shown above the
    ranks by both the HTML view and the widget, as the text view shows them."""
    head = f"<div class='mpinb-summary' style='font-weight:bold'>{html.escape(result.summary())}</div>"
    notes = "".join(f"<div class='mpinb-note' style='color:#c62828'>note: {html.escape(n)}</div>"
                    for n in result.notes)
    return head + notes


def footer_html(result) -> str:
    """Warnings that concern all ranks (the text view's [all ranks] block)."""
    shared = [w for w in result.warnings if w.rank is None]
    return "".join(f"<div class='mpinb-shared' style='color:#c62828'>warning: {html.escape(str(w))}</div>"
                   for w in shared)


def render_html(result) -> str:
    cols = "".join(rank_html(result, r) for r in result.ranks)
    return (f"<div class='mpinb-view'>{header_html(result)}<div style='display:flex;flex-wrap:wrap'>{cols}</div>"
            f"{footer_html(result)}</div>")


# ------------------------------------------------------------------------------ widgets

def widgets_available() -> bool:
    """True inside a Jupyter kernel with ipywidgets importable."""
    ip = sys.modules.get("IPython")
    if ip is None:
        return False
    shell = ip.get_ipython()
    if shell is None or not hasattr(shell, "kernel"):
        return False
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return False
    return True


def build_widget(result):
    """ipywidgets view: summary on top, one column per rank, pages of 8 ranks."""
    import ipywidgets as w

    def column(rank):
        return w.HTML(rank_html(result, rank), layout=w.Layout(flex="1 1 0", min_width="14em"))

    pages = [result.ranks[i:i + RANKS_PER_PAGE] for i in range(0, len(result.ranks), RANKS_PER_PAGE)]
    boxes = [w.HBox([column(r) for r in page], layout=w.Layout(flex_flow="row wrap")) for page in pages]
    if len(boxes) == 1:
        body = boxes[0]
    else:
        body = w.Tab(children=boxes)
        for i, page in enumerate(pages):
            body.set_title(i, f"ranks {page[0]}-{page[-1]}")
    parts = [w.HTML(header_html(result)), body]
    if footer_html(result):
        parts.append(w.HTML(footer_html(result)))
    return w.VBox(parts, layout=w.Layout(width="100%"))


def mimebundle(result) -> dict:
    bundle = {"text/plain": render_text(result), "text/html": render_html(result)}
    if widgets_available():
        try:
            widget_bundle = build_widget(result)._repr_mimebundle_()
        except Exception:  # noqa: BLE001 - widgets are an enhancement; text and html remain
            widget_bundle = None
        if widget_bundle:
            bundle.update({k: v for k, v in widget_bundle.items() if k != "text/plain"})
    return bundle


class LiveOutput:
    """Streams each rank's output while a cell runs: into per-rank widget areas in a notebook,
    as ``[stdout:N]`` prefixed lines elsewhere."""

    def __init__(self, ranks, use_widgets: bool | None = None):
        self.ranks = list(ranks)
        self.use_widgets = widgets_available() if use_widgets is None else use_widgets
        self.handle = None
        self.areas = {}
        if self.use_widgets:
            import ipywidgets as w
            from IPython.display import display

            self.areas = {r: w.Textarea(value="", description=f"rank {r}", disabled=True,
                                        layout=w.Layout(flex="1 1 0", height="8em")) for r in self.ranks}
            box = w.HBox(list(self.areas.values())[:RANKS_PER_PAGE], layout=w.Layout(flex_flow="row wrap"))
            self.handle = display(box, display_id=True)

    def __call__(self, rank: int, stream: str, text: str) -> None:
        if self.use_widgets and rank in self.areas:
            self.areas[rank].value += text
            return
        if self.use_widgets and stream == "error":
            return
        prefix = f"[{stream}:{rank}] "
        sys.stdout.write("".join(prefix + line + "\n" for line in text.rstrip("\n").split("\n")))
        sys.stdout.flush()

    def close(self) -> None:
        """Remove the live areas (the final view replaces them)."""
        if self.handle is not None:
            from IPython.display import HTML

            self.handle.update(HTML(""))
