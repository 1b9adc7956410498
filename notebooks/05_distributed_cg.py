# ---
# jupyter:
#   jupytext:
#     formats: mpinb/tutorials///ipynb,notebooks///py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # A distributed conjugate-gradient solve
#
# After transposes, solvers: a 1-D Poisson problem `A x = b` split over the ranks, each rank
# holding a block of 8 unknowns. The product `A x` needs the neighbours' edge values (a halo
# exchange with `sendrecv`); the dot products of CG need every rank's part (an `allreduce`).
# JAX's own solvers and `lax.custom_linear_solve` keep mpinb's collectives in program order
# under `jax.jit`, and `--compare` checks the jitted solve against the eager one, rank by rank.

# %%
import os

# 4 ranks, or as many as this machine has cores if that is fewer (more ranks than cores are
# right but slow); MPINB_NOTEBOOK_RANKS=N chooses another number
n = int(os.environ.get("MPINB_NOTEBOOK_RANKS", min(4, os.cpu_count() or 1)))
# %load_ext mpinb
# %mpijax start -n $n

# %% [markdown]
# The operator, by blocks. `MPI.PROC_NULL` at the two ends of the line: nothing comes from
# there, and the boundary is zero.

# %%
# %%mpijax --setup
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from mpi4py import MPI
from mpinb import mpi

jax.config.update("jax_enable_x64", True)
rank, size = MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size()
BLOCK, SHIFT = 8, 0.5
left = rank - 1 if rank > 0 else MPI.PROC_NULL
right = rank + 1 if rank < size - 1 else MPI.PROC_NULL


def matvec(x):
    """This rank's block of A x: 2.5 x_i - x_{i-1} - x_{i+1}, the halos by sendrecv."""
    from_left = mpi.sendrecv(x[-1:], x[:1], source=left, dest=right)
    from_right = mpi.sendrecv(x[:1], x[-1:], source=right, dest=left)
    padded = jnp.concatenate([from_left, x, from_right])
    return (2.0 + SHIFT) * x - padded[:-2] - padded[2:]


def dot(u, v):
    return mpi.allreduce(jnp.vdot(u, v), op=MPI.SUM)


b = jnp.sin(jnp.arange(BLOCK * size) * 0.7)[rank * BLOCK:(rank + 1) * BLOCK] + 1.0

# %% [markdown]
# ## CG with distributed dot products, under `lax.custom_linear_solve`
#
# The CG loop runs the same number of times on every rank (its step sizes come from
# allreduces, so every rank computes the same ones). `--compare` runs the cell eagerly first,
# then jitted, and compares every array the cell assigned; `--show` puts each rank's own part
# of the residual side by side (the whole one is the same on every rank).

# %%
# %%mpijax --compare --show my_residual
def cg(matvec, b, iterations=60):
    def step(_, state):
        x, r, p, rr = state
        ap = matvec(p)
        alpha = rr / dot(p, ap)
        x, r = x + alpha * p, r - alpha * ap
        rr_new = dot(r, r)
        return x, r, r + (rr_new / rr) * p, rr_new
    return lax.fori_loop(0, iterations, step, (jnp.zeros_like(b), b, b, dot(b, b)))[0]


solve = jax.jit(lambda b: lax.custom_linear_solve(matvec, b, lambda mv, rhs: cg(mv, rhs), symmetric=True))
x = solve(b)
my_residual = jnp.linalg.norm(matvec(x) - b)
print("|A x - b| over all ranks below 1e-12:", bool(jnp.sqrt(dot(matvec(x) - b, matvec(x) - b)) < 1e-12))

# %% [markdown]
# The gradient of a loss through the solve is implicit (another solve, with the transposed
# operator: its exchanges and allreduces in order too). Checked here against NumPy on the
# whole problem, gathered on every rank.

# %%
# %%mpijax
def loss(b):
    return dot(solve(b), solve(b))


grad = jax.jit(jax.grad(loss))(b)
N = BLOCK * size
A = np.diag(np.full(N, 2.0 + SHIFT)) - np.diag(np.ones(N - 1), 1) - np.diag(np.ones(N - 1), -1)
b_all = np.asarray(mpi.allgather(b)).reshape(-1)
x_all = np.linalg.solve(A, b_all)
print("x equals numpy:", np.allclose(np.asarray(mpi.allgather(x)).reshape(-1), x_all))
print("grad equals numpy:", np.allclose(np.asarray(mpi.allgather(grad)).reshape(-1), 2 * np.linalg.solve(A, x_all)))

# %% [markdown]
# ## JAX's own `cg`
#
# `jax.scipy.sparse.linalg.cg` computes its dot products locally, so it needs the whole vector
# on every rank: each rank computes its block of `A x` and `allgather`s the blocks. Its own
# `custom_linear_solve` holds the collectives; no call outside it is needed.

# %%
# %%mpijax --compare
from jax.scipy.sparse.linalg import cg as jax_cg


def replicated_matvec(x_all):
    return mpi.allgather(matvec(lax.dynamic_slice_in_dim(x_all, rank * BLOCK, BLOCK))).reshape(-1)


x_jax, _ = jax.jit(lambda b: jax_cg(replicated_matvec, b, tol=1e-12, atol=0.0))(jnp.asarray(b_all))
print("jax cg equals numpy:", np.allclose(x_jax, x_all))

# %%
# %mpijax stop
