"""Proving that ranks wait for each other forever, from what each one waits in.

Each rank blocked in an mpinb call, or in a blocking MPI call of its own (the MPI watch,
mpinb.engine.mpi4py_waits), tells the notebook whom it waits for (ext/waits.pxi: the op, its
source, destination, tags and root, the communicator's members as world ranks). A rank
that left the cell will call nothing more in it. From these facts alone this module decides
whether a set of ranks can never move on, the wait-for graph of MPI correctness checkers:

* a receive needs its source to send to it with a matching tag (any member, for ANY_SOURCE);
* a blocking send needs its destination to post a matching receive;
* a sendrecv whose receive may or may not be done (the MPI watch cannot tell) needs its source
  to send or its destination to receive: it is stuck only if neither will;
* a collective needs the members of its communicator in the same collective, same root, as far
  as every implementation needs them (:data:`ROOTED`, :data:`PREFIX`): all of them for a
  barrier, allreduce, allgather or alltoall; a non-root of a bcast or scatter needs its root,
  the root of a reduce or gather needs everyone, the other side may complete with any one; a
  scan needs the members before it.

A rank is *stuck* if one rank it needs (all it could need, for ANY_SOURCE) is stuck or left the
cell and is not doing what it needs. A rank that may have nonblocking requests in flight
(``pending``) may be doing anything for anyone: it is never what keeps another rank stuck. The
deadlocked ranks are the largest set in which every rank is stuck (a greatest fixed point: start
from every blocked rank, drop those that a rank outside the set may still free, until none
drops). A rank computing, sleeping or in a call mpinb cannot see may still free anyone: it is
never part of a proof, and neither is a rank waiting on a communicator whose members are
unknown. Pure: the caller says which ranks were blocked long enough and which left
(mpinb.cells.cell_run).

    >>> ring = {r: {"op": "recv", "source": (r + 1) % 3, "recvtag": 0, "comm": [0, 1, 2]} for r in range(3)}
    >>> prove(ring, left=set()).cycle()
    [0, 1, 2]

mpinb.view.deadlock_words says a proven deadlock in words.
"""

from __future__ import annotations

import dataclasses

from ..mpi_ops import POINT_TO_POINT  # the op table's own list: send, recv, sendrecv

#: collectives with a root: (what a non-root needs, what the root needs); "root": the root
#: alone, "any": any one other member (a tree may route through any), "all": every member
ROOTED = {
    "bcast": ("root", "any"), "scatter": ("root", "any"), "scatterv": ("root", "any"),
    "reduce": ("any", "all"), "gather": ("any", "all"), "gatherv": ("any", "all"),
}
#: collectives in which a member needs only the members before it (in the communicator's order)
PREFIX = ("scan", "exscan")


def receiving(rec: dict) -> bool:
    """Whether the call may wait to receive (a recv, or a sendrecv whose receive is not known
    to be done)."""
    return rec["op"] == "recv" or (rec["op"] == "sendrecv" and not rec.get("received"))


def unknown_half(rec: dict) -> bool:
    """A sendrecv of which it is not known whether it still waits to receive or to send."""
    return rec["op"] == "sendrecv" and rec.get("received") is None


def _sending(rec: dict) -> bool:
    """Whether the call has a send in progress (a send; a sendrecv posts its send first)."""
    return rec["op"] in ("send", "sendrecv")


def _same_comm(a: dict, b: dict) -> bool:
    return a.get("comm") is not None and a.get("comm") == b.get("comm")


def _tag_matches(wanted, sent) -> bool:
    return wanted is None or wanted == sent


def needs(rank: int, rec: dict) -> tuple[str, list[int]]:
    """('all', ranks) when the call needs every one of ``ranks`` to do its part, ('any', ranks)
    when any one of them is enough; ('none', []) when mpinb cannot tell whom it waits for."""
    comm = rec.get("comm")
    if comm is None:
        return "none", []
    others = [m for m in comm if m != rank]
    if rec["op"] not in POINT_TO_POINT:
        return _collective_needs(rank, rec, comm, others)
    if unknown_half(rec):
        if rec.get("source") == "any":
            return "none", []
        peers = sorted({p for p in (rec.get("source"), rec.get("dest")) if p is not None and p != rank})
        return ("any", peers) if peers else ("none", [])
    peer = rec.get("source") if receiving(rec) else rec.get("dest")
    if peer == "any":
        return "any", others
    if peer is None or peer == rank:
        return "none", []
    return "all", [peer]


