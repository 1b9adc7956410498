"""The ipyparallel configuration a cluster starts with, including launcher pass-through."""

import os
import socket
import sys

import pytest

from mpinb.cluster.mpi_cluster import MPICluster
from mpinb.cluster.start_phases import CONTROLLER_ARGS
from mpinb.launch.launchers import default_mpiexec


def test_default_configuration_is_local_and_off_the_network():
    cluster = MPICluster(n=3)
    c = cluster.config()
    assert cluster.local
    assert c.Cluster.engine_launcher_class == "mpi"
    assert c.Cluster.n == 3
    assert c.Cluster.controller_ip == "127.0.0.1"
    assert c.MPILauncher.mpi_cmd[-1] == default_mpiexec(local=True)  # behind stdbuf where it exists
    assert os.path.basename(c.MPILauncher.mpi_cmd[-1]) == "mpiexec.gforker"  # the mpich wheel's
    assert os.path.dirname(c.MPILauncher.mpi_cmd[-1]) == os.path.dirname(sys.executable)
    env = c.MPIEngineSetLauncher.environment
    assert env["JAX_PLATFORMS"] == "cpu" and env["UCX_TLS"] == "self,sm"


def test_launcher_arguments_switch_to_hydra():
    cluster = MPICluster(n=2, mpi_args=["-bind-to", "core"])
    c = cluster.config()
    assert not cluster.local
    assert c.MPILauncher.mpi_cmd == [default_mpiexec()]
    assert c.MPILauncher.mpi_args == ["-bind-to", "core"]
    assert "UCX_TLS" not in c.MPIEngineSetLauncher.environment


def test_slurm_allocation_passes_launcher_and_arguments_through():
    c = MPICluster(n=64, mpi_cmd=["srun"], mpi_args=["--mpi=pmix", "--cpu-bind=cores"],
                   controller_ip="0.0.0.0", engine_env={"OMP_NUM_THREADS": "1"}).config()  # noqa: S104
    assert c.MPILauncher.mpi_cmd == ["srun"]
    assert c.MPILauncher.mpi_args == ["--mpi=pmix", "--cpu-bind=cores"]
    assert c.Cluster.controller_ip == "0.0.0.0"  # noqa: S104 - passed through, as configured
    assert c.MPIEngineSetLauncher.environment["OMP_NUM_THREADS"] == "1"


def test_slurm_job_step_inside_an_allocation(monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "1234")
    cluster = MPICluster(n=8, launcher="slurm", nodes=2, mpi_args=["--cpu-bind=cores"], cluster_id="17-abcd")
    c = cluster.config()
    assert cluster.slurm_mode == "step" and not cluster.local
    assert c.Cluster.engine_launcher_class == "mpi"
    assert c.MPILauncher.mpi_cmd == ["srun", "--mpi=pmi2", "--kill-on-bad-exit=1", "--job-name=mpinb-17-abcd"]
    cluster.listed = False  # a standby's step (mpinb.cluster.standby) shares the running step's CPUs
    assert "--overlap" in cluster.config().MPILauncher.mpi_cmd
    assert c.MPILauncher.mpi_args == ["--nodes=2", "--cpu-bind=cores"]
    assert c.Cluster.controller_ip == "*"  # the engines are remote: every interface,
    assert c.Cluster.controller_args == [*CONTROLLER_ARGS, "--IPController.enable_curve=True"]  # and encrypted


def test_slurm_batch_job_outside_an_allocation(monkeypatch):
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    monkeypatch.delenv("SLURM_JOBID", raising=False)
    cluster = MPICluster(n=8, launcher="slurm", nodes=2, partition="gpu", account="proj1",
                         time_limit="1:00:00", cluster_id="17-abcd", engine_env={"A": "1"})
    c = cluster.config()
    assert cluster.slurm_mode == "batch"
    assert c.Cluster.engine_launcher_class == "slurm"
    launcher = c.SlurmEngineSetLauncher
    script = launcher.batch_template
    assert "#SBATCH --partition=gpu\n#SBATCH --account=proj1\n#SBATCH --time=1:00:00\n" in script
    assert "#SBATCH --job-name=mpinb-17-abcd\n" in script and "#SBATCH --nodes=2\n" in script
    assert "#SBATCH --output={output_file}" in script and "#SBATCH --ntasks={n}" in script
    assert "srun --mpi=pmi2 --kill-on-bad-exit=1 {program_and_args}" in script
    assert launcher.environment["A"] == "1"


