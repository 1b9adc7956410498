"""An nbclient ``NotebookClient`` that does not stall on a reply it has already received.

In CI, a kernel's reply already in the client's socket went unseen by jupyter_client's asyncio
poll until the whole cell timeout (600 s) ran out and the poll's final check found it: a cell
that took 0.2 s stalled a run ten minutes, then it went on as if nothing had happened (the
kernel idle all along, the next cell not yet sent). Reproduced with ipykernel 6.31 and 7.4,
jupyter_client 8.10, pyzmq 27.3: three of about twenty-six runs of the quickstart, two running side by
side. Polling in slices of a second ends each slice with that check. Used by
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
