"""How a cluster that ended outside its notebook is said (the facts of
mpinb.cluster.outside_end): what happened and what to do, in one sentence, the same in the next
cell's error, in the note of a cell it ended under, and in ``%mpijax status``. Pure: no IPython.
"""

from __future__ import annotations

from .rank_words import label
from .words import death_words, exit_words

#: what happened, by cause
HAPPENED = {
    "stopped_outside": "the cluster was stopped outside this notebook (ipyparallel's stop: the STOP button of the "
                       "IPython Parallel panel, or ipcluster stop)",
    "controller_ended": "the cluster's controller ended outside this notebook",
    "job_ended": "the cluster's MPI job ended outside this notebook",
}


def deaths_words(deaths: dict) -> str:
    """' (rank 0 killed by signal 9 (SIGKILL); rank 1 ...)' from the launcher's exit records, or ''."""
    if not deaths:
        return ""
    by_death: dict[str, list[int]] = {}
    for rank, death in sorted(deaths.items(), key=lambda item: int(item[0])):
        by_death.setdefault(death_words(death), []).append(int(rank))
    return " (" + "; ".join(f"{label(ranks)} {words}" for words, ranks in by_death.items()) + ")"


def what_to_do(replayed: int) -> str:
    """The way back: a restart, which replays the --setup cells."""
    if not replayed:
        return "%mpijax restart starts it again"
    return f"%mpijax restart starts it again and replays {replayed} --setup cell{'s' if replayed != 1 else ''}"


def ended_words(ended: dict, replayed: int = 0) -> str:
    """The one sentence: 'the cluster was stopped outside this notebook (...); %mpijax restart
    starts it again'."""
    happened = HAPPENED.get(ended.get("cause"), "the cluster ended outside this notebook")
    how = f" ({exit_words(ended['returncode'])})" if ended.get("returncode") is not None else ""
    return f"{happened}{how}{deaths_words(ended.get('deaths') or {})}; {what_to_do(replayed)}"
