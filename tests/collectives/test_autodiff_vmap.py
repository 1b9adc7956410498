"""grad / jvp / vjp and vmap of the collectives, checked against the linear maps they are."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from mpi4py import MPI
from reference import assert_same, make

from mpinb import mpi


def _weights(rank, shape):
    return make(shape, np.float64, rank, salt=1) + 1.0


def test_grad_allreduce_sum(world):
    """mpi4jax's rule: the transpose of allreduce(SUM) is the identity on each rank, so rank r's
    gradient of <w_r, allreduce(x)> is its own w_r (the replicated result counts once)."""
    rank, _size = world
    w = _weights(rank, (3,))
    g = jax.grad(lambda x: jnp.vdot(w, mpi.allreduce(x, MPI.SUM)))(make((3,), np.float64, rank))
    assert_same(g, w)


def test_grad_allreduce_jit_equals_eager(world):
    rank, _ = world
    def f(x):
        return jnp.sum(jnp.sin(mpi.allreduce(x * x, MPI.SUM)))
    x = make((4,), np.float64, rank)
    assert_same(jax.jit(jax.grad(f))(x), jax.grad(f)(x))


def test_grad_alltoall(world):
    rank, size = world
    w = _weights(rank, (size, 2))
    g = jax.jit(jax.grad(lambda x: jnp.vdot(w, mpi.alltoall(x))))(make((size, 2), np.float64, rank))
    # y_r[s] = x_s[r]  =>  dL/dx_s[r] = w_r[s]
    assert_same(g, np.stack([_weights(r, (size, 2))[rank] for r in range(size)]))


def test_grad_allgather_and_reduce_scatter(world):
    rank, size = world
    w = _weights(rank, (size, 3))
    g = jax.grad(lambda x: jnp.vdot(w, mpi.allgather(x)))(make((3,), np.float64, rank))
    assert_same(g, np.sum([_weights(r, (size, 3))[rank] for r in range(size)], axis=0))

    w2 = _weights(rank, (3,))
    g2 = jax.jit(jax.grad(lambda x: jnp.vdot(w2, mpi.reduce_scatter(x, MPI.SUM))))(make((size, 3), np.float64, rank))
    assert_same(g2, np.stack([_weights(r, (3,)) for r in range(size)]))


def test_grad_bcast(world):
    rank, size = world
    root = size - 1
    w = _weights(rank, (2, 2))
    g = jax.grad(lambda x: jnp.vdot(w, mpi.bcast(x, root)))(make((2, 2), np.float64, rank))
    want = np.sum([_weights(r, (2, 2)) for r in range(size)], axis=0) if rank == root else np.zeros((2, 2))
    assert_same(g, want)


def test_grad_sendrecv(world):
    rank, size = world
    left, right = (rank - 1) % size, (rank + 1) % size
    w = _weights(rank, (3,))
    def f(x):
        return jnp.vdot(w, mpi.sendrecv(x, jnp.zeros_like(x), source=left, dest=right))
    g = jax.jit(jax.grad(f))(make((3,), np.float64, rank))
    # rank r receives x_left: dL/dx_r = w_right
    assert_same(g, _weights(right, (3,)))


def test_grad_alltoallv_and_allgatherv(world):
    rank, size = world
    counts = [r % 2 + 1 for r in range(size)]
    w = _weights(rank, (sum(counts),))
    g = jax.grad(lambda x: jnp.vdot(w, mpi.allgatherv(x, counts)))(make((counts[rank],), np.float64, rank))
    start = sum(counts[:rank])
    want = np.sum([_weights(r, (sum(counts),))[start:start + counts[rank]] for r in range(size)], axis=0)
    assert_same(g, want)

    send = [1] * size
    w2 = _weights(rank, (size,))
    g2 = jax.grad(lambda x: jnp.vdot(w2, mpi.alltoallv(x, send, send)))(make((size,), np.float64, rank))
    assert_same(g2, np.array([_weights(r, (size,))[rank] for r in range(size)]))


def test_jvp_alltoall_matches_linear_map(world):
    rank, size = world
    x = make((size, 3), np.float64, rank)
    t = _weights(rank, (size, 3))
    y, ty = jax.jvp(mpi.alltoall, (x,), (t,))
    assert_same(y, mpi.alltoall(x))
    assert_same(ty, mpi.alltoall(t))


def test_grad_when_only_some_ranks_use_the_output(world):
    """Rank-dependent use of a collective's output, written as data (jnp.where), so that every
    rank traces the same program and joins the same collectives. Only rank 0's loss uses the
    replicated sum; with the identity transpose only rank 0 gets a gradient (as in mpi4jax)."""
    rank, _size = world

    def loss(x):
        y = mpi.allreduce(x, MPI.SUM)
        return jnp.where(rank == 0, jnp.sum(y), 0.0)

    g = jax.jit(jax.grad(loss))(make((2,), np.float64, rank))
    assert_same(g, np.ones(2) if rank == 0 else np.zeros(2))


def test_not_differentiable_ops_say_so(world):
    rank, _ = world
    with pytest.raises(TypeError, match=r"only MPI\.SUM can be differentiated"):
        jax.grad(lambda x: mpi.allreduce(x, MPI.MAX).sum())(make((2,), np.float64, rank))
    with pytest.raises(TypeError, match="gather cannot be differentiated"):
        jax.grad(lambda x: mpi.gather(x, 0).sum())(make((2,), np.float64, rank))


def test_nondifferentiated_use_of_nondifferentiable_op(world):
    rank, size = world
    # MAX on a value that does not depend on x: no tangent flows through it, so no error
    def f(x):
        m = mpi.allreduce(jnp.float64(rank), MPI.MAX)
        return jnp.sum(x) * m

    assert float(jax.grad(f)(jnp.ones(3))[0]) == size - 1


# ----------------------------------------------------------------------------------- vmap


def test_vmap_allreduce_and_alltoall(world):
    rank, size = world
    xs = make((5, size, 2), np.float32, rank)
    got = jax.jit(jax.vmap(mpi.alltoall))(xs)
    want = np.stack([np.stack([make((5, size, 2), np.float32, s)[b, rank] for s in range(size)]) for b in range(5)])
    assert_same(got, want)
    got = jax.vmap(lambda a: mpi.allreduce(a, MPI.SUM), in_axes=1, out_axes=1)(xs)
    assert_same(got, np.sum([make((5, size, 2), np.float32, r) for r in range(size)], axis=0))


def test_vmap_allgather_gather_scatter_bcast(world):
    rank, size = world
    xs = make((3, 2), np.float64, rank)
    gathered = np.stack([np.stack([make((3, 2), np.float64, r)[b] for r in range(size)]) for b in range(3)])
    assert_same(jax.vmap(mpi.allgather)(xs), gathered)
    g = jax.vmap(lambda a: mpi.gather(a, 0))(xs)
    if rank == 0:
        assert_same(g, gathered)
    else:
        assert_same(g, xs)
    sc_in = make((3, size, 2), np.float64, 0) if rank == 0 else np.zeros((3, 2), np.float64)
    assert_same(jax.vmap(lambda a: mpi.scatter(a, 0))(sc_in), make((3, size, 2), np.float64, 0)[:, rank])
    assert_same(jax.vmap(lambda a: mpi.bcast(a, 0))(xs), make((3, 2), np.float64, 0))


def test_vmap_sendrecv_with_unbatched_recvbuf(world):
    rank, size = world
    left, right = (rank - 1) % size, (rank + 1) % size
    xs = make((4, 3), np.int32, rank)
    got = jax.vmap(lambda a: mpi.sendrecv(a, np.zeros(3, np.int32), source=left, dest=right))(xs)
    assert_same(got, make((4, 3), np.int32, left))


def test_vmap_reduce_scatter_allgatherv(world):
    rank, size = world
    xs = make((2, size, 3), np.float64, rank)
    got = jax.vmap(lambda a: mpi.reduce_scatter(a, MPI.SUM))(xs)
    assert_same(got, np.sum([make((2, size, 3), np.float64, r)[:, rank] for r in range(size)], axis=0))
    counts = [1] * size
    got = jax.vmap(lambda a: mpi.allgatherv(a, counts))(make((2, 1, 3), np.float64, rank))
    assert_same(got, np.concatenate([make((2, 1, 3), np.float64, r) for r in range(size)], axis=1))


def _pair(rank, size):
    p = rank ^ 1
    return p if p < size else MPI.PROC_NULL


def test_vmap_recv_with_a_batched_template_receives_the_batch(world):
    rank, size = world
    peer = _pair(rank, size)
    xs = make((4, 3), np.float64, rank)

    def exchange(a):
        if rank < peer or peer == MPI.PROC_NULL:
            mpi.send(a, peer)
            return mpi.recv(jnp.zeros_like(a), peer)
        got = mpi.recv(jnp.zeros_like(a), peer)
        mpi.send(a, peer)
        return got

    got = jax.jit(jax.vmap(exchange))(xs)
    assert_same(got, np.zeros((4, 3)) if peer == MPI.PROC_NULL else make((4, 3), np.float64, peer))


def test_vmap_recv_with_an_unbatched_template_receives_the_batch_too(world):
    """``jnp.zeros_like`` of a batched value, or a template from outside, is not batched under
    vmap; the receive is batched all the same, so it takes the batch a vmapped send sends."""
    rank, size = world
    peer = _pair(rank, size)
    template = jnp.zeros(3)
    if peer == MPI.PROC_NULL:
        got = jax.vmap(lambda a: a + mpi.recv(template, peer))(make((4, 3), np.float64, rank))
        assert_same(got, make((4, 3), np.float64, rank))
        return
    if rank < peer:
        jax.jit(jax.vmap(lambda a: mpi.send(a, peer)))(make((4, 3), np.float64, rank))
        return
    got = jax.jit(jax.vmap(lambda a: a - mpi.recv(template, peer)))(make((4, 3), np.float64, rank))
    assert_same(got, make((4, 3), np.float64, rank) - make((4, 3), np.float64, peer))


def test_a_message_shorter_than_the_receive_buffer_is_an_error(world):
    """A vmapped receive from a sender that is not vmapped: one element arrives where the batch
    was expected. MPI accepts the short message; mpinb says so instead of returning garbage."""
    rank, size = world
    peer = _pair(rank, size)
    if peer == MPI.PROC_NULL:
        return  # nothing arrives from MPI.PROC_NULL
    if rank < peer:
        mpi.send(make((3,), np.float64, rank), peer)
        return
    f = jax.jit(jax.vmap(lambda a: a + mpi.recv(jnp.zeros(3), peer)))
    with pytest.raises(Exception, match=re.escape(
            f"rank {rank}: received 3 elements from rank {peer}, but the receive buffer holds 12")):
        f(make((4, 3), np.float64, rank)).block_until_ready()
