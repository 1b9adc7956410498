"""What the library keeps of the collectives each rank called (``ran()``, ext/ran.pxi): the
record the notebook compares across ranks. Every rank gathers the others' records here with
mpi4py and compares them as mpinb.analysis.divergence does."""

import jax
import jax.numpy as jnp
from mpi4py import MPI

from mpinb import mpi
from mpinb.analysis import divergence
from mpinb.mpi import library


def called(fn):
    """Every rank's ran() record of ``fn()``, run on every rank."""
    lib = library.load()
    lib.ran_begin()
    jax.block_until_ready(fn())
    return MPI.COMM_WORLD.allgather(lib.ran())


def no_divergence(records):
    return divergence.find(dict(enumerate(records)), range(len(records))) == []


def test_a_computation_from_the_cache_runs_what_a_fresh_one_ran(world):
    f = jax.jit(lambda x: mpi.allreduce(x, op=MPI.SUM))
    fresh = called(lambda: f(jnp.ones(3, jnp.float32)))
    cached = called(lambda: f(jnp.ones(3, jnp.float32)))
    assert fresh == cached
    (run,) = fresh[0]["runs"]
    assert (run["op"], run["dtype"], run["dims"], run["reduce"], run["comm"], run["count"]) == (
        "allreduce", "float32", (3,), "SUM", divergence.WORLD, 1)
    assert fresh[0]["total"] == 1 and fresh[0]["complete"]


def test_a_loop_is_one_run_with_its_count(world):
    step = jax.jit(lambda x: jax.lax.fori_loop(0, 5, lambda i, y: mpi.allreduce(y, op=MPI.MAX), x))
    records = called(lambda: step(jnp.ones(2)))
    assert [(r["op"], r["count"]) for r in records[0]["runs"]] == [("allreduce", 5)]
    assert no_divergence(records)


def test_what_differs_by_rank_by_design_is_kept_the_same_on_every_rank(world):
    """Root and non-root pass different shapes to gather and scatter, ranks different counts
    to alltoallv: what each keeps is what the ranks must agree on, equal on every rank."""
    rank, size = world
    counts = [1] * size
    records = called(lambda: (mpi.gather(jnp.ones((2, 3)), root=0),
                              mpi.scatter(jnp.ones((size, 4)) if rank == 0 else jnp.ones(4), root=0),
                              mpi.alltoallv(jnp.ones((size, 3)), counts, counts)))
    assert no_divergence(records)
    runs = records[0]["runs"]
    assert [r["op"] for r in runs] == ["gather", "scatter", "alltoallv"]
    assert runs[0]["root"] == 0 and runs[2]["dims"] == (None, 3)
    assert all(rec["runs"] == runs for rec in records)


def test_point_to_point_calls_are_not_kept(world):
    rank, size = world
    records = called(lambda: mpi.sendrecv(jnp.ones(2), jnp.ones(2), source=(rank - 1) % size,
                                          dest=(rank + 1) % size))
    assert records[0] == {"total": 0, "runs": [], "complete": True}


def test_a_sub_communicator_is_told_from_the_world(world):
    rank, size = world
    half = MPI.COMM_WORLD.Split(rank % 2, rank)
    try:
        records = called(lambda: mpi.allreduce(jnp.ones(2), op=MPI.SUM, comm=half))
        (run,) = records[rank]["runs"]
        assert run["comm_size"] == half.Get_size()
    finally:
        half.Free()
    if size > 1:
        assert run["comm"] != divergence.WORLD  # the ranks of one parity share a key, the others another
        assert records[0]["runs"][0]["comm"] != records[1]["runs"][0]["comm"]
        assert all(rec["runs"][0]["comm"] == records[r % 2]["runs"][0]["comm"] for r, rec in enumerate(records))
    assert no_divergence(records)
