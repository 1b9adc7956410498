"""An ipyparallel cluster of MPI engines (engine id == MPI rank) with mpinb loaded on every rank.

    from mpinb import MPICluster
    cluster = MPICluster(n=4).start()      # progress bar while the engines register
    result = cluster.run_cell("import jax; x = jax.numpy.ones(3)")
    cluster.stop()

Launching (see :mod:`mpinb.launch.launchers`): by default a single-node job on loopback, started with
MPICH's ``mpiexec.gforker`` from the ``mpich`` wheel (it opens no listening socket) and
shared-memory MPI transports; nothing listens on a network interface. ``launcher="slurm"`` runs
the ranks as a job step of the current Slurm allocation (``srun --mpi=pmi2``) or, outside one,
as a batch job (``nodes``, ``partition``, ``account``, ``time_limit``); the controller then
listens on every interface, with CurveZMQ encryption. ``launcher="mpiexec"`` (implied by
``mpi_cmd`` or ``mpi_args``) uses the given launcher as is, e.g. on PBS
``MPICluster(n=64, mpi_cmd=["mpiexec"], mpi_args=["-f", "$PBS_NODEFILE"], controller_ip="*")``.
Every argument ends up in the ipyparallel configuration returned by ``config()``.
"""

from __future__ import annotations

import contextlib
import glob
import os
import secrets
import shutil
import stat
import tempfile
import time

from traitlets.config import Config

from ..cell_options import CellOptions
from ..engine.devices import placement
from ..errors import (
    ClusterBusy,
    ClusterError,
    ClusterLost,
    ClusterNotRunning,
    ControllerError,
    LauncherError,
)
from ..launch.launchers import LAUNCHERS, launcher_for, slurm_mode
from . import lifetime, registry, upkeep
from .controller import start_controller
from .health import ClusterHealth
from .progress import StartProgress
from .settled_messages import SettledMessages
from .start_checks import ask_every_engine, check_ranks

DEFAULT_START_TIMEOUT = 120.0


class LauncherExited(Exception):
    """The MPI launcher ended before every engine registered (internal: start() turns it into
    the ClusterError users see, with the launcher's output)."""


