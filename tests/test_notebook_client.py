"""The notebook tests' client (tests/support/notebook_client.py) against the stall seen in CI: a
kernel's reply already in the client's socket while pyzmq's asyncio poll waits on a socket whose
wake-up was lost (the socket's file descriptor, edge-triggered, was cleared by a read of
ZMQ_EVENTS elsewhere). The plain poll then waits its whole timeout; the sliced one re-checks."""

from __future__ import annotations

import asyncio
import time
from queue import Empty

import zmq
import zmq.asyncio
from support.notebook_client import in_slices

TIMEOUT = 4.0


async def lost_wake_up(wrap) -> tuple[float, bytes]:
    """Seconds until a message that arrived while the poll waited is returned, its wake-up lost."""
    ctx = zmq.asyncio.Context()
    receiver = ctx.socket(zmq.DEALER)
    sender = zmq.Context.instance().socket(zmq.DEALER)
    try:
        port = receiver.bind_to_random_port("tcp://127.0.0.1")
        sender.connect(f"tcp://127.0.0.1:{port}")
        sender.send(b"hello")
        assert await receiver.recv() == b"hello"  # connected, and the socket watched by this loop

        async def get_msg(timeout=None):
            if await receiver.poll(None if timeout is None else int(timeout * 1000)):
                return await receiver.recv()
            raise Empty

        started = time.monotonic()
        waiting = asyncio.ensure_future(wrap(get_msg)(timeout=TIMEOUT))
        await asyncio.sleep(0.05)  # the poll waits on the socket's descriptor
        sender.send(b"reply")
        time.sleep(0.2)  # the reply arrives while the loop does not run
        zmq.Socket.shadow(receiver.underlying).get(zmq.EVENTS)  # and its wake-up is taken elsewhere
        message = await waiting
        return time.monotonic() - started, message
    finally:
        sender.close(linger=0)
        receiver.close(linger=0)
        ctx.term()


def test_a_lost_wake_up_costs_a_slice_not_the_cell_timeout():
    seconds, message = asyncio.run(lost_wake_up(lambda get: in_slices(get, slice_s=0.25)))
    assert message == b"reply" and seconds < TIMEOUT / 2, seconds


def test_the_plain_poll_misses_it_until_its_timeout():
    """What the sliced poll guards against, shown with this pyzmq (if a pyzmq stops missing the
    wake-up, this fails and says so: the slices are then a spare check)."""
    seconds, message = asyncio.run(lost_wake_up(lambda get: get))
    assert message == b"reply" and seconds >= TIMEOUT - 0.1, seconds
