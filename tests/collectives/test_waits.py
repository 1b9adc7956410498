"""What a blocked call tells about whom it waits for (mpi.inflight(), read by the notebook's
deadlock proof): peers, tags and the communicator's members as world ranks, on a communicator
whose ranks are numbered backwards. Each rank receives from itself: its own helper thread sends
the message once it has read the record, so this runs at any size."""

import threading
import time

import jax
import jax.numpy as jnp
import numpy as np
from mpi4py import MPI

from mpinb import mpi


def test_a_blocked_receive_says_whom_it_waits_for_in_world_ranks(world):
    rank, size = world
    backwards = MPI.COMM_WORLD.Split(0, size - 1 - rank)
    me = backwards.Get_rank()
    assert me == size - 1 - rank
    seen = []

    def read_then_send():
        deadline = time.monotonic() + 120
        while not seen and time.monotonic() < deadline:
            record = mpi.inflight()
            if record and record["op"] == "recv":
                seen.append(record)
            time.sleep(0.01)
        backwards.Send(np.arange(3, dtype=np.float32), dest=me, tag=5)

    helper = threading.Thread(target=read_then_send)
    helper.start()
    try:
        got = jax.block_until_ready(mpi.recv(jnp.zeros(3, jnp.float32), source=me, tag=5, comm=backwards))
    finally:
        helper.join()
        backwards.Free()
    assert np.array_equal(np.asarray(got), np.arange(3))
    record = seen[0]
    assert record["source"] == rank and record["dest"] is None  # its own world rank, through the comm
    assert record["recvtag"] == 5 and record["root"] is None and record["received"] is False
    assert record["comm"] == list(range(size - 1, -1, -1))
    assert mpi.inflight() is None  # nothing in flight once it returned
