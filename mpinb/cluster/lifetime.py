"""How long a cluster lives: registered with its watchdog as soon as its processes start (so that
a kernel killed even during the start leaves nothing behind), unregistered when it is stopped.
See mpinb.cluster.registry (the files) and mpinb.cluster.watchdog (the process that ends a
cluster whose holder is gone).
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time

import psutil

from ..options.cluster_options import ClusterOptions
from . import identity, registry


def process_entry(pid: int) -> dict | None:
    """A process of the cluster as its file names it: PID, start, boot, process group."""
    return identity.of(pid)


def launcher_processes(ipp_cluster) -> list[dict]:
    """The MPI launchers ipyparallel started on this host for the cluster, each the leader of its
    own process group (none for a batch job, whose ``sbatch`` leaves nothing running here)."""
    launchers = [getattr(es, "process", None) for es in getattr(ipp_cluster, "engines", {}).values()]
    return [e for e in (process_entry(p.pid) for p in launchers if isinstance(p, psutil.Process)) if e is not None]


def controller_process(ipp_cluster) -> dict | None:
    """The controller ipyparallel started on this host for the cluster."""
    controller = getattr(getattr(ipp_cluster, "controller", None), "process", None)
    return process_entry(controller.pid) if isinstance(controller, psutil.Process) else None


def options_of(cluster) -> dict:
    """The options that attach makes the cluster again from: its own, as it runs with them
    (the launcher chosen); not its progress bar or its id, which attach sets itself."""
    return {entry.name: getattr(cluster, entry.name) for entry in dataclasses.fields(ClusterOptions)
            if entry.name not in ("progress", "cluster_id")}


def register(cluster, ipp_cluster, started_outside: bool = False) -> subprocess.Popen:
    """Write the cluster's file (this process its holder) and start its watchdog.
    ``started_outside``: ipyparallel started it (from an mpinb profile), and it ends with
    ipyparallel's stop, not when its holder is gone (mpinb.cluster.watchdog)."""
    security = os.path.join(ipp_cluster.profile_dir, "security")
    launchers, controller = launcher_processes(ipp_cluster), controller_process(ipp_cluster)
    record = {
        "id": cluster.cluster_id,
        "n": cluster.n,
        "launcher": cluster.launcher,
        "started_at": time.time(),
        "boot": identity.boot_id(),
        "holder": registry.me(),
        "released_at": None,
        "keep_alive": cluster.keep_alive,
        "started_outside": started_outside,
        "standby": not cluster.listed,  # a standby: not listed, not attached (mpinb.cluster.standby)
        "options": options_of(cluster),
        "own_id": cluster._own_cluster_id,
        # what the watchdog ends, in this order, and what says that the cluster ended outside
        # its notebook (mpinb.cluster.outside_end)
        "processes": [*launchers, *([controller] if controller else [])],
        "launchers": launchers,
        "controller": controller,
        "slurm_job_name": (f"mpinb-{cluster.cluster_id}" if cluster.launcher == "slurm" else None),
        "workdir": cluster.workdir,
        "profile_dir": ipp_cluster.profile_dir,
        "ipp_cluster_file": ipp_cluster.cluster_file,
        "files": [os.path.join(security, f"*{cluster.cluster_id}*.json"), ipp_cluster.cluster_file],
    }
    registry.write(cluster.cluster_id, record)
    if cluster.keep_alive is not None:  # a kernel restart (ipyparallel's atexit) must not stop it either
        ipp_cluster.shutdown_atexit = False
    return start_watchdog(cluster.cluster_id)


def start_watchdog(cluster_id: str, settle: float = 0.0) -> subprocess.Popen:
    """Start a watchdog for a registered cluster (mpinb.cluster.watchdog), its output appended to
    ``<id>.log``; one that finds another already watching exits at once. ``settle``: seconds to
    wait, at most, until it watches (holds the cluster's lock), so that the next look finds it."""
    log = open(os.path.join(registry.folder(), f"{cluster_id}.log"), "ab")  # noqa: SIM115 - the child owns it
    with log:
        watchdog = subprocess.Popen([sys.executable, "-m", "mpinb.cluster.watchdog", cluster_id],
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    registry.update(cluster_id, watchdog=process_entry(watchdog.pid))
    if settle:
        from .watchdog import watched

        end = time.monotonic() + settle
        while not watched(cluster_id) and watchdog.poll() is None and time.monotonic() < end:
            time.sleep(0.02)
    return watchdog


def held_by_another(cluster_id: str | None) -> bool:
    """Whether another live process holds the cluster now (one that attached with force)."""
    record = registry.read(cluster_id) if cluster_id else None
    holder = (record or {}).get("holder")
    return bool(holder) and holder.get("pid") != os.getpid() and registry.alive(holder)


def unregister(cluster_id: str | None) -> None:
    """The cluster was stopped by its holder: its watchdog exits, its log goes."""
    if not cluster_id:
        return
    from .watchdog import forget

    forget(cluster_id)
