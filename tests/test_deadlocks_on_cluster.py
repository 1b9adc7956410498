"""Deadlocks end the cell by themselves on a real 3-rank cluster, with no timeout set: the view
says the cycle (or who left the cell without calling), and the next cell runs; mpinb's
collectives and mpi4py's own calls alike. Ranks that all wait in receives are freed where they
wait (the receives withdrawn: the engines keep their variables, and messages that came too late
are dropped); otherwise the engines are restarted and the setup cell replayed. A rank that
computes, or waits in a call mpinb cannot see, is never called deadlocked. The proof itself:
tests/test_deadlock_proof.py."""

import pytest
from support import three_ranks
from support.three_ranks import NO_HANG, usable

from mpinb import view
from mpinb.errors import ClusterBusy
from mpinb.view.note_words import notes_of


@pytest.fixture(scope="module")
def cluster():
    yield from three_ranks.started()


@pytest.fixture(autouse=True)
def _healthy(cluster):
    """Each test starts from a usable cluster, whatever the test before it left behind."""
    three_ranks.heal(cluster)


def test_a_ring_receiving_from_the_wrong_neighbour_ends_with_its_cycle(cluster):
    cluster.run_cell("kept = 42")
    res = cluster.run_cell("x = jnp.full(4, rank)\n"
                           "y = mpi.sendrecv(x, x, source=(rank + 1) % size, dest=(rank + 1) % size)",
                           timeout=NO_HANG)
    assert not res.timed_out and res.deadlock is not None, res.text()
    said = ("deadlock: rank 0 waits to receive from rank 1 (line 2), rank 1 to receive from rank 2 (line 2), "
            "rank 2 to receive from rank 0 (line 2)")
    assert notes_of(res)[0] == said, notes_of(res)
    assert "deadlock (ranks 0-2)" in res.summary()
    assert said in res.text() and said in view.render_html(res)
    assert not res.restarted, notes_of(res)
    assert all(res.states[r] == "failed" and "withdrawn" in res.records[r].error.evalue for r in range(3)), res.text()
    # each rank's message went to the neighbour that did not wait for it: dropped there, said
    freed = notes_of(res)[-1]
    assert freed.startswith("ranks 0-2 were freed where they waited; the engines keep "
                            "their variables"), notes_of(res)
    assert "rank 1 dropped a message of 16 B from rank 0 (tag 0)" in freed and freed in res.text()
    usable(cluster)
    assert cluster.run_cell("kept").records[0].result["repr"] == "42"  # the engines kept their variables
    # the fixed ring gets its neighbours' values, not the old cell's dropped messages
    res = cluster.run_cell("y = mpi.sendrecv(x + 10, x, source=(rank - 1) % size, dest=(rank + 1) % size)\n"
                           "right = bool((y == (rank - 1) % size + 10).all())", show=["right"], timeout=NO_HANG)
    assert res.ok, res.text()
    assert [res.records[r].show["right"]["repr"] for r in range(3)] == ["True"] * 3, res.text()


def test_a_cell_freed_in_its_eager_pass_does_not_wait_again_in_its_jitted_pass(cluster):
    """--compare runs the cell eagerly, then jitted: freed in the first, it is not run again (its
    receive would wait again, and the freeing would end in a restart)."""
    res = cluster.run_cell("got = mpi.recv(jnp.zeros(2), source=(rank + 1) % size, tag=4)", compare=True,
                           timeout=NO_HANG)
    assert res.deadlock is not None and not res.restarted, notes_of(res)
    assert all("withdrawn" in res.records[r].error.evalue for r in range(3)), res.text()
    usable(cluster)


def test_a_ring_of_large_sendrecvs_is_freed_too(cluster):
    """Messages too large to be sent eagerly: once a rank's receive is taken back, it still owns
    a send that its neighbour, also freed, receives only by draining: then every send completes,
    and what was drained is said."""
    res = cluster.run_cell("big = jnp.ones(1_000_000)\n"
                           "y = mpi.sendrecv(big, big, source=(rank + 1) % size, dest=(rank + 1) % size)",
                           timeout=NO_HANG)
    assert res.deadlock is not None and not res.restarted, notes_of(res)
    assert "rank 1 dropped a message of 4000000 B from rank 0 (tag 0)" in notes_of(res)[-1], notes_of(res)
    usable(cluster)


