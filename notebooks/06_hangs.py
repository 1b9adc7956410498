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
# # Hangs, explained
#
# The bug met most often in distributed code is not a wrong number but a hang: ranks that wait
# for each other forever. MPI says nothing; the cell just never ends. mpinb knows what each
# rank waits in (the op, the peer, the tag, the communicator) and which ranks have left the
# cell, and once that proves that no rank can ever move on, it ends the cell by itself, with no
# timeout, and says why in one sentence. Then it frees the ranks: where every blocked rank
# waits in a receive or in an mpinb collective that the others left the cell without calling,
# mpinb takes the receives back and has the others tell the collective they will not come (each
# rank's cell fails there, with the line), and the engines keep their variables; a rank blocked
# in a send under way (or in mpi4py's own collectives) cannot be freed that way, so the engines
# are restarted and the `--setup` cell replayed (about ten seconds). The view says which.
# Each hang below is run, diagnosed, then fixed.
#
# The hang cells use `--no-raise`: a deadlocked cell fails (so that Run All stops at it), and
# this notebook means to go on.

# %%
import os

# 4 ranks, or as many as this machine has cores if that is fewer (more ranks than cores are
# right but slow); MPINB_NOTEBOOK_RANKS=N chooses another number
n = int(os.environ.get("MPINB_NOTEBOOK_RANKS", min(4, os.cpu_count() or 1)))
# %load_ext mpinb
# %mpijax start -n $n

# %%
# %%mpijax --setup
import jax.numpy as jnp
from mpi4py import MPI
from mpinb import mpi

rank, size = MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size()
left, right = (rank - 1) % size, (rank + 1) % size

# %% [markdown]
# ## A ring that receives before it sends
#
# Every rank passes its value to the right: it receives from the left, then sends to the
# right. Every rank is waiting to receive, so no one ever sends: a cycle.

# %%
# %%mpijax --no-raise
x = jnp.full(4, float(rank))
got = mpi.recv(x, source=left)
mpi.send(x, dest=right)

# %% [markdown]
# The fix: `sendrecv` sends and receives at once, so no rank waits for another to finish first.

# %%
# %%mpijax
x = jnp.full(4, float(rank))
got = mpi.sendrecv(x, x, source=left, dest=right)
print(f"rank {rank} got {float(got[0]):.0f} from rank {left}")

# %% [markdown]
# ## Two ranks that both send first
#
# Partners swap arrays: each sends, then receives. With a small message this works, because MPI
# copies it aside (an *eager* send) and the send returns at once. A large message waits for its
# receive to be posted, and both ranks are sending: a deadlock that appears only when the
# arrays grow.

# %%
# %%mpijax --no-raise
partner = rank ^ 1
if partner < size:
    for n_values in (16, 4_000_000):
        mine = jnp.ones(n_values)
        mpi.send(mine, dest=partner)
        theirs = mpi.recv(mine, source=partner)
        print(f"swapped {n_values} values")

# %% [markdown]
# The fix, again: one `sendrecv` per swap.

# %%
# %%mpijax
partner = rank ^ 1
if partner < size:
    for n_values in (16, 4_000_000):
        mine = jnp.ones(n_values)
        theirs = mpi.sendrecv(mine, mine, source=partner, dest=partner)
        print(f"swapped {n_values} values")

# %% [markdown]
# ## A collective inside a branch that depends on the rank
#
# Only rank 0 wants the total, so only rank 0 calls `allreduce`; the others leave the cell.
# A collective needs every rank of its communicator.

# %%
# %%mpijax --no-raise
if rank == 0:
    total = mpi.allreduce(jnp.float32(rank), op=MPI.SUM)
    print("total", total)

# %% [markdown]
# The fix: every rank calls it; only rank 0 prints (or use `mpi.reduce` to a root).

# %%
# %%mpijax
total = mpi.allreduce(jnp.float32(rank), op=MPI.SUM)
if rank == 0:
    print("total", float(total))

# %% [markdown]
# ## A tag that no send uses
#
# Rank 0 sends with tag 1; rank 1 receives with tag 2. The message waits on rank 1 for a
# receive with tag 1, which never comes. The sentence names the tags.

# %%
# %%mpijax --no-raise
if rank == 0:
    mpi.send(jnp.ones(3), dest=1, tag=1)
elif rank == 1:
    msg = mpi.recv(jnp.zeros(3), source=0, tag=2)

# %% [markdown]
# The fix: the same tag on both sides.

# %%
# %%mpijax
if rank == 0:
    mpi.send(jnp.ones(3), dest=1, tag=1)
elif rank == 1:
    msg = mpi.recv(jnp.zeros(3), source=0, tag=1)
    print("received", msg)

# %% [markdown]
# ## Ranks that disagree on the root
#
# Each rank believes it is the root of the broadcast. This one does not even hang: checked
# mode (on in clusters that `%mpijax start` starts) compares what every rank is about to call
# before the collective runs, and turns the disagreement into the same error on every rank.

# %%
# %%mpijax --no-raise
value = mpi.bcast(jnp.float32(rank), root=rank)

# %% [markdown]
# The fix: one root, the same on every rank.

# %%
# %%mpijax
value = mpi.bcast(jnp.float32(rank), root=0)
print("value", float(value))

# %% [markdown]
# ## The same hangs in mpi4py's own calls
#
# mpinb watches the blocking MPI calls a cell makes itself too (`comm.recv`, `comm.Send`,
# `comm.bcast`, `comm.Barrier`, ...: docs/explanation/deadlocks.md, "The MPI watch"). Here every rank asks its right
# neighbour for an object before it sends its own to the left.

# %%
# %%mpijax --no-raise
comm = MPI.COMM_WORLD
got = comm.recv(source=right)
comm.send(rank, dest=left)

# %% [markdown]
# The fix: mpi4py's `sendrecv`.

# %%
# %%mpijax
got = MPI.COMM_WORLD.sendrecv(rank, dest=left, source=right)
print(f"rank {rank} got {got} from rank {right}")

# %% [markdown]
# ## What cannot be proven
#
# A rank that computes, sleeps, or waits in a call that mpinb cannot see (a nonblocking
# receive's `wait()`, a JAX collective) may still answer, so it is never called deadlocked: such
# a hang is shown live (each rank's state and line) and ends at `--timeout` (or the stop button).

# %%
# %mpijax stop
