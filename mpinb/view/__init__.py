"""How results are shown in the notebook: text and HTML of a cell's result, the live
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

#: the package's names, each imported from its module on first use: a watchdog or ``mpinb list``
#: that needs only the errors' words (error_words) does not load the renderers and NumPy
_WHERE = {"CellView": "cell_view", "LiveOutput": "live", "live_words": "words", "mimebundle": "cell_view",
          "render_html": "html", "render_text": "text"}

__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module 'mpinb.view' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
