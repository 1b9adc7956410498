"""A finished cell's view in a notebook (``CellView``: static HTML and text, the same facts in
both, readable after a kernel restart, on GitHub, in nbconvert, in terminals and tests), and
whether the code runs in a notebook's kernel (where the live boxes while a cell runs,
mpinb.view.live, and the start's progress are displays redrawn in place). ``import mpinb``
needs neither IPython nor a kernel.
"""

from __future__ import annotations

import sys

from ..options.cell_options import ViewOptions
from .html import render_html
from .text import DEFAULT_VIEW, groups, render_text

RANKS_PER_PAGE = 8


def in_notebook() -> bool:
    """True inside a Jupyter kernel, whose front end shows HTML and redraws a display in place."""
    ip = sys.modules.get("IPython")
    if ip is None:
        return False
    shell = ip.get_ipython()
    return shell is not None and hasattr(shell, "kernel")


def mimebundle(result, view: ViewOptions = DEFAULT_VIEW) -> dict:
    """A finished cell's view: static HTML and text, the same facts in both. Never a widget: its
    model dies with the kernel, and a saved notebook would show a broken widget after a restart,
    and nothing on GitHub or in nbconvert, where a widget output is preferred to the HTML beside
    it. (While a cell runs, its ranks' boxes are a display redrawn in place: mpinb.view.live.)"""
    grouped = None if view.by_rank else groups(result, view)  # made once, shown in both
    return {"text/plain": render_text(result, view, grouped), "text/html": render_html(result, view, grouped)}


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
