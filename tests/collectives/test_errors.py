"""Bad input is a clear Python error at trace time; MPI errors in handlers become exceptions."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from mpi4py import MPI

from mpinb import mpi


def test_alltoall_wrong_leading_dimension(world):
    _, size = world
    want = (f"alltoall input must have shape (nproc, ...): "
            f"leading dimension {size + 1} is not the number of ranks {size}")
    with pytest.raises(ValueError, match=re.escape(want)):
        jax.jit(mpi.alltoall)(jnp.zeros((size + 1, 2)))
    with pytest.raises(ValueError, match=r"must have shape \(nproc, \.\.\.\): leading dimension none"):
        mpi.alltoall(jnp.float32(1))


def test_shape_errors_carry_mpi4jax_s_words(world):
    """mpi4jax users' tests match "must have shape (nproc, ...)" (and "Scatter input ...")."""
    rank, size = world
    with pytest.raises(ValueError, match=re.escape("must have shape (nproc, ...)")):
        mpi.alltoall(jnp.zeros((size + 2, 2)))
    with pytest.raises(ValueError, match=re.escape("reduce_scatter input must have shape (nproc, ...)")):
        mpi.reduce_scatter(jnp.zeros((size + 2, 2)), MPI.SUM)
    with pytest.raises(ValueError, match=re.escape(
            f"Scatter input must have shape (nproc, ...): scatter: leading dimension {size + 2} at root")):
        mpi.scatter(jnp.zeros((size + 2, 2)), rank)  # this rank is the root


def test_root_and_peer_out_of_range(world):
    _, size = world
    with pytest.raises(ValueError, match=f"bcast: root {size} is out of range for a communicator of size {size}"):
        mpi.bcast(jnp.zeros(2), size)
    with pytest.raises(ValueError, match="reduce: root -5 is out of range"):
        mpi.reduce(jnp.zeros(2), MPI.SUM, -5)
    with pytest.raises(ValueError, match="send: dest"):
        mpi.send(jnp.zeros(2), size + 3)
    with pytest.raises(ValueError, match="recv: tag -7 is not a valid MPI tag"):
        mpi.recv(jnp.zeros(2), 0, tag=-7)


def test_traced_static_arguments(world):
    with pytest.raises(TypeError, match="bcast: root must be a static Python int, got a traced value"):
        jax.jit(lambda x, r: mpi.bcast(x, r))(jnp.zeros(2), 0)
    with pytest.raises(TypeError, match="allreduce: comm must be an mpi4py communicator, got a traced value"):
        jax.jit(lambda x, c: mpi.allreduce(x, MPI.SUM, comm=c))(jnp.zeros(2), jnp.int32(0))
    with pytest.raises(TypeError, match="gather: root must be an int, got str"):
        mpi.gather(jnp.zeros(2), "0")


def test_non_array_input():
    with pytest.raises(TypeError, match="allreduce: x must be an array or scalar, got str"):
        mpi.allreduce("hello", MPI.SUM)
    with pytest.raises(TypeError, match="alltoall: x must be an array or scalar, got NoneType"):
        mpi.alltoall(None)
    with pytest.raises(TypeError, match="bcast: x must be an array or scalar, got object"):
        mpi.bcast(object(), 0)


def test_unsupported_dtype_op_pairs():
    with pytest.raises(TypeError, match=r"allreduce: MPI\.SUM does not support dtype float16; cast to float32 first"):
        mpi.allreduce(jnp.zeros(2, jnp.float16), MPI.SUM)
    with pytest.raises(TypeError, match=r"MPI\.SUM does not support dtype bool"):
        mpi.allreduce(jnp.zeros(2, bool), MPI.SUM)
    with pytest.raises(TypeError, match=r"scan: MPI\.BAND does not support dtype float32"):
        mpi.scan(jnp.zeros(2, jnp.float32), MPI.BAND)
    with pytest.raises(ValueError, match="only the predefined MPI ops"):
        mpi.allreduce(jnp.zeros(2), MPI.MAXLOC)
    with pytest.raises(TypeError, match=r"op must be an mpi4py\.MPI\.Op"):
        mpi.allreduce(jnp.zeros(2), "sum")
    with pytest.raises(TypeError, match="dtype float8_e4m3fn of x is not supported"):
        mpi.allgather(jnp.zeros(2, jnp.float8_e4m3fn))


def test_bad_communicators():
    with pytest.raises(TypeError, match=r"comm must be an mpi4py\.MPI\.Comm, got int"):
        mpi.barrier(comm=3)
    with pytest.raises(ValueError, match=r"comm is MPI\.COMM_NULL"):
        mpi.barrier(comm=MPI.COMM_NULL)


def test_sendrecv_mismatched_buffers(world):
    rank, _size = world
    with pytest.raises(TypeError, match="sendrecv: sendbuf dtype float32 differs from recvbuf dtype int32"):
        mpi.sendrecv(jnp.zeros(2, jnp.float32), jnp.zeros(2, jnp.int32), source=rank, dest=rank)


def test_variable_counts_checked(world):
    rank, size = world
    with pytest.raises(ValueError, match=f"allgatherv: counts has {size + 1} entries, expected one per rank"):
        mpi.allgatherv(jnp.zeros((1,)), [1] * (size + 1))
    with pytest.raises(ValueError, match=rf"allgatherv: leading dimension 3 is not counts\[{rank}\] = 1"):
        mpi.allgatherv(jnp.zeros((3,)), [1] * size)
    with pytest.raises(ValueError, match="alltoallv: sendcounts must be non-negative"):
        mpi.alltoallv(jnp.zeros((0,)), [-1] + [1] * (size - 1), [0] * size)


