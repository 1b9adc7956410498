"""Real solver programs with mpinb's collectives inside JAX's solvers and transformations, each
compared with the solution of the whole problem in one process (NumPy, or the same JAX code on
the global arrays). Run at 1 rank here and at 2 and 4 ranks by tests/test_ranks.py.

The problem: a 1-D Poisson-like operator ``A = tridiag(-1, 2 + s, -1)`` on ``N = 8 * size``
points, Dirichlet boundaries, its rows split over the ranks in blocks of 8. Its product needs
the neighbours' edge values: a halo exchange with ``sendrecv`` (``PROC_NULL`` at the ends gives
the zero boundary). Vectors are either split (each rank holds its block; dot products are
allreduces) or replicated (each rank holds the whole vector, computes its block of ``A x`` and
allgathers it: what JAX's own solvers need, whose dot products are local).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from mpi4py import MPI

from mpinb import mpi

SHIFT = 0.5
BLOCK = 8


@pytest.fixture(scope="module")
def problem(world):
    rank, size = world
    n = BLOCK * size
    a = (np.diag(np.full(n, 2.0 + SHIFT)) - np.diag(np.ones(n - 1), 1) - np.diag(np.ones(n - 1), -1))
    b = np.sin(np.arange(n) * 0.7) + 1.0
    return rank, size, a, b


def neighbours(rank, size):
    return (rank - 1 if rank > 0 else MPI.PROC_NULL), (rank + 1 if rank < size - 1 else MPI.PROC_NULL)


def block_matvec(x, rank, size):
    """This rank's block of ``A x`` from its block ``x``: the halos come by sendrecv."""
    left, right = neighbours(rank, size)
    from_left = mpi.sendrecv(x[-1:], x[:1], source=left, dest=right)
    from_right = mpi.sendrecv(x[:1], x[-1:], source=right, dest=left)
    # the zero boundary written out: mpinb's receive from PROC_NULL gives zeros, but mpi4jax's
    # leaves its result buffer unset (this file also runs against mpi4jax, outside CI)
    from_left = jnp.where(left == MPI.PROC_NULL, 0.0, from_left)
    from_right = jnp.where(right == MPI.PROC_NULL, 0.0, from_right)
    padded = jnp.concatenate([from_left, x, from_right])
    return (2.0 + SHIFT) * x - padded[:-2] - padded[2:]


def replicated_matvec(x_full, rank, size):
    """``A x`` of a replicated ``x``: each rank computes its block (with the halo exchange),
    then every block is gathered."""
    mine = block_matvec(lax.dynamic_slice_in_dim(x_full, rank * BLOCK, BLOCK), rank, size)
    return mpi.allgather(mine).reshape(-1)


def mine(v, rank):
    return np.asarray(v)[rank * BLOCK:(rank + 1) * BLOCK]


# ----------------------------------------------------------------------- JAX's Krylov solvers

@pytest.mark.parametrize("solver", ["cg", "bicgstab", "gmres"])
def test_jax_krylov_solver_with_a_distributed_operator_under_jit(problem, solver):
    rank, size, a, b = problem
    from jax.scipy.sparse import linalg

    solve = getattr(linalg, solver)
    x, _ = jax.jit(lambda b: solve(lambda v: replicated_matvec(v, rank, size), b, tol=1e-10, atol=0.0,
                                   maxiter=400))(jnp.asarray(b))
    np.testing.assert_allclose(x, np.linalg.solve(a, b), rtol=1e-7, atol=1e-8)


def test_gradient_through_cg_is_the_implicit_one(problem):
    """d/db of |x(b)|^2 with A x = b is 2 A^-1 x (A symmetric): cg differentiates implicitly,
    solving again with the transposed operator (its collectives inside that solve too)."""
    rank, size, a, b = problem

    from jax.scipy.sparse.linalg import cg

    def loss(b):
        x, _ = cg(lambda v: replicated_matvec(v, rank, size), b, tol=1e-12, atol=0.0)
        return jnp.sum(x ** 2)

    g = jax.jit(jax.grad(loss))(jnp.asarray(b))
    x = np.linalg.solve(a, b)
    np.testing.assert_allclose(g, 2 * np.linalg.solve(a, x), rtol=1e-6, atol=1e-8)


def distributed_cg(matvec, b, iterations):
    """CG on split vectors: the dot products are allreduces (what users write for
    lax.custom_linear_solve)."""
    def dot(u, v):
        return mpi.allreduce(jnp.vdot(u, v), op=MPI.SUM)

    def step(_, state):
        x, r, p, rr = state
        ap = matvec(p)
        alpha = rr / dot(p, ap)
        x, r = x + alpha * p, r - alpha * ap
        rr_new = dot(r, r)
        return x, r, r + (rr_new / rr) * p, rr_new

    x0 = jnp.zeros_like(b)
    return lax.fori_loop(0, iterations, step, (x0, b, b, dot(b, b)))[0]