def test_slurm_batch_script_as_sbatch_gets_it(monkeypatch, tmp_path):
    """The script ipyparallel writes (its options are only added to its own default template)."""
    from ipyparallel.cluster.launcher import SlurmEngineSetLauncher

    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    monkeypatch.delenv("SLURM_JOBID", raising=False)
    cluster = MPICluster(n=8, launcher="slurm", nodes=2, partition="gpu", account="proj1",
                         time_limit="1:00:00", cluster_id="17-abcd")
    cluster.workdir = str(tmp_path)
    (tmp_path / "status").mkdir()
    launcher = SlurmEngineSetLauncher(config=cluster.config(), profile_dir=str(tmp_path), cluster_id="17-abcd")
    launcher.write_batch_script(8)
    script = (tmp_path / "slurm_engine.sbatch").read_text()
    for line in ("#SBATCH --ntasks=8", "#SBATCH --nodes=2", "#SBATCH --partition=gpu", "#SBATCH --account=proj1",
                 "#SBATCH --time=1:00:00", "#SBATCH --job-name=mpinb-17-abcd"):
        assert line in script.splitlines(), script
    assert script.count("--partition") == 1 and script.splitlines()[-1].startswith("srun --mpi=pmi2 ")
    assert " -m mpinb.engine --IPEngine.wait_for_url_file=120 " in script.splitlines()[-1]
    assert script.splitlines()[-1].endswith(" --mpi")  # ipyparallel's engine; id = MPI rank


def test_encryption_follows_the_controller_address():
    curve = "--IPController.enable_curve=True"
    assert MPICluster(n=2).config().Cluster.controller_args == CONTROLLER_ARGS
    c = MPICluster(n=2, mpi_cmd=["mpiexec"], controller_ip="10.0.0.5").config()
    assert c.Cluster.controller_args == [*CONTROLLER_ARGS, curve]
    assert curve not in MPICluster(n=2, mpi_cmd=["mpiexec"], controller_ip="10.0.0.5",
                                   encrypt=False).config().Cluster.controller_args


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"launcher": "pbs"}, "launcher must be one of local, mpiexec, slurm"),
    ({"nodes": 2}, "nodes only apply to launcher='slurm'"),
    ({"launcher": "mpiexec", "partition": "x", "time_limit": "1:00"}, "partition, time_limit only apply"),
    ({"launcher": "slurm", "nodes": 9}, "nodes must be an int from 1 to n=8"),
    ({"launcher": "local", "mpi_args": ["-x"]}, "the local launcher takes no mpi_cmd or mpi_args"),
])
def test_bad_launcher_options_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        MPICluster(n=8, **kwargs)


def test_pbs_style_mpiexec_arguments():
    c = MPICluster(n=8, mpi_cmd=["mpiexec"], mpi_args=["-f", "$PBS_NODEFILE", "-ppn", "4"]).config()
    assert c.MPILauncher.mpi_args == ["-f", "$PBS_NODEFILE", "-ppn", "4"]


@pytest.mark.parametrize("n", [0, -1, 2.5, True, "4"])
def test_bad_size_is_refused(n):
    with pytest.raises(ValueError, match="n must be a positive int"):
        MPICluster(n=n)


def test_not_running_cluster_status_and_run_cell():
    cluster = MPICluster(n=2)
    assert cluster.status() == {"running": False, "n": 2, "lost": None, "ended": None, "setup_cells": 0}
    with pytest.raises(RuntimeError, match="no cluster running"):
        cluster.run_cell("1")


def test_no_local_signal_to_an_engine_pid():
    """Engines may run on other hosts: mpinb signals them through ipyparallel (their nanny),
    never with os.kill on a PID that an engine reported about itself."""
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[1] / "mpinb"
    offenders = [f"{p.name}:{n}" for p in sorted(root.rglob("*.py"))
                 for n, line in enumerate(p.read_text().splitlines(), 1)
                 if "os.kill(" in line and not line.lstrip().startswith("#")]
    assert not offenders, offenders


