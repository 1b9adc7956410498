"""The 3-rank cluster the fault and deadlock tests share: how it starts (on the topology
``support.topology`` gives), how each test finds it usable whatever the test before it left
behind, and ``usable``: the next cell runs and the setup cell's names are there (replayed after
a restart). Each test module keeps its own fixtures (``yield from started()``, ``heal(cluster)``):
one cluster per module, no autouse fixture leaking into other modules."""

from support.topology import make_cluster

SETUP = ("import jax, jax.numpy as jnp\nfrom mpi4py import MPI\nfrom mpinb import mpi\n"
         "rank, size = MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size()\nready = True")
#: A cell that should end by itself (an error on every rank, not a hang) gets this long.
NO_HANG = 120


def started():
    """A started 3-rank cluster with SETUP run as a setup cell, stopped after the generator ends."""
    c = make_cluster(3).start()
    assert c.run_cell(SETUP, setup=True).ok
    yield c
    c.stop()


def heal(cluster) -> None:
    """Restart the cluster if an earlier test left it lost or busy."""
    if cluster.lost or not cluster.wait_idle(timeout=0):
        cluster.restart()


def usable(c) -> None:
    res = c.run_cell("int(mpi.allreduce(jnp.int32(1), MPI.SUM)) + 0 * ready", timeout=NO_HANG)
    assert res.ok, res.text()
    assert res.records[0].result["repr"] == str(c.n)
