"""The protocol between the engines and the notebook beyond ipyparallel's results: what a rank is
waiting in, and how a rank's process ended. Nothing here assumes a filesystem or a PID space
shared with the notebook: on a cluster the engines run on other hosts.

Two messages, both produced on the engine's host and carried by connections the cluster
already has:

1. **In-flight status** (engine -> notebook, while a cell runs). A thread of the engine calls
   :func:`status_message` every 0.2 s and publishes the dict with ipyparallel's
   ``publish_data``; it arrives as ``AsyncResult.data[STATUS_KEY]`` of the running cell::

       {"inflight": {"op": "allreduce", "call": 57, "bytes": 16, "peer": -1, "seconds": 12.3}
                    or None,             # the mpinb collective this rank is blocked in
        "cell": 12,                      # the engine's cell counter
        "where": {"cell": "In[7]", "line": 5,          # the running cell's line,
                  "function": "stepper", "file": "In[3]", "file_is_cell": True, "file_line": 4,  # the
                  # innermost frame of the user's code,
                  "call": "stepper", "collectives": [("all-reduce", 2)]}  # a jitted call
                 or {"cell": "In[7]", "settling": True}  # its code returned, its queued work runs
                 or None}                # (mpinb.engine.stall, mpinb.engine.settle)

2. **Exit record** (launcher wrapper -> notebook, when an engine process ends abnormally).
   ``mpinb.launch.rank`` writes one line to its stderr, which the MPI launcher (mpiexec, srun)
   forwards to the process that started it, next to the notebook, where ipyparallel keeps it
   in the engine set's output::

       MPINB-EXIT {"rank": 1, "returncode": -11, "signal": 11, "fault": "Fatal Python error: ..."}

   ``fault`` is what faulthandler wrote for the engine (a segfault's Python traceback), read
   by the wrapper from a file on the engine's own host (:func:`fault_path`).
"""

from __future__ import annotations

import json
import os

from .. import environment

STATUS_KEY = "mpinb_status"
EXIT_MARKER = "MPINB-EXIT "
#: an exit record line, newline included, fits in one atomic pipe write (PIPE_BUF is 4096 on
#: Linux): another process of the rank (its nanny) writes to the same pipe
MAX_LINE_BYTES = 4000


def status_message(inflight: dict | None, cell: int | None, where: dict | None = None) -> dict:
    return {STATUS_KEY: {"inflight": inflight, "cell": cell, "where": where}}


def inflight_of(data: dict | None) -> dict | None:
    """The in-flight record in a cell's published data (``AsyncResult.data``), if any."""
    status = (data or {}).get(STATUS_KEY)
    if not status or not status.get("inflight"):
        return None
    return dict(status["inflight"])


def where_of(data: dict | None) -> dict | None:
    """Where the running cell is, in a cell's published data, if the engine said."""
    status = (data or {}).get(STATUS_KEY)
    return dict(status["where"]) if status and status.get("where") else None


def in_jitted_collective(where: dict | None) -> bool:
    """Whether the rank waits in a jitted call whose compiled module holds collectives."""
    return bool(where and where.get("call") and where.get("collectives"))


def finishing_queued_work(where: dict | None) -> bool:
    """Whether the rank's cell code returned and it waits for the work its jitted calls queued
    (mpinb.engine.settle)."""
    return bool(where and where.get("settling"))


#: the variable through which the rank wrapper (mpinb.launch.rank) tells its engine the folder it
#: reads the engine's fault report from (the engine's setup writes faulthandler's output there)
STATUS_DIR_ENV = environment.STATUS_DIR.name


def fault_path(directory: str, rank: int | None) -> str:
    """Where an engine's faulthandler writes, on the engine's host."""
    return os.path.join(directory, f"fault-rank{rank}.txt")


def exit_line(rank: int | None, returncode: int, fault: str = "") -> str:
    """The record as one line of at most MAX_LINE_BYTES - 1 bytes (the fault text is cut
    short, keeping its start: the innermost frames come first in faulthandler's report)."""
    record = {"rank": rank, "returncode": returncode, "signal": -returncode if returncode < 0 else None,
              "fault": fault}

    def line_with(chars: int) -> str:
        return EXIT_MARKER + json.dumps(dict(record, fault=fault[:chars]))

    if len(line_with(len(fault)).encode()) < MAX_LINE_BYTES:
        return line_with(len(fault))
    lo, hi = 0, len(fault)  # the longest prefix that fits: lo fits, hi does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if len(line_with(mid).encode()) < MAX_LINE_BYTES else (lo, mid)
    return line_with(lo)


def parse_exit_lines(text: str) -> dict[int, dict]:
    """{rank: exit record} from a launcher's output (other lines are ignored; a later record of
    the same rank wins). Another process of the same rank (its nanny) writes to the same
    stream, so text may follow the record on its line: the JSON object is read up to its end."""
    out = {}
    decoder = json.JSONDecoder()
    for line in text.splitlines():
        at = line.find(EXIT_MARKER)
        if at < 0:
            continue
        try:
            record, _ = decoder.raw_decode(line, at + len(EXIT_MARKER))
        except ValueError:
            continue
        if isinstance(record, dict) and isinstance(record.get("rank"), int):
            out[record["rank"]] = record
    return out