def test_checked_mode_catches_ranks_that_disagree_on_allgatherv_counts(world):
    """Rank 1 thinks it contributes 2 rows, the others think 1: every operand matches its own
    counts, but MPI would truncate (MPICH aborts the job). Checked mode compares the result
    (sum(counts) rows), so every rank raises the same error instead."""
    rank, size = world
    if size < 2:
        pytest.skip("needs two ranks")
    counts = [1] * size
    if rank == 1:
        counts[1] = 2
    was = mpi.get_checked()
    mpi.set_checked(True)
    try:
        want = (rf"mpinb\.allgatherv: rank {rank}: checked mode: ranks disagree on the collective: "
                rf"rank 1 called allgatherv float32\[{size + 1},3\] \(#\d+\), "
                rf"rank 0 called allgatherv float32\[{size},3\] \(#\d+\)")
        with pytest.raises(Exception, match=want):
            jax.block_until_ready(mpi.allgatherv(jnp.ones((counts[rank], 3), jnp.float32), counts))
        assert int(mpi.allreduce(jnp.int32(1), MPI.SUM)) == size  # still usable, still in step
    finally:
        mpi.set_checked(was)


def test_truncated_receive_is_a_python_exception_naming_op_and_rank(world):
    """Every rank sends 8 elements to itself and offers room for 4: the handler returns an FFI
    error naming both sizes, and JAX raises it on this rank (no abort, no hang; Open MPI 4.1
    itself would truncate the message to self silently)."""
    rank, _ = world
    f = jax.jit(lambda a, b: mpi.sendrecv(a, b, source=rank, dest=rank))
    want = (rf"mpinb\.sendrecv: rank {rank}: received 8 elements from rank {rank}, more than the receive "
            r"buffer holds \(4\)")
    with pytest.raises(Exception, match=want) as info:
        jax.block_until_ready(f(jnp.ones(8, jnp.int32), jnp.zeros(4, jnp.int32)))
    assert "JaxRuntimeError" in type(info.value).__name__ or "XlaRuntimeError" in type(info.value).__name__
    # the library is still usable afterwards
    assert int(mpi.allreduce(jnp.int32(1), MPI.SUM)) == world[1]


@pytest.mark.parametrize("how", ["recv", "sendrecv"])
def test_a_large_message_into_a_small_buffer_is_an_error_and_nothing_is_left_behind(world, how):
    """From another rank, 400 kB into room for 200 kB (Open MPI 4.1 corrupts the heap truncating
    it): an error on the receiving rank naming both sizes; the message does not linger to be
    matched by a later receive, and the next exchange is right."""
    rank, size = world
    if size < 2:
        pytest.skip("needs two ranks")
    if rank < size - size % 2:  # the odd rank out of the pairs only takes part in the allreduce
        exchange_too_much(rank, rank ^ 1, how)
    assert int(mpi.allreduce(jnp.int32(1), MPI.SUM)) == size


def exchange_too_much(rank, peer, how):
    n = 100_000
    big, small = jnp.full(n, rank + 1, jnp.int32), jnp.zeros(n // 2, jnp.int32)
    want = rf"mpinb\.{how}: rank {rank}: received {n} elements from rank {peer}, more than the receive buffer holds"
    if how == "sendrecv":
        f = jax.jit(lambda a, b: mpi.sendrecv(a, b, source=peer, dest=peer))
        with pytest.raises(Exception, match=want):
            jax.block_until_ready(f(big, small))
    elif rank % 2 == 0:
        jax.block_until_ready(mpi.send(big, dest=peer))
    else:
        with pytest.raises(Exception, match=want):
            jax.block_until_ready(jax.jit(lambda b: mpi.recv(b, source=peer))(small))
    again = jax.jit(lambda a, b: mpi.sendrecv(a, b, source=peer, dest=peer))(big, jnp.zeros(n, jnp.int32))
    assert np.array_equal(np.asarray(again), np.full(n, peer + 1, np.int32))


def test_pytrees_are_refused_with_the_way_to_map_them(world):
    with pytest.raises(TypeError, match=re.escape("allreduce: x must be an array, got a dict (a pytree)")):
        mpi.allreduce({"a": jnp.ones(2)}, MPI.SUM)
    with pytest.raises(TypeError, match=re.escape("jax.tree.map(lambda a: mpi.bcast(a, ...), tree)")):
        mpi.bcast({"a": jnp.ones(2), "b": jnp.zeros(1)}, 0)


def test_a_status_dropped_by_the_caller_stays_alive_for_the_compiled_receive(world):
    """recv(..., status=MPI.Status()): the compiled receive writes into that status every time it
    runs, so mpinb keeps the object alive (freed memory written into crashed the process)."""
    import gc
    import weakref

    made = []

    def fresh_status():
        status = MPI.Status()
        made.append(weakref.ref(status))
        return status

    f = jax.jit(lambda x: mpi.recv(x, MPI.PROC_NULL, status=fresh_status()))
    f(jnp.zeros(2)).block_until_ready()
    gc.collect()
    assert len(made) == 1 and made[0]() is not None
    f(jnp.ones(2)).block_until_ready()
    assert made[0]().Get_source() == MPI.PROC_NULL
