"""Ranks with the same thing to say, said once: the ``dshbak -c`` of the per-rank view.

    >>> rank_ranges([0, 1, 2, 5, 7, 8])
    '0-2,5,7-8'
    >>> group_by({0: "a", 1: "b", 2: "a"})
    [([0, 2], 'a'), ([1], 'b')]

Pure: no IPython, no widgets.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping


def rank_ranges(ranks: Iterable[int], sep: str = ",") -> str:
    """Sorted ranks as ranges: [0, 1, 2, 5] -> '0-2,5'."""
    ranks = sorted(set(ranks))
    parts, start = [], None
    for i, r in enumerate(ranks):
        if start is None:
            start = r
        if i + 1 == len(ranks) or ranks[i + 1] != r + 1:
            parts.append(f"{start}" if start == r else f"{start}-{r}")
            start = None
    return sep.join(parts)


def label(ranks: Iterable[int], sep: str = ",") -> str:
    """'rank 3' or 'ranks 0-3' (or 'ranks 0, 2' with ``sep=", "``)."""
    ranks = sorted(set(ranks))
    return f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {rank_ranges(ranks, sep)}"


def group_by(values: Mapping[int, Hashable]) -> list[tuple[list[int], Hashable]]:
    """Ranks grouped by equal value, groups in the order of their first rank."""
    groups: dict[Hashable, list[int]] = {}
    for rank in sorted(values):
        groups.setdefault(values[rank], []).append(rank)
    return sorted(((ranks, value) for value, ranks in groups.items()), key=lambda item: item[0][0])


def merge_sections(per_rank: Mapping[int, list[tuple]]) -> list[tuple[list[int], list[str]]]:
    """{rank: [(section name, lines[, key]), ...]} -> [(ranks, lines)]: each section grouped by
    equal content (its ``key`` where given: what the lines show may be equal when what they stand
    for, a picture, is not), then the sections of one rank set joined in their order. The rank
    sets are ordered by size (all ranks first), then by first rank; empty sections are left out."""
    order: list[str] = []
    for sections in per_rank.values():
        for name, *_ in sections:
            if name not in order:
                order.append(name)
    by_set: dict[tuple[int, ...], list[str]] = {}
    for name in order:
        content = {}
        for r, sections in per_rank.items():
            found = next((section for section in sections if section[0] == name), (name, ()))
            lines = found[1]
            content[r] = (found[2] if len(found) > 2 else lines, lines)
        for ranks, (_, lines) in group_by(content):
            if lines:
                by_set.setdefault(tuple(ranks), []).extend(lines)
    return sorted(((list(ranks), lines) for ranks, lines in by_set.items()), key=lambda g: (-len(g[0]), g[0][0]))
