"""What the client knows about the engines' health: which are gone and how they ended (the
launcher's exit records, faulthandler's report), which MPI call a running rank waits in (its
published status), and the signals it sends them (the stop button, SIGKILL on stop).

Plain functions of a :class:`mpinb.cluster.mpi_cluster.MPICluster`, which its methods call: they
read the cluster's ipyparallel client, cluster and engines. Never a local ``os.kill`` with a
PID an engine reported: on a cluster that number belongs to another host.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time

import psutil

from ..wire.status import inflight_of, parse_exit_lines, where_of


def first_remote_error(exc) -> tuple[int | None, str, str]:
    """(rank, exception name, message) of the first engine's error in ipyparallel's
    CompositeError (engine ids are the MPI ranks)."""
    ename, evalue, _, info = exc.elist[0]
    return info.get("engine_id"), ename, evalue


def status(cluster) -> dict:
    """The cluster at a glance (MPICluster.status)."""
    cluster.notice_outside_end()
    if not cluster.running:  # and, if it ended without a stop from this notebook, how
        return {"running": False, "n": cluster.n, "lost": cluster.lost, "ended": cluster.ended,
                "setup_cells": len(cluster.setup_cells)}
    return {
        "running": True,
        "launcher": cluster.launcher + (f" ({cluster.slurm_mode})" if cluster.slurm_mode else ""),
        "lost": cluster.lost,
        "blocked_ranks": sorted(r for r, ar in cluster.outstanding.items() if not ar.ready()),
        "checked": cluster.checked,
        "jax": jax_runtime(cluster),
        "n": cluster.n,
        "engines": list(cluster.client.ids),
        "uptime_s": round(time.time() - (cluster.started_at or time.time()), 1),
        "start_s": round(cluster.start_seconds or 0.0, 2),
        "hlo_capture": all(e.get("hlo_capture") for e in cluster.engines),
        "mpi_watch": all(e.get("mpi_watch") for e in cluster.engines),
        "withdraw": can_wake(cluster),
        "pids": [e["pid"] for e in cluster.engines],
        "hosts": sorted({e["host"] for e in cluster.engines}),
        "setup_cells": len(cluster.setup_cells),
        "standby": cluster.standby_facts(),
    }


def jax_runtime(cluster) -> dict:
    """How JAX runs on the engines, as the engines said at setup (mpinb.view.tables words it):
    ``processes`` of jax.distributed (None: one process per rank), ``devices`` and ``platform``
    of each."""
    first = cluster.engines[0] if cluster.engines else {}
    return {"processes": first.get("jax_processes") if cluster.jax_distributed else None,
            "devices": len(first.get("devices", ())) or first.get("local_devices", 1),
            "platform": first.get("platform", "cpu")}


def can_wake(cluster) -> bool:
    """Whether every engine takes back a waiting receive when woken (MPICluster.can_wake)."""
    return bool(cluster.engines) and all(e.get("wake_signal") for e in cluster.engines)


def signal_engines(cluster, sig: int, ranks=None) -> None:
    """Send ``sig`` to engines through ipyparallel: each engine's nanny, on the engine's own
    host, signals its engine. Never a local os.kill with a PID an engine reported: on a
    cluster that number belongs to another host."""
    if cluster.client is None:
        return
    known = registered(cluster)
    targets = sorted(known if ranks is None else set(ranks) & known)
    if targets:
        with contextlib.suppress(Exception):  # an engine already gone has no nanny to answer
            cluster.client.send_signal(sig, targets=targets, block=False)


def registered(cluster) -> set[int]:
    """Engine ids the controller still knows (a dead engine's nanny unregisters it)."""
    try:
        return set(cluster.client.ids) if cluster.client is not None else set()
    except Exception:  # noqa: BLE001 - the controller itself is gone
        return set()


def kill_engines(cluster) -> None:
    """SIGKILL every engine (SIGINT cannot free a rank blocked inside MPI), then give the
    nannies a moment to report them gone."""
    signal_engines(cluster, signal.SIGKILL)
    end = time.monotonic() + 3.0
    while registered(cluster) and time.monotonic() < end:
        time.sleep(0.05)


def launcher_ended(cluster):
    """The exit status of the MPI launcher started on this host if it has ended (MPICluster.launcher_ended)."""
    engine_sets = getattr(cluster._cluster, "engines", {}) if cluster._cluster is not None else {}
    for engine_set in list(engine_sets.values()):
        if not isinstance(getattr(engine_set, "process", None), psutil.Process):
            continue
        if getattr(engine_set, "state", "") == "after":  # ipyparallel saw it end
            status = (getattr(engine_set, "stop_data", None) or {}).get("exit_code")
            return "unknown" if status is None else status
        ended, status = exit_of(engine_set)
        if ended:
            return "unknown" if status is None else status
    return None


def controller_exit(cluster):
    """The exit status of the controller this process started, once it has ended; None while it
    runs, or when another process started it (an attached cluster's)."""
    controller = getattr(cluster._cluster, "controller", None)
    if not isinstance(getattr(controller, "process", None), psutil.Process):
        return None
    return exit_of(controller)[1]


def exit_of(launcher) -> tuple[bool, int | None]:
    """Whether the process an ipyparallel launcher of this process started has ended, and its
    exit status (negative: the signal that killed it; None while it runs, or when not known)."""
    process = launcher.process
    seen = _exit_seen(process.pid)
    end = time.monotonic() + 2.0
    while seen is None and _main_thread_ended(process) and time.monotonic() < end:
        # its main thread has ended (a zombie in /proc) and its other threads are ending: the
        # process is waitable once they have
        time.sleep(0.01)
        seen = _exit_seen(process.pid)
    if seen is None:
        return False, None  # still running
    if seen:
        killed = seen.si_code in (os.CLD_KILLED, os.CLD_DUMPED)
        return True, (-seen.si_status if killed else seen.si_status)
    # ipyparallel's waiter thread reaped it: its psutil wait keeps the status on the same process
    # object once it returns. A wait of this process's own meanwhile would find no child and keep
    # None there instead, so the waiter is let finish first.
    waiter = getattr(launcher, "_wait_thread", None)
    if waiter is not None and not process.is_running():
        waiter.join(timeout=2.0)
    try:
        return True, process.wait(timeout=0)
    except psutil.TimeoutExpired:
        return False, None  # not a child of this process, and running
    except psutil.Error:
        return True, None


def _exit_seen(pid: int):
    """How a child process ended, as os.waitid sees it without reaping it: None while it runs,
    False once it is reaped (or is no child of this process)."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return False
    except OSError:
        return None


def _main_thread_ended(process: psutil.Process) -> bool:
    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False  # reaped meanwhile: the next look says so


def launcher_output(cluster) -> str:
    """What the MPI launcher and the engines printed so far: the launcher's output file on
    the notebook's host (a batch job's output file is where Slurm writes it). Read afresh
    each time: ipyparallel's get_output() keeps its first read and may delete the file."""
    engine_sets = getattr(cluster._cluster, "engines", {}) if cluster._cluster is not None else {}
    text = ""
    for engine_set in list(engine_sets.values()):
        path = getattr(engine_set, "output_file", "")
        try:
            with open(path, errors="replace") as fh:
                text += fh.read()
        except OSError:  # gone: once the launcher ended, ipyparallel read it and removed it
            with contextlib.suppress(Exception):
                text += engine_set.get_output() or ""
    return text


