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

import atexit
import contextlib
import os
import signal
import threading
import time
import weakref

import psutil

from . import identity, registry

#: seconds without a cell before a standby begins to prepare
IDLE = 2.0
#: the standbys of this process, stopped at its exit (a standby's start may be under way then)
LIVE: weakref.WeakSet = weakref.WeakSet()
#: the standby's start waits this long for each phase (its stops included)
PATIENCE = 24 * 3600.0


def usable(cluster) -> str | None:
    """Why ``cluster`` gets no standby ("off", "is_standby", "slurm_batch", "per_rank_devices"),
    None when it gets one."""
    if not cluster.standby:
        return "off"
    if not cluster.listed:  # a standby itself (it is not listed until swapped in)
        return "is_standby"
    if cluster.launcher == "slurm" and cluster.slurm_mode == "batch":
        return "slurm_batch"
    if cluster.devices != "cpu":  # its ranks would take the running ranks' accelerators
        return "per_rank_devices"
    return None


class Standby:
    """One standby cluster for ``active`` (an MPICluster): ``begin_when_idle()`` prepares it in a
    thread, ``pause()``/``resume()`` bracket the active cluster's cells, ``take()`` hands it over
    ready (or None), ``stop()`` ends it."""

    def __init__(self, active):
        # an MPICluster, as the active one; it ends with this process (no keep_alive) until swapped in
        self.cluster = type(active)(active.options.updated({
            "progress": False, "cluster_id": None, "start_timeout": PATIENCE, "keep_alive": None}))
        self.cluster.listed = False  # not in ipyparallel's cluster files until it is swapped in
        self.active = active
        self.state = "waiting"       # waiting, preparing, ready, failed, stopped
        self.failure: str | None = None
        self.paused: list[int] = []   # the process groups stopped while a cell runs
        self.thread: threading.Thread | None = None
        self._lock = threading.Lock()
        LIVE.add(self)

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

    @staticmethod
    def _signal(groups: list[int], sig: int) -> None:
        for group in groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, sig)

    def pause(self) -> None:
        """Stop a standby that is still preparing, so that the cell about to run has the cores."""
        if self.state == "preparing" and not self.paused:
            self.paused = self._groups()
            self._signal(self.paused, signal.SIGSTOP)

    def resume(self) -> None:
        """Let the groups that pause() stopped go on (exactly those)."""
        paused, self.paused = self.paused, []
        self._signal(paused, signal.SIGCONT)

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
            ready = self.state == "ready"
            if ready:
                self.state = "taken"
        if not ready:  # still preparing after ``wait``, or failed: ended, not left behind
            self.stop()
            return None
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
        return {"state": self.state, "paused": bool(self.paused), "memory": self.memory(), "failure": self.failure}


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
                 "notes", "workdir", "record"):
        setattr(active, name, getattr(ready, name))
    active.started_at = time.time()
    active._direct_views, active.outstanding, active._watched = {}, {}, {}
    active._settled = SettledMessages()
    active.lost = active.ended = None
    ipp_cluster = active._cluster
    ipp_cluster.cluster_file = os.path.join(ipp_cluster.profile_dir, "security", f"cluster-{active.cluster_id}.json")
    ipp_cluster.update_cluster_file()
    ipp_cluster.shutdown_atexit = active.keep_alive is None
    from .lifetime import options_of

    files = [*active.record.get("files", []), ipp_cluster.cluster_file]
    active.record = registry.update(  # the active cluster's own options (its keep_alive, its patience)
        active.cluster_id, ipp_cluster_file=ipp_cluster.cluster_file, files=files, standby=False,
        options=options_of(active), keep_alive=active.keep_alive, setup_cells=active.setup_cells) or active.record


def restart(active, replay_setup: bool = True, keep_progress: bool = True):
    """``active.restart()`` (an MPICluster): its processes ended, then its standby swapped in if
    one is ready (else a start); the setup cells replayed, each one's first line and seconds kept
    in ``active.replayed``."""
    from ..options.cell_options import CellOptions

    cells = list(active.setup_cells)
    t0 = time.perf_counter()
    waiting, active._standby = active._standby, None
    try:
        active._teardown()  # first: the old ranks (spinning in MPI, maybe) give the standby the cores
        ready = waiting.take(wait=active.start_timeout) if waiting is not None else None
    except BaseException:  # the stop button meanwhile: no standby is left behind
        if waiting is not None:
            waiting.stop()
        raise
    if ready is not None:
        swap_in(active, ready)
        active.start_seconds = time.perf_counter() - t0
        active.idle_since = time.monotonic()
        prepare(active)
    else:
        active.start(keep_progress=keep_progress)
    active.replayed = []
    for code in cells if replay_setup else []:
        started = time.perf_counter()
        active.run_cell(code, CellOptions(setup=True))
        active.replayed.append((code.strip().split("\n")[0], time.perf_counter() - started))
    registry.update(active.cluster_id, setup_cells=active.setup_cells)  # what a later attach replays
    return active


@atexit.register
def _stop_all() -> None:
    """At this process's exit, end its standbys (one whose start is under way would otherwise
    leave what it started so far to the watchdog, or, before it is registered, to no one)."""
    for standby in list(LIVE):
        with contextlib.suppress(Exception):  # best effort on the way out
            standby.stop()
