"""A cluster's watchdog: ``python -m mpinb.cluster.watchdog CLUSTER_ID``, one per cluster, started
beside it on the notebook's host in a session of its own (a signal to the kernel's process group
does not reach it).

Exactly one watchdog watches a cluster: it holds the cluster's lock file (``<id>.lock`` beside
its file) locked while it runs, and a second one started for the same cluster exits at once. The
kernel frees the lock when the watchdog ends however it ends, so a free lock says that no
watchdog watches, and ``list``, ``attach`` and ``start`` give such a cluster a new one
(mpinb.cluster.upkeep).

Once a second it reads the cluster's file (mpinb.cluster.registry). While the cluster's holder
(the kernel or script that started it, or last attached) runs, nothing happens. When the holder
is gone (SIGKILL, the OOM killer, a culler, a crash; a zombie that its parent has not reaped
counts as gone, and so does a process that took its PID: mpinb.cluster.identity) the watchdog
ends the cluster at once, or,
for a cluster kept alive on purpose (``keep_alive`` seconds), after that long without a holder
(a new kernel's ``attach`` makes itself the holder). A cluster stopped by its holder removes its
file, and the watchdog exits.

Ending a cluster does not wait for anything that may hang (a controller that does not answer,
ranks blocked in MPI): the controller's and the MPI launcher's process groups get SIGKILL, a
Slurm job or step is cancelled; ranks on other hosts end with their launcher (MPI launchers end
a job whose launcher died; mpinb's rank wrapper ends its engine when its parent dies).
Nothing depends on a message from the engines, so a cell that computes for hours without a word
is never taken for a dead kernel: only the holder's process is watched.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import os
import shutil
import signal
import subprocess
import sys
import time

import psutil

from . import identity, registry

POLL = 1.0  # seconds between looks at the holder


def same_process(entry: dict) -> psutil.Process | None:
    """The process an entry of the cluster file names, if it still runs (mpinb.cluster.identity)."""
    return identity.process(entry)


def take_lock(cluster_id: str) -> int | None:
    """The cluster's lock taken (an open descriptor that keeps it while this process lives), or
    None when another process holds it: a watchdog watches the cluster already."""
    fd = os.open(registry.lock_path(cluster_id), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def watched(cluster_id: str) -> bool:
    """Whether a watchdog watches the cluster now (holds its lock)."""
    fd = take_lock(cluster_id)
    if fd is None:
        return True
    os.close(fd)  # closing frees it again
    return False


def kill_with_group(entry: dict) -> None:
    """SIGKILL to the process an entry ({pid, started, pgid}) names, if it still runs, and to its
    whole process group when it leads one (what it forked, even what would outlive it)."""
    proc = same_process(entry)
    if proc is None:
        return
    if entry.get("pgid") == entry["pid"]:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(entry["pid"], signal.SIGKILL)
    with contextlib.suppress(psutil.Error):
        proc.kill()


def end_cluster(record: dict) -> None:
    """End every process the cluster started, remove its files (see the module)."""
    job = record.get("slurm_job_name")
    if job:
        from ..launch.launchers import slurm_jobs, slurm_steps

        for listed in slurm_steps(job) + slurm_jobs(job):
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                subprocess.run(["scancel", "--signal=KILL", listed], capture_output=True, timeout=30, check=False)
    for entry in record.get("processes", []):  # the MPI launcher, then the controller
        kill_with_group(entry)
    for path in record.get("files", []):
        for found in glob.glob(path):
            with contextlib.suppress(OSError):
                os.remove(found)
    if record.get("workdir"):
        shutil.rmtree(record["workdir"], ignore_errors=True)
    forget(record["id"])


def forget(cluster_id: str) -> None:
    """Remove a cluster's file, its watchdog's log and its lock file."""
    registry.remove(cluster_id)
    for path in (os.path.join(registry.folder(), f"{cluster_id}.log"), registry.lock_path(cluster_id)):
        with contextlib.suppress(OSError):
            os.remove(path)


def watch(cluster_id: str, poll: float = POLL) -> str:
    """Watch until the cluster is stopped ('stopped') or ended here ('ended'); 'watched' at once
    when another watchdog watches it."""
    if registry.read(cluster_id) is None:
        return "stopped"
    lock = take_lock(cluster_id)
    if lock is None:
        return "watched"
    while True:
        record = registry.read(cluster_id)
        if record is None:
            return "stopped"
        if registry.alive(record.get("holder")):
            if record.get("released_at"):
                registry.update(cluster_id, released_at=None)
        else:
            released = record.get("released_at") or time.time()
            if not record.get("released_at"):
                registry.update(cluster_id, released_at=released)
            keep = record.get("keep_alive")
            if keep is None or time.time() - released >= keep:
                end_cluster(record)
                return "ended"
        time.sleep(poll)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) != 1:
        print("usage: python -m mpinb.cluster.watchdog CLUSTER_ID", file=sys.stderr)
        return 2
    outcome = watch(argv[0])
    print(f"mpinb watchdog: cluster {argv[0]} {outcome}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