def test_custom_linear_solve_with_split_vectors_and_its_gradient(problem):
    """mpi4jax's pattern: lax.custom_linear_solve whose solve is a CG on split vectors, under jit,
    and the gradient of a global loss through it."""
    rank, size, a, b = problem

    def matvec(v):
        return block_matvec(v, rank, size)

    def solve(b):
        return lax.custom_linear_solve(matvec, b, lambda mv, rhs: distributed_cg(mv, rhs, 3 * BLOCK * size),
                                       symmetric=True)

    def loss(b):
        return mpi.allreduce(jnp.sum(solve(b) ** 2), op=MPI.SUM)

    x = np.linalg.solve(a, b)
    np.testing.assert_allclose(jax.jit(solve)(jnp.asarray(mine(b, rank))), mine(x, rank), rtol=1e-8, atol=1e-10)
    g = jax.jit(jax.grad(loss))(jnp.asarray(mine(b, rank)))
    np.testing.assert_allclose(g, mine(2 * np.linalg.solve(a, x), rank), rtol=1e-7, atol=1e-9)


# ----------------------------------------------------------------------- other solvers

def test_newton_with_custom_root(problem):
    """Solve x + 0.1 x^3 + 0.1 A x = b with lax.custom_root: Newton-like iterations whose residual
    holds the halo exchange, and whose convergence test is an allreduce."""
    rank, size, a, b = problem

    def residual(x):
        return x + 0.1 * x ** 3 + 0.1 * block_matvec(x, rank, size) - jnp.asarray(mine(b, rank))

    def newton(f, x0):
        def body(x):
            return x - f(x) / (1.0 + 0.3 * x ** 2 + 0.1 * (2.0 + SHIFT))
        def more(state):
            x, k = state
            return (mpi.allreduce(jnp.sum(f(x) ** 2), op=MPI.SUM) > 1e-24) & (k < 200)
        return lax.while_loop(more, lambda s: (body(s[0]), s[1] + 1), (x0, 0))[0]

    x = jax.jit(lambda x0: lax.custom_root(residual, x0, newton, lambda g, y: y))(jnp.zeros(BLOCK))
    want = np.zeros(len(b))
    for _ in range(500):  # the same fixed point, on the whole vector
        want = want - (want + 0.1 * want ** 3 + 0.1 * a @ want - b) / (1.0 + 0.3 * want ** 2 + 0.1 * (2.0 + SHIFT))
    np.testing.assert_allclose(x, mine(want, rank), rtol=1e-9, atol=1e-11)


