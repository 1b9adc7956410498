"""An nbclient ``NotebookClient`` that does not stall on a reply it has already received.

In CI, a kernel's reply already in the client's socket went unseen by jupyter_client's asyncio
poll until the whole cell timeout (600 s) ran out and the poll's final check found it: a cell
that took 0.2 s stalled a run ten minutes, then it went on as if nothing had happened (the
kernel idle all along, the next cell not yet sent). Reproduced with ipykernel 6.31 and 7.4,
jupyter_client 8.10, pyzmq 27.3: three of about twenty-six runs of the quickstart, two running side by
side; one of four plain runs of 06_hangs (a 40 s wait, the reply in the socket at its end).
The cause is a lost wake-up: a zmq socket's file descriptor is edge-triggered (it signals that
something changed; any read of ZMQ_EVENTS, send or receive on the socket clears it), and pyzmq's
asyncio poll sleeps until the descriptor signals. Caught in the act 0.3 s before the timeout:
the reply in the shell socket, pyzmq's poll registered on the running loop, the descriptor not
readable. tests/test_notebook_client.py makes the same stall on purpose. Polling in slices of a
second re-reads ZMQ_EVENTS at each slice's start and end. Used by
tests/test_notebooks.py and, copied beside it, by .ci/installed.py (which runs outside the
tree)."""

import time
from queue import Empty

from nbclient import NotebookClient


def in_slices(get_msg, slice_s: float = 1.0):
    """``get_msg(timeout)`` of a kernel client's channel, polling in slices of ``slice_s``."""
    async def get(timeout=None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = slice_s if deadline is None else max(0.0, min(slice_s, deadline - time.monotonic()))
            try:
                return await get_msg(timeout=left)
            except Empty:
                if deadline is not None and time.monotonic() >= deadline:
                    raise
    return get


class SlicedClient(NotebookClient):
    """A NotebookClient whose shell and IOPub channels poll in slices (see the module docstring)."""

    async def async_start_new_kernel_client(self):
        kc = await super().async_start_new_kernel_client()
        for channel in (kc.shell_channel, kc.iopub_channel):
            channel.get_msg = in_slices(channel.get_msg)
        return kc
