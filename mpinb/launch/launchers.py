"""How the MPI job of a cluster is started and ended: one :class:`Launcher` class per launcher
(as ipyparallel's ``cluster/launcher.py`` has one per way of starting engines).

==============  ===========================================================  =====================
launcher        starts the ranks with                                        ends the job with
==============  ===========================================================  =====================
``local``       the MPI's own launcher on this host (MPICH's                 SIGKILL to mpiexec
                ``mpiexec.gforker``, Open MPI's ``mpiexec``), shared
                memory, controller on loopback (the default)
``mpiexec``     the given ``mpi_cmd`` (default: the MPI's ``mpiexec``)       SIGKILL to mpiexec
                with ``mpi_args`` as given (PBS, SSH hosts)
``slurm``       inside an allocation (``SLURM_JOB_ID`` set: ``salloc``,      ``scancel`` of the
                an interactive job): a job step, ``srun --mpi=pmi2           step, then SIGKILL
                --kill-on-bad-exit=1``                                       to srun
``slurm``       outside one: a batch job through ipyparallel's Slurm         ``scancel`` of the
                launcher (``sbatch``; nodes, partition, account, time)       job
==============  ===========================================================  =====================

Which MPI's launcher: the one of the library mpi4py loads (:mod:`mpinb.launch.mpi_impl`), not
whichever ``mpiexec`` comes first on PATH.

``srun --mpi=pmi2``: the ``mpich`` wheel gets a real COMM_WORLD from Slurm's PMI-2 plugin (not
from ``pmix``, and ``none`` gives every rank a world of one). ``--kill-on-bad-exit=1``: one dead
rank ends the step, as mpiexec ends the job, instead of leaving the others blocked in MPI.

A controller that the engines reach over the network (any ``controller_ip`` but loopback; the
Slurm launcher's default is every interface) runs with CurveZMQ encryption
(``IPController.enable_curve``); the connection files carry the server key.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from typing import ClassVar

from traitlets.config import Config

from ..errors import LauncherError
from .mpi_impl import LIBMPI_ENV, check_launcher_matches, check_root, find_launcher, loaded_mpi, shared_core_env

LOOPBACK = ("127.0.0.1", "localhost", "::1")
#: srun options every mpinb job step gets (see the module docstring)
SRUN_OPTIONS = ("--mpi=pmi2", "--kill-on-bad-exit=1")


def default_mpiexec(local: bool = False) -> str:
    """The launcher of the MPI mpi4py loads here (with ``local``, its launcher for a job on this
    host only: MPICH's ``mpiexec.gforker``)."""
    return find_launcher(loaded_mpi(), local=local)


def in_slurm_allocation(env=os.environ) -> bool:
    """Inside ``salloc``, an interactive job or a batch script: job steps join the allocation."""
    return bool(env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID"))


def job_name(cluster_id: str) -> str:
    """The Slurm name of a cluster's job or step, how stop() finds what to cancel."""
    return f"mpinb-{cluster_id}"


def slurm_mode(env=os.environ) -> str:
    """'step' inside an allocation, 'batch' outside one."""
    return "step" if in_slurm_allocation(env) else "batch"


def _engine_cmd(status_dir: str, wait: float = 120.0) -> list[str]:
    """Each rank runs under mpinb.launch.rank, which reports how its engine ended (mpinb.wire.status).
    Its engine may start before the controller listens (mpinb.cluster.controller.start_controller):
    it waits ``wait`` seconds for the controller's file and answer, not ipyparallel's 10 and 5, and
    tolerates 180 s without the controller's heartbeat (every 0.25 s: start_phases.CONTROLLER_ARGS)."""
    return [sys.executable, "-m", "mpinb.launch.rank", "--status-dir", status_dir, "--",
            sys.executable, "-m", "mpinb.engine", f"--IPEngine.wait_for_url_file={wait:g}",
            f"--IPEngine.timeout={wait:g}", "--IPEngine.max_heartbeat_misses=240"]


def _watch_env(cluster, env: dict) -> None:
    """Tell the engines which libmpi mpi4py loads, so that the MPI watch, which needs it, loads
    before mpi4py does (mpinb.engine.mpi4py_waits); nothing if that cannot be asked here."""
    try:
        path = loaded_mpi(_engines_env(cluster, env)).path
    except LauncherError:
        return
    if path:
        env.setdefault(LIBMPI_ENV, path)


class Launcher:
    """How one kind of MPI job is started and ended, for one cluster (an MPICluster: its size,
    options, cluster id and directories)."""

    #: the name users pick it by (``launcher=``, ``--launcher``)
    name: ClassVar[str]
    #: where the controller listens when the cluster does not say
    default_controller_ip: ClassVar[str] = "127.0.0.1"

    def __init__(self, cluster):
        self.cluster = cluster

    def controller_ip(self) -> str:
        """Where the controller listens: loopback unless the engines may be on other hosts."""
        ip = self.cluster.controller_ip
        return self.default_controller_ip if ip is None else ip

    def encrypted(self) -> bool:
        """CurveZMQ whenever the controller listens beyond loopback (unless told otherwise)."""
        if self.cluster.encrypt is not None:
            return bool(self.cluster.encrypt)
        return self.controller_ip() not in LOOPBACK

    def configure(self, c: Config, env: dict) -> None:
        """Fill the launcher part of an ipyparallel ``Config``: ipyparallel's MPI launcher with
        ``mpi_command()``, the engines' environment and the rank wrapper."""
        cluster = self.cluster
        c.Cluster.engine_launcher_class = "mpi"
        c.MPILauncher.mpi_cmd, c.MPILauncher.mpi_args = self.mpi_command(env)
        env.update(cluster.engine_env)
        _watch_env(cluster, env)
        c.MPIEngineSetLauncher.environment = env
        if cluster.status_dir:
            c.MPIEngineSetLauncher.engine_cmd = _engine_cmd(cluster.status_dir, cluster.start_timeout)

    def mpi_command(self, env: dict) -> tuple[list[str], list[str]]:
        """(the MPI launcher command, its arguments); may add to the engines' ``env``."""
        raise NotImplementedError

    def queue_state(self) -> str:
        """For a start that timed out: what the batch system says about the job ('' if none)."""
        return ""

    def end_job(self, ipp_cluster, wait: float = 10.0) -> None:
        """End the MPI job (after the engines were killed): SIGKILL to the launcher process."""
        for engine_set in list(getattr(ipp_cluster, "engines", {}).values()):
            with contextlib.suppress(Exception):  # already gone: nothing left to kill
                engine_set.signal(signal.SIGKILL)


def _engines_env(cluster, env: dict) -> dict:
    """The environment the engines will see (what decides which MPI mpi4py loads there)."""
    return {**os.environ, **env, **cluster.engine_env}


class LocalLauncher(Launcher):
    """The MPI's own launcher on this host, shared memory, controller on loopback: MPICH's
    ``mpiexec.gforker`` opens no listening socket (hydra's control port binds every interface);
    Open MPI's ``mpiexec`` keeps MPI on shared memory and its runtime's channel on loopback
    (``mpi_impl.IMPLEMENTATIONS``)."""

    name = "local"

    def configure(self, c: Config, env: dict) -> None:
        """As every launcher does; and the engines, on this host, read where the controller
        listens from its connection file, which they wait for: so they can start with it, not
        after it (their start, mostly imports, overlaps the controller's)."""
        super().configure(c, env)
        c.Cluster.send_engines_connection_env = False

    def mpi_command(self, env: dict) -> tuple[list[str], list[str]]:
        mpi = loaded_mpi(_engines_env(self.cluster, env))
        impl = mpi.implementation
        args = [*(impl.oversubscribe + impl.default_args + impl.local_args if impl else ()), *self.cluster.mpi_args]
        env.update(dict(impl.local_env) if impl else {})
        # ranks on this host share its cores: a rank waiting in MPI gives its core away
        env.update(shared_core_env(mpi, _engines_env(self.cluster, env)))
        check_root(mpi, args, _engines_env(self.cluster, env))
        # stdbuf: gforker forwards the ranks' output through block-buffered stdio, so an
        # exit record (mpinb.wire.status) would only arrive when the whole job ends
        stdbuf = ["stdbuf", "-oL", "-eL"] if shutil.which("stdbuf") else []
        return [*stdbuf, find_launcher(mpi, local=True)], args


class MpiexecLauncher(Launcher):
    """The given ``mpi_cmd`` (default: the MPI's ``mpiexec``) with ``mpi_args`` as given."""

    name = "mpiexec"

    def mpi_command(self, env: dict) -> tuple[list[str], list[str]]:
        mpi = loaded_mpi(_engines_env(self.cluster, env))
        if self.cluster.mpi_cmd:
            check_launcher_matches(mpi, self.cluster.mpi_cmd, self.cluster.mpi_args, _engines_env(self.cluster, env))
            return list(self.cluster.mpi_cmd), list(self.cluster.mpi_args)
        args = [*(mpi.implementation.default_args if mpi.implementation else ()), *self.cluster.mpi_args]
        check_root(mpi, args, _engines_env(self.cluster, env))
        return [find_launcher(mpi)], args


class SlurmLauncher(Launcher):
    """What both Slurm launchers share: the controller on every interface, a job named after
    the cluster, ``scancel`` to end it."""

    name = "slurm"
    default_controller_ip = "*"

    def job_name(self) -> str:
        return job_name(self.cluster.cluster_id)

    def size_args(self) -> list[str]:
        return [f"--nodes={self.cluster.nodes}"] if self.cluster.nodes else []

    def listed(self) -> list[str]:
        """The ids Slurm lists for this cluster's job (or step)."""
        raise NotImplementedError

    def cancel(self, job: str) -> None:
        raise NotImplementedError

    def which_in_queue(self) -> list[str]:
        """squeue's selection for queue_state."""
        raise NotImplementedError

    def queue_state(self) -> str:
        if not self.cluster.cluster_id:
            return ""
        try:
            out = subprocess.run(["squeue", "-h", *self.which_in_queue(), "-o", "job %i %T %r"],
                                 capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.TimeoutExpired):
            return ""
        return f"\nSlurm: {out.strip()}" if out.strip() else ""

    def end_job(self, ipp_cluster, wait: float = 10.0) -> None:
        """``scancel`` the step or the batch job, and wait until Slurm no longer lists it (a new
        step in the same allocation would wait for its CPUs)."""
        for job in self.listed():
            self.cancel(job)
        self.kill_local(ipp_cluster)
        end = time.monotonic() + wait
        while self.listed() and time.monotonic() < end:
            time.sleep(0.1)

    def kill_local(self, ipp_cluster) -> None:
        """What runs on this host for the job, if anything, is killed too."""


class SlurmStepLauncher(SlurmLauncher):
    """Inside an allocation (``SLURM_JOB_ID`` set: ``salloc``, an interactive job): a job step,
    ``srun --mpi=pmi2 --kill-on-bad-exit=1``; a standby's (mpinb.cluster.standby) with
    ``--overlap``: it shares the running step's CPUs."""

    def mpi_command(self, env: dict) -> tuple[list[str], list[str]]:
        cluster = self.cluster
        overlap = [] if cluster.listed else ["--overlap"]  # a standby's step shares the running step's CPUs
        return ([*(cluster.mpi_cmd or ["srun"]), *SRUN_OPTIONS, *overlap, f"--job-name={self.job_name()}"],
                [*self.size_args(), *cluster.mpi_args])

    def listed(self) -> list[str]:
        return slurm_steps(self.job_name())

    def cancel(self, job: str) -> None:
        subprocess.run(["scancel", "--signal=KILL", job], capture_output=True, timeout=30, check=False)

    def which_in_queue(self) -> list[str]:
        return ["-j", os.environ.get("SLURM_JOB_ID") or os.environ.get("SLURM_JOBID", "")]

    def kill_local(self, ipp_cluster) -> None:
        Launcher.end_job(self, ipp_cluster)  # the srun process on this host


class SlurmBatchLauncher(SlurmLauncher):
    """Outside an allocation: a batch job through ipyparallel's Slurm launcher (``sbatch``;
    nodes, partition, account, time); its script's one job step runs the ranks. The script is
    written into the cluster's own directory, not the notebook's working directory."""

    def configure(self, c: Config, env: dict) -> None:
        cluster = self.cluster
        c.Cluster.engine_launcher_class = "slurm"
        launcher = c.SlurmEngineSetLauncher
        srun = [*SRUN_OPTIONS, *cluster.mpi_args]
        launcher.batch_template = BATCH_TEMPLATE.format(
            job_name=self.job_name(), n="{n}", output_file="{output_file}",
            directives=self.directives().replace("{", "{{").replace("}", "}}"),
            srun_options=shlex.join(srun), program_and_args="{program_and_args}")
        if cluster.workdir:
            launcher.batch_file_name = os.path.join(cluster.workdir, "slurm_engine.sbatch")
        env.update(cluster.engine_env)
        _watch_env(cluster, env)
        launcher.environment = env
        if cluster.status_dir:
            # --mpi: engine id = MPI rank (ipyparallel's MPI launcher adds it; its batch launchers do not)
            launcher.engine_cmd = [*_engine_cmd(cluster.status_dir, cluster.start_timeout), "--mpi"]

    def directives(self) -> str:
        """The #SBATCH lines of the options: written into the script here, because ipyparallel
        adds its own (queue, account, timelimit) only to its default template, not to ours."""
        cluster = self.cluster
        args = self.size_args()
        if cluster.partition:
            args.append(f"--partition={cluster.partition}")
        if cluster.account:
            args.append(f"--account={cluster.account}")
        if cluster.time_limit:
            args.append(f"--time={cluster.time_limit}")
        return "".join(f"#SBATCH {shlex.quote(arg)}\n" for arg in args)

    def listed(self) -> list[str]:
        return slurm_jobs(self.job_name())

    def cancel(self, job: str) -> None:
        subprocess.run(["scancel", job], capture_output=True, timeout=30, check=False)

    def which_in_queue(self) -> list[str]:
        return ["-n", self.job_name()]


def launcher_for(cluster) -> Launcher:
    """The launcher of ``cluster``: by its name, and for Slurm by whether this process runs
    inside an allocation (a step) or not (a batch job)."""
    if cluster.launcher == "slurm":
        return SlurmStepLauncher(cluster) if cluster.slurm_mode == "step" else SlurmBatchLauncher(cluster)
    return {"local": LocalLauncher, "mpiexec": MpiexecLauncher}[cluster.launcher](cluster)


BATCH_TEMPLATE = """#!/bin/sh
#SBATCH --export=ALL
#SBATCH --job-name={job_name}
#SBATCH --ntasks={n}
#SBATCH --output={output_file}
{directives}srun {srun_options} {program_and_args}
"""



# --------------------------------------------------------------------------- Slurm's queue
def _squeue_named(name: str, steps: bool) -> list[str]:
    """Ids of this user's jobs (or, with ``steps``, job steps ``JOB.STEP``) called ``name``."""
    return _squeue_answer(name, steps) or []


def _squeue_answer(name: str, steps: bool) -> list[str] | None:
    """As ``_squeue_named``, None when Slurm did not answer (no squeue, an error, no reply)."""
    try:
        done = subprocess.run(["squeue", "--me", "-h", *(["-s"] if steps else []), "-o", "%i %j"],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    return [fields[0] for fields in map(str.split, done.stdout.splitlines()) if len(fields) == 2 and fields[1] == name]


def slurm_job_runs(name: str) -> bool | None:
    """Whether Slurm still has a job or job step called ``name`` (queued or running), None when
    it did not answer."""
    jobs = _squeue_answer(name, steps=False)
    steps = _squeue_answer(name, steps=True)
    if jobs is None or steps is None:
        return None
    return bool(jobs or steps)


def slurm_steps(name: str) -> list[str]:
    """Ids (``JOB.STEP``) of this user's running job steps called ``name``."""
    return _squeue_named(name, steps=True)


def slurm_jobs(name: str) -> list[str]:
    """Ids of this user's jobs called ``name``."""
    return _squeue_named(name, steps=False)
