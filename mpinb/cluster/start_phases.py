"""The phases of a cluster's start (``MPICluster.start``): the controller, the MPI job, the
engines registering, the ranks' check (mpinb.cluster.start_checks) and the engines' setup; a
phase that fails or does not end within ``start_timeout`` tears down what was started and
raises with the launcher's output or the engines' words.
"""

from __future__ import annotations

import os
import secrets
import tempfile
import time

from traitlets.config import Config

from .. import environment
from ..cells import health
from ..errors import ClusterError, ControllerError, LauncherError
from ..launch.launchers import launcher_for
from . import lifetime, registry, upkeep
from .controller import start_controller
from .progress import StartProgress
from .start_checks import ask_every_engine, check_ranks


class EnginesMissing(Exception):
    """Not every engine registered within start_timeout (internal: start() turns it into the
    ClusterError users see, with the launcher's output); ``facts``: how many did."""

    def __init__(self, **facts):
        super().__init__(facts)
        self.facts = facts


class LauncherExited(EnginesMissing):
    """The MPI launcher ended before every engine registered; ``facts``: its exit status, when."""


#: the controller's own options (see configuration): its schedulers as threads of its process
#: and one broadcast scheduler (a cell's few messages need no more, and one process starts faster
#: and holds less than eight); a heartbeat every 0.25 s, not 3 s, for a new engine's registration
#: completes at its first heartbeat (it took 3-6 s of a 9 s start), with as many seconds of misses
#: tolerated as before (30: mpinb learns of a dead engine from its nanny, not from its heart)
CONTROLLER_ARGS = ["--IPController.use_threads=True", "--IPController.broadcast_scheduler_depth=0",
                   "--HeartMonitor.period=250", "--HeartMonitor.max_heartmonitor_misses=120"]


def configuration(cluster) -> Config:
    """The ipyparallel configuration ``cluster`` (an MPICluster) starts with: its launcher's
    (mpinb.launch.launchers), the controller's address and encryption, the engines' environment."""
    c = Config()
    c.Cluster.n = cluster.n
    launch = launcher_for(cluster)
    c.Cluster.controller_ip = launch.controller_ip()
    c.Cluster.controller_args = CONTROLLER_ARGS + (["--IPController.enable_curve=True"] if launch.encrypted() else [])
    # UCX's own crash handler prints a C backtrace (seconds, under load) before the rank
    # dies; faulthandler already gives the Python one, and the report must come fast.
    # MPINB_CLUSTER_ID: every process of the job carries the cluster's id (what tests count)
    env = {"UCX_HANDLE_ERRORS": "none", environment.CLUSTER_ID.name: cluster.cluster_id or ""}
    if cluster.devices == "cpu":
        env["JAX_PLATFORMS"] = "cpu"
    launch.configure(c, env)
    c.LocalControllerLauncher.environment = {environment.CLUSTER_ID.name: cluster.cluster_id or ""}
    return c


def run_start(cluster, t0: float, progress: StartProgress) -> None:
    """The phases of ``cluster.start()``: controller, engines registering, checked, set up."""
    import ipyparallel as ipp

    cluster.lost = cluster.ended = None
    cluster.outstanding = {}
    upkeep.survey()  # the files of clusters that ended without a word go, a dead watchdog is replaced
    cluster.workdir = tempfile.mkdtemp(prefix="mpinb-")
    os.makedirs(cluster.status_dir)
    if not cluster.cluster_id:
        cluster.cluster_id = f"{int(time.time())}-{secrets.token_hex(2)}"
        cluster._own_cluster_id = True
    try:
        config = cluster.config()
    except LauncherError:
        cluster._teardown()
        raise
    listing = {} if cluster.listed else {"cluster_file": ""}  # a standby is not listed until swapped in
    cluster._cluster = ipp.Cluster(config=config, log_level=40, engine_timeout=int(cluster.start_timeout),
                                   cluster_id=cluster.cluster_id, **listing)
    try:
        start_controller(cluster._cluster, cluster.start_timeout, with_engines=True)  # the engines start meanwhile
        lifetime.register(cluster, cluster._cluster)  # from here on, nothing outlives this process
        cluster.record = registry.read(cluster.cluster_id)  # what says whether it ended outside this notebook
        cluster.client = cluster._cluster.connect_client_sync()
        progress.phase("registering")
        wait_for_engines(cluster, t0, progress)
    except (KeyboardInterrupt, ControllerError):  # the stop button, or no controller (its own words)
        cluster._teardown()  # leave no job or controller behind
        raise
    except Exception as exc:
        output = health.launcher_output(cluster)[-2000:] + launcher_for(cluster).queue_state()
        cluster._teardown()
        missing = exc.facts if isinstance(exc, EnginesMissing) else {}  # how many came, the launcher's end
        raise ClusterError(cause="engines_not_up", n=cluster.n, waited=cluster.start_timeout, problem=str(exc),
                           output=output, **missing) from exc
    cluster._protect_connection_files()
    check_and_set_up(cluster, progress)
    cluster.started_at = time.time()
    cluster.start_seconds = time.perf_counter() - t0
    registry.update(cluster.cluster_id, engines=cluster.engines, start_seconds=cluster.start_seconds)
    progress.phase("ready")


def check_and_set_up(cluster, progress: StartProgress | None = None) -> None:
    """The phases after the engines registered: the ranks checked (mpinb.cluster.start_checks)
    and set up; their accounts of themselves kept (``cluster.engines``). A start tears the
    cluster down when one fails (an attach of a cluster started elsewhere lets go of it)."""
    cluster.every_engine = cluster.client[:]
    cluster.every_engine.block = True
    if progress is not None:
        progress.phase("checking")
    try:
        cluster.preflight, cluster.notes = check_ranks(cluster)
    except BaseException:  # a difference, a rank that did not answer, the stop button: leave nothing running
        cluster._teardown()
        raise
    if progress is not None:
        progress.phase("setup")
    infos = setup_engines(cluster)
    ranks = [info["rank"] for info in infos]
    ids = list(cluster.client.ids)
    if ranks != ids:
        cluster._teardown()
        alone = len(set(ranks)) < len(ranks)  # each rank a world of its own
        raise ClusterError(cause="ids_not_ranks", ids=ids, ranks=ranks, alone=alone)
    cluster.engines = infos


def setup_engines(cluster) -> list[dict]:
    """Run the engines' setup (mpinb.engine.startup) on every rank; what each says of itself.
    A setup that fails, or that some rank does not finish within start_timeout, ends the
    cluster with the engine's own words or the ranks that did not answer."""
    from ..engine.startup import setup

    try:
        return ask_every_engine(cluster, "setup", setup, cluster.dump_root, cluster.status_dir,
                                cluster.checked, cluster.jax_distributed, cluster.local_devices, cluster.devices)
    except BaseException:  # an engine's error, a rank that did not answer, the stop button
        cluster._teardown()
        raise


def wait_for_engines(cluster, t0: float, progress: StartProgress) -> None:
    """Wait until all n engines registered, counting them on the progress bar: EnginesMissing
    after start_timeout, LauncherExited at once when the MPI launcher ended first (a bad
    option, a refusal: its output says why)."""
    while True:
        registered = len(cluster.client.ids)
        progress.count(registered)
        if registered >= cluster.n:
            return
        ended = cluster.launcher_ended()
        if ended is not None:
            seconds = time.perf_counter() - t0
            raise LauncherExited(status=ended, seconds=seconds, registered=registered)
        if time.perf_counter() - t0 > cluster.start_timeout:
            raise EnginesMissing(registered=registered)
        time.sleep(0.1)