def test_odeint_with_a_distributed_right_hand_side(problem):
    """dy/dt = -A y, y replicated (JAX's error control then agrees on every rank), A y by blocks."""
    rank, size, a, b = problem
    from jax.experimental.ode import odeint

    ts = jnp.array([0.0, 0.2, 0.5])
    y = jax.jit(lambda y0: odeint(lambda y, t: -replicated_matvec(y, rank, size), y0, ts, rtol=1e-9, atol=1e-9))(
        jnp.asarray(b))
    a_j = jnp.asarray(a)
    want = odeint(lambda y, t: -(a_j @ y), jnp.asarray(b), ts, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(y, want, rtol=1e-7, atol=1e-9)


def test_bfgs_with_a_distributed_objective(problem):
    """minimize 1/2 x.A x - b.x with jax.scipy.optimize.minimize(BFGS), x replicated: each rank
    adds its rows' part with an allreduce, and its custom_vjp allreduces the gradient (a replicated
    input's gradient is the sum of every rank's part)."""
    rank, size, a, b = problem
    from jax.scipy.optimize import minimize

    @jax.custom_vjp
    def objective(x):
        return mpi.allreduce(local(x), op=MPI.SUM)

    def local(x):
        xr = lax.dynamic_slice_in_dim(x, rank * BLOCK, BLOCK)
        return 0.5 * jnp.vdot(xr, block_matvec(xr, rank, size)) - jnp.vdot(xr, jnp.asarray(mine(b, rank)))

    def forward(x):
        return objective(x), x

    def backward(x, ct):
        return (mpi.allreduce(jax.grad(local)(x), op=MPI.SUM) * ct,)

    objective.defvjp(forward, backward)
    result = jax.jit(lambda x0: minimize(objective, x0, method="BFGS", tol=1e-12).x)(
        jnp.zeros(len(b)))
    aj, bj = jnp.asarray(a), jnp.asarray(b)  # BFGS on the whole problem in one process
    alone = minimize(lambda x: 0.5 * x @ aj @ x - bj @ x, jnp.zeros(len(b)), method="BFGS", tol=1e-12).x
    np.testing.assert_allclose(result, alone, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(result, np.linalg.solve(a, b), rtol=1e-3)  # and BFGS did its job


def test_custom_vmap_rule_around_a_collective(problem):
    rank, size, _, b = problem
    from jax.custom_batching import custom_vmap

    @custom_vmap
    def total(x):
        return mpi.allreduce(x, op=MPI.SUM)

    @total.def_vmap
    def _(axis_size, in_batched, xs):
        return mpi.allreduce(xs, op=MPI.SUM) * 1.0, in_batched[0]

    x = jnp.asarray(mine(b, rank))
    whole = np.asarray(b).reshape(size, BLOCK).sum(axis=0)
    np.testing.assert_allclose(jax.jit(total)(x), whole)
    np.testing.assert_allclose(jax.jit(jax.vmap(total))(jnp.stack([x, 2 * x])), np.stack([whole, 2 * whole]))


def test_checkify_of_a_distributed_program(problem):
    rank, size, a, b = problem
    from jax.experimental import checkify

    def f(x):
        y = block_matvec(x, rank, size)
        checkify.check(mpi.allreduce(jnp.sum(y ** 2), op=MPI.SUM) < 1e9, "the norm blew up")
        return y

    err, y = jax.jit(checkify.checkify(f))(jnp.asarray(mine(b, rank)))
    err.throw()
    np.testing.assert_allclose(y, mine(a @ b, rank))
    err, _ = jax.jit(checkify.checkify(f))(jnp.full(BLOCK, 1e6))
    with pytest.raises(checkify.JaxRuntimeError, match="the norm blew up"):
        err.throw()


@pytest.mark.parametrize("policy", ["nothing_saveable", "dots_saveable", "everything_saveable"])
def test_remat_policies_keep_the_gradient(problem, policy):
    rank, size, a, b = problem

    def loss(x):
        step = jax.checkpoint(lambda v: jnp.tanh(block_matvec(v, rank, size)),
                              policy=getattr(jax.checkpoint_policies, policy))
        return mpi.allreduce(jnp.sum(step(step(x)) ** 2), op=MPI.SUM)

    x = np.cos(np.arange(len(b)) * 0.3)
    g = jax.jit(jax.grad(loss))(jnp.asarray(mine(x, rank)))
    aj = jnp.asarray(a)
    want = jax.grad(lambda v: jnp.sum(jnp.tanh(aj @ jnp.tanh(aj @ v)) ** 2))(jnp.asarray(x))
    np.testing.assert_allclose(g, mine(want, rank), rtol=1e-9, atol=1e-12)


def test_lax_map_of_the_distributed_operator(problem):
    rank, size, a, b = problem
    xs = np.stack([b, 2 * b + 1, np.cos(b)])
    ys = jax.jit(lambda xs: lax.map(lambda x: block_matvec(x, rank, size), xs))(
        jnp.asarray(xs[:, rank * BLOCK:(rank + 1) * BLOCK]))
    np.testing.assert_allclose(ys, (xs @ a.T)[:, rank * BLOCK:(rank + 1) * BLOCK])


def test_associative_scan_whose_combine_holds_a_collective(world):
    """A prefix 'sum' whose combine adds the other operand's total over the ranks: the combine
    runs on every rank the same number of times, so its allreduces stay matched."""
    rank, size = world
    x = jnp.arange(6.0) + rank

    def combine(u, v):
        return u + mpi.allreduce(v, op=MPI.SUM)

    got = jax.jit(lambda x: lax.associative_scan(combine, x))(x)
    every = np.stack([np.arange(6.0) + r for r in range(size)])
    # the same scan in one process, with the allreduce as a sum over the ranks' inputs: the
    # combine sees the same tree of partial results on every rank
    np.testing.assert_allclose(got, _associative_scan_reference(every, rank))


def _associative_scan_reference(every: np.ndarray, rank: int) -> np.ndarray:
    """Run lax.associative_scan on all ranks' inputs at once (a leading axis of ranks), the
    allreduce being the sum over that axis; this rank's row."""
    def combine(u, v):
        return u + jnp.sum(v, axis=0, keepdims=True) * jnp.ones_like(v)

    out = jax.jit(lambda x: lax.associative_scan(combine, x, axis=1))(jnp.asarray(every))
    return np.asarray(out)[rank]


def test_vmap_of_a_cond_that_exchanges(problem):
    """A batched predicate turns cond into a select: both branches run, on every rank."""
    rank, size, a, b = problem
    xs = np.stack([b, -b, 0.5 * b])
    take = jnp.array([True, False, True])
    ys = jax.jit(jax.vmap(lambda t, x: lax.cond(t, lambda v: block_matvec(v, rank, size), lambda v: -v, x)))(
        take, jnp.asarray(xs[:, rank * BLOCK:(rank + 1) * BLOCK]))
    want = np.where(np.asarray(take)[:, None], xs @ a.T, -xs)
    np.testing.assert_allclose(ys, want[:, rank * BLOCK:(rank + 1) * BLOCK])
