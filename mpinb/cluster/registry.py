"""This user's clusters on this host, one file each: what a new kernel needs to find, attach to
or end a cluster, and what the cluster's watchdog (mpinb.cluster.watchdog) needs to end it when
no kernel holds it any more.

The files live in ``<Jupyter runtime dir>/mpinb-clusters/<cluster id>.json`` (the folder mode
0700, each file 0600: they name the cluster's processes and its connection files, which carry
its key). A cluster's *holder* is the process (a kernel, a script) that started or last attached
to it, named by PID, start time and boot (mpinb.cluster.identity) so that a reused PID, a zombie
or a process of an earlier boot is not taken for it.

Changes to a file are made one at a time (``update`` holds ``<id>.edit`` locked while it reads,
changes and writes), and one process at a time takes in a cluster that ipyparallel started
(``taking``, ``<id>.take``).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time

from . import identity

FOLDER = "mpinb-clusters"


def folder() -> str:
    from jupyter_core.paths import jupyter_runtime_dir

    path = os.path.join(jupyter_runtime_dir(), FOLDER)
    os.makedirs(path, mode=0o700, exist_ok=True)
    os.chmod(path, 0o700)
    return path


def path_of(cluster_id: str) -> str:
    return os.path.join(folder(), f"{cluster_id}.json")


def me() -> dict:
    """This process as a holder: its PID, start time, boot and host."""
    return identity.me()


def alive(holder: dict | None) -> bool:
    """Whether the holder process still runs: the same process (PID, start time, boot), not a
    zombie (mpinb.cluster.identity)."""
    return identity.running(holder)


def lock_path(cluster_id: str, kind: str = "lock") -> str:
    """A cluster's lock file: ``lock``, the one its watchdog holds while it watches
    (mpinb.cluster.watchdog); ``edit``, held by each change of its file (``editing``); ``take``,
    held while a process takes the cluster in (``taking``)."""
    return os.path.join(folder(), f"{cluster_id}.{kind}")


def write(cluster_id: str, record: dict) -> str:
    """Write (or replace) a cluster's file, readable by its owner only."""
    path = path_of(cluster_id)
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(record, fh, indent=1, sort_keys=True)
    os.replace(tmp, path)
    return path


def read(cluster_id: str) -> dict | None:
    try:
        with open(path_of(cluster_id)) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


@contextlib.contextmanager
def editing(cluster_id: str):
    """The cluster's file held for this process's change alone (an exclusive lock on
    ``<id>.edit``): another process's change waits, and is not lost."""
    fd = os.open(lock_path(cluster_id, "edit"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # and its lock


def update(cluster_id: str, **changes) -> dict | None:
    """Change some fields of a cluster's file (one change at a time); None when it is gone."""
    if not os.path.exists(path_of(cluster_id)):
        return None  # gone: no lock file left behind for it
    with editing(cluster_id):
        record = read(cluster_id)
        if record is None:
            return None
        record.update(changes)
        write(cluster_id, record)
        return record


@contextlib.contextmanager
def taking(cluster_id: str):
    """Whether this process may take in the cluster now: yields None while it alone does (others
    are refused until it leaves the block), else the process that is taking it in (its PID and
    host, as ``me()`` names it)."""
    path = lock_path(cluster_id, "take")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                other = json.loads(os.pread(fd, 4096, 0) or b"null")
            except ValueError:  # being written
                other = None
            yield other or {"pid": None, "host": None}
            return
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(me()).encode(), 0)
        try:
            yield None
        finally:
            with contextlib.suppress(OSError):
                os.remove(path)  # one that opened it meanwhile then finds the cluster's file
    finally:
        os.close(fd)


def remove(cluster_id: str) -> None:
    """Remove a cluster's file (and the lock of its changes)."""
    for path in (path_of(cluster_id), lock_path(cluster_id, "edit")):
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)


def clusters() -> list[dict]:
    """Every cluster file of this user here, oldest first."""
    found = []
    for name in sorted(os.listdir(folder())):
        if name.endswith(".json"):
            record = read(name[:-len(".json")])
            if record is not None:
                found.append(record)
    return sorted(found, key=lambda r: r.get("started_at", 0))


def idle_seconds(record: dict, now: float | None = None) -> float | None:
    """How long a cluster has had no live holder, None while it has one."""
    if alive(record.get("holder")):
        return None
    since = record.get("released_at") or record.get("started_at") or 0
    return max(0.0, (time.time() if now is None else now) - since)
