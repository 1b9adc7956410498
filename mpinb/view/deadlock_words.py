"""A proven deadlock in words (mpinb.analysis.deadlock proves it): the ranks' cycle of waits,
or who waits for ranks that left the cell. Pure: no IPython.
"""

from __future__ import annotations

from ..analysis.deadlock import Deadlock, receiving, unknown_half
from ..mpi_ops import POINT_TO_POINT
from .rank_words import label


def line_words(d: Deadlock, r: int) -> str:
    """' (line 5)', or '' where rank ``r``'s line is not known."""
    line = d.lines.get(r)
    return f" (line {line})" if line else ""


def tags_named(d: Deadlock) -> bool:
    """Tags are named only where they tell something: when the point-to-point calls of the
    deadlock use more than one, or when the message waited for might have been sent with
    another before its sender left the cell."""
    tags = {rec.get("recvtag") if receiving(rec) else rec.get("sendtag")
            for rec in d.waits.values() if rec["op"] in POINT_TO_POINT}
    return len(tags) > 1 or bool(d.left)


def tag_words(tag, named: bool) -> str:
    """' with tag 3', ' with any tag', or '' where tags are not named."""
    if not named:
        return ""
    return " with any tag" if tag is None else f" with tag {tag}"


def wait_words(d: Deadlock, r: int, short: bool = False) -> str:
    """'rank 0 waits to receive from rank 1 (line 5)', 'rank 2 waits in allreduce (line 7)';
    ``short``: without 'waits' ('rank 1 to receive from rank 2')."""
    rec, peer = d.waits[r], d.blocker[r]
    named = tags_named(d)
    subject = f"rank {r}" if short else f"rank {r} waits"
    if rec["op"] not in POINT_TO_POINT:
        root = f" (root {rec['root']})" if rec.get("root") is not None else ""
        return f"{subject} in {rec['op']}{root}{line_words(d, r)}"
    if receiving(rec) and (not unknown_half(rec) or rec.get("source") == peer):
        source = "any rank" if rec.get("source") == "any" else f"rank {peer}"
        return f"{subject} to receive{tag_words(rec.get('recvtag'), named)} from {source}{line_words(d, r)}"
    return f"{subject} for rank {peer} to receive its send{tag_words(rec.get('sendtag'), named)}{line_words(d, r)}"


def missing_words(d: Deadlock, waiting: list[int]) -> str:
    """What the ranks that left the cell did not do: 'sending it', 'receiving it', 'calling it'."""
    ops = {d.waits[r]["op"] for r in waiting}
    if ops <= set(POINT_TO_POINT):
        return "sending it" if all(receiving(d.waits[r]) for r in waiting) else "receiving it"
    return "calling it" if len(ops) == 1 else "calling them"


def deadlock_words(d: Deadlock) -> str:
    """The deadlock in one sentence: the cycle, or who waits for ranks that left the cell."""
    cycle = d.cycle()
    if cycle:
        same_op = len({d.waits[r]["op"] for r in cycle}) == 1
        return "deadlock: " + ", ".join(wait_words(d, r, short=i > 0 and same_op) for i, r in enumerate(cycle))
    waiting = [r for r in d.ranks if d.blocker[r] in d.left]
    what = "; ".join(wait_words(d, r) for r in waiting)
    return f"deadlock: {what}; {label(d.left, sep=', ')} left the cell without {missing_words(d, waiting)}"
