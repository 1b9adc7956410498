"""The wait-for graph of mpinb.analysis.deadlock: what is proven a deadlock, and what never is
(a rank that may still answer), with the sentence that says it."""

import pytest

from mpinb.analysis.deadlock import prove
from mpinb.view.deadlock_words import deadlock_words

W3 = [0, 1, 2]


def recv(source, tag=0, comm=W3):
    return {"op": "recv", "source": source, "recvtag": tag, "comm": comm}


def send(dest, tag=0, comm=W3):
    return {"op": "send", "dest": dest, "sendtag": tag, "comm": comm}


def sendrecv(dest, source, received=False, comm=W3):
    return {"op": "sendrecv", "dest": dest, "source": source, "sendtag": 0, "recvtag": 0, "comm": comm,
            "received": received}


def coll(op, root=None, comm=W3):
    return {"op": op, "root": root, "comm": comm}


def test_a_ring_of_receives_from_the_wrong_neighbour_is_a_cycle():
    ring = {r: sendrecv((r + 1) % 3, (r + 1) % 3) for r in W3}
    found = prove(ring, left=set(), lines={0: 5, 1: 5, 2: 5})
    assert found.ranks == W3 and found.cycle() == [0, 1, 2]
    assert deadlock_words(found) == ("deadlock: rank 0 waits to receive from rank 1 (line 5), rank 1 to receive from "
                             "rank 2 (line 5), rank 2 to receive from rank 0 (line 5)")


def test_the_right_ring_and_a_matching_pair_are_only_on_their_way():
    assert prove({r: sendrecv((r + 1) % 3, (r - 1) % 3) for r in W3}, left=set()) is None
    assert prove({0: send(1, tag=4), 1: recv(0, tag=4)}, left=set()) is None
    assert prove({0: send(1, tag=4), 1: recv("any", tag=None)}, left=set()) is None
    assert prove({r: coll("bcast", root=1) for r in W3}, left=set()) is None


def test_two_blocking_sends_and_a_tag_no_send_uses():
    both = prove({0: send(1), 1: send(0)}, left=set())
    assert deadlock_words(both) == ("deadlock: rank 0 waits for rank 1 to receive its send, "
                            "rank 1 for rank 0 to receive its send")
    tags = prove({0: send(1, tag=1), 1: recv(0, tag=2)}, left=set())
    assert "with tag 1" in deadlock_words(tags) and "with tag 2" in deadlock_words(tags)


def test_a_collective_some_ranks_left_the_cell_without_calling():
    found = prove({0: coll("allreduce")}, left={1, 2}, lines={0: 2})
    assert deadlock_words(found) == ("deadlock: rank 0 waits in allreduce (line 2); ranks 1-2 left the cell "
                                     "without calling it")
    gone = prove({0: recv(1)}, left={1})
    assert deadlock_words(gone) == ("deadlock: rank 0 waits to receive with tag 0 from rank 1; "
                            "rank 1 left the cell without sending it")


def test_collectives_that_differ_in_op_or_root():
    ops = prove({0: coll("allreduce", comm=[0, 1]), 1: coll("bcast", root=0, comm=[0, 1])}, left=set())
    said = deadlock_words(ops)
    assert "rank 0 waits in allreduce" in said and "rank 1 waits in bcast (root 0)" in said
    roots = prove({0: coll("bcast", root=0, comm=[0, 1]), 1: coll("bcast", root=1, comm=[0, 1])}, left=set())
    assert roots.ranks == [0, 1]


@pytest.mark.parametrize("blocked", [
    {0: coll("allreduce"), 1: coll("allreduce")},   # rank 2 computes: it may still call it
    {0: recv(1), 1: recv(2)},                      # rank 2 may still send to 1, which then sends to 0
    {0: recv("any"), 1: recv(0)},                  # rank 2 may send to 0
    {0: recv(1, comm=None), 1: recv(0, comm=None)},  # members unknown: nothing is proven
])
def test_a_rank_that_may_still_answer_is_never_part_of_a_proof(blocked):
    assert prove(blocked, left=set()) is None


def test_any_source_waits_for_all_of_its_communicator():
    assert prove({0: recv("any"), 1: recv(2), 2: recv(1)}, left=set()).ranks == W3
    assert prove({0: recv("any")}, left={1, 2}).left == [1, 2]


def test_a_sendrecv_whose_receive_is_done_waits_for_its_send_only():
    # rank 0 received; its send to 1 waits for 1's receive, which waits for 2, which left
    found = prove({0: sendrecv(1, 2, received=True), 1: recv(2)}, left={2})
    assert found.ranks == [0, 1] and found.blocker == {0: 1, 1: 2}
    assert prove({0: sendrecv(1, 2, received=True), 1: recv(0)}, left={2}) is None  # 1 takes 0's send


def test_a_sendrecv_that_may_wait_on_either_half_is_stuck_only_if_neither_can_come():
    """The MPI watch cannot tell whether a sendrecv still waits to receive or to send (received
    None): it is stuck only if its source will not send and its destination will not receive."""
    def unknown(dest, source):
        return sendrecv(dest, source, received=None)
    # a ring shift in which rank 2 is late (computing): rank 1 finished, rank 0 waits for rank 2
    assert prove({0: unknown(1, 2)}, left={1}) is None
    # the same ring, then an allreduce that rank 1 already entered
    assert prove({0: unknown(1, 2), 1: coll("allreduce")}, left=set()) is None
    # a matched pair still moving a large message
    assert prove({0: unknown(1, 1), 1: unknown(0, 0)}, left=set()) is None
    # the wrong ring: each sends to and receives from the next, which sends on instead
    wrong = prove({r: unknown((r + 1) % 3, (r + 1) % 3) for r in W3}, left=set(), lines={0: 1, 1: 1, 2: 1})
    assert deadlock_words(wrong) == ("deadlock: rank 0 waits to receive from rank 1 (line 1), rank 1 to receive from "
                             "rank 2 (line 1), rank 2 to receive from rank 0 (line 1)")


def test_rooted_collectives_need_only_what_every_implementation_needs():
    # a non-root of a bcast needs its root only: rank 2 waiting for rank 1 does not block it
    assert prove({1: coll("bcast", root=0), 2: recv(1)}, left=set()) is None
    assert deadlock_words(prove({1: coll("bcast", root=0)}, left={0})) == (
        "deadlock: rank 1 waits in bcast (root 0); rank 0 left the cell without calling it")
    # the root of a bcast may complete with any one member; the root of a reduce needs them all
    assert prove({0: coll("bcast", root=0)}, left={1}) is None
    assert prove({0: coll("bcast", root=0)}, left={1, 2}).ranks == [0]
    assert prove({0: coll("reduce", root=0)}, left={1}).ranks == [0]
    assert prove({1: coll("reduce", root=0)}, left={2}) is None
    # a scan needs the members before it only
    assert prove({0: coll("scan")}, left={1, 2}) is None
    assert prove({1: coll("scan")}, left={0}).ranks == [1]


def test_a_rank_with_nonblocking_requests_in_flight_never_keeps_another_stuck():
    pending = {**recv(0), "pending": True}
    assert prove({0: recv(1), 1: pending}, left=set()) is None
