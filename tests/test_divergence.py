"""The divergence finding compares what each rank ran in a cell (mpinb.analysis.divergence),
worded by mpinb.view.divergence_words. Pure: records as the library's ``ran()`` gives them."""

from mpinb.analysis import divergence
from mpinb.view.divergence_words import divergence_finding
from mpinb.view.hlo_words import finding_message


def run(op, dims=(4,), dtype="float32", root=None, reduce=None, comm=0, comm_size=2, count=1):
    return {"op": op, "dtype": dtype, "dims": dims, "root": root, "reduce": reduce, "comm": comm,
            "comm_size": comm_size, "count": count}


def ran(*runs, complete=True):
    first, out = 0, []
    for r in runs:
        out.append({**r, "first": first})
        first += r["count"]
    return {"total": first, "runs": out, "complete": complete}


ALLREDUCE = run("allreduce", dims=(), reduce="SUM")


def found(records, finished=None):
    return divergence.find(records, sorted(records) if finished is None else finished)


def test_the_same_sequence_is_no_finding_however_each_rank_got_its_computation():
    """Nothing says whether a rank compiled the computation or took it from JAX's cache: the
    same calls are the same sequence."""
    assert found({0: ran(ALLREDUCE), 1: ran(ALLREDUCE)}) == []
    assert found({0: ran(), 1: ran()}) == []


def test_a_collective_only_some_ranks_called_is_found():
    """The tutorial's branch: rank 0 called allreduce (and was freed there), rank 1 finished."""
    (d,) = found({0: ran(ALLREDUCE), 1: ran()}, finished=[1])
    assert (d.first, d.other, d.position, d.other_ran) == (0, 1, 1, None)
    assert d.first_ran == divergence.Collective("allreduce", "float32", (), None, "SUM")
    w = divergence_finding(d)
    assert w.kind == "divergent" and w.severity == "error"
    assert finding_message(w) == (
        "rank 0 called allreduce float32[] SUM (collective #1 on the world communicator in this "
        "cell), rank 1 finished the cell without calling it: the ranks may deadlock")


def test_a_rank_that_stopped_early_is_not_missing_a_collective():
    """Its own error says why it stopped; the others' calls are not a divergence."""
    assert found({0: ran(ALLREDUCE), 1: ran()}, finished=[0]) == []


def test_a_different_collective_is_found_by_its_place():
    bcast0, bcast1 = run("bcast", dims=(), root=0), run("bcast", dims=(), root=1)
    (d,) = found({0: ran(ALLREDUCE, bcast0), 1: ran(ALLREDUCE, bcast1)}, finished=[])
    assert d.position == 2
    assert finding_message(divergence_finding(d)) == (
        "at collective #2 on the world communicator, rank 0 called bcast float32[] root 0 but rank 1 called "
        "bcast float32[] root 1: the ranks may deadlock or mix data")


def test_loops_are_compared_by_count():
    """Run-length records: 3 + 2 calls against 5 is the same sequence; 5 against 4 is not."""
    assert found({0: ran(run("allreduce", count=3), run("allreduce", count=2)),
                  1: ran(run("allreduce", count=5))}) == []
    (d,) = found({0: ran(run("allreduce", count=5)), 1: ran(run("allreduce", count=4))})
    assert (d.position, d.first_count, d.other_count, d.other_ran) == (5, 5, 4, None)
    assert "rank 1 finished the cell after 4 collectives there" in finding_message(divergence_finding(d))


def test_each_communicator_is_compared_among_the_ranks_that_called_on_it():
    """Ranks 0-1 and 2-3 reduce over their own halves: different calls, no finding."""
    half = {r: ran(run("allreduce", comm=11 if r < 2 else 22, dims=(r // 2 + 1,))) for r in range(4)}
    assert found(half) == []
    half[3] = ran(run("allreduce", comm=22, dims=(7,)))
    (d,) = found(half)
    assert (d.comm, d.first, d.other) == (22, 2, 3)
    assert "on a communicator of 2 ranks" in finding_message(divergence_finding(d))


def test_what_was_not_kept_is_not_compared():
    """Beyond the kept runs only a count is known: a shorter kept record is no finding."""
    assert found({0: ran(ALLREDUCE, ALLREDUCE, complete=False), 1: ran(ALLREDUCE, complete=False)}) == []
    assert found({0: ran(ALLREDUCE), 1: None}) == []


def test_shapes_that_may_differ_by_rank_are_kept_as_such():
    """The library keeps a trailing-only shape (alltoallv) with its first dimension unknown."""
    a = run("alltoallv", dims=(None, 3))
    assert found({0: ran(a), 1: ran(a)}) == []
    (d,) = found({0: ran(a), 1: ran(run("alltoallv", dims=(None, 4)))})
    assert "alltoallv float32[*,3] but rank 1 called alltoallv float32[*,4]" in finding_message(divergence_finding(d))
