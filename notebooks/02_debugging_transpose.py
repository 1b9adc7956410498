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
# # Debugging a distributed transpose
#
# A distributed FFT moves data between ranks with a transpose: each rank splits its rows into
# one piece per rank, an `alltoall` exchanges the pieces, and a local reshape finishes the job.
# In mpi4jax before 0.3.11 this was **wrong under `jax.jit` and right eagerly** on GPUs
# (mpi4jax issue 176). This notebook shows why, and how mpinb's views expose it.

# %%
import os

# 4 ranks, or as many as this machine has cores if that is fewer (more ranks than cores are
# right but slow); MPINB_NOTEBOOK_RANKS=N chooses another number
n = int(os.environ.get("MPINB_NOTEBOOK_RANKS", min(4, os.cpu_count() or 1)))
# %load_ext mpinb
# %mpijax start -n $n

# %% [markdown]
# ## The seed pattern: reshape, transpose, alltoall, reshape, transpose

# %%
# %%mpijax --compare --show ok
import jax
import jax.numpy as jnp
import numpy as np
from mpi4py import MPI
from mpinb import mpi

rank, size = MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size()

def transpose(block):
    n, cols = block.shape
    pieces = block.reshape(n, size, cols // size).transpose(1, 0, 2)  # piece s -> rank s
    return mpi.alltoall(pieces).reshape(size * n, cols // size).T

A = np.arange(4 * size * 6 * size, dtype=np.float32).reshape(4 * size, 6 * size)
block = A[rank * 4:(rank + 1) * 4]
t = jax.jit(transpose)(block)
ok = bool(np.array_equal(np.asarray(t), A.T[rank * 6:(rank + 1) * 6]))

# %% [markdown]
# ## What XLA compiled
#
# `%mpijax hlo` shows each rank's optimized HLO. Layout braces are minor-to-major:
# `f32[4,8,6]{2,1,0}` is row-major. Non-row-major layouts would be marked `<<...>>`.
# mpinb pins row-major layouts on its custom calls, so XLA materialises the transpose
# (the `relayout` finding, of severity info, gives its size) before handing the buffer to MPI.

# %%
# %mpijax hlo transpose(block) --ranks 0

# %% [markdown]
# ## A custom call without layout constraints (warning 2)
#
# mpi4jax before 0.3.11 emitted its custom calls without layout constraints. XLA:CPU happens to
# pick row-major anyway, so the result is right here, but nothing guarantees it. The analysis
# flags such calls. (`mpinb.mpi.teaching` holds deliberately unsafe variants, for this notebook only.)

# %%
# %%mpijax --compare
from mpinb.mpi import teaching

def transpose_unconstrained(block):
    n, cols = block.shape
    pieces = block.reshape(n, size, cols // size).transpose(1, 0, 2)
    return teaching.alltoall_unconstrained(pieces).reshape(size * n, cols // size).T

u = jax.jit(transpose_unconstrained)(block)

# %% [markdown]
# ## Reproducing the symptom on CPU: jitted wrong, eager right (warning 1)
#
# On GPU, layout assignment let the unconstrained custom call *inherit the transpose's
# layout*: instead of materialising the transpose, XLA passed the original buffer with a
# permuted layout (a free bitcast). The handler read that memory as if it were row-major.
# Eagerly, the transpose runs as its own computation and produces a row-major array, so the
# same handler got the right bytes.
#
# `teaching.alltoall_follow_producer` simulates exactly this on CPU: when its operand comes
# from a transpose inside the same jitted function it accepts the transpose's layout. Under
# `--compare` the jitted and eager results differ, and the HLO analysis names the culprit.

# %%
# %%mpijax --compare
def transpose_like_gpu(block):
    n, cols = block.shape
    pieces = block.reshape(n, size, cols // size).transpose(1, 0, 2)
    return teaching.alltoall_follow_producer(pieces).reshape(size * n, cols // size).T

z = jax.jit(transpose_like_gpu)(block)

# %% [markdown]
# The fix (mpi4jax 0.3.11, and every mpinb collective) is to pin row-major layouts on every
# operand and result of the custom call: XLA must then materialise the transpose, and the
# handler's assumption holds on every backend.

# %%
# %mpijax stop