def test_start_progress_counts_engines_and_ends_at_ready(capsys):
    """One bar from start() to ready: engines counted as they register, the phase named; at the
    end it says ready with every engine counted (outside a notebook: text on stderr)."""
    from mpinb.cluster.progress import StartProgress

    progress = StartProgress(3, show=True)
    progress.phase("registering")
    progress.count(1)
    progress.count(3)
    progress.phase("ready")
    progress.close()
    last = capsys.readouterr().err.replace("\r", "\n").strip().splitlines()[-1]
    assert last.startswith("ready: 3/3 engines") and last.endswith(" s"), last
    quiet = StartProgress(3, show=False)
    quiet.count(2)
    quiet.close()
    assert capsys.readouterr().err == ""


class _Comm:
    """What coordinator_address asks of an mpi4py communicator, as rank ``rank`` of ranks on ``hosts``."""

    def __init__(self, rank, hosts):
        self.rank, self.hosts = rank, hosts

    def Get_rank(self):
        return self.rank

    def allgather(self, value):
        return list(self.hosts)

    def bcast(self, value, root=0):
        return value if self.rank == root else "chosen by rank 0"


def test_the_coordinator_listens_on_loopback_only_when_every_rank_shares_rank_0_s_host(monkeypatch):
    from mpinb.engine import jax_processes

    host = socket.gethostname()
    address = jax_processes.coordinator_address(_Comm(0, [host, host]))
    assert address.startswith("127.0.0.1:") and int(address.rsplit(":", 1)[1]) > 0
    assert jax_processes.coordinator_address(_Comm(1, [host, host])) == "chosen by rank 0"
    monkeypatch.setattr(jax_processes, "reachable_address", lambda: "127.0.0.2")  # stands for rank 0's address
    assert jax_processes.coordinator_address(_Comm(0, [host, "elsewhere"])).startswith("127.0.0.2:")


def test_rank_0_s_reachable_address_is_its_first_non_loopback_one(monkeypatch):
    from mpinb.engine import jax_processes
    from mpinb.errors import EngineSetupError

    def resolving_to(*addresses):
        return lambda *args, **kw: [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, 0)) for a in addresses]

    monkeypatch.setattr(socket, "getaddrinfo", resolving_to("127.0.1.1", "10.1.2.3", "10.9.9.9"))
    assert jax_processes.reachable_address() == "10.1.2.3"
    monkeypatch.setattr(socket, "getaddrinfo", resolving_to("127.0.1.1"))
    with pytest.raises(EngineSetupError, match="resolves only to loopback, which the ranks on other hosts"):
        jax_processes.reachable_address()

    def unknown(*args, **kw):
        raise socket.gaierror("Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", unknown)
    with pytest.raises(EngineSetupError, match="does not resolve"):
        jax_processes.reachable_address()


# ------------------------------------------------------------- which MPI's launcher (mpi_impl)

def fake_launcher(folder, name, says):
    """An executable ``folder/name`` whose --version prints ``says``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(f"#!/bin/sh\necho '{says}'\n")
    path.chmod(0o755)
    return str(path)


@pytest.fixture
def machine(tmp_path, monkeypatch):
    """A venv holding the mpich wheel's launchers, and a system Open MPI on PATH."""
    from mpinb.launch import mpi_impl

    venv_bin, system_bin = tmp_path / "venv" / "bin", tmp_path / "usr" / "bin"
    launchers = {
        "hydra": fake_launcher(venv_bin, "mpiexec", "HYDRA build details:\n    Version: 5.0.2"),
        "gforker": fake_launcher(venv_bin, "mpiexec.gforker", "invalid mpiexec argument --version"),
        "openmpi": fake_launcher(system_bin, "mpiexec.openmpi", "mpiexec.openmpi (OpenRTE) 4.1.4"),
    }
    (tmp_path / "usr" / "lib" / "x86_64-linux-gnu").mkdir(parents=True)
    monkeypatch.setattr(sys, "executable", str(venv_bin / "python"))
    monkeypatch.setenv("PATH", f"{venv_bin}:{system_bin}")
    mpi_impl.launcher_family.cache_clear()
    yield tmp_path, launchers
    mpi_impl.launcher_family.cache_clear()


