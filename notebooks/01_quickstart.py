# ---
# jupyter:
#   jupytext:
#     formats: mpinb/tutorials///ipynb,notebooks///py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.7
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # mpinb quick start
#
# Start a cluster of MPI engines (one engine per MPI rank), run cells on every rank with
# `%%mpijax`, and read every rank's result side by side.

# %%
import os

# 4 ranks, or as many as this machine has cores if that is fewer (more ranks than cores are
# right but slow); MPINB_NOTEBOOK_RANKS=N chooses another number
n = int(os.environ.get("MPINB_NOTEBOOK_RANKS", min(4, os.cpu_count() or 1)))
# %load_ext mpinb
# %mpijax start -n $n

# %% [markdown]
# Every `%%mpijax` cell runs on all ranks. Variables live on the engines, one namespace per
# rank; the view shows what the ranks printed or computed alike once, under `[ranks 0-3]`, and
# what differs under each rank (`--by-rank` shows every rank in full). Lines that differ only by
# each rank's own number are said once too, the number shown as the ranks that print it: ⟨0-3⟩.

# %%
# %%mpijax
import jax
import jax.numpy as jnp
from mpi4py import MPI
from mpinb import mpi

rank, size = MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size()
print(f"hello from rank {rank} of {size}")
x = jnp.arange(4.0) + 10 * rank
x

# %% [markdown]
# ## Collectives inside `jax.jit`
#
# `mpinb.mpi` has the API of mpi4jax. `--show` summarises variables per rank: shape, dtype,
# min/max/mean and a preview.

# %%
# %%mpijax --show total,everyone
total = jax.jit(lambda v: mpi.allreduce(v, op=MPI.SUM))(x)
everyone = mpi.allgather(x)

# %% [markdown]
# `--ranks` restricts a cell to some ranks (only for cells without collectives, which need
# every rank), and an error on one rank is shown in that rank's column. A failing rank also
# raises `CellFailed` after the view, so that "Run All" stops there; this cell fails on
# purpose, so `--no-raise` keeps the notebook going.

# %%
# %%mpijax --ranks 0
print("only rank", rank, "runs this")

# %%
# %%mpijax --no-raise
if rank == size - 1:
    raise ValueError(f"rank {rank} refuses")

# %% [markdown]
# `--compare` first runs the cell without jit (its bindings are rolled back afterwards), then
# normally, and compares every JAX value the cell assigned and what it printed.

# %%
# %%mpijax --compare
y = jax.jit(lambda v: mpi.alltoall(jnp.tile(v, (size, 1))))(x)

# %%
# %mpijax status

# %%
# %mpijax stop
