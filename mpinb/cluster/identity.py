"""Which process a cluster's file names, and whether that very process still runs.

A PID alone does not name a process: after its process ends the PID is given to another, and
after a reboot every PID of the file names a process of the new boot. A process is therefore
recorded by its PID, its start time (in clock ticks since boot, field 22 of ``/proc/PID/stat``:
exact, an integer) and the boot it ran in (``/proc/sys/kernel/random/boot_id``). It runs when a
process with that PID exists in this boot, started at that tick, and is not a zombie: a zombie
(killed, not yet reaped by its parent) runs no code, and counts as gone.

Where ``/proc`` is missing (macOS) psutil's start time (seconds since the epoch) and status
stand in; a file written there names no boot, and its processes are judged by PID and start time.
"""

from __future__ import annotations

import functools
import os
import socket

import psutil

BOOT_ID = "/proc/sys/kernel/random/boot_id"


@functools.lru_cache(maxsize=1)
def boot_id() -> str | None:
    """This boot's id (a new one at every boot), None where the system has none."""
    try:
        with open(BOOT_ID) as fh:
            return fh.read().strip() or None
    except OSError:
        return None


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` from the state on (the name, in parentheses, may hold
    spaces and parentheses itself: it ends at the last ')'), None when there is no such file."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            text = fh.read().decode("ascii", "replace")
    except OSError:
        return None
    return text[text.rfind(")") + 2:].split()


def _look(pid: int) -> tuple[str, int | None, float | None] | None:
    """(state letter, start ticks, start seconds since the epoch) of a process, None if none."""
    fields = _stat_fields(pid)
    if fields is not None and len(fields) > 19:
        state, ticks = fields[0], int(fields[19])  # field 3 is the state, field 22 the start
        try:
            started = psutil.Process(pid).create_time()
        except psutil.Error:
            started = None
        return state, ticks, started
    if os.path.isdir("/proc"):  # a Linux without this PID
        return None
    try:
        proc = psutil.Process(pid)
        state = "Z" if proc.status() == psutil.STATUS_ZOMBIE else "R"
        return state, None, proc.create_time()
    except psutil.Error:
        return None


def of(pid: int) -> dict | None:
    """A process as the cluster's file records it: PID, start ticks and seconds, boot, process
    group (the processes it leads are ended with it); None when it does not run."""
    seen = _look(pid)
    if seen is None or seen[0] == "Z":
        return None
    try:
        pgid = os.getpgid(pid)
    except OSError:
        return None
    return {"pid": pid, "ticks": seen[1], "started": seen[2], "boot": boot_id(), "pgid": pgid}


def me() -> dict:
    """This process as a cluster's holder: its identity and its host."""
    entry = of(os.getpid()) or {"pid": os.getpid(), "boot": boot_id()}
    return {**entry, "host": socket.gethostname()}


def this_boot(entry: dict | None) -> bool:
    """Whether an entry (or a record) was written in this boot: one that names another boot is
    not, one that names none (written where there is no boot id) is taken to be."""
    recorded = (entry or {}).get("boot")
    return recorded is None or boot_id() is None or recorded == boot_id()


def running(entry: dict | None) -> bool:
    """Whether the process an entry names still runs: the same process (PID, start, boot), not a
    zombie. An entry without a start (a damaged file) names no process for sure: not running."""
    if not entry or not isinstance(entry.get("pid"), int) or not this_boot(entry):
        return False
    seen = _look(entry["pid"])
    if seen is None or seen[0] == "Z":
        return False
    _, ticks, started = seen
    if entry.get("ticks") is not None and ticks is not None:
        return entry["ticks"] == ticks
    if entry.get("started") is not None and started is not None:
        return abs(started - entry["started"]) < 0.01
    return False


def process(entry: dict | None) -> psutil.Process | None:
    """The psutil handle of the process an entry names, if it still runs (see ``running``)."""
    if not running(entry):
        return None
    try:
        return psutil.Process(entry["pid"])
    except psutil.Error:
        return None