def test_a_collective_on_the_program_s_own_communicator_restarts_the_engines(cluster):
    """The others cannot join the exchange of a communicator the program made (they might not
    hold it): the engines restart, the setup cell is replayed, and what was not a setup cell is
    gone, as the view says."""
    cluster.run_cell("kept = 42\nmine = MPI.COMM_WORLD.Split(0, rank)")
    res = cluster.run_cell("if rank == 0:\n    mpi.allreduce(jnp.ones(2), MPI.SUM, comm=mine)", timeout=NO_HANG)
    assert res.deadlock is not None and res.restarted and "1 --setup cell replayed" in notes_of(res)[-1], notes_of(res)
    usable(cluster)
    assert not cluster.run_cell("kept").ok


def test_a_receive_and_a_barrier_are_both_freed(cluster):
    """Rank 0 waits to receive from rank 1, which waits in barrier with rank 2 for rank 0: rank 0
    takes its receive back, then joins the barrier's exchange to free the others."""
    cluster.run_cell("kept = 5")
    res = cluster.run_cell("if rank == 0:\n    mpi.recv(jnp.zeros(2), source=1, tag=3)\nelse:\n    mpi.barrier()",
                           timeout=NO_HANG)
    said = "deadlock: rank 0 waits to receive from rank 1 (line 2), rank 1 waits in barrier (line 4)"
    assert notes_of(res)[0] == said
    assert not res.restarted and notes_of(res)[-1].startswith("ranks 0-2 were freed where they waited"), notes_of(res)
    assert "withdrawn before it ran" in res.records[1].error.evalue, res.records[1].error
    usable(cluster)
    assert cluster.run_cell("kept").records[0].result["repr"] == "5"


def test_a_collective_the_others_left_without_calling(cluster):
    res = cluster.run_cell("if rank == 0:\n    mpi.allreduce(jnp.ones(3), MPI.SUM)", timeout=NO_HANG)
    assert not res.timed_out, res.text()
    said = "deadlock: rank 0 waits in allreduce (line 2); ranks 1-2 left the cell without calling it"
    assert notes_of(res)[0] == said
    assert res.states[1] == res.states[2] == "finished"
    # ranks 1 and 2 joined checked mode's exchange to free rank 0: no restart
    assert not res.restarted and notes_of(res)[-1].startswith("rank 0 was freed where it waited"), notes_of(res)
    assert "withdrawn before it ran" in res.records[0].error.evalue, res.records[0].error
    usable(cluster)


def test_two_large_blocking_sends_to_each_other(cluster):
    """Messages too large to be sent eagerly: each send waits for a receive that never comes."""
    code = ("big = jnp.ones(4_000_000)\n"
            "if rank < 2:\n    mpi.send(big, dest=1 - rank, tag=rank)\n"
            "    mpi.recv(big, source=1 - rank, tag=1 - rank)")
    res = cluster.run_cell(code, timeout=NO_HANG)
    assert notes_of(res)[0] == ("deadlock: rank 0 waits for rank 1 to receive its send with tag 0 (line 3), "
                            "rank 1 for rank 0 to receive its send with tag 1 (line 3)"), notes_of(res)
    assert res.restarted, notes_of(res)  # MPI cannot take back a send under way
    usable(cluster)


def test_keep_leaves_the_ranks_blocked_for_a_look(cluster):
    res = cluster.run_cell("if rank != 1:\n    mpi.recv(jnp.zeros(2), source=1, tag=7)", deadlock="keep",
                           timeout=NO_HANG)
    said = ("deadlock: rank 0 waits to receive with tag 7 from rank 1 (line 2); rank 2 waits to receive with "
            "tag 7 from rank 1 (line 2); rank 1 left the cell without sending it")
    assert notes_of(res)[0] == said, notes_of(res)
    assert not res.restarted
    with pytest.raises(ClusterBusy, match="ranks 0, 2 still run an earlier cell"):
        cluster.run_cell("1")
    cluster.restart()
    usable(cluster)


def test_a_rank_computing_beside_waiting_ranks_finishes_untouched(cluster):
    res = cluster.run_cell("import time\nif rank == 0:\n    time.sleep(5)\n"
                           "total = int(mpi.allreduce(jnp.int32(rank), MPI.SUM))", timeout=NO_HANG)
    assert res.ok and res.deadlock is None, res.text()
    usable(cluster)


class Places:
    """A ``stream`` that keeps every place ``run_cell`` told it for each rank."""

    def __init__(self):
        self.seen: dict[int, list] = {}

    def __call__(self, rank, kind, text):
        pass

    def state(self, rank, state, seconds, inflight, error_name, where):
        self.seen.setdefault(rank, []).append(where)


