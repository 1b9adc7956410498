"""An ipyparallel cluster of MPI engines (engine id == MPI rank) with mpinb loaded on every rank.

    from mpinb import MPICluster
    cluster = MPICluster(n=4).start()      # progress bar while the engines register
    result = cluster.run_cell("import jax; x = jax.numpy.ones(3)")
    cluster.stop()

Launching (:mod:`mpinb.launch.launchers`): by default a job on this host, started with the
launcher of the MPI mpi4py loads, MPI on shared memory and the controller on loopback.
``launcher="slurm"`` runs the ranks as a job step of the current Slurm allocation or as a batch
job; ``launcher="mpiexec"`` (implied by ``mpi_cmd`` or ``mpi_args``) uses the launcher given, as
on PBS. Every option ends up in the ipyparallel configuration that ``config()`` returns.
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import os
import shutil
import signal
import stat
import time

from traitlets.config import Config

from ..cells import health
from ..errors import ClusterBusy, ClusterError, ClusterLost, ClusterNotRunning
from ..launch.launchers import launcher_for, slurm_mode
from ..options.cell_options import CellOptions
from ..options.cluster_options import ClusterOptions
from ..view import error_words as _error_words  # noqa: F401 - gives mpinb.errors its voice
from . import identity, lifetime, outside_end, registry, standby, upkeep
from .progress import StartProgress
from .settled_messages import SettledMessages
from .start_phases import configuration, run_start
from .watchdog import kill_remnants


class MPICluster:
    """Lifecycle of the engine cluster: ``start``, ``stop``, ``restart``, ``status``; its cells
    (``run_cell``, ``pull``), the one door to its engines (``on_engines``) and what it knows of
    their health (mpinb.cells.health).

    ``MPICluster(ClusterOptions(...))``, or the options' fields as keywords (``MPICluster(n=4,
    launcher="slurm")``; ``n`` may come first: ``MPICluster(4)``); each option, its default and
    its meaning: :class:`mpinb.options.cluster_options.ClusterOptions`. ValueError for a value that
    cannot work, TypeError for a keyword that is no option. Each option is an attribute too
    (``cluster.n``, ``cluster.hlo``; ``cluster.launcher`` the one chosen).
    """

    def __init__(self, options: ClusterOptions | int | None = None, /, **keywords):
        self.options = ClusterOptions.given(options, keywords)
        for field in dataclasses.fields(ClusterOptions):
            setattr(self, field.name, getattr(self.options, field.name))
        self.launcher = self.options.chosen_launcher
        self.engine_env = dict(self.options.engine_env)
        self.slurm_mode = slurm_mode() if self.launcher == "slurm" else None
        self._cluster = None
        self.client = None
        self.every_engine = None          # an ipyparallel DirectView of every engine (on_engines uses it)
        self.engines: list[dict] = []
        self.preflight: list[dict] = []   # each rank's account of itself at start (engine/self_account.py)
        self.notes: list[dict] = []       # what the start found worth saying (more ranks than cores)
        self.workdir: str | None = None
        self.started_at: float | None = None
        self.start_seconds: float | None = None
        self.setup_cells: list[str] = []
        self.outstanding: dict = {}       # rank -> RankTask of a cell that has not finished
        self._watched: dict = {}          # rank -> RankTask of the cell being run (its status)
        self._direct_views: dict = {}     # ranks -> DirectView of them (made once per client)
        self._settled = SettledMessages()  # ipyparallel's records of earlier cells' messages, forgotten
        self.lost: dict | None = None     # why the MPI job is gone, once it is: a rank and its death
        self.ended: dict | None = None    # how it ended outside this notebook (mpinb.cluster.outside_end)
        self.record: dict | None = None   # its registry file as written at its start or attach
        self._own_cluster_id = False      # the id was made here (a restart makes a new one)
        self.adopting = False             # taking in a cluster ipyparallel started (mpinb.cluster.attach.adopt)
        self.listed = True                # in ipyparallel's cluster files (a standby is not, until swapped in)
        self.idle_since: float | None = None  # when the last cell ended (None while one runs)
        self._standby = None              # the next restart's engines (mpinb.cluster.standby)
        self.replayed: list[tuple[str, float]] = []  # the last restart's replayed cells: (first line, seconds)

    @property
    def local(self) -> bool:
        """A single-node cluster on loopback with the default launcher."""
        return self.launcher == "local"

    @property
    def dump_root(self) -> str | None:
        return os.path.join(self.workdir, "hlo") if self.workdir and self.hlo else None

    @property
    def status_dir(self) -> str | None:
        return os.path.join(self.workdir, "status") if self.workdir else None

    # ----------------------------------------------------------------------- configuration
    def config(self) -> Config:
        """The ipyparallel configuration this cluster starts with (inspectable, testable)."""
        return configuration(self)

    # ----------------------------------------------------------------------- lifecycle
    @property
    def running(self) -> bool:
        return self.client is not None

    def start(self, keep_progress: bool = True) -> MPICluster:
        """Start the controller and n MPI engines and set them up; raise ClusterError if they do
        not come up within start_timeout. ``keep_progress=False``: take the progress bar away
        once done."""
        if self.running:
            raise ClusterError(cause="already_running")
        t0 = time.perf_counter()
        progress = StartProgress(self.n, self.progress)
        try:
            run_start(self, t0, progress)
        finally:
            progress.close(keep=keep_progress)
        self.idle_since = time.monotonic()
        standby.prepare(self)
        return self

    def _protect_connection_files(self) -> None:
        """Connection files hold the cluster's key: readable by the owner only."""
        for path in self.connection_files():
            os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)

    def connection_files(self) -> list[str]:
        if self._cluster is None:
            return []
        security = os.path.join(self._cluster.profile_dir, "security")
        return sorted(glob.glob(os.path.join(security, f"*{self._cluster.cluster_id}*.json")))

    def stop(self) -> None:
        """Stop engines and controller (idempotent), and the standby. Engines are killed, not
        asked: their namespaces are discarded anyway, and a rank blocked inside MPI would not answer."""
        self._stop_standby()
        self._teardown()
        self.lost = self.ended = None

    def _stop_standby(self) -> None:
        standby, self._standby = self._standby, None
        if standby is not None:
            standby.stop()

    def _teardown(self, ended: bool = False) -> None:
        """End every process of the cluster and forget it; ``ended``: it ended outside this
        notebook or its MPI job is gone, so no engine is asked to die first (the controller
        that would pass the signal may be gone, and the wait would be for nothing)."""
        if lifetime.held_by_another(self.cluster_id):  # taken over by another kernel: only let go
            self._disconnect()
            return
        if self.adopting:  # a cluster ipyparallel started, which could not be taken in: let go of it as it was
            lifetime.unregister(self.cluster_id)
            self._disconnect()
            self.adopting = False
            shutil.rmtree(self.workdir or "", ignore_errors=True)
            self.workdir = None
            return
        if self.cluster_id and self._cluster is not None:  # the watchdog takes no process's end for an outside end
            registry.update(self.cluster_id, stopping=True)
        cluster, self._cluster = self._cluster, None
        if not ended:
            health.kill_engines(self)
        elif self.record and identity.running(self.record.get("controller")):  # what is left of the job's ranks,
            health.signal_engines(self, signal.SIGKILL)  # wherever they run, through their nannies (no wait)
        if cluster is not None:
            launcher_for(self).end_job(cluster)  # so that stopping does not wait
        if ended:  # a controller killed alone leaves its children
            kill_remnants(self.cluster_id)
        if self.client is not None:
            with contextlib.suppress(Exception):  # best effort on the way down
                self.client.close()
        self.client = None
        self.every_engine = None
        if cluster is not None:
            with contextlib.suppress(Exception):  # the processes were killed above; this only cleans up
                cluster.stop_cluster_sync()
        self.engines = []
        self.outstanding = {}
        if self.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None
        lifetime.unregister(self.cluster_id)
        self.record = None
        if self._own_cluster_id:  # a restart gets a new id (and job name)
            self.cluster_id, self._own_cluster_id = None, False

    def _disconnect(self) -> None:
        """Let go of a cluster that another kernel holds now, leaving it running."""
        if self.client is not None:
            with contextlib.suppress(Exception):  # best effort
                self.client.close()
        self._cluster, self.client, self.every_engine, self.engines, self.outstanding = None, None, None, [], {}

    @classmethod
    def attach(cls, cluster_id: str | None = None, *, force: bool = False) -> MPICluster:
        """Reconnect to a running cluster of this user on this host (started with ``keep_alive``
        by a kernel that is gone, or held by another with ``force``): mpinb.cluster.attach."""
        from .attach import attach

        return attach(cls, cluster_id, force=force)

    def restart(self, replay_setup: bool = True, keep_progress: bool = True) -> MPICluster:
        """Kill and start a cluster of the same size; replay the cells marked as setup. The
        notebook's own state is untouched; only the engines' namespaces start afresh. A standby
        prepared ahead is swapped in (a second); else the cluster starts anew. ``keep_progress=
        False``: the start's progress bar is taken away once done (a restart inside a cell, whose
        view says it). ``replayed`` then holds each replayed cell's first line and seconds."""
        return standby.restart(self, replay_setup, keep_progress)

    # ----------------------------------------------------------------------- cells
    def ensure_ready(self) -> list[dict]:
        """Raise unless a cell can run now: ClusterLost once the MPI job ended or the cluster
        ended outside this notebook (what is left of it is ended first), ClusterNotRunning
        without a cluster, ClusterBusy while ranks still run an earlier cell. Returns what was
        mended on the way (facts for the cell's notes): a watchdog that had died, replaced."""
        self.notice_outside_end()
        if self.lost:
            raise ClusterLost(cause="job_gone", lost=self.lost, replayed=len(self.setup_cells))
        if self.ended:
            raise ClusterLost(cause="ended_outside", ended=self.ended, replayed=len(self.setup_cells))
        if not self.running:
            raise ClusterNotRunning(cause="not_started")
        mended = upkeep.keep_watched(self.cluster_id)
        busy = {r: ar for r, ar in self.outstanding.items() if not ar.ready()}
        if busy:
            raise ClusterBusy(cause="busy", busy=sorted(busy), inflight={r: self.inflight(r) for r in busy},
                              where={r: self.where(r) for r in busy}, replayed=len(self.setup_cells))
        return mended

    def ended_outside(self, job: bool = True) -> dict | None:
        """How the running cluster ended outside this notebook, if it did, else None (mpinb.cluster.
        outside_end.of_cluster; ``job=False``: a cell under way reports its ranks' deaths itself)."""
        return outside_end.of_cluster(self, job)

    def notice_outside_end(self, job: bool = True) -> dict | None:
        """If the cluster ended outside this notebook (``ended_outside(job)``), end what is left
        of it at once and keep the facts (``self.ended``) for the next cell and ``status()``."""
        ended = self.ended_outside(job)
        if ended is not None:
            self.ended = ended
            self._stop_standby()
            self._teardown(ended=True)
        return ended

    def standby_facts(self) -> dict:
        """The standby's state and memory (mpinb.cluster.standby), or why there is none."""
        why_not = standby.usable(self)
        return {"state": why_not} if why_not or self._standby is None else self._standby.facts()

    def mark_ended(self, ended: dict) -> None:
        """A cell saw the cluster end outside this notebook; what is left ends after the cell."""
        self.ended = ended

    def engines_of(self, ranks) -> object:
        """An ipyparallel DirectView of ``ranks`` (engine ids are the MPI ranks), made once per
        client and set of ranks: making one costs about as much as sending a cell."""
        key = tuple(ranks)
        engines = self._direct_views.get(key)
        if engines is None or engines.client is not self.client:
            engines = self._direct_views[key] = self.client[list(key)]
        return engines

    def on_engines(self, function, *args, ranks=None):
        """Send ``function(*args)`` to the engines of ``ranks`` and return ipyparallel's
        AsyncResult at once: the one door through which the notebook side runs anything on an
        engine. ``function`` must be one of :data:`mpinb.engine.entry_points.ENTRY_POINTS`
        (TypeError otherwise); it travels by name (mpinb.wire.by_name). ``ranks``: None for every
        engine (its ``get()`` a list in rank order), a sequence of ranks for those in one request
        (a list too), or one int for that engine alone (its ``get()`` the value itself, its error
        raised as the engine's RemoteError)."""
        from ..engine.entry_points import ENTRY_POINTS
        from ..wire.by_name import ByName

        if not any(function is entry for entry in ENTRY_POINTS):
            raise TypeError(f"on_engines: {function!r} is not one of the functions run on engines "
                            "(mpinb.engine.entry_points.ENTRY_POINTS)")
        if ranks is None:
            engines = self.every_engine
        elif isinstance(ranks, int):
            engines = self.client[ranks]
        else:
            engines = self.engines_of(sorted(ranks))
        return engines.apply_async(ByName(function), *args)

    def begin_cell(self) -> None:
        """Forget the ranks of earlier cells: ensure_ready found them all finished."""
        self.outstanding = {}

    def keep_running(self, rank: int, async_result) -> None:
        """Note that ``rank`` is still running the current cell: the next cell waits for it."""
        self.outstanding[rank] = async_result

    def mark_lost(self, cause: dict) -> None:
        """Note that the MPI job is gone and why (a rank and its death): later cells raise ClusterLost."""
        self.lost = cause

    def run_cell(self, code: str, options: CellOptions | None = None, *, stream=None, **keywords):
        """Run ``code`` on every rank (or ``ranks=...``) and return its result (a
        :class:`~mpinb.cells.result.CellResult`). The options are a
        :class:`~mpinb.options.cell_options.CellOptions` or its fields as keywords (``compare=True``,
        ``timeout=30``, ``show=["y"]``, ...); ``stream`` receives output and states while it runs
        (mpinb.cells.cell_run.CellRun). A ``setup=True`` cell that finished on every rank is
        replayed after a restart."""
        from ..cells.cell_run import CellRun

        options = CellOptions(**keywords) if options is None else options
        client = self.client
        mark = self._settled.begin(client) if client is not None else 0
        self.idle_since = None
        waiting = self._standby
        if waiting is not None:
            waiting.pause()  # the cell has the cores
        try:
            result = CellRun(self, code, options, stream=stream).run()
        finally:
            if waiting is not None:
                waiting.resume()
            self.idle_since = time.monotonic()
        if client is not None and client is self.client:  # after a restart the old client is gone
            self._settled.end(client, [v for v in self._direct_views.values() if v.client is client], mark)
        if (self.lost or self.ended) and self.running:  # nothing of a gone job is left running
            self._teardown(ended=True)
        if options.setup and code not in self.setup_cells and result.ok:
            self.setup_cells.append(code)
            registry.update(self.cluster_id, setup_cells=self.setup_cells)
        return result

    def pull(self, name: str, max_bytes: int | None = None):
        """Every rank's ``name`` as one NumPy array in the notebook: a jax.Array sharded across
        processes assembled into the global array, per-rank arrays stacked in rank order
        (mpinb.cells.pull); at most ``max_bytes`` (default 256 MiB), else PullError."""
        from ..cells.pull import DEFAULT_MAX_BYTES, pull

        return pull(self, name, DEFAULT_MAX_BYTES if max_bytes is None else max_bytes)

    # ----------------------------------------------------------------------- the engines' health
    def status(self) -> dict:
        """The cluster at a glance (what ``%mpijax status`` shows): launcher, ranks blocked in an
        earlier cell, how JAX runs, engines, PIDs, hosts, uptime, setup cells."""
        return health.status(self)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait up to ``timeout`` seconds (None: no limit) for the ranks still running an
        earlier cell (one that timed out, say) to finish it; True once every rank is idle."""
        return health.wait_idle(self, timeout)

    def interrupt(self, ranks=None) -> None:
        """SIGINT the engines (the notebook's stop button). A rank in Python stops with
        KeyboardInterrupt; a rank blocked inside MPI stays blocked (see inflight), unless it waits
        in a receive and is then woken (``wake``), or in a collective's exchange that the stopped
        ranks then join (``join``): the stop button does both (mpinb.cells.freeing.after_stop)."""
        health.signal_engines(self, signal.SIGINT, ranks)

    def can_wake(self) -> bool:
        """Whether every engine takes back a waiting receive when woken (mpinb.engine.rank_release)."""
        return health.can_wake(self)

    def wake(self, ranks=None) -> bool:
        """Send the engines the wake signal: a rank waiting in a receive takes it back and its cell
        fails there (mpinb.engine.rank_release). False, sending nothing, if some engine cannot be woken
        (its setup named no signal: the signal's default action would end it). Never right after
        another signal: Linux gives a signal sent to a process whose main thread has one pending
        to another thread, and Python's sleep then misses a SIGINT."""
        if not self.can_wake():
            return False
        health.signal_engines(self, self.engines[0]["wake_signal"], ranks)
        return True

    def at_rest(self, ranks, timeout: float = 10.0) -> bool:
        """Whether every one of the idle ``ranks`` has no call of its own under way or queued, so
        that all of them may join an exchange (mpinb.engine.rank_release.at_rest); False if one
        cannot say so within ``timeout``."""
        from ..engine.rank_release import at_rest

        try:
            return all(self.on_engines(at_rest, ranks=ranks).get(timeout=timeout))
        except Exception:  # noqa: BLE001 - an engine that cannot answer cannot join either
            return False

    def join(self, ranks, comm: str):
        """Have the idle ``ranks`` join the signature exchange that the others wait in on ``comm``
        ("world" or "default"), to free them (mpinb.engine.rank_release.join); its AsyncResult."""
        from ..engine.rank_release import join

        return self.on_engines(join, comm, ranks=ranks)

    def drop_left(self, ranks):
        """Have the idle ``ranks`` drop the messages left unreceived after ranks were freed
        (mpinb.engine.rank_release.drop_left); its AsyncResult."""
        from ..engine.rank_release import drop_left

        return self.on_engines(drop_left, ranks=ranks)

    def launcher_ended(self):
        """The exit status of this host's MPI launcher once it ended (an int, or 'unknown'); else
        None, and for a launcher that leaves nothing running here (a batch job's ``sbatch``)."""
        return health.launcher_ended(self)

    def exit_records(self) -> dict[int, dict]:
        """How dead engines ended: {rank: {"returncode": ..., "fault": ...}}, from the exit
        record lines mpinb.launch.rank writes and the MPI launcher brings back (mpinb.wire.status)."""
        return health.exit_records(self)

    def dead_ranks(self) -> dict[int, dict]:
        """{rank: its death} for engines that are gone (their nanny unregistered them); a death is
        {"returncode": ...} from the launcher's exit record, None where there is none."""
        return health.dead_ranks(self)

    def fault_report(self, rank: int) -> str:
        """What faulthandler wrote for a rank that crashed (segfault traceback), if anything."""
        return self.exit_records().get(rank, {}).get("fault", "")

    def watch(self, results: dict) -> None:
        """The RankTasks of the cell being submitted, by rank: where ``inflight`` reads."""
        self._watched = dict(results)

    def inflight(self, rank: int) -> dict | None:
        """The MPI call ``rank`` is blocked in, as its engine last published it (None: none known)."""
        return health.inflight(self, rank)

    def where(self, rank: int) -> dict | None:
        """Where ``rank``'s running cell is (its line, the user's frame, a jitted call), as its
        engine last published it (mpinb.engine.stall); None if idle or unknown."""
        return health.where(self, rank)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def __repr__(self) -> str:
        state = f"running, engines {list(self.client.ids)}" if self.running else "stopped"
        return f"<MPICluster n={self.n} {state}>"
