"""The next restart's engines, prepared ahead: a standby cluster of the same options, started in
the background once the notebook is idle, and swapped in by ``MPICluster.restart()`` in a
fraction of a second instead of a new start.

Preparing it never slows the user's cells: it begins only after the notebook has run no cell
for ``IDLE`` seconds, and while a cell runs its processes (its controller's and its MPI job's
process groups) are stopped (SIGSTOP) and go on after the cell (SIGCONT). Its start waits as
long as it takes (a stopped start counts no time of its own); one that fails anyway (a stop in
the middle of an engine's registration) is dropped, and the restart is a start.

It costs what its engines hold (about the memory of the running cluster's engines, JAX
imported); ``%mpijax status`` says how much, and ``ClusterOptions(standby=False)`` (``%mpijax
start --no-standby``) turns it off. It works with the local and mpiexec launchers and with a
Slurm job step (a second step of the allocation); not with a Slurm batch job (a second job
would queue for nodes of its own). It is not listed by ipyparallel (no cluster file: the
IPython Parallel panel shows the running cluster only) until it is swapped in.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time

import psutil

from . import identity, registry

#: seconds without a cell before a standby begins to prepare
IDLE = 2.0
#: the standby's start waits this long for each phase (its stops included)
PATIENCE = 24 * 3600.0


def usable(cluster) -> str | None:
    """Why ``cluster`` gets no standby (facts: "off", "is_standby", "slurm_batch"), None when it gets one."""
    if not cluster.standby:
        return "off"
    if not cluster.listed:  # a standby itself (it is not listed until swapped in)
        return "is_standby"
    if cluster.launcher == "slurm" and cluster.slurm_mode == "batch":
        return "slurm_batch"
    return None


class Standby:
    """One standby cluster for ``active`` (an MPICluster): ``begin_when_idle()`` prepares it in a
    thread, ``pause()``/``resume()`` bracket the active cluster's cells, ``take()`` hands it over
    ready (or None), ``stop()`` ends it."""

    def __init__(self, active):
        self.cluster = type(active)(active.options.updated({  # an MPICluster, as the active one
            "progress": False, "cluster_id": None, "start_timeout": PATIENCE}))
        self.cluster.listed = False  # not in ipyparallel's cluster files until it is swapped in
        self.active = active
        self.state = "waiting"       # waiting, preparing, ready, failed, stopped
        self.failure: str | None = None
        self.paused = False
        self.thread: threading.Thread | None = None
        self._lock = threading.Lock()

    # ----------------------------------------------------------------------- preparing
    def begin_when_idle(self) -> None:
        """Prepare the standby in a thread of its own, once the active cluster has run no cell for IDLE s."""
        self.thread = threading.Thread(target=self._prepare, name="mpinb-standby", daemon=True)
        self.thread.start()

    def _prepare(self) -> None:
        while self.state == "waiting":
            idle_since = self.active.idle_since
            if idle_since is not None and time.monotonic() - idle_since >= IDLE:
                break
            time.sleep(0.2)
        with self._lock:
            if self.state != "waiting":
                return
            self.state = "preparing"
        try:
            self.cluster.start()
        except BaseException as exc:  # noqa: BLE001 - a standby that failed is dropped; the restart starts anew
            self.failure = f"{type(exc).__name__}: {exc}"
            with self._lock:
                self.state = "failed" if self.state == "preparing" else self.state
            self.cluster.stop()
            return
        with self._lock:
            if self.state == "preparing":
                self.state = "ready"
                return
        self.cluster.stop()  # stopped meanwhile

    # ----------------------------------------------------------------------- around cells
    def _groups(self) -> list[int]:
        """The process groups of the standby's controller and MPI launchers on this host."""
        record = registry.read(self.cluster.cluster_id) if self.cluster.cluster_id else None
        entries = [e for e in (record or {}).get("processes", []) if e.get("pgid") == e.get("pid")]
        return [e["pgid"] for e in entries if identity.running(e)]

    def _signal(self, sig: int) -> None:
        for group in self._groups():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, sig)

    def pause(self) -> None:
        """Stop a standby that is still preparing, so that the cell about to run has the cores."""
        if self.state == "preparing" and not self.paused:
            self.paused = True
            self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self.paused:
            self.paused = False
            self._signal(signal.SIGCONT)

    # ----------------------------------------------------------------------- handing over
    def take(self, wait: float) -> object | None:
        """The standby cluster, ready, waiting at most ``wait`` seconds for one still preparing
        (resumed, and begun now if it was waiting for idle time); None when there is none ready.
        The standby is the caller's from then on."""
        with self._lock:
            if self.state == "waiting":
                self.state = "stopped"  # not worth starting now: the restart starts a cluster itself
                return None
        self.resume()
        if self.thread is not None:
            self.thread.join(wait)
        with self._lock:
            if self.state != "ready":
                return None
            self.state = "taken"
        if self.cluster.ended_outside() is not None:  # it died meanwhile (killed, the OOM killer)
            self.state = "failed"
            self.cluster.stop()
            return None
        return self.cluster

    def stop(self) -> None:
        """End the standby: at once if ready, else its start is cut short (its processes ended)."""
        with self._lock:
            was, self.state = self.state, "stopped"
        self.resume()
        if was == "ready":
            self.cluster.stop()
        elif was == "preparing":
            from .watchdog import end_processes

            record = registry.read(self.cluster.cluster_id) if self.cluster.cluster_id else None
            if record:
                end_processes(record)  # its start then fails and stops what is left

    # ----------------------------------------------------------------------- what it costs
    def memory(self) -> int | None:
        """Bytes its processes on this host hold (resident), None before it has any."""
        total, seen = 0, False
        record = registry.read(self.cluster.cluster_id) if self.cluster.cluster_id else None
        for entry in (record or {}).get("processes", []):
            proc = identity.process(entry)
            if proc is None:
                continue
            with contextlib.suppress(psutil.Error):
                for p in [proc, *proc.children(recursive=True)]:
                    with contextlib.suppress(psutil.Error):
                        total += p.memory_info().rss
                        seen = True
        return total if seen else None

    def facts(self) -> dict:
        """What ``%mpijax status`` says of it (mpinb.view.tables words it)."""
        return {"state": self.state, "paused": self.paused, "memory": self.memory(), "failure": self.failure}


def prepare(active) -> None:
    """Begin the next restart's standby for ``active`` (an MPICluster), where it may have one."""
    if active._standby is None and usable(active) is None:
        active._standby = Standby(active)
        active._standby.begin_when_idle()


def swap_in(active, ready) -> None:
    """Make ``active`` (an MPICluster, torn down) the cluster ``ready`` is (a standby started
    with its options): its controller, engines, files and id; listed by ipyparallel from now on
    (its cluster file written), as a cluster started anew would be."""
    from .settled_messages import SettledMessages

    for name in ("cluster_id", "_own_cluster_id", "_cluster", "client", "every_engine", "engines", "preflight",
                 "notes", "workdir", "record", "started_at"):
        setattr(active, name, getattr(ready, name))
    active._direct_views, active.outstanding, active._watched = {}, {}, {}
    active._settled = SettledMessages()
    active.lost = active.ended = None
    ipp_cluster = active._cluster
    ipp_cluster.cluster_file = os.path.join(ipp_cluster.profile_dir, "security", f"cluster-{active.cluster_id}.json")
    ipp_cluster.update_cluster_file()
    files = [*active.record.get("files", []), ipp_cluster.cluster_file]
    active.record = registry.update(active.cluster_id, ipp_cluster_file=ipp_cluster.cluster_file,
                                    files=files) or active.record
