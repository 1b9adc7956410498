"""Which ranks are freed where they wait (mpinb.cells.freeing), and the words: after a
deadlock, only when every rank still running waits in a receive the wake takes back or in a
checked collective's exchange that the idle ranks can join, and every engine can be woken;
the ranks freed only if all came back. The real thing on a 3-rank cluster:
tests/test_deadlocks_on_cluster.py and tests/test_faults.py; the receives themselves: tests/test_mpi_watch.py."""

from mpinb.cells import freeing
from mpinb.view.words import freed_words


class Task:
    def __init__(self, ready):
        self.is_ready = ready

    def ready(self):
        return self.is_ready

    def get(self, timeout=None):
        return True


class Joined(Task):
    """A join's AsyncResult over several engines: a list, one answer each."""

    def __init__(self, answers):
        super().__init__(True)
        self.answers = answers

    def get(self, timeout=None):
        return self.answers


class Cluster:
    """Records what it was asked; a woken or joined rank comes back if ``frees``."""

    def __init__(self, inflight, wakeable=True, frees=True, busy=()):
        self.records, self.wakeable, self.frees, self.busy = inflight, wakeable, frees, set(busy)
        self.refuses = False
        self.woken, self.joined, self.run, self.asked = [], [], None, []

    def at_rest(self, ranks):
        self.asked.append(sorted(ranks))
        return not self.busy & set(ranks)

    def inflight(self, r):
        return self.records.get(r)

    def can_wake(self):
        return self.wakeable

    def wake(self, ranks):
        self.woken.append(sorted(ranks))
        self._free(ranks)
        return True

    def join(self, ranks, comm):
        self.joined.append((sorted(ranks), comm))
        self._free([r for r, rec in self.records.items() if rec.get("joinable") == comm])
        return Joined([not self.refuses] * len(ranks))  # one answer per joiner, as a DirectView gives

    def _free(self, ranks):
        if self.frees:
            for r in ranks:
                self.run.pending[r].is_ready = True


class Run:
    poll = 0.01

    def __init__(self, cluster, ready):
        self.cluster, cluster.run = cluster, self
        self.pending = {r: Task(ok) for r, ok in ready.items()}

    def all_ready(self):
        return all(t.ready() for t in self.pending.values())

    def wait_a_little(self):
        pass


RECV = {"op": "recv", "withdrawable": True}
BARRIER = {"op": "barrier", "withdrawable": False, "joinable": "default", "comm": [0, 1, 2]}


def test_ranks_all_in_withdrawable_receives_are_woken_and_freed():
    cluster = Cluster({0: RECV, 1: RECV})
    assert freeing.free_in_place(Run(cluster, {0: False, 1: False, 2: True})) == [0, 1]
    assert cluster.woken == [[0, 1]] and cluster.joined == []  # the rank that left is not signalled


def test_a_receive_first_then_the_idle_ranks_join_the_exchange():
    """Rank 0 in a receive, ranks 1 and 2 in a barrier's exchange: rank 0 is woken, then joins."""
    cluster = Cluster({0: RECV, 1: BARRIER, 2: BARRIER})
    assert freeing.free_in_place(Run(cluster, {0: False, 1: False, 2: False})) == [0, 1, 2]
    assert cluster.woken == [[0]] and cluster.joined == [([0], "default")]


def test_a_rank_past_the_exchange_means_no_wake_at_all():
    cluster = Cluster({0: RECV, 1: {"op": "allreduce", "withdrawable": False, "joinable": None}})
    assert freeing.free_in_place(Run(cluster, {0: False, 1: False})) == [] and cluster.woken == []


def test_engines_that_cannot_be_woken_are_not_signalled():
    """An engine whose setup named no signal would be ended by it (its default action)."""
    cluster = Cluster({0: RECV}, wakeable=False)
    assert freeing.free_in_place(Run(cluster, {0: False})) == [] and cluster.woken == []


def test_a_rank_that_does_not_come_back_means_a_restart(monkeypatch):
    """A sendrecv whose receive was withdrawn still waits for its large send: not freed."""
    monkeypatch.setattr(freeing, "WITHDRAW_WAIT", 0.05)
    cluster = Cluster({0: RECV, 1: {"op": "sendrecv", "withdrawable": True}}, frees=False)
    assert freeing.free_in_place(Run(cluster, {0: False, 1: False})) == []
    assert cluster.woken == [[0, 1]]


