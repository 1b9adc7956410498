"""How results are shown in the notebook: text and HTML of a cell's result, the live widget
boxes while it runs, pictures, the timeline, the status and HLO tables, and their words.

Every sentence a user reads is written here, from facts the others return or raise: a cell's
summary and states (words), its notes (note_words), mpinb's errors (error_words, which gives
mpinb.errors its voice), the start (start_words), the clusters here (cluster_words), the
magic's confirmations (magic_words), a divergence (divergence_words), --compare's hints
(hint_words) and comparisons (compare_words), the layout findings (hlo_words), a proven deadlock
(deadlock_words), the timeline's line (timeline_words), library logs folded (log_words).

    from mpinb import view
    view.render_text(result, ViewOptions(by_rank=True))   # or render_html, mimebundle
    display(view.CellView(result, options))               # what %%mpijax displays
"""

from .html import render_html
from .live import LiveOutput
from .text import render_text
from .widgets import CellView, mimebundle
from .words import live_words

__all__ = ["CellView", "LiveOutput", "live_words", "mimebundle", "render_html", "render_text"]
