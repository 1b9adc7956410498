"""Which deadlocked ranks are freed where they wait (mpinb.client.freeing), and the words: only
when every rank still running waits in a receive the wake takes back and every engine can be
woken; the ranks freed only if all came back. The real thing on a 3-rank cluster:
tests/test_deadlocks.py; the receives themselves: tests/test_mpi_watch.py."""

from mpinb.client import freeing
from mpinb.view.words import freed_words


class Task:
    def __init__(self, ready):
        self.is_ready = ready

    def ready(self):
        return self.is_ready


class Cluster:
    def __init__(self, inflight, wakeable=True, frees=True):
        self.records, self.wakeable, self.frees, self.woken = inflight, wakeable, frees, []

    def inflight(self, r):
        return self.records.get(r)

    def can_wake(self):
        return self.wakeable

    def wake(self, ranks):
        self.woken.append(sorted(ranks))


class Run:
    def __init__(self, cluster, ready):
        self.cluster = cluster
        self.pending = {r: Task(ok) for r, ok in ready.items()}

    def all_ready(self):
        return all(t.ready() for t in self.pending.values())

    def wait_a_little(self):
        if self.cluster.woken and self.cluster.frees:
            for task in self.pending.values():
                task.is_ready = True


RECV = {"op": "recv", "withdrawable": True}


def test_ranks_all_in_withdrawable_receives_are_woken_and_freed():
    cluster = Cluster({0: RECV, 1: RECV})
    run = Run(cluster, {0: False, 1: False, 2: True})
    assert freeing.withdraw_receives(run) == [0, 1]
    assert cluster.woken == [[0, 1]]  # the rank that left the cell is not signalled


def test_one_rank_in_a_collective_means_no_wake_at_all():
    cluster = Cluster({0: RECV, 1: {"op": "barrier", "withdrawable": False}})
    run = Run(cluster, {0: False, 1: False})
    assert freeing.withdraw_receives(run) == [] and cluster.woken == []


def test_engines_that_cannot_be_woken_are_not_signalled():
    """An engine whose setup named no signal would be ended by it (its default action)."""
    cluster = Cluster({0: RECV}, wakeable=False)
    assert freeing.withdraw_receives(Run(cluster, {0: False})) == [] and cluster.woken == []


def test_a_rank_that_does_not_come_back_means_a_restart(monkeypatch):
    """A sendrecv whose receive was withdrawn still waits for its large send: not freed."""
    monkeypatch.setattr(freeing, "WITHDRAW_WAIT", 0.05)
    cluster = Cluster({0: RECV, 1: {"op": "sendrecv", "withdrawable": True}}, frees=False)
    assert freeing.withdraw_receives(Run(cluster, {0: False, 1: False})) == []
    assert cluster.woken == [[0, 1]]


def test_the_words_say_who_was_freed_and_what_was_dropped():
    assert freed_words([0, 1, 2], {}) == ("ranks 0-2 were freed where they waited (the receive withdrawn); "
                                          "the engines keep their variables")
    said = freed_words([1], {1: [{"source": 0, "tag": 1, "bytes": 12}, {"source": None, "tag": 3, "bytes": 8}]})
    assert said.startswith("rank 1 was freed where it waited")
    assert said.endswith("so that a later receive cannot take them: rank 1 dropped a message of 12 B from "
                         "rank 0 (tag 1) and 1 more")
