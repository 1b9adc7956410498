"""Autodiff of every differentiable collective against the *global* function it implements.

Each rank holds one slice ``X[rank]`` of a global input ``X``; the collective computes one slice
of a global output. The reference is single-process JAX on the whole ``X`` (no MPI), so the
per-rank gradient of mpinb must equal ``jax.grad(global)(X)[rank]``.

The convention is mpi4jax's (and ``jax.lax.psum``'s in ``shard_map``): the result of
``allreduce(SUM)`` is one replicated value, so its transpose is the identity on each rank. A loss
is therefore made replicated the usual way, ``allreduce`` of the per-rank partial losses, and
counts once. Every check runs eagerly and under ``jax.jit``, with ``grad``, ``vjp``, ``jvp`` and
``linear_transpose``.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from mpi4py import MPI
from reference import assert_same, make

from mpinb import mpi

TRANSFORMS = ("eager", "jit")


def _maybe_jit(how, f):
    return jax.jit(f) if how == "jit" else f


def _weights(rank, shape):
    return make(shape, np.float64, rank, salt=5) / 7.0 + 0.5


def _global_input(shape, size, salt=0):
    return np.stack([make(shape, np.float64, r, salt=salt) / 5.0 for r in range(size)])


# Each case: per-rank input shape, the mpinb op on one rank's slice, and the global op on the
# stacked input X (shape (size, *in_shape)) giving the stacked per-rank outputs.
def _cases(size):
    counts = [r % 2 + 1 for r in range(size)]
    root = size - 1

    return {
        "alltoall": ((size, 2), mpi.alltoall, lambda X: jnp.swapaxes(X, 0, 1)),
        "allgather": ((3,), mpi.allgather, lambda X: jnp.stack([X] * size)),
        "reduce_scatter": ((size, 3), lambda x: mpi.reduce_scatter(x, MPI.SUM), lambda X: jnp.sum(X, axis=0)),
        "bcast": ((2, 2), lambda x: mpi.bcast(x, root), lambda X: jnp.stack([X[root]] * size)),
        "sendrecv": ((3,), lambda x: mpi.sendrecv(x, jnp.zeros_like(x), source=(mpi_rank() - 1) % size,
                                                  dest=(mpi_rank() + 1) % size),
                     lambda X: jnp.roll(X, 1, axis=0)),
        "allgatherv": ((None,), lambda x: mpi.allgatherv(x, counts),
                       lambda Xs: jnp.stack([jnp.concatenate(Xs)] * size)),
        "alltoallv": ((size,), lambda x: mpi.alltoallv(x, [1] * size, [1] * size), lambda X: jnp.swapaxes(X, 0, 1)),
    }, counts


def mpi_rank():
    return MPI.COMM_WORLD.Get_rank()


def _local_and_global_inputs(name, shape, size, counts, rank):
    if name == "allgatherv":
        xs = [make((counts[r],), np.float64, r) / 5.0 for r in range(size)]
        return xs[rank], xs
    X = _global_input(shape, size)
    return X[rank], X


@pytest.mark.parametrize("how", TRANSFORMS)
@pytest.mark.parametrize("name", ["alltoall", "allgather", "reduce_scatter", "bcast", "sendrecv",
                                  "allgatherv", "alltoallv"])
def test_grad_of_a_replicated_loss_is_the_global_gradient(world, name, how):
    """L = sum over ranks of <w_r, sin(op(x)_r)>, made replicated with allreduce; on rank r the
    gradient must be dL/dX[r] of the global function."""
    rank, size = world
    cases, counts = _cases(size)
    shape, op, global_op = cases[name]
    x, X = _local_and_global_inputs(name, shape, size, counts, rank)
    out_shape = np.shape(global_op(X)[0])
    w = [_weights(r, out_shape) for r in range(size)]

    def loss(x):
        return mpi.allreduce(jnp.vdot(w[rank], jnp.sin(op(x))), MPI.SUM)

    def global_loss(X):
        Y = global_op(X)
        return sum(jnp.vdot(w[r], jnp.sin(Y[r])) for r in range(size))

    want = jax.grad(global_loss)(X)[rank]
    assert_same(_maybe_jit(how, jax.grad(loss))(x), np.asarray(want))
    # vjp with the replicated loss's cotangent: the same gradient scaled
    value, pullback = jax.vjp(_maybe_jit(how, loss), x)
    assert_same(value, np.asarray(global_loss(X)))
    assert_same(pullback(jnp.float64(2.0))[0], 2.0 * np.asarray(want))


@pytest.mark.parametrize("how", TRANSFORMS)
@pytest.mark.parametrize("name", ["alltoall", "allgather", "reduce_scatter", "bcast", "sendrecv",
                                  "allgatherv", "alltoallv"])
def test_jvp_and_linear_transpose_are_the_global_linear_map(world, name, how):
    """The tangent of rank r's output is slice r of the global JVP; the linear transpose applied
    to per-rank cotangents C[r] is slice r of the global transpose."""
    rank, size = world
    cases, counts = _cases(size)
    shape, op, global_op = cases[name]
    x, X = _local_and_global_inputs(name, shape, size, counts, rank)
    if name == "allgatherv":
        T = [make((counts[r],), np.float64, r, salt=3) for r in range(size)]
    else:
        T = _global_input(shape, size, salt=3)
    t = T[rank]
    y, ty = _maybe_jit(how, lambda a, b: jax.jvp(op, (a,), (b,)))(x, t)
    Y, TY = jax.jvp(global_op, (X,), (T,))
    assert_same(y, np.asarray(Y[rank]))
    assert_same(ty, np.asarray(TY[rank]))

    C = np.stack([_weights(r, np.shape(Y[0])) for r in range(size)])
    (got,) = _maybe_jit(how, jax.linear_transpose(op, x))(C[rank])
    (want,) = jax.linear_transpose(global_op, X)(C)
    assert_same(got, np.asarray(want[rank]))


@pytest.mark.parametrize("how", TRANSFORMS)
def test_allreduce_sum_ad_is_mpi4jax_s(world, how):
    """mpi4jax 0.9.1: the JVP of allreduce(SUM) is the allreduce of the tangents; its transpose is
    the identity on each rank; the transpose of that is allreduce again."""
    rank, size = world
    x = make((4,), np.float64, rank) / 5.0
    ct = _weights(0, (4,))  # a replicated cotangent: the same on every rank
    total = np.sum([make((4,), np.float64, r) / 5.0 for r in range(size)], axis=0)

    def f(v):
        return mpi.allreduce(v, MPI.SUM)

    (transposed,) = _maybe_jit(how, jax.linear_transpose(f, x))(ct)
    assert_same(transposed, ct)  # not size * ct
    (twice,) = _maybe_jit(how, jax.linear_transpose(lambda c: jax.linear_transpose(f, x)(c)[0], x))(x)
    assert_same(twice, total)

    y, ty = _maybe_jit(how, lambda a: jax.jvp(f, (a,), (2 * a,)))(x)
    assert_same(y, total)
    assert_same(ty, 2 * total)

    # a replicated loss of the replicated result: the global gradient g'(sum_s x_s) on every rank
    g = _maybe_jit(how, jax.grad(lambda v: jnp.sum(jnp.sin(f(v)) * ct)))(x)
    assert_same(g, np.cos(total) * ct)
    _, pullback = jax.vjp(_maybe_jit(how, f), x)
    assert_same(pullback(jnp.asarray(ct))[0], ct)

    # chained allreduces: each transpose is the identity, so the gradient is ct, mpi4jax's number
    # (the outer allreduce sums a value that is already replicated; docs/reference/library.md says so)
    h = _maybe_jit(how, jax.grad(lambda v: jnp.vdot(ct, f(f(v)))))(x)
    assert_same(h, ct)


@pytest.mark.parametrize("how", TRANSFORMS)
def test_distributed_least_squares_gradient(world, how):
    """min 0.5 |A x - b|^2 with A split across ranks, both ways mpi4jax users write it.

    Rows split (x replicated): each rank's gradient is its own A_r^T (A_r x - b_r), and their sum
    (an allreduce) is the single-process A^T (A x - b). Columns split (each rank holds x_r and
    A[:, cols_r]; A x is an allreduce): rank r's gradient is slice r of the single-process one.
    """
    rank, size = world
    rows, cols = 3, 2
    A = np.stack([make((rows, cols * size), np.float64, r, salt=1) / 4.0 for r in range(size)]).reshape(
        size * rows, cols * size)
    b = np.arange(size * rows, dtype=np.float64) / 3.0
    x = np.linspace(-1.0, 1.0, cols * size)
    full = A.T @ (A @ x - b)

    A_r, b_r = A[rank * rows:(rank + 1) * rows], b[rank * rows:(rank + 1) * rows]

    def rows_loss(v):
        return 0.5 * mpi.allreduce(jnp.sum((A_r @ v - b_r) ** 2), MPI.SUM)

    g_rows = _maybe_jit(how, jax.grad(rows_loss))(x)
    assert_same(g_rows, A_r.T @ (A_r @ x - b_r))
    assert_same(mpi.allreduce(g_rows, MPI.SUM), full)

    A_c, x_c = A[:, rank * cols:(rank + 1) * cols], x[rank * cols:(rank + 1) * cols]

    def cols_loss(v):
        return 0.5 * jnp.sum((mpi.allreduce(A_c @ v, MPI.SUM) - b) ** 2)

    g_cols = _maybe_jit(how, jax.grad(cols_loss))(x_c)
    assert_same(g_cols, full[rank * cols:(rank + 1) * cols])
    # one gradient step on the split x equals the single-process step
    step = x_c - 0.1 * g_cols
    assert_same(mpi.allgather(step).reshape(-1), x - 0.1 * full)
