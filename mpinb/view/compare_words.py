"""--compare's findings in words (mpinb.analysis.compare returns them as facts): why a value
differs, one comparison in a line, and what was compared across ranks in the summary. Pure:
no IPython.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..analysis.compare import Comparison, tally
from .rank_words import label


def lines_words(n: int) -> str:
    """'1 line', '3 lines'."""
    return f"{n} line{'s' * (n != 1)}"


#: why two values (or what the runs printed) differ, by the comparison's cause
DETAILS = {
    "values": lambda c: f"{c.jitted} vs {c.eager}",
    "shape": lambda c: f"shape {c.jitted} vs {c.eager}",
    "dtype": lambda c: f"dtype {c.jitted} vs {c.eager}",
    "structure": lambda c: f"structure differs: {c.jitted} vs {c.eager}",
    "not_assigned": lambda c: "not assigned in the eager run",
    "line_count": lambda c: (f"the jitted run printed {lines_words(c.jitted)}, the eager run {c.eager} "
                             "(Python code inside a jitted function runs only when it is traced)"),
    "printed_text": lambda c: (f"the two runs printed different text ({lines_words(c.jitted)} each; timings, "
                               "or values computed differently)"),
}


def comparison_detail(c: Comparison) -> str:
    """Why the two runs differ, where it is not numbers: 'shape (3,) vs (4,)'; '' for numbers."""
    return DETAILS[c.cause](c) if c.cause else ""


def comparison_line(c: Comparison) -> str:
    """'y: jit == eager', 'y: jit ~ eager (max abs 1e-07)', 'y: jit != eager, max abs diff 1, ...'."""
    if c.status == "equal":
        return f"{c.name}: jit == eager"
    if c.status == "close":
        return f"{c.name}: jit ~ eager (max abs {c.max_abs:.3g})"
    detail = comparison_detail(c)
    if c.status == "missing":
        return f"{c.name}: {detail}"
    if c.printed:
        return f"{c.name}: printed differently: {detail}"
    if c.cause and not c.max_abs and c.first_index is None:
        return f"{c.name}: jit != eager: {detail}"
    where = f" first at {list(c.first_index)}" if c.first_index is not None else ""
    return (f"{c.name}: jit != eager, max abs diff {c.max_abs:.6g}, max rel diff "
            f"{c.max_rel:.6g}{where}{(' ' + detail) if detail else ''}")


def ranks_words(ranks) -> str:
    """'rank 2', 'ranks 0-3', 'ranks 0, 2, 5-7'."""
    return label(ranks, sep=", ")


def comparisons_summary(per_rank: Mapping[int, list[Comparison]]) -> str:
    """What was compared and where it differs, across ranks: 'jit != eager: b on ranks 0-3' or
    'jit == eager: b, t'; printed text that differs is said apart ('printed differently: stdout
    on rank 1'), never as a verdict on the values."""
    t = tally(per_rank)
    parts = []
    if t.differ:
        parts.append("jit != eager: " + "; ".join(f"{v} on {ranks_words(r)}" for v, r in t.differ.items()))
    elif t.same:
        within = " (within tolerance)" if t.close else ""
        parts.append(f"jit {'~' if t.close else '=='} eager: {', '.join(t.same)}{within}")
    if t.printed:
        parts.append("printed differently: " + "; ".join(f"{v} on {ranks_words(r)}" for v, r in t.printed.items()))
    return "; ".join(parts)
