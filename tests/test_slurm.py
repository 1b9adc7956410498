"""A real Slurm (tests/support/slurm_cluster.py: munged, slurmctld and two slurmd nodes on this machine):
the cluster started as a job step inside an allocation and as a batch job, ranks on both nodes,
the fault and output tests rerun as a job step, and stop() leaving no step, job or process.

Needs root and Debian's Slurm; .ci/run installs it and sets MPINB_REQUIRE_SLURM=1 so that this
can never be skipped there.
"""

import os

import psutil
import pytest
from support import slurm_cluster
from support.require import require
from support.rerun import JAX_NATIVE, pytest_passes

from mpinb.cluster.mpi_cluster import MPICluster
from mpinb.launch import launchers

TIMEOUT = 1200
ENGINE_ENV = {"UCX_NET_DEVICES": "lo"}  # the test's Slurm nodes are this machine
WHERE = "import os\nfrom mpi4py import MPI\n(MPI.COMM_WORLD.Get_size(), os.environ['SLURMD_NODENAME'])"


@pytest.fixture(scope="module")
def slurm():
    require("slurm", slurm_cluster.missing())
    with slurm_cluster.SlurmTestCluster() as s:
        yield s


@pytest.fixture
def allocation(slurm, monkeypatch):
    """As inside ``salloc -N 2 -n 4``: SLURM_JOB_ID names an allocation of both nodes."""
    job = slurm.allocate(nodes=2, tasks=4)
    monkeypatch.setenv("SLURM_JOB_ID", job)
    yield job
    slurm.cancel(job)


def engine_processes(status_dir: str) -> list[psutil.Process]:
    """The rank wrappers (and their engines) of one cluster, wherever Slurm started them."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        if status_dir in " ".join(proc.info["cmdline"] or []):
            found.append(proc)
    return found


def nodes_and_sizes(cluster) -> tuple[set[str], set[int]]:
    res = cluster.run_cell(WHERE, timeout=120)
    assert res.ok, res.text()
    values = [eval(rec.result["repr"]) for rec in res.records.values()]  # noqa: S307 - our own repr
    return {node for _, node in values}, {size for size, _ in values}


def assert_nothing_left(cluster_id: str, status_dir: str) -> None:
    name = launchers.job_name(cluster_id)
    assert not launchers.slurm_steps(name), "job step still listed after stop()"
    assert not launchers.slurm_jobs(name), "batch job still listed after stop()"
    left = [p for p in engine_processes(status_dir) if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not left, [p.info["cmdline"] for p in left]


def test_job_step_spans_both_nodes_and_stop_leaves_nothing(allocation):
    cluster = MPICluster(n=4, launcher="slurm", engine_env=ENGINE_ENV, progress=False)
    assert cluster.slurm_mode == "step"
    cluster.start()
    try:
        cluster_id, status_dir = cluster.cluster_id, cluster.status_dir
        assert launchers.slurm_steps(launchers.job_name(cluster_id))  # a step of the allocation
        assert all(step.startswith(f"{allocation}.") for step in launchers.slurm_steps(launchers.job_name(cluster_id)))
        nodes, sizes = nodes_and_sizes(cluster)
        assert nodes == set(slurm_cluster.NODES) and sizes == {4}
        assert engine_processes(status_dir)
    finally:
        cluster.stop()
    assert_nothing_left(cluster_id, status_dir)


def test_batch_job_outside_an_allocation(slurm, monkeypatch):
    """sbatch through ipyparallel's Slurm launcher, with nodes, partition and time limit; a rank
    that exits is reported with its cause (the exit record comes through the job's output file,
    which Slurm writes on the batch host: this machine here, a shared home on a real cluster)."""
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    monkeypatch.delenv("SLURM_JOBID", raising=False)
    cluster = MPICluster(n=4, launcher="slurm", nodes=2, partition=slurm_cluster.PARTITION,
                         time_limit="10:00", engine_env=ENGINE_ENV, progress=False)
    assert cluster.slurm_mode == "batch"
    cluster.start()
    try:
        cluster_id, status_dir = cluster.cluster_id, cluster.status_dir
        assert len(launchers.slurm_jobs(launchers.job_name(cluster_id))) == 1
        nodes, sizes = nodes_and_sizes(cluster)
        assert nodes == set(slurm_cluster.NODES) and sizes == {4}
        res = cluster.run_cell("import os, time\nif MPI.COMM_WORLD.Get_rank() == 1:\n    os._exit(3)\ntime.sleep(60)",
                               timeout=120)
        assert res.states[1] == "dead" and res.dead[1] == {"returncode": 3}, (res.dead, cluster.exit_records())
    finally:
        cluster.stop()
    assert_nothing_left(cluster_id, status_dir)


def test_fault_and_output_tests_pass_as_a_slurm_job_step(slurm, allocation):
    env = dict(os.environ, MPINB_TEST_SLURM="1", SLURM_JOB_ID=allocation)
    pytest_passes(["test_faults.py", "test_output.py", "test_lifetime.py"], env, timeout=TIMEOUT)
    assert not [step for step in slurm.steps() if step.startswith(f"{allocation}.")], "a step outlived its cluster"


def test_the_stall_report_and_pull_of_a_jax_distributed_cluster_as_a_slurm_job_step(slurm, allocation):
    env = dict(os.environ, MPINB_TEST_SLURM="1", SLURM_JOB_ID=allocation)
    pytest_passes(JAX_NATIVE, env, timeout=TIMEOUT)
    assert not [step for step in slurm.steps() if step.startswith(f"{allocation}.")], "a step outlived its cluster"
