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
# # The distributed transpose three ways: mpinb, JAX's own `shard_map`, one process
#
# JaxPM and jaxDecomp now distribute with JAX itself: `jax.distributed.initialize()`, a global
# mesh, `shard_map` with `lax.all_to_all`. An mpinb cluster started with `--jax-distributed`
# runs that code across its ranks with no boilerplate, beside `mpinb.mpi` code, with the same
# views: here the transpose of a matrix whose rows are spread over the ranks, written three ways.

# %%
import os

# 4 ranks, or as many as this machine has cores if that is fewer (more ranks than cores are
# right but slow); MPINB_NOTEBOOK_RANKS=N chooses another number
n = int(os.environ.get("MPINB_NOTEBOOK_RANKS", min(4, os.cpu_count() or 1)))
# %load_ext mpinb
# %mpijax start -n $n --jax-distributed

# %% [markdown]
# `jax.process_count()` is the number of ranks: every engine called `jax.distributed.initialize`
# when it started. The matrix `A` (N × M) is the same on every rank; each rank owns N/size rows.

# %%
# %%mpijax --setup
import time
import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import NamedSharding, PartitionSpec as P
from mpi4py import MPI
from mpinb import mpi

rank, size = MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size()
N, M = 8 * size, 6 * size
A = np.arange(N * M, dtype=np.float32).reshape(N, M)
block = A[rank * (N // size):(rank + 1) * (N // size)]       # this rank's rows
expected = A.T[rank * (M // size):(rank + 1) * (M // size)]  # this rank's rows of A.T
print(f"rank {rank}: process {jax.process_index()} of {jax.process_count()}, devices {jax.device_count()}")

# %% [markdown]
# ## 1. `mpinb.mpi.alltoall` under `jax.jit`
#
# Cut the block into one piece per rank, exchange, stack: mpi4jax's way, with mpinb's
# collective (it pins row-major layouts, so the jitted result equals the eager one).

# %%
# %%mpijax --compare --show mpinb_ok
def mpinb_transpose(b):
    rows, cols = b.shape
    pieces = b.reshape(rows, size, cols // size).transpose(1, 0, 2)  # piece s goes to rank s
    return mpi.alltoall(pieces).reshape(size * rows, cols // size).T

mpinb_jit = jax.jit(mpinb_transpose)
mpinb_result = mpinb_jit(block)
mpinb_ok = bool(np.array_equal(np.asarray(mpinb_result), expected))

# %% [markdown]
# ## 2. `shard_map` with `lax.all_to_all` over `jax.distributed`
#
# The same exchange in JAX's own words: a global array sharded by rows over a mesh of every
# process's device. The HLO findings now include XLA's own `all-to-all` and the transpose XLA
# materialises after it (an info finding: correct, a copy). `--show y` draws which rank holds
# which block of the global result; `--compare` compares it block by block on each rank.

# %%
# %%mpijax --compare --show jax_ok,y
mesh = jax.make_mesh((jax.device_count(),), ("x",))
x = jax.make_array_from_process_local_data(NamedSharding(mesh, P("x")), block)
jax_transpose = jax.jit(jax.shard_map(lambda b: jax.lax.all_to_all(b, "x", 1, 0, tiled=True).T,
                                      mesh=mesh, in_specs=P("x"), out_specs=P("x")))
y = jax_transpose(x)
jax_ok = bool(np.array_equal(np.asarray(y.addressable_data(0)), expected))

# %% [markdown]
# ## 2b. mpinb's `alltoall` inside the `shard_map` body
#
# With one device per process, the body may call `mpinb.mpi`'s collectives where it called
# `lax.all_to_all`: the same blocks, over MPI (the fast path; see the timings below).

# %%
# %%mpijax --show both_ok
def block_transpose(b):  # lax.all_to_all(b, "x", 1, 0, tiled=True).T, with mpinb's alltoall
    rows, cols = b.shape
    pieces = b.reshape(rows, size, cols // size).transpose(1, 0, 2)
    return mpi.alltoall(pieces).reshape(size * rows, cols // size).T

both_transpose = jax.jit(jax.shard_map(block_transpose, mesh=mesh, in_specs=P("x"), out_specs=P("x")))
both_ok = bool(np.array_equal(np.asarray(both_transpose(x).addressable_data(0)), expected))

# %% [markdown]
# ## 3. One process, and the three side by side
#
# NumPy's `A.T` is the reference. Times are per call after a warm-up, on this machine's ranks,
# each called with a JAX array already in place (a NumPy argument would be copied in first, at
# every call: that alone made mpinb's plain jit look several times slower here). mpinb's two run
# in checked mode, the default of `%mpijax start`: one small allgather more per collective
# (`--unchecked` times them without it); JAX's all_to_all goes through Gloo.

# %%
# %%mpijax
def per_call(f, arg, repeat=100):
    jax.block_until_ready(f(arg))
    t0 = time.perf_counter()
    for _ in range(repeat):
        jax.block_until_ready(f(arg))
    return (time.perf_counter() - t0) / repeat * 1e6

t_mpinb = per_call(mpinb_jit, jnp.asarray(block))
t_jax, t_both = per_call(jax_transpose, x), per_call(both_transpose, x)
t0 = time.perf_counter()
reference = A.T.copy()
t_numpy = (time.perf_counter() - t0) * 1e6
print(f"mpinb alltoall : equals numpy {mpinb_ok}, {t_mpinb:8.1f} us per call")
print(f"jax all_to_all : equals numpy {jax_ok}, {t_jax:8.1f} us per call")
print(f"mpinb in shard_map: equals numpy {both_ok}, {t_both:8.1f} us per call")
print(f"numpy, 1 process: whole A.T, {t_numpy:8.1f} us")

# %% [markdown]
# ## The global array in the notebook
#
# `%mpijax pull y` assembles the sharded `y` from the blocks the ranks hold, in index order:
# one NumPy array here, in the notebook, equal to `A.T`; `--images` draws it.

# %%
# %mpijax pull y --as y_global --images
import numpy as np

A_here = np.arange(y_global.shape[1] * y_global.shape[0], dtype=np.float32).reshape(y_global.shape[::-1])
print("pulled", y_global.shape, "equals A.T:", bool(np.array_equal(y_global, A_here.T)))

# %% [markdown]
# ## When one rank skips a collective
#
# A collective that only some processes reach hangs without a word in plain JAX. Here rank 0
# alone calls the jitted transpose; with `--timeout` the report says where rank 0 waits (the
# cell's line, the jitted function, the collectives it holds) and that the others finished
# without calling it. The cell fails on purpose (`--no-raise`); a rank stuck in a collective
# cannot be interrupted, so the cluster is restarted after it (the `--setup` cell is replayed).

# %%
# %%mpijax --timeout 8 --no-raise
if rank == 0:
    y = jax_transpose(x)

# %%
# %mpijax restart

# %%
# %mpijax stop
