"""A cluster's life: nothing it started outlives the process that started it (a kernel killed by
SIGKILL, the OOM killer, a culler), whatever the launcher; a computation without a word for long
is not taken for a dead holder; a cluster kept alive on purpose outlives its kernel, a new one
attaches to it (its variables intact), and it ends by itself after its time without a kernel;
``list`` and ``clean``; the files are the owner's only.

The holder here is a script (as a kernel is a process) that starts a cluster where the tests
run (tests/support/topology.py: this host, the other-host stand-in, a Slurm job step) and then
sleeps; it is killed with SIGKILL and the cluster's processes are counted: every process that
carries the cluster's id (the job's, by MPINB_CLUSTER_ID, and the watchdog, by its command line).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil
import pytest
from support.holders import cluster_processes, start_holder, start_kept
from support.topology import OTHER_HOST, SLURM, make_cluster

from mpinb.cluster import registry

#: the issue's bound: every process gone within a minute of the holder's death
BOUND = 60.0


LAUNCHERS = [{}] if (OTHER_HOST or SLURM) else [{}, {"mpi_args": ["-bind-to", "none"]}]


@pytest.mark.parametrize("options", LAUNCHERS, ids=lambda o: "mpiexec" if o else "default")
def test_a_holder_killed_by_sigkill_leaves_no_process_behind(options):
    holder, cluster_id = start_holder(**options)
    try:
        started = cluster_processes(cluster_id)
        names = {p.name() for p in started}
        assert len(started) >= 5 and any("python" in n for n in names), names  # job, engines, watchdog
        assert registry.read(cluster_id)["holder"]["pid"] == holder.pid
        holder.kill()
        holder.wait()
        killed = time.monotonic()
        left = cluster_processes(cluster_id)
        while left and time.monotonic() - killed < BOUND:
            time.sleep(0.5)
            left = cluster_processes(cluster_id)
        assert not left, [(p.pid, " ".join(p.cmdline())[:120]) for p in left]
        assert registry.read(cluster_id) is None  # and its file is gone
    finally:
        if holder.poll() is None:
            holder.kill()


def test_a_holder_killed_and_left_a_zombie_counts_as_gone():
    """A kernel killed by SIGKILL whose parent does not reap it (here: this test, until the end)
    stays a zombie: it runs no code, and its cluster ends as if it had been reaped."""
    holder, cluster_id = start_holder()
    try:
        assert cluster_processes(cluster_id)
        holder.kill()  # and no wait(): the holder stays a zombie, this test its parent
        while psutil.Process(holder.pid).status() != psutil.STATUS_ZOMBIE:
            time.sleep(0.05)
        killed = time.monotonic()
        left = cluster_processes(cluster_id)
        while left and time.monotonic() - killed < BOUND:
            time.sleep(0.5)
            left = cluster_processes(cluster_id)
        assert psutil.Process(holder.pid).status() == psutil.STATUS_ZOMBIE  # still unreaped at the end
        assert not left, [(p.pid, " ".join(p.cmdline())[:120]) for p in left]
        assert registry.read(cluster_id) is None
    finally:
        holder.kill()
        holder.wait()


def test_a_long_silent_cell_is_not_taken_for_a_dead_holder():
    """The watchdog watches the holder's process, never the engines' messages: a cell that says
    nothing for longer than the watchdog's period finishes, and the cluster stays registered."""
    with make_cluster(2) as cluster:
        cluster_id = cluster.cluster_id
        res = cluster.run_cell("import time\ntime.sleep(6)\nx = 1", timeout=120)
        assert res.ok, res.text()
        record = registry.read(cluster_id)
        assert record is not None and registry.alive(record["holder"])
        assert record["holder"]["pid"] == os.getpid()
    assert registry.read(cluster_id) is None  # stopped by its holder: unregistered


def test_a_kept_alive_cluster_survives_its_kernel_and_a_new_one_attaches_with_the_variables():
    from mpinb import MPICluster
    from mpinb.errors import ClusterHeld

    holder, cluster_id = start_kept(600)
    try:
        with pytest.raises(ClusterHeld, match=rf"cluster {cluster_id} is held by PID {holder.pid} on .*force"):
            MPICluster.attach(cluster_id)  # its kernel still runs
        holder.kill()
        holder.wait()
        time.sleep(3)  # longer than the watchdog's period: it saw the holder gone, and kept the cluster
        assert cluster_processes(cluster_id), "the cluster ended with its kernel, though kept alive"
        record = registry.read(cluster_id)
        assert record["released_at"] and registry.idle_seconds(record) >= 0
        listed = subprocess.run([sys.executable, "-m", "mpinb", "list"], capture_output=True, text=True,
                                check=True).stdout
        assert cluster_id in listed and "2 ranks" in listed and "idle" in listed, listed
        cluster = MPICluster.attach()  # the only one
        try:
            assert cluster.cluster_id == cluster_id and len(cluster.setup_cells) == 1
            res = cluster.run_cell("x + 1")
            assert res.ok and [res.records[r].result["repr"] for r in (0, 1)] == ["1", "11"], res.text()
            assert registry.read(cluster_id)["holder"]["pid"] == os.getpid()
        finally:
            cluster.stop()
        assert registry.read(cluster_id) is None
        killed = time.monotonic()
        while cluster_processes(cluster_id) and time.monotonic() - killed < BOUND:
            time.sleep(0.5)
        assert not cluster_processes(cluster_id)
    finally:
        if holder.poll() is None:
            holder.kill()


def test_a_kept_alive_cluster_ends_after_its_time_without_a_kernel():
    holder, cluster_id = start_kept(2)
    holder.kill()
    holder.wait()
    killed = time.monotonic()
    while (cluster_processes(cluster_id) or registry.read(cluster_id)) and time.monotonic() - killed < 2 + BOUND:
        time.sleep(0.5)
    assert not cluster_processes(cluster_id) and registry.read(cluster_id) is None


def test_attach_to_nothing_or_to_an_unknown_id_lists_what_there_is():
    from mpinb import MPICluster
    from mpinb.errors import ClusterError

    with pytest.raises(ClusterError, match=r"no cluster 'no-such-id' here \(this user's clusters on this host\)"):
        MPICluster.attach("no-such-id")
    if not registry.clusters():
        with pytest.raises(ClusterError, match=r"no cluster to attach to"):
            MPICluster.attach()


def test_clean_ends_the_clusters_no_kernel_holds():
    holder, cluster_id = start_kept(600)
    holder.kill()
    holder.wait()
    out = subprocess.run([sys.executable, "-m", "mpinb", "clean"], capture_output=True, text=True, check=True).stdout
    assert f"ended {cluster_id}" in out, out
    assert registry.read(cluster_id) is None
    gone = time.monotonic()
    while cluster_processes(cluster_id) and time.monotonic() - gone < BOUND:
        time.sleep(0.5)
    assert not cluster_processes(cluster_id)


def test_cluster_files_are_the_owner_s_only():
    import stat

    with make_cluster(1) as cluster:
        path = registry.path_of(cluster.cluster_id)
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700
