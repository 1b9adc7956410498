"""How the MPI job of a cluster is started and ended: one entry per launcher.

==============  ===========================================================  =====================
launcher        starts the ranks with                                        ends the job with
==============  ===========================================================  =====================
``local``       MPICH's ``mpiexec.gforker`` on this host, shared memory,     SIGKILL to mpiexec
                controller on loopback (the default)
``mpiexec``     the given ``mpi_cmd`` (default: the wheel's hydra            SIGKILL to mpiexec
                ``mpiexec``) with ``mpi_args`` as given (PBS, SSH hosts)
``slurm``       inside an allocation (``SLURM_JOB_ID`` set: ``salloc``,      ``scancel`` of the
                an interactive job): a job step, ``srun --mpi=pmi2           step, then SIGKILL
                --kill-on-bad-exit=1``                                       to srun
``slurm``       outside one: a batch job through ipyparallel's Slurm         ``scancel`` of the
                launcher (``sbatch``; nodes, partition, account, time)       job
==============  ===========================================================  =====================

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

from traitlets.config import Config

LAUNCHERS = ("local", "mpiexec", "slurm")
LOOPBACK = ("127.0.0.1", "localhost", "::1")

#: Environment that keeps a single-node MPICH job off the network: UCX uses shared memory only.
LOCAL_MPI_ENV = {"UCX_TLS": "self,sm"}
#: srun options every mpinb job step gets (see the module docstring)
SRUN_OPTIONS = ("--mpi=pmi2", "--kill-on-bad-exit=1")


class LauncherError(RuntimeError):
    """A launcher cannot be used as asked (not installed, bad option)."""


def default_mpiexec(name: str = "mpiexec") -> str:
    here = os.path.join(os.path.dirname(sys.executable), name)
    if os.path.exists(here):
        return here
    found = shutil.which(name)
    if not found:
        raise LauncherError(f"no {name} found: install the `mpich` wheel or pass mpi_cmd=[...]")
    return found


def in_slurm_allocation(env=os.environ) -> bool:
    """Inside ``salloc``, an interactive job or a batch script: job steps join the allocation."""
    return bool(env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID"))


def job_name(cluster_id: str) -> str:
    """The Slurm name of a cluster's job or step, how stop() finds what to cancel."""
    return f"mpinb-{cluster_id}"


def slurm_mode(env=os.environ) -> str:
    """'step' inside an allocation, 'batch' outside one."""
    return "step" if in_slurm_allocation(env) else "batch"


def _engine_cmd(status_dir: str) -> list[str]:
    """Each rank runs under mpinb.launch, which reports how its engine ended (mpinb.status)."""
    return [sys.executable, "-m", "mpinb.launch", "--status-dir", status_dir, "--",
            sys.executable, "-m", "ipyparallel.engine"]


def configure(c: Config, cluster, env: dict) -> None:
    """Fill the launcher part of an ipyparallel ``Config`` for ``cluster`` (an MPICluster)."""
    launcher = cluster.launcher
    if launcher == "slurm" and cluster.slurm_mode == "batch":
        _configure_batch(c, cluster, env)
        return
    c.Cluster.engine_launcher_class = "mpi"
    if launcher == "local":
        # MPICH's fork-based launcher opens no listening socket (hydra's control port binds
        # every interface), and shared-memory transports keep MPI itself off the network.
        # stdbuf: gforker forwards the ranks' output through block-buffered stdio, so an
        # exit record (mpinb.status) would only arrive when the whole job ends
        stdbuf = ["stdbuf", "-oL", "-eL"] if shutil.which("stdbuf") else []
        c.MPILauncher.mpi_cmd = [*stdbuf, default_mpiexec("mpiexec.gforker")]
        env.update(LOCAL_MPI_ENV)
        c.MPILauncher.mpi_args = list(cluster.mpi_args)
    elif launcher == "mpiexec":
        c.MPILauncher.mpi_cmd = cluster.mpi_cmd or [default_mpiexec()]
        c.MPILauncher.mpi_args = list(cluster.mpi_args)
    else:  # a step of the current Slurm allocation
        c.MPILauncher.mpi_cmd = [*(cluster.mpi_cmd or ["srun"]), *SRUN_OPTIONS,
                                 f"--job-name={job_name(cluster.cluster_id)}"]
        c.MPILauncher.mpi_args = [*_slurm_size_args(cluster), *cluster.mpi_args]
    env.update(cluster.engine_env)
    c.MPIEngineSetLauncher.environment = env
    if cluster.status_dir:
        c.MPIEngineSetLauncher.engine_cmd = _engine_cmd(cluster.status_dir)


def _slurm_size_args(cluster) -> list[str]:
    return [f"--nodes={cluster.nodes}"] if cluster.nodes else []


BATCH_TEMPLATE = """#!/bin/sh
#SBATCH --export=ALL
#SBATCH --job-name={job_name}
#SBATCH --ntasks={n}
#SBATCH --output={output_file}
{directives}srun {srun_options} {program_and_args}
"""