def test_open_mpi_gets_open_mpi_s_launcher_even_with_the_mpich_wheel_first_on_path(machine):
    from mpinb.launch.mpi_impl import LoadedMPI, find_launcher

    root, launchers = machine
    mpi = LoadedMPI("Open MPI v4.1.4, package: Debian OpenMPI", str(root / "usr/lib/x86_64-linux-gnu/libmpi.so.40"))
    assert mpi.family == "Open MPI"
    assert find_launcher(mpi) == launchers["openmpi"]
    assert find_launcher(mpi, local=True) == launchers["openmpi"]  # Open MPI has no local-only launcher


def test_mpich_gets_the_wheel_s_launchers(machine):
    from mpinb.launch.mpi_impl import LoadedMPI, find_launcher

    root, launchers = machine
    mpi = LoadedMPI("MPICH Version: 5.0.2", str(root / "venv" / "lib" / "libmpi.so.12"))
    assert find_launcher(mpi) == launchers["hydra"]
    assert find_launcher(mpi, local=True) == launchers["gforker"]


def test_no_launcher_of_the_loaded_mpi_is_a_launcher_error_naming_it(machine):
    from mpinb.errors import LauncherError
    from mpinb.launch.mpi_impl import LoadedMPI, find_launcher

    root, launchers = machine
    os.remove(launchers["openmpi"])  # only MPICH's are left
    mpi = LoadedMPI("Open MPI v4.1.4", str(root / "usr/lib/x86_64-linux-gnu/libmpi.so.40"))
    with pytest.raises(LauncherError, match=r"no launcher of Open MPI found .*mpiexec\.openmpi.*--mpi-cmd"):
        find_launcher(mpi)