def _collective_needs(rank: int, rec: dict, comm: list, others: list[int]) -> tuple[str, list[int]]:
    op, root = rec["op"], rec.get("root")
    if op in ROOTED:
        need = ROOTED[op][1] if root == rank else ROOTED[op][0]
        if need == "root":
            return ("all", [root]) if root is not None and root != rank else ("none", [])
        return need, others
    if op in PREFIX:
        before = comm[:comm.index(rank)] if rank in comm else []
        return ("all", before) if before else ("none", [])
    return "all", others


def does_its_part(peer_rec: dict | None, rank: int, rec: dict, peer: int | None = None) -> bool:
    """Whether what ``peer_rec`` (a blocked rank's call; None: it left the cell) is doing is what
    ``rank``'s call ``rec`` waits for from ``peer``: the matching send, the matching receive,
    the same collective. A peer with nonblocking requests in flight may be doing it."""
    if peer_rec is None or not _same_comm(rec, peer_rec):
        return False
    if peer_rec.get("pending"):
        return True
    if rec["op"] not in POINT_TO_POINT:
        return peer_rec["op"] == rec["op"] and peer_rec.get("root") == rec.get("root")
    sends_to_me = (_sending(peer_rec) and peer_rec.get("dest") == rank
                   and _tag_matches(rec.get("recvtag"), peer_rec.get("sendtag")))
    receives_mine = (receiving(peer_rec) and peer_rec.get("source") in (rank, "any")
                     and _tag_matches(peer_rec.get("recvtag"), rec.get("sendtag")))
    if unknown_half(rec):
        return ((peer == rec.get("source") and sends_to_me)
                or (peer == rec.get("dest") and receives_mine))
    return sends_to_me if receiving(rec) else receives_mine


@dataclasses.dataclass
class Deadlock:
    """Ranks that wait forever: each one's call, the rank it waits for in vain, and the ranks
    that left the cell among those."""

    waits: dict[int, dict]          # rank -> its call (an inflight record)
    blocker: dict[int, int]         # rank -> a rank it waits for that will never do its part
    left: list[int]                 # ranks waited for that left the cell
    lines: dict[int, int | None] = dataclasses.field(default_factory=dict)  # rank -> the cell's line

    @property
    def ranks(self) -> list[int]:
        return sorted(self.waits)

    def cycle(self) -> list[int]:
        """A cycle of ranks each waiting for the next, from the lowest rank; [] if the waits end
        at ranks that left the cell instead."""
        path, r = [], min(self.waits)
        while r in self.waits and r not in path:
            path.append(r)
            r = self.blocker[r]
        return path[path.index(r):] if r in path else []


def prove(blocked: dict[int, dict], left: set[int], lines: dict[int, int | None] | None = None) -> Deadlock | None:
    """The ranks among ``blocked`` (rank -> the call it has been blocked in long enough) that can
    never move on, given that the ranks in ``left`` left the cell; None when none is proven."""
    stuck = dict(blocked)

    def blocker(r: int) -> int | None:
        kind, peers = needs(r, blocked[r])
        gone = [m for m in peers if (m in stuck or m in left) and not does_its_part(stuck.get(m), r, blocked[r], m)]
        if kind == "all":
            return gone[0] if gone else None
        if kind == "any" and peers and len(gone) == len(peers):
            return gone[0]
        return None

    changed = True
    while changed:
        changed = False
        for r in list(stuck):
            if blocker(r) is None:
                del stuck[r]
                changed = True
    if not stuck:
        return None
    blockers = {r: blocker(r) for r in stuck}
    gone = {m for r in stuck if blockers[r] in left for m in needs(r, stuck[r])[1] if m in left}
    return Deadlock(stuck, blockers, sorted(gone), dict(lines or {}))
