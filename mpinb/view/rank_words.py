"""Ranks named in words: 'rank 3', 'ranks 0-3' (mpinb.analysis.grouping writes their ranges).
Pure: no IPython.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..analysis.grouping import rank_ranges


def label(ranks: Iterable[int], sep: str = ",") -> str:
    """'rank 3' or 'ranks 0-3' (or 'ranks 0, 2' with ``sep=", "``)."""
    ranks = sorted(set(ranks))
    return f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {rank_ranges(ranks, sep)}"