def _batch_directives(cluster) -> str:
    """The #SBATCH lines of the options: written into the script here, because ipyparallel adds
    its own (queue, account, timelimit) only to its default template, not to ours."""
    args = _slurm_size_args(cluster)
    if cluster.partition:
        args.append(f"--partition={cluster.partition}")
    if cluster.account:
        args.append(f"--account={cluster.account}")
    if cluster.time_limit:
        args.append(f"--time={cluster.time_limit}")
    return "".join(f"#SBATCH {shlex.quote(arg)}\n" for arg in args)


def _configure_batch(c: Config, cluster, env: dict) -> None:
    """A batch job through ipyparallel's Slurm launcher: sbatch submits a script whose one job
    step runs the ranks. The script is written into the cluster's own directory, not the
    notebook's working directory."""
    c.Cluster.engine_launcher_class = "slurm"
    launcher = c.SlurmEngineSetLauncher
    srun = [*SRUN_OPTIONS, *cluster.mpi_args]
    launcher.batch_template = BATCH_TEMPLATE.format(
        job_name=job_name(cluster.cluster_id), n="{n}", output_file="{output_file}",
        directives=_batch_directives(cluster).replace("{", "{{").replace("}", "}}"),
        srun_options=shlex.join(srun), program_and_args="{program_and_args}")
    if cluster.workdir:
        launcher.batch_file_name = os.path.join(cluster.workdir, "slurm_engine.sbatch")
    env.update(cluster.engine_env)
    launcher.environment = env
    if cluster.status_dir:
        # --mpi: engine id = MPI rank (ipyparallel's MPI launcher adds it; its batch launchers do not)
        launcher.engine_cmd = [*_engine_cmd(cluster.status_dir), "--mpi"]


def controller_ip(cluster) -> str:
    """Where the controller listens: loopback unless the engines may be on other hosts."""
    if cluster.controller_ip is not None:
        return cluster.controller_ip
    return "*" if cluster.launcher == "slurm" else "127.0.0.1"


def encrypted(cluster) -> bool:
    """CurveZMQ whenever the controller listens beyond loopback (unless told otherwise)."""
    if cluster.encrypt is not None:
        return bool(cluster.encrypt)
    return controller_ip(cluster) not in LOOPBACK


# --------------------------------------------------------------------------- ending a job
def _squeue_named(name: str, steps: bool) -> list[str]:
    """Ids of this user's jobs (or, with ``steps``, job steps ``JOB.STEP``) called ``name``."""
    try:
        out = subprocess.run(["squeue", "--me", "-h", *(["-s"] if steps else []), "-o", "%i %j"],
                             capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [fields[0] for fields in map(str.split, out.splitlines()) if len(fields) == 2 and fields[1] == name]


def slurm_steps(name: str) -> list[str]:
    """Ids (``JOB.STEP``) of this user's running job steps called ``name``."""
    return _squeue_named(name, steps=True)


def slurm_jobs(name: str) -> list[str]:
    """Ids of this user's jobs called ``name``."""
    return _squeue_named(name, steps=False)


def queue_state(cluster) -> str:
    """For a start that timed out: what Slurm says about the cluster's batch job (pending, why),
    or, for a step, about the allocation it runs in."""
    if cluster.launcher != "slurm" or not cluster.cluster_id:
        return ""
    if cluster.slurm_mode == "step":
        which = ["-j", os.environ.get("SLURM_JOB_ID") or os.environ.get("SLURM_JOBID", "")]
    else:
        which = ["-n", job_name(cluster.cluster_id)]
    try:
        out = subprocess.run(["squeue", "-h", *which, "-o", "job %i %T %r"],
                             capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return f"\nSlurm: {out.strip()}" if out.strip() else ""


def end_job(cluster, ipp_cluster, wait: float = 10.0) -> None:
    """End the MPI job through what started it (after the engines were killed): SIGKILL to the
    mpiexec (or srun) process; for Slurm, ``scancel`` of the step or the batch job, and wait
    until Slurm no longer lists it (a new step in the same allocation would wait for its CPUs)."""
    engine_sets = list(getattr(ipp_cluster, "engines", {}).values())
    if cluster.launcher != "slurm":
        for engine_set in engine_sets:
            with contextlib.suppress(Exception):  # already gone: nothing left to kill
                engine_set.signal(signal.SIGKILL)
        return
    name = job_name(cluster.cluster_id)
    lister = slurm_steps if cluster.slurm_mode == "step" else slurm_jobs
    for job in lister(name):
        subprocess.run(["scancel", "--signal=KILL", job] if cluster.slurm_mode == "step" else ["scancel", job],
                       capture_output=True, timeout=30, check=False)
    for engine_set in engine_sets:
        with contextlib.suppress(Exception):
            if cluster.slurm_mode == "step":
                engine_set.signal(signal.SIGKILL)  # the srun process on this host
    end = time.monotonic() + wait
    while lister(name) and time.monotonic() < end:
        time.sleep(0.1)