class MPICluster(ClusterHealth):
    """Lifecycle of the engine cluster: ``start``, ``stop``, ``restart``, ``status``.

    Parameters
    ----------
    n: number of MPI ranks (engines).
    launcher: ``"local"`` (default), ``"mpiexec"`` (default when ``mpi_cmd`` or ``mpi_args`` is
        given) or ``"slurm"``; see :mod:`mpinb.launch.launchers`.
    mpi_cmd: launcher command: for ``mpiexec`` default the ``mpich`` wheel's hydra ``mpiexec``;
        for ``slurm`` default ``srun``.
    mpi_args: extra launcher arguments (``["--bind-to", "core"]``, ``["--cpu-bind=cores"]``, ...);
        with ``slurm`` they go to ``srun``.
    nodes, partition, account, time_limit: Slurm only: ``--nodes`` of the step or batch job;
        the batch job's partition, account and time limit (``"1:00:00"``).
    engine_env: environment variables for the engines (e.g. ``{"JAX_ENABLE_X64": "1"}``).
    controller_ip: interface the controller listens on; default loopback, ``"*"`` (every
        interface) for ``slurm``.
    encrypt: CurveZMQ encryption of the cluster's connections; default on whenever the
        controller listens beyond loopback.
    hlo: capture the optimized HLO of what each rank compiles (for layout warnings).
    checked: run the collective library in checked mode on the engines (ranks agree on each
        collective first; a mismatch is an error on every rank instead of a hang).
    jax_distributed: start JAX's own multi-process runtime on the ranks
        (``jax.distributed.initialize``, Gloo collectives on CPU): ``jax.process_count()`` is n,
        ``shard_map`` and ``lax`` collectives run across the ranks.
    local_devices: CPU devices per engine process (default JAX's: one).
    start_timeout: seconds each phase of the start waits: for the controller to listen on its
        ports (mpinb.client.controller), for the engines to register, to answer the ranks'
        check, to finish their setup (mpinb.client.start_checks).
    progress: show a progress bar while the cluster starts (engines registered, phase, time).
    devices: ``"cpu"`` (default: every rank's JAX on the CPU, what mpinb's collectives move) or
        ``"per-rank"`` (each rank one local accelerator, by its rank on its host; mpinb.engine.devices).
    keep_alive: let the cluster outlive the process that started it (a kernel restarted, or
        killed) for this many seconds without a holder; a new kernel's ``attach`` holds it again.
        By default the cluster ends as soon as its holder is gone (mpinb.client.watchdog).
    """

    def __init__(self, n: int = 4, *, launcher: str | None = None, mpi_cmd=None, mpi_args=(),
                 nodes: int | None = None, partition: str | None = None, account: str | None = None,
                 time_limit: str | None = None, engine_env=None, controller_ip: str | None = None,
                 encrypt: bool | None = None, hlo: bool = True, checked: bool = True,
                 jax_distributed: bool = False, local_devices: int | None = None,
                 start_timeout: float = DEFAULT_START_TIMEOUT, progress: bool = True,
                 cluster_id: str | None = None, keep_alive: float | None = None, devices: str = "cpu"):
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError(f"MPICluster: n must be a positive int, got {n!r}")
        if launcher is None:
            launcher = "mpiexec" if (mpi_cmd or mpi_args) else "local"
        if launcher not in LAUNCHERS:
            raise ValueError(f"MPICluster: launcher must be one of {', '.join(LAUNCHERS)}, got {launcher!r}")
        if launcher == "local" and (mpi_cmd or mpi_args):
            raise ValueError("MPICluster: the local launcher takes no mpi_cmd or mpi_args (use launcher='mpiexec')")
        slurm_only = {"nodes": nodes, "partition": partition, "account": account, "time_limit": time_limit}
        given = [name for name, value in slurm_only.items() if value is not None]
        if given and launcher != "slurm":
            raise ValueError(f"MPICluster: {', '.join(given)} only apply to launcher='slurm'")
        if nodes is not None and (not isinstance(nodes, int) or isinstance(nodes, bool) or not 1 <= nodes <= n):
            raise ValueError(f"MPICluster: nodes must be an int from 1 to n={n}, got {nodes!r}")
        if local_devices is not None and (not isinstance(local_devices, int) or isinstance(local_devices, bool)
                                          or local_devices < 1):
            raise ValueError(f"MPICluster: local_devices must be a positive int, got {local_devices!r}")
        self.n = n
        self.launcher = launcher
        self.mpi_cmd = list(mpi_cmd) if mpi_cmd else None
        self.mpi_args = list(mpi_args)
        self.nodes, self.partition, self.account, self.time_limit = nodes, partition, account, time_limit
        self.slurm_mode = slurm_mode() if launcher == "slurm" else None
        self.engine_env = dict(engine_env or {})
        self.controller_ip = controller_ip
        self.encrypt = encrypt
        self.hlo = hlo
        self.checked = checked
        self.jax_distributed = bool(jax_distributed)
        self.local_devices = local_devices
        self.start_timeout = float(start_timeout)
        self.progress = progress
        self.keep_alive = lifetime.keep_alive_seconds(keep_alive)
        self.devices = placement(devices)
        self.cluster_id = cluster_id
        self._cluster = None
        self.client = None
        self.view = None
        self.engines: list[dict] = []
        self.preflight: list[dict] = []   # each rank's account of itself at start (engine/self_account.py)
        self.notes: list[str] = []        # what the start found worth saying (more ranks than cores)
        self.workdir: str | None = None
        self.started_at: float | None = None
        self.start_seconds: float | None = None
        self.setup_cells: list[str] = []
        self.outstanding: dict = {}       # rank -> RankTask of a cell that has not finished
        self._watched: dict = {}          # rank -> RankTask of the cell being run (its status)
        self._views: dict = {}            # ranks -> DirectView of them (made once per client)
        self._settled = SettledMessages()  # ipyparallel's records of earlier cells' messages, forgotten
        self.lost: str | None = None      # why the MPI job is gone, once it is
        self._own_cluster_id = False      # the id was made here (a restart makes a new one)

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
        c = Config()
        c.Cluster.n = self.n
        launch = launcher_for(self)
        c.Cluster.controller_ip = launch.controller_ip()
        if launch.encrypted():
            c.Cluster.controller_args = ["--IPController.enable_curve=True"]
        # UCX's own crash handler prints a C backtrace (seconds, under load) before the rank
        # dies; faulthandler already gives the Python one, and the report must come fast.
        # MPINB_CLUSTER_ID: every process of the job carries the cluster's id (what tests count)
        env = {"UCX_HANDLE_ERRORS": "none", "MPINB_CLUSTER_ID": self.cluster_id or ""}
        if self.devices == "cpu":
            env["JAX_PLATFORMS"] = "cpu"
        launch.configure(c, env)
        c.LocalControllerLauncher.environment = {"MPINB_CLUSTER_ID": self.cluster_id or ""}
        return c

    # ----------------------------------------------------------------------- lifecycle
    @property
    def running(self) -> bool:
        return self.client is not None

    def start(self, keep_progress: bool = True) -> MPICluster:
        """Start the controller and n MPI engines and set them up; raise ClusterError if they do
        not come up within start_timeout. ``keep_progress=False``: take the progress bar away
        once done."""
        if self.running:
            raise ClusterError("cluster already running; stop() or restart() it first")
        t0 = time.perf_counter()
        progress = StartProgress(self.n, self.progress)
        try:
            self._start(t0, progress)
        finally:
            progress.close(keep=keep_progress)
        return self

    def _start(self, t0: float, progress: StartProgress) -> None:
        """The phases of start(): controller, engines registering, engines set up."""
        import ipyparallel as ipp

        self.lost = None
        self.outstanding = {}
        upkeep.survey()  # the files of clusters that ended without a word go, a dead watchdog is replaced
        self.workdir = tempfile.mkdtemp(prefix="mpinb-")
        os.makedirs(self.status_dir)
        if not self.cluster_id:
            self.cluster_id = f"{int(time.time())}-{secrets.token_hex(2)}"
            self._own_cluster_id = True
        try:
            config = self.config()
        except LauncherError:
            self._teardown()
            raise
        self._cluster = ipp.Cluster(config=config, log_level=40, engine_timeout=self.start_timeout,
                                    cluster_id=self.cluster_id)
        try:
            start_controller(self._cluster, self.start_timeout)
            self._cluster.start_engines_sync()
            lifetime.register(self, self._cluster)  # from here on, nothing outlives this process
            self.client = self._cluster.connect_client_sync()
            progress.phase("engines registering")
            self._wait_for_engines(t0, progress)
        except (KeyboardInterrupt, ControllerError):  # the stop button, or no controller (its own words)
            self._teardown()  # leave no job or controller behind
            raise
        except Exception as exc:
            output = self._launcher_output()[-2000:] + launcher_for(self).queue_state()
            self._teardown()
            why = (str(exc) if isinstance(exc, LauncherExited)
                   else f"{self.n} MPI engines did not come up (waited up to {self.start_timeout:.0f} s): {exc}")
            raise ClusterError(why + (f"\nlast output of the MPI launcher:\n{output}" if output.strip() else "")) \
                from exc
        self._protect_connection_files()
        self.view = self.client[:]
        self.view.block = True
        progress.phase("checking the ranks")
        try:
            self.preflight, self.notes = check_ranks(self)
        except BaseException:  # a difference, a rank that did not answer, the stop button: leave nothing running
            self._teardown()
            raise
        progress.phase("setting up the engines")
        infos = self._setup_engines()
        ranks = [info["rank"] for info in infos]
        ids = list(self.client.ids)
        if ranks != ids:
            self._teardown()
            alone = len(set(ranks)) < len(ranks)  # each rank a world of its own
            raise ClusterError(f"engine ids {ids} are not the MPI ranks {ranks}" + (
                ": the ranks do not see each other, as when the launcher belongs to another MPI than the one "
                "mpi4py loads (leave mpi_cmd unset to use that MPI's own launcher; docs/install.md, 'Choosing the MPI')"
                if alone else ""))
        self.engines = infos
        self.started_at = time.time()
        self.start_seconds = time.perf_counter() - t0
        registry.update(self.cluster_id, engines=infos, start_seconds=self.start_seconds)
        progress.phase("ready")

    def _setup_engines(self) -> list[dict]:
        """Run the engines' setup (mpinb.engine.startup) on every rank; what each says of itself.
        A setup that fails, or that some rank does not finish within start_timeout, ends the
        cluster with the engine's own words or the ranks that did not answer."""
        from ..engine.startup import setup

        try:
            return ask_every_engine(self, "the engines' setup", setup, self.dump_root, self.status_dir,
                                    self.checked, self.jax_distributed, self.local_devices, self.devices)
        except BaseException:  # an engine's error, a rank that did not answer, the stop button
            self._teardown()
            raise

    def _wait_for_engines(self, t0: float, progress: StartProgress) -> None:
        """Wait until all n engines registered, counting them on the progress bar: TimeoutError
        after start_timeout, LauncherExited at once when the MPI launcher ended first (a bad
        option, a refusal: its output says why)."""
        while True:
            registered = len(self.client.ids)
            progress.count(registered)
            if registered >= self.n:
                return
            ended = self.launcher_ended()
            if ended is not None:
                seconds = time.perf_counter() - t0
                raise LauncherExited(f"the MPI launcher ended (exit status {ended}) after {seconds:.1f} s, "
                                     f"with {registered} of {self.n} engines registered")
            if time.perf_counter() - t0 > self.start_timeout:
                raise TimeoutError(f"{registered} of {self.n} engines registered")
            time.sleep(0.1)

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
        """Stop engines and controller (idempotent). Engines are killed, not asked: their
        namespaces are discarded anyway, and a rank blocked inside MPI would not answer."""
        self._teardown()

    def _teardown(self) -> None:
        if lifetime.held_by_another(self.cluster_id):  # taken over by another kernel: only let go
            self._disconnect()
            return
        cluster, self._cluster = self._cluster, None
        self._kill_engines()
        if cluster is not None:
            launcher_for(self).end_job(cluster)  # so that stopping does not wait
        if self.client is not None:
            with contextlib.suppress(Exception):  # best effort on the way down
                self.client.close()
        self.client = None
        self.view = None
        if cluster is not None:
            with contextlib.suppress(Exception):  # the processes were killed above; this only cleans up
                cluster.stop_cluster_sync()
        self.engines = []
        self.outstanding = {}
        if self.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None
        lifetime.unregister(self.cluster_id)
        if self._own_cluster_id:  # a restart gets a new id (and job name)
            self.cluster_id, self._own_cluster_id = None, False

    def _disconnect(self) -> None:
        """Let go of a cluster that another kernel holds now, leaving it running."""
        if self.client is not None:
            with contextlib.suppress(Exception):  # best effort
                self.client.close()
        self._cluster, self.client, self.view, self.engines, self.outstanding = None, None, None, [], {}

    @classmethod
    def attach(cls, cluster_id: str | None = None, *, force: bool = False) -> MPICluster:
        """Reconnect to a running cluster of this user on this host (started with ``keep_alive``
        by a kernel that is gone, or held by another with ``force``): mpinb.client.attach."""
        from .attach import attach

        return attach(cls, cluster_id, force=force)

    def restart(self, replay_setup: bool = True, keep_progress: bool = True) -> MPICluster:
        """Kill and start a cluster of the same size; replay the cells marked as setup. The
        notebook's own state is untouched; only the engines' namespaces start afresh.
        ``keep_progress=False``: the start's progress bar is taken away once done (a restart
        inside a cell, whose view says it)."""
        cells = list(self.setup_cells)
        self._teardown()
        self.start(keep_progress=keep_progress)
        if replay_setup:
            for code in cells:
                self.run_cell(code, CellOptions(setup=True))
        return self

    # ----------------------------------------------------------------------- cells
    def ensure_ready(self) -> None:
        """Raise unless a cell can run now: RuntimeError without a cluster, ClusterLost once the
        MPI job ended, ClusterBusy while ranks still run an earlier cell."""
        from ..view.words import busy_words

        if not self.running:
            raise ClusterNotRunning("no cluster running: start one with %mpijax start -n N (or MPICluster(n).start())")
        if self.lost:
            raise ClusterLost(f"the MPI job is gone ({self.lost}); run %mpijax restart (cluster.restart())")
        busy = {r: ar for r, ar in self.outstanding.items() if not ar.ready()}
        if busy:
            raise ClusterBusy(busy_words(sorted(busy), {r: self.inflight(r) for r in busy},
                                         {r: self.where(r) for r in busy}, len(self.setup_cells)))

    def rank_view(self, ranks) -> object:
        """An ipyparallel DirectView of ``ranks`` (engine ids are the MPI ranks), made once per
        client and set of ranks: making one costs about as much as sending a cell."""
        key = tuple(ranks)
        view = self._views.get(key)
        if view is None or view.client is not self.client:
            view = self._views[key] = self.client[list(key)]
        return view

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
            engines = self.view
        elif isinstance(ranks, int):
            engines = self.client[ranks]
        else:
            engines = self.rank_view(sorted(ranks))
        return engines.apply_async(ByName(function), *args)

    def begin_cell(self) -> None:
        """Forget the ranks of earlier cells: ensure_ready found them all finished."""
        self.outstanding = {}

    def keep_running(self, rank: int, async_result) -> None:
        """Note that ``rank`` is still running the current cell: the next cell waits for it."""
        self.outstanding[rank] = async_result

    def mark_lost(self, cause: str) -> None:
        """Note that the MPI job is gone and why ("rank 1 ..."): later cells raise ClusterLost."""
        self.lost = cause

    def run_cell(self, code: str, options: CellOptions | None = None, *, stream=None, **keywords):
        """Run ``code`` on every rank (or ``ranks=...``) and return its result (a
        :class:`~mpinb.client.result.CellResult`). The options are a
        :class:`~mpinb.cell_options.CellOptions` or its fields as keywords (``compare=True``,
        ``timeout=30``, ``show=["y"]``, ...); ``stream`` receives output and states while it runs
        (mpinb.client.cell_run.CellRun). A ``setup=True`` cell that finished on every rank is
        replayed after a restart."""
        from .cell_run import CellRun

        options = CellOptions(**keywords) if options is None else options
        client = self.client
        mark = self._settled.begin(client) if client is not None else 0
        result = CellRun(self, code, options, stream=stream).run()
        if client is not None and client is self.client:  # after a restart the old client is gone
            self._settled.end(client, [v for v in self._views.values() if v.client is client], mark)
        if options.setup and code not in self.setup_cells and result.ok:
            self.setup_cells.append(code)
            registry.update(self.cluster_id, setup_cells=self.setup_cells)
        return result

    def pull(self, name: str, max_bytes: int | None = None):
        """Every rank's ``name`` as one NumPy array in the notebook: a jax.Array sharded across
        processes assembled into the global array, per-rank arrays stacked in rank order
        (mpinb.client.pull); at most ``max_bytes`` (default 256 MiB), else PullError."""
        from .pull import DEFAULT_MAX_BYTES, pull

        return pull(self, name, DEFAULT_MAX_BYTES if max_bytes is None else max_bytes)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def __repr__(self) -> str:
        state = f"running, engines {list(self.client.ids)}" if self.running else "stopped"
        return f"<MPICluster n={self.n} {state}>"
