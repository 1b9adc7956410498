"""The per-rank view in a notebook: ipywidgets where the front end has them (summary, cards,
or --by-rank one column per rank in pages of 8), with the same content always present as
text/plain and text/html, so nbconvert, terminals and tests can read it. Widgets are imported
lazily: ``import mpinb`` needs neither IPython nor ipywidgets.
"""

from __future__ import annotations

import sys

from ..options import ViewOptions
from . import images
from .html import body_html, footer_html, header_html, rank_html, render_html
from .text import DEFAULT_VIEW, render_text

RANKS_PER_PAGE = 8


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


def build_widget(result, view: ViewOptions = DEFAULT_VIEW):
    """ipywidgets view: summary on top, then the groups of ranks (or, --by-rank, one column per
    rank in pages of 8 ranks), then the layout findings."""
    import ipywidgets as w

    footer = footer_html(result, view)
    if not view.by_rank:
        parts = [w.HTML(header_html(result, view)),
                 w.HTML(f"<div style='display:flex;flex-wrap:wrap'>{body_html(result, view)}</div>")]
        if footer:
            parts.append(w.HTML(footer))
        return w.VBox(parts, layout=w.Layout(width="100%"))
    scales = images.scales(result)

    def column(rank):
        return w.HTML(rank_html(result, rank, view, scales), layout=w.Layout(flex="1 1 0", min_width="14em"))

    pages = [result.ranks[i:i + RANKS_PER_PAGE] for i in range(0, len(result.ranks), RANKS_PER_PAGE)]
    boxes = [w.HBox([column(r) for r in page], layout=w.Layout(flex_flow="row wrap")) for page in pages]
    if len(boxes) == 1:
        body = boxes[0]
    else:
        body = w.Tab(children=boxes)
        for i, page in enumerate(pages):
            body.set_title(i, f"ranks {page[0]}-{page[-1]}")
    parts = [w.HTML(header_html(result, view)), body]
    if footer:
        parts.append(w.HTML(footer))
    return w.VBox(parts, layout=w.Layout(width="100%"))


def mimebundle(result, view: ViewOptions = DEFAULT_VIEW) -> dict:
    bundle = {"text/plain": render_text(result, view), "text/html": render_html(result, view)}
    if widgets_available():
        try:
            widget_bundle = build_widget(result, view)._repr_mimebundle_()
        except Exception:  # noqa: BLE001 - widgets are an enhancement; text and html remain
            widget_bundle = None
        if widget_bundle:
            bundle.update({k: v for k, v in widget_bundle.items() if k != "text/plain"})
    return bundle


class CellView:
    """A cell's result with the options it is shown with: what ``%%mpijax`` displays (the
    result itself shows with the default options)."""

    def __init__(self, result, options: ViewOptions = DEFAULT_VIEW):
        self.result, self.options = result, options

    def text(self) -> str:
        return render_text(self.result, self.options)

    def _repr_mimebundle_(self, include=None, exclude=None):
        return mimebundle(self.result, self.options)

    def __repr__(self) -> str:
        return self.text()
