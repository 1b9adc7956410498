"""Overlap (mpi.set_overlap): sendrecv returns to XLA with a future and its transfer runs on the
progress thread (ext/overlap.pxi). The same results as blocking, program order kept through
chains of calls, gradients, errors delivered through the future. Whether XLA runs other work
meanwhile is its executor's choice (benchmarks/overlap.py measures what it gains)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from mpi4py import MPI

from mpinb import mpi


@pytest.fixture
def overlap():
    if MPI.Query_thread() != MPI.THREAD_MULTIPLE:  # an MPI built without it: refused, in words
        with pytest.raises(RuntimeError, match="MPI_THREAD_MULTIPLE"):
            mpi.set_overlap(True)
        pytest.skip("this MPI does not provide MPI_THREAD_MULTIPLE: overlap is refused (checked)")
    before = mpi.get_overlap()
    mpi.set_overlap(True)
    yield
    mpi.set_overlap(before)


def handed_off() -> int:
    from mpinb.mpi import library

    return library.load().overlap()["calls"]


def halo_step(rank, size, h):
    up, down = (rank - 1) % size, (rank + 1) % size

    def step(u):
        top = mpi.sendrecv(u[:h], u[:h], source=down, dest=up)
        bottom = mpi.sendrecv(u[-h:], u[-h:], source=up, dest=down)
        inner = u.at[1:-1].set(0.5 * (u[:-2] + u[2:]))
        return inner.at[:h].add(top).at[-h:].add(bottom)

    return step


def reference_step(rank, size, h, fields):
    u = fields[rank]
    inner = u.copy()
    inner[1:-1] = 0.5 * (u[:-2] + u[2:])
    inner[:h] += fields[(rank + 1) % size][:h]
    inner[-h:] += fields[(rank - 1) % size][-h:]
    return inner


def test_a_halo_exchange_overlapped_equals_blocking_and_numpy(world, overlap):
    rank, size = world
    fields = [np.random.default_rng(r).standard_normal((64, 33)) for r in range(size)]
    u = jnp.asarray(fields[rank])
    step = jax.jit(halo_step(rank, size, 4))
    before = handed_off()
    got = np.asarray(step(u))
    assert handed_off() == before + 2  # both calls went through the progress thread
    mpi.set_overlap(False)
    blocking = np.asarray(step(u))
    assert handed_off() == before + 2
    assert np.array_equal(got, blocking)
    np.testing.assert_allclose(got, reference_step(rank, size, 4, fields), rtol=1e-12)


def test_a_chain_of_overlapped_calls_keeps_program_order(world, overlap):
    rank, size = world

    @jax.jit
    def shift_many(x):
        def body(_, x):
            return mpi.sendrecv(x, x, source=(rank - 1) % size, dest=(rank + 1) % size)
        return jax.lax.fori_loop(0, 5, body, x)

    got = np.asarray(shift_many(jnp.arange(3.0) + 10 * rank))
    np.testing.assert_array_equal(got, np.arange(3.0) + 10 * ((rank - 5) % size))


def test_the_gradient_of_an_overlapped_sendrecv_is_the_blocking_one(world, overlap):
    rank, size = world

    def loss(x):
        y = mpi.sendrecv(x, x, source=(rank + 1) % size, dest=(rank - 1) % size)
        return jnp.sum(jnp.sin(y) * (rank + 1))

    x = jnp.linspace(0.0, 1.0, 5) + rank
    overlapped = np.asarray(jax.jit(jax.grad(loss))(x))
    mpi.set_overlap(False)
    blocking = np.asarray(jax.jit(jax.grad(loss))(x))
    assert np.array_equal(overlapped, blocking)
    # d/dx of the rank above's loss term: the rank that received x is rank - 1
    np.testing.assert_allclose(overlapped, np.cos(np.asarray(x)) * ((rank - 1) % size + 1), rtol=1e-12)


def test_an_error_reaches_the_caller_through_the_future_and_the_next_call_works(world, overlap):
    rank, _ = world
    f = jax.jit(lambda a, b: mpi.sendrecv(a, b, source=rank, dest=rank))
    before = handed_off()
    want = (rf"mpinb\.sendrecv: rank {rank}: received 8 elements from rank {rank}, more than the receive "
            r"buffer holds \(4\)")
    with pytest.raises(Exception, match=want):
        jax.block_until_ready(f(jnp.zeros(8, jnp.int32), jnp.zeros(4, jnp.int32)))
    assert handed_off() == before + 1
    again = np.asarray(f(jnp.arange(4, dtype=jnp.int32), jnp.zeros(4, jnp.int32)))
    np.testing.assert_array_equal(again, np.arange(4))


def test_with_huge_pages_on_sendrecv_runs_blocking(world, overlap):
    from mpinb.mpi import library

    rank, size = world
    ext = library.load()
    was = ext.huge_pages()["enabled"]
    ext.set_huge_pages(True)
    try:
        before = handed_off()
        f = jax.jit(lambda x: mpi.sendrecv(x, x, source=(rank - 1) % size, dest=(rank + 1) % size))
        got = np.asarray(f(jnp.arange(3.0) * (rank + 1)))
        assert handed_off() == before
    finally:
        ext.set_huge_pages(was)
    np.testing.assert_array_equal(got, np.arange(3.0) * ((rank - 1) % size + 1))


def test_checked_mode_runs_sendrecv_blocking(world, overlap):
    rank, size = world
    was = mpi.get_checked()
    mpi.set_checked(True)
    try:
        before = handed_off()
        f = jax.jit(lambda x: mpi.sendrecv(x, x, source=(rank + 1) % size, dest=(rank - 1) % size))
        got = np.asarray(f(jnp.arange(2.0) + rank))
        assert handed_off() == before
    finally:
        mpi.set_checked(was)
    np.testing.assert_array_equal(got, np.arange(2.0) + (rank + 1) % size)