def test_a_rank_whose_collective_is_still_queued_has_not_left_the_cell(cluster):
    """JAX returns from a jitted call before XLA has run it: rank 1's cell code returns while its
    allreduce still waits behind a long computation, and rank 0 waits in that allreduce. Rank
    1 has not left the cell until the work it queued has run (mpinb.engine.settle): no deadlock
    is called, every rank gets the same sum, and rank 1's live state says what it finishes."""
    code = ("spin = jax.jit(lambda x, n: mpi.allreduce(jax.lax.fori_loop(0, n, lambda i, a: jnp.tanh(a @ a), x), "
            "MPI.SUM))\n"
            "y = spin(jnp.full((400, 400), 1e-3, jnp.float32), 3000 if rank == 1 else 1)\n"
            "if rank == 0:\n    print(float(y[0, 0]))\n")
    places = Places()
    res = cluster.run_cell(code, stream=places, label="In[31]", timeout=NO_HANG)
    assert res.ok and res.deadlock is None and not res.restarted, res.text()
    assert {"cell": "In[31]", "settling": True} in places.seen[1], places.seen[1]
    same = cluster.run_cell("first = float(y[0, 0])", show=["first"])
    assert len({same.records[r].show["first"]["repr"] for r in range(3)}) == 1, same.text()
    usable(cluster)


def test_a_wait_mpinb_cannot_see_is_never_called_a_deadlock(cluster):
    """Rank 0 waits for a nonblocking receive (MPI_Wait: the MPI watch does not say whom it waits
    for): a real hang, but no proof; the timeout reports it."""
    res = cluster.run_cell("if rank == 0:\n    MPI.COMM_WORLD.irecv(source=1, tag=3).wait()\nelse:\n    mpi.barrier()",
                           timeout=8)
    assert res.timed_out and res.deadlock is None, res.text()
    cluster.restart()
    usable(cluster)


def test_a_ring_of_mpi4py_receives_ends_with_its_cycle(cluster):
    """mpi4py's own calls are in the wait-for graph too (the MPI watch, ext/mpi_watch.c); an mpinb
    sendrecv before (its send is nonblocking inside the call) does not count as a request the
    program keeps, which would make the proof impossible."""
    assert cluster.run_cell("x = mpi.sendrecv(jnp.ones(2), jnp.ones(2), source=(rank - 1) % size, "
                            "dest=(rank + 1) % size)").ok
    res = cluster.run_cell("got = MPI.COMM_WORLD.recv(source=(rank + 1) % size)", timeout=NO_HANG)
    assert not res.timed_out and res.deadlock is not None, res.text()
    assert notes_of(res)[0] == ("deadlock: rank 0 waits to receive from rank 1 (line 1), rank 1 to receive from "
                            "rank 2 (line 1), rank 2 to receive from rank 0 (line 1)"), notes_of(res)
    assert all(res.deadlock.waits[r]["function"] == "MPI_Mprobe" for r in range(3)), res.deadlock
    assert not res.restarted and all(res.records[r].error.ename == "Exception" for r in range(3)), res.text()
    assert "withdrawn" in res.records[0].error.evalue, res.records[0].error
    usable(cluster)


def test_mpi4py_s_receive_against_mpinb_s_barrier(cluster):
    """Rank 0 waits in mpi4py's recv for rank 1, which waits in mpinb's barrier for rank 0."""
    res = cluster.run_cell("if rank == 0:\n    MPI.COMM_WORLD.recv(source=1, tag=3)\nelse:\n    mpi.barrier()",
                           timeout=NO_HANG)
    assert not res.timed_out, res.text()
    said = "deadlock: rank 0 waits to receive from rank 1 (line 2), rank 1 waits in barrier (line 4)"
    assert notes_of(res)[0] == said
    usable(cluster)


def test_an_mpi4py_barrier_the_others_left_without_calling(cluster):
    res = cluster.run_cell("if rank == 2:\n    MPI.COMM_WORLD.Barrier()", timeout=NO_HANG)
    assert notes_of(res)[0] == "deadlock: rank 2 waits in barrier (line 2); ranks 0-1 left the cell without calling it"
    usable(cluster)


def test_an_mpi4py_bcast_beside_a_computing_root_finishes_untouched(cluster):
    res = cluster.run_cell("import time\nif rank == 0:\n    time.sleep(4)\n"
                           "got = MPI.COMM_WORLD.bcast(rank + 10, root=0)", show=["got"], timeout=NO_HANG)
    assert res.ok and res.deadlock is None, res.text()
    assert {res.records[r].show["got"]["repr"] for r in range(3)} == {"10"}