def test_the_words_say_who_was_freed_and_what_was_dropped():
    assert freed_words([0, 1, 2], {}) == "ranks 0-2 were freed where they waited; the engines keep their variables"
    said = freed_words([1], {1: ([{"source": 0, "tag": 1, "bytes": 12}, {"source": None, "tag": 3, "bytes": 8}], 2)})
    assert said.startswith("rank 1 was freed where it waited")
    assert said.endswith("messages left unreceived were dropped, so that a later receive cannot take them: rank 1 "
                         "dropped a message of 12 B from rank 0 (tag 1) and 3 more")


class StoppedRun(Run):
    """A run in the stop button's grace period; its ranks' reports are ``settled`` or not yet."""

    def __init__(self, cluster, ready, settled=True):
        super().__init__(cluster, ready)
        self.woken, self.is_settled = [], settled

    def settled(self, r, rec, now):
        return self.is_settled


def test_the_stop_button_wakes_receives_first_then_joins_once_only_exchanges_are_left():
    """Rank 0 stopped (idle), rank 1 waits in a receive, rank 2 in a barrier's exchange: nothing
    before WAKE_AFTER; then rank 1 is woken; then rank 2 is joined, once."""
    cluster = Cluster({1: RECV, 2: dict(BARRIER, comm=[0, 2])})
    run, steps = StoppedRun(cluster, {0: True, 1: False, 2: False}), set()
    freeing.after_stop(run, freeing.WAKE_AFTER / 2, steps)
    assert cluster.woken == [] and run.woken == []
    freeing.after_stop(run, freeing.WAKE_AFTER * 2, steps)
    assert cluster.woken == [[1]] and run.woken == [1] and cluster.joined == []
    freeing.after_stop(run, freeing.WAKE_AFTER * 3, steps)
    assert cluster.joined == [([0], "default")] and run.woken == [1, 2]
    freeing.after_stop(run, freeing.WAKE_AFTER * 4, steps)
    assert len(cluster.joined) == 1


def test_the_stop_button_joins_only_ranks_that_stay_in_their_exchange():
    """A report not yet settled (the rank may only pass through the exchange): no join yet; a
    rank still running something else: no join at all."""
    cluster = Cluster({1: BARRIER, 2: BARRIER})
    run, steps = StoppedRun(cluster, {0: True, 1: False, 2: False}, settled=False), set()
    for elapsed in (1.0, 2.0):
        freeing.after_stop(run, elapsed, steps)
    assert cluster.joined == [] and run.woken == []
    run.is_settled = True
    freeing.after_stop(run, 3.0, steps)
    assert cluster.joined == [([0], "default")] and run.woken == [1, 2]
    busy = Cluster({1: BARRIER})
    run, steps = StoppedRun(busy, {0: True, 1: False, 2: False}), set()
    for elapsed in (1.0, 2.0):
        freeing.after_stop(run, elapsed, steps)
    assert busy.joined == [] and run.woken == []  # rank 2 runs outside any exchange


def test_no_rank_joins_unless_every_joiner_is_at_rest():
    """Two communicators' exchanges; one joiner has a call of its own queued: every joiner is
    asked first, and none joins (one alone would wait in the exchange forever)."""
    cluster = Cluster({1: dict(BARRIER, comm=[0, 1]), 2: dict(BARRIER, joinable="world", comm=[0, 2, 3])},
                      busy=[3])
    assert freeing.free_in_place(Run(cluster, {0: True, 1: False, 2: False, 3: True})) == []
    assert cluster.asked == [[0, 3]] and cluster.joined == []
    cluster.busy = set()  # all at rest: both exchanges are joined
    assert freeing.free_in_place(Run(cluster, {0: True, 1: False, 2: False, 3: True})) == [1, 2]
    assert cluster.joined == [([0], "default"), ([0, 3], "world")]


def test_a_join_refused_on_the_engine_frees_no_one():
    """Each joiner answers for itself (a list): one False means the join freed no one, even if
    the waiting ranks then came back for another reason."""
    cluster = Cluster({1: BARRIER, 2: BARRIER})
    cluster.refuses = True
    assert freeing.free_in_place(Run(cluster, {0: True, 1: False, 2: False})) == []
    assert cluster.joined == [([0], "default")]


def test_the_stop_button_wakes_a_receive_its_queued_work_reaches_late():
    """Rank 1 reaches its receive only after the first wake: it is woken on a later poll, once."""
    cluster = Cluster({})
    run, steps = StoppedRun(cluster, {0: True, 1: False}), set()
    freeing.after_stop(run, freeing.WAKE_AFTER * 2, steps)
    assert cluster.woken == [] and run.woken == []
    cluster.frees = False
    cluster.records[1] = RECV
    freeing.after_stop(run, freeing.WAKE_AFTER * 3, steps)
    freeing.after_stop(run, freeing.WAKE_AFTER * 4, steps)
    assert cluster.woken == [[1]] and run.woken == [1]
