"""Library logs in a rank's output said briefly (mpinb.analysis.grouping finds them): each run of
log lines in one line, who logged it and how many more lines there are. Pure: no IPython.
"""

from __future__ import annotations

from ..analysis.grouping import log_runs


def log_run_words(run: list[tuple[str, str]], handle: str = "") -> str:
    """'log (Gloo): Rank 0 is connected to 1 peer ranks (+3 more log lines; all in r.stderr[rank])'."""
    sources = ", ".join(dict.fromkeys(src for src, _ in run))
    where = f"; all in {handle}" if handle else ""
    more = f" (+{len(run) - 1} more log lines{where})" if len(run) > 1 else ""
    return f"log ({sources}): {run[0][1]}{more}"


def fold_logs(text: str, handle: str = "") -> str:
    """``text`` with each run of log lines said in one line (all of them are in ``handle``)."""
    out = [item if isinstance(item, str) else log_run_words(item, handle) for item in log_runs(text)]
    return "\n".join(out) + ("\n" if text.endswith("\n") and out else "")
