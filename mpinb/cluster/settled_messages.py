"""ipyparallel's client keeps every message it sent for the whole session: its result, its
metadata (output included) and futures by message id, and the id in the client's and each view's
history. mpinb reads what a cell's messages brought while the cell runs and keeps it in the
cell's result; once a cell is over, ipyparallel's copies only grow the notebook's process.
``SettledMessages`` forgets the messages of mpinb's cells but the last ``keep`` (those still
outstanding never), so that a long session's memory stays flat.
"""

from __future__ import annotations

import collections

#: the cells whose messages stay in ipyparallel's records (the last one, for a look by hand)
KEEP_CELLS = 1


class SettledMessages:
    """The message ids each of the recent cells sent, and the forgetting of older ones."""

    def __init__(self, keep: int = KEEP_CELLS):
        self.keep = keep
        self.cells: collections.deque[list[str]] = collections.deque()

    def begin(self, client) -> int:
        """Where the client's history stands as a cell begins (the mark for ``end``)."""
        return len(client.history)

    def end(self, client, views, mark: int) -> None:
        """The cell that began at ``mark`` is over: remember its messages and forget those of
        the cells before the last ``keep``."""
        self.cells.append(list(client.history[mark:]))
        old = []
        while len(self.cells) > self.keep:
            old.extend(self.cells.popleft())
        outstanding = set(client.outstanding)
        gone = {m for m in old if m not in outstanding}
        if not gone:
            return
        for table in (client.results, client.metadata, getattr(client, "_futures", {}),
                      getattr(client, "_output_futures", {})):
            for msg_id in gone:
                table.pop(msg_id, None)
        client.history[:] = [m for m in client.history if m not in gone]
        for view in views:
            view.history[:] = [m for m in view.history if m not in gone]