def test_open_mpi_as_root_without_being_told_is_refused_before_anything_starts(machine, monkeypatch):
    from mpinb.errors import LauncherError
    from mpinb.launch import mpi_impl

    root, launchers = machine
    mpi = mpi_impl.LoadedMPI("Open MPI v4.1.4", str(root / "usr/lib/x86_64-linux-gnu/libmpi.so.40"))
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    with pytest.raises(LauncherError, match=r"refuses to run as root unless told: set OMPI_ALLOW_RUN_AS_ROOT=1 "
                                            r"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"):
        mpi_impl.check_root(mpi, [], {})
    mpi_impl.check_root(mpi, [], {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"})
    mpi_impl.check_root(mpi, ["--allow-run-as-root"], {})
    # a launcher the user names is checked too, when it says it is Open MPI's
    with pytest.raises(LauncherError, match="refuses to run as root"):
        mpi_impl.check_launcher_matches(mpi, [launchers["openmpi"]], [], {})
    # and another MPI's launcher is named as such
    with pytest.raises(LauncherError, match=r"is MPICH's launcher, but mpi4py loads Open MPI"):
        mpi_impl.check_launcher_matches(mpi, [launchers["hydra"]], [], {})
    mpi_impl.check_launcher_matches(mpi, ["srun"], [], {})  # not an MPI launcher: not asked


def test_the_local_launcher_s_command_for_each_mpi(machine, monkeypatch):
    from mpinb.launch import mpi_impl

    root, launchers = machine
    for version, lib, want, extra in (
            ("MPICH Version: 5.0.2", "venv/lib/libmpi.so.12", launchers["gforker"], []),
            ("Open MPI v4.1.4", "usr/lib/x86_64-linux-gnu/libmpi.so.40", launchers["openmpi"],
             ["--oversubscribe", "--bind-to", "none", "--mca", "btl", "self,vader", "--mca", "oob_tcp_if_include"]),
            # Open MPI 5's runtime refuses a loopback-only channel: only MPI is kept on shared memory
            ("Open MPI v5.0.11, package: Open MPI user@localhost Distribution", "usr/lib/x86_64-linux-gnu/libmpi.so.40",
             launchers["openmpi"], ["--oversubscribe", "--bind-to", "none", "--mca", "btl", "self,sm"])):
        loaded = mpi_impl.LoadedMPI(version, str(root / lib))
        monkeypatch.setattr("mpinb.launch.launchers.loaded_mpi", lambda env=None, loaded=loaded: loaded)
        monkeypatch.setenv("OMPI_ALLOW_RUN_AS_ROOT", "1")
        monkeypatch.setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        c = MPICluster(n=4, progress=False).config()
        assert c.MPILauncher.mpi_cmd[-1] == want
        assert c.MPILauncher.mpi_args[:len(extra)] == extra
        assert ("oob_tcp_if_include" in c.MPILauncher.mpi_args) == ("v4." in version), c.MPILauncher.mpi_args


def test_a_local_job_s_ranks_wait_without_keeping_their_core(machine, monkeypatch):
    """Open MPI and Intel MPI spin in their waits unless told (mpi_impl.shared_core_env); MPICH yields
    already; a value the user set is kept."""
    from mpinb.launch import mpi_impl

    root, _ = machine
    monkeypatch.setenv("OMPI_ALLOW_RUN_AS_ROOT", "1")
    monkeypatch.setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    for version, lib, want in (
            ("MPICH Version: 5.0.2", "venv/lib/libmpi.so.12", {}),
            ("Intel(R) MPI Library 2021.18 for Linux* OS", "venv/lib/libmpi.so.12", {"I_MPI_WAIT_MODE": "1"}),
            ("Open MPI v4.1.4", "usr/lib/x86_64-linux-gnu/libmpi.so.40", {"OMPI_MCA_mpi_yield_when_idle": "1"}),
            ("Open MPI v5.0.11", "usr/lib/x86_64-linux-gnu/libmpi.so.40", {"OMPI_MCA_mpi_yield_when_idle": "1"})):
        loaded = mpi_impl.LoadedMPI(version, str(root / lib))
        monkeypatch.setattr("mpinb.launch.launchers.loaded_mpi", lambda env=None, loaded=loaded: loaded)
        env = MPICluster(n=2, progress=False).config().MPIEngineSetLauncher.environment
        names = ("I_MPI_WAIT_MODE", "OMPI_MCA_mpi_yield_when_idle")
        assert {k: env[k] for k in names if k in env} == want, version
        for name in want:  # the user's own choice stands: in the cluster's engine_env, or in the environment
            given = MPICluster(n=2, progress=False, engine_env={name: "0"}).config().MPIEngineSetLauncher.environment
            assert given[name] == "0"
            monkeypatch.setenv(name, "0")
            assert name not in MPICluster(n=2, progress=False).config().MPIEngineSetLauncher.environment
            monkeypatch.delenv(name)


def test_the_rank_wrapper_waits_until_the_controller_s_file_is_whole(tmp_path, monkeypatch):
    """The local launcher starts the engines with the controller: each rank's wrapper waits
    until the controller's engine file parses (a half-written file would end the engine)."""
    import threading
    import time

    from mpinb.launch import rank

    security = tmp_path / "security"
    security.mkdir()
    path = security / "ipcontroller-17-x-engine.json"
    path.write_text('{"registration": 12')  # half written
    env = {"IPP_PROFILE_DIR": str(tmp_path), "IPP_CLUSTER_ID": "17-x"}
    command = ["python", "-m", "mpinb.engine", "--IPEngine.wait_for_url_file=30"]
    threading.Timer(0.3, lambda: path.write_text('{"registration": 1234}')).start()
    started = time.monotonic()
    rank.wait_for_connection_file(command, env)
    assert 0.25 < time.monotonic() - started < 20 and path.read_text().endswith("}")
    assert rank.option(["a", "--profile-dir", "/p", "--cluster-id=c"], "--cluster-id") == "c"
    assert rank.option(["a", "--profile-dir", "/p"], "--profile-dir") == "/p"
    started = time.monotonic()
    rank.wait_for_connection_file(command, {**env, "IPP_CONNECTION_INFO": "{}"})  # given: no file read
    rank.wait_for_connection_file(["python", "--IPEngine.wait_for_url_file=0.2"], {"IPP_PROFILE_DIR": "/nowhere",
                                                                                   "IPP_CLUSTER_ID": "y"})
    assert time.monotonic() - started < 5  # gives up after its wait: the engine then says what it misses
