"""One rank of tests/test_shared_cores.py (run under mpiexec -n 2): both ranks pinned to the
same core, the time of a round trip through mpinb's waits and through raw mpi4py, measured in
turns in the same run. Prints one JSON line on rank 0: {pattern: mean seconds per round trip}.

With ``engine`` as argument the rank is set up as an engine is: mpinb's receives withdrawable
(the wake handler installed) and the MPI watch following mpi4py's receives.
"""

import json
import os
import sys
import time

ENGINE = "engine" in sys.argv[1:]
ROUNDS, PER_ROUND = 5, 40

os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core for both ranks
os.environ.setdefault("JAX_PLATFORMS", "cpu")

if ENGINE:
    from mpinb.engine import mpi4py_waits

    assert mpi4py_waits.preload(), "the MPI watch did not load"
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402

import mpinb.mpi as mpi  # noqa: E402

world = MPI.COMM_WORLD
rank = world.Get_rank()
peer = 1 - rank
if ENGINE:
    from mpinb.engine import rank_release

    assert mpi4py_waits.start()
    assert rank_release.install() is not None, "receives were not made withdrawable"
    rank_release.begin_cell()

row = jnp.arange(100, dtype=jnp.float32)


@jax.jit
def mpinb_recv(x):
    """A round trip whose waits are mpinb's recv (send, then recv on rank 0; the reverse on 1)."""
    if rank == 0:
        mpi.send(x, dest=1, comm=world)
        return mpi.recv(x, source=1, comm=world)
    y = mpi.recv(x, source=0, comm=world)
    mpi.send(y, dest=0, comm=world)
    return y


@jax.jit
def mpinb_sendrecv(x):
    """Two exchanges with mpinb's sendrecv (a round trip)."""
    y = mpi.sendrecv(x, x, source=peer, dest=peer, comm=world)
    return mpi.sendrecv(y, y, source=peer, dest=peer, comm=world)


@jax.jit
def mpinb_allreduce(x):
    """Two allreduces (MPICH's own waits, after checked mode's signature exchange if on)."""
    return mpi.allreduce(mpi.allreduce(x, op=MPI.SUM, comm=world) * 0.5, op=MPI.SUM, comm=world) * 0.5


def mpi4py_pickled(x):
    """A round trip through mpi4py's pickling recv (MPI_Mprobe: the watch's loop in engines)."""
    if rank == 0:
        world.send(x, dest=1)
        return world.recv(source=1)
    y = world.recv(source=0)
    world.send(y, dest=0)
    return y


raw_in, raw_out = np.arange(100, dtype=np.float32), np.empty(100, np.float32)


def raw(_):
    """The baseline: the same round trip with mpi4py's buffer Send/Recv (MPICH's own waits)."""
    if rank == 0:
        world.Send(raw_in, dest=1)
        world.Recv(raw_out, source=1)
    else:
        world.Recv(raw_out, source=0)
        world.Send(raw_out, dest=0)
    return raw_out


PATTERNS = {"mpinb recv": lambda: mpinb_recv(row).block_until_ready(),
            "mpinb sendrecv": lambda: mpinb_sendrecv(row).block_until_ready(),
            "mpinb allreduce": lambda: mpinb_allreduce(row).block_until_ready(),
            "raw": lambda: raw(None)}
if ENGINE:
    PATTERNS["mpi4py recv, watched"] = lambda: mpi4py_pickled(raw_in)

totals = dict.fromkeys(PATTERNS, 0.0)
for run in PATTERNS.values():  # compile and warm up
    run()
for _ in range(ROUNDS):  # in turns, so that a busy moment of the machine falls on every pattern
    for name, run in PATTERNS.items():
        world.Barrier()
        start = time.perf_counter()
        for _ in range(PER_ROUND):
            run()
        totals[name] += time.perf_counter() - start
if rank == 0:
    print(json.dumps({name: total / (ROUNDS * PER_ROUND) for name, total in totals.items()}), flush=True)