def exit_records(cluster) -> dict[int, dict]:
    """How dead engines ended, from the launcher's output (MPICluster.exit_records)."""
    return parse_exit_lines(launcher_output(cluster))


def dead_ranks(cluster) -> dict[int, dict]:
    """{rank: its death} for engines that are gone (MPICluster.dead_ranks)."""
    known = registered(cluster)
    gone = [e["rank"] for e in cluster.engines if e["rank"] not in known]
    if not gone:
        return {}
    records = exit_records(cluster)  # only read once something ended: it is the launcher's log
    return {rank: {"returncode": records[rank]["returncode"] if rank in records else None} for rank in gone}


def published(cluster, rank: int) -> dict:
    """What ``rank``'s engine last published while running a cell (the one being run, or one
    that has not finished); empty if none."""
    ar = cluster.outstanding.get(rank) or cluster._watched.get(rank)
    return ar.data if ar is not None else {}


def inflight(cluster, rank: int) -> dict | None:
    """The MPI call ``rank`` is blocked in (MPICluster.inflight)."""
    info = inflight_of(published(cluster, rank))
    return None if info is None else dict(info, age=0.0)  # published every 0.2 s: fresh


def where(cluster, rank: int) -> dict | None:
    """Where ``rank``'s running cell is (MPICluster.where)."""
    return where_of(published(cluster, rank))


def wait_idle(cluster, timeout: float | None = None) -> bool:
    """Wait for the ranks still running an earlier cell (MPICluster.wait_idle)."""
    end = None if timeout is None else time.monotonic() + timeout
    for ar in list(cluster.outstanding.values()):
        left = None if end is None else max(0.0, end - time.monotonic())
        ar.wait(left)
    return all(ar.ready() for ar in cluster.outstanding.values())
