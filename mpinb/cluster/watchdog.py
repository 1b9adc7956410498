"""A cluster's watchdog: ``python -m mpinb.cluster.watchdog CLUSTER_ID``, one per cluster, started
beside it on the notebook's host in a session of its own (a signal to the kernel's process group
does not reach it).

Exactly one watchdog watches a cluster: it holds the cluster's lock file (``<id>.lock`` beside
its file) locked while it runs, and a second one started for the same cluster exits at once. The
kernel frees the lock when the watchdog ends however it ends, so a free lock says that no
watchdog watches, and ``list``, ``attach`` and ``start`` give such a cluster a new one
(mpinb.cluster.upkeep).

Once a second it reads the cluster's file (mpinb.cluster.registry). When the cluster ended
outside its notebook (mpinb.cluster.outside_end: ipyparallel's own stop, from JupyterLab's
IPython Parallel panel or ``ipcluster stop``; its controller or its MPI job killed), the watchdog
ends what is left of it (no controller, no MPI job, no connection or cluster file is left):
at once when no holder runs, else after HELD_GRACE seconds, in which a holder that runs a cell
ends it itself; it notes in the cluster's file how it ended (the holder says so at its next
cell) and exits.
While the cluster's holder (the kernel or script that started it, or last attached) runs,
nothing else happens. When the holder
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

from .. import environment
from . import identity, outside_end, registry

POLL = 1.0  # seconds between looks at the holder and the cluster's processes
JOB_LOOK = 10.0  # seconds between questions to Slurm about a batch job
#: seconds between seeing that a held cluster ended outside its notebook and ending what is left:
#: ipyparallel's own stop ends the controller at once, the engines and the cluster file within
#: about 5 s (4-5 s seen here), and a holder that runs a cell meanwhile ends the cluster itself
HELD_GRACE = 10.0


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


def kill_remnants(cluster_id: str | None) -> None:
    """SIGKILL to what is left of a cluster whose leaders were killed alone (a controller killed
    with SIGKILL leaves its children): the processes of this user whose environment names the
    cluster (MPINB_CLUSTER_ID, which mpinb gives its controller and engines; an id is used once)."""
    if not cluster_id:
        return
    me = os.getuid()
    for proc in psutil.process_iter(["uids"]):
        try:
            if proc.pid == os.getpid() or proc.info["uids"] is None or proc.info["uids"].real != me:
                continue
            if proc.environ().get(environment.CLUSTER_ID.name) == cluster_id:
                proc.kill()
        except psutil.Error:  # ended meanwhile, or not ours to read
            continue


def end_processes(record: dict) -> None:
    """End every process the cluster started: its Slurm job or step cancelled, its MPI launchers'
    and its controller's process groups killed."""
    job = record.get("slurm_job_name")
    if job:
        from ..launch.launchers import slurm_jobs, slurm_steps

        for listed in slurm_steps(job) + slurm_jobs(job):
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                subprocess.run(["scancel", "--signal=KILL", listed], capture_output=True, timeout=30, check=False)
    for entry in record.get("processes", []):  # the MPI launcher, then the controller
        kill_with_group(entry)
    if outside_end.how_it_ended(record) is not None:  # a process of it was killed alone: its children
        kill_remnants(record.get("id"))


def remove_files(record: dict) -> None:
    """Remove the cluster's connection files, its ipyparallel cluster file (the IPython Parallel
    panel and ``ipcluster list`` list it no more) and its working directory."""
    for path in record.get("files", []):
        for found in glob.glob(path):
            with contextlib.suppress(OSError):
                os.remove(found)
    if record.get("workdir"):
        shutil.rmtree(record["workdir"], ignore_errors=True)


def end_cluster(record: dict) -> None:
    """End every process the cluster started, remove its files (see the module)."""
    end_processes(record)
    remove_files(record)
    forget(record["id"])


def forget(cluster_id: str) -> None:
    """Remove a cluster's file, its watchdog's log and its lock file."""
    registry.remove(cluster_id)
    for path in (os.path.join(registry.folder(), f"{cluster_id}.log"), registry.lock_path(cluster_id)):
        with contextlib.suppress(OSError):
            os.remove(path)


def ended_outside(record: dict, last_job_look: list[float]) -> dict | None:
    """How the cluster ended outside its notebook (mpinb.cluster.outside_end), None while it runs
    or while its holder stops it; a batch job's end is asked of Slurm every JOB_LOOK seconds
    (``last_job_look``: when it was last asked, kept by the caller)."""
    if record.get("stopping"):
        return None
    ended = outside_end.how_it_ended(record)
    job = record.get("slurm_job_name")
    if ended is None and job and not record.get("launchers") and time.monotonic() - last_job_look[0] >= JOB_LOOK:
        from ..launch.launchers import slurm_job_runs

        last_job_look[0] = time.monotonic()
        if slurm_job_runs(job) is False:
            ended = {"cause": outside_end.JOB_ENDED}
    return ended


def end_ended(cluster_id: str, ended: dict) -> bool:
    """End what is left of a cluster that ended outside its notebook; its file keeps the facts
    (``ended``, written first) for a holder that still runs, which says them at its next cell.
    False, doing nothing, when the holder stops the cluster meanwhile."""
    record = registry.read(cluster_id)
    if record is None or record.get("stopping"):
        return False
    held = registry.alive(record.get("holder"))
    if held:
        registry.update(cluster_id, ended=ended, ended_at=time.time())
    end_processes(record)
    remove_files(record)
    if not held:
        forget(cluster_id)
    return True


def watch(cluster_id: str, poll: float = POLL) -> str:
    """Watch until the cluster is stopped ('stopped'), ended here because its holder is gone
    ('ended') or because it ended outside its notebook ('ended outside'); 'watched' at once
    when another watchdog watches it."""
    if registry.read(cluster_id) is None:
        return "stopped"
    lock = take_lock(cluster_id)
    if lock is None:
        return "watched"
    last_job_look = [time.monotonic()]
    seen_ended: float | None = None  # when the cluster was first seen ended outside its notebook
    while True:
        record = registry.read(cluster_id)
        if record is None:
            return "stopped"
        ended = ended_outside(record, last_job_look)
        held = registry.alive(record.get("holder"))
        seen_ended = None if ended is None else (seen_ended or time.monotonic())
        grace_over = ended is not None and (not held or time.monotonic() - seen_ended >= HELD_GRACE)
        if grace_over and end_ended(cluster_id, ended):  # the facts as they are now, the grace over
            return "ended outside"
        if held:
            if record.get("released_at"):
                registry.update(cluster_id, released_at=None)
        else:
            released = record.get("released_at") or time.time()
            if not record.get("released_at"):
                registry.update(cluster_id, released_at=released)
            keep = record.get("keep_alive")
            if record.get("started_outside"):
                pass  # ipyparallel's (a profile's cluster): it ends with ipyparallel's stop, above
            elif keep is None or time.time() - released >= keep:
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
