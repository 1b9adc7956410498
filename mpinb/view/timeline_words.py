"""The collectives' timeline in one line (mpinb.analysis.timeline returns its facts): how many
calls each rank made and the longest wait. Pure: no IPython.
"""

from __future__ import annotations

from ..analysis.timeline import Wait, call_counts, dropped, waits


def wait_words(w: Wait) -> str:
    """'alltoall #25: rank 0 entered 0.12 s after rank 3'."""
    return f"{w.op} #{w.k}: rank {w.last} entered {w.seconds:.3g} s after rank {w.first}"


def timeline_summary(result) -> str:
    """'timeline: 48 mpinb calls per rank; longest wait: alltoall #25: rank 0 entered ...'; ''
    when no rank made a call."""
    counts = call_counts(result)
    if counts is None:
        return ""
    low, high = counts
    count = f"{low}" if low == high else f"{low}-{high}"
    text = f"timeline: {count} mpinb call{'s' if high != 1 else ''} per rank"
    longest = waits(result)
    if longest:
        text += f"; longest wait: {wait_words(longest[0])}"
    lost = dropped(result)
    if lost:
        text += f" ({lost} earlier calls not kept)"
    return text
