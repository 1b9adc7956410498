"""A cluster that others end: ipyparallel's own stop (what the STOP button of JupyterLab's IPython
Parallel panel and ``ipcluster stop`` run), its controller, its engines or its MPI launcher
killed (SIGKILL, as the OOM killer does), between cells or during one, and its watchdog killed.
Real processes each time, on 2 ranks.

Each time, the next cell (and ``%mpijax status``) says in one sentence what happened and what to
do, at once, and nothing of the cluster is left running: no engine, MPI launcher, controller or
watchdog, no cluster file for the panel to list. A cell under way when the cluster is stopped or
loses its controller ends then, saying so. A holder that runs no cell meanwhile finds the same:
the watchdog ends what is left after its grace and keeps the facts for the next cell."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
import types

import psutil
import pytest
from support.holders import cluster_processes
from support.shell import ipython_shell
from support.topology import make_cluster

from mpinb.cells import health
from mpinb.cluster import identity, registry, watchdog
from mpinb.errors import ClusterLost
from mpinb.view.tables import StatusTable

SETUP = "from mpi4py import MPI\nrank = MPI.COMM_WORLD.Get_rank()"
#: the issue's bound on the next cell's answer is 2 s; margin for a loaded 2-core machine
SAID_WITHIN = 2.0 + 3.0
#: seconds for every process of an ended cluster to be gone (engines' nannies end by themselves)
GONE_WITHIN = 20.0


@pytest.fixture
def cluster():
    c = make_cluster(2).start()
    assert c.run_cell(SETUP, setup=True).ok
    c.test_ids = (c.cluster_id, registry.read(c.cluster_id))  # kept: an ended cluster forgets them
    yield c
    c.stop()


# ------------------------------------------------------------------------------ ways to end it

def ipyparallel_stop(cluster) -> None:
    """What the panel's STOP does, from another process (the Jupyter server)."""
    _, record = cluster.test_ids
    subprocess.run([sys.executable, "-c", "import sys, ipyparallel as ipp\n"
                    "ipp.Cluster.from_file(sys.argv[1]).stop_cluster_sync()", record["ipp_cluster_file"]],
                   check=True, timeout=120)


def ipcluster_stop(cluster) -> None:
    cluster_id, record = cluster.test_ids
    subprocess.run([os.path.join(os.path.dirname(sys.executable), "ipcluster"), "stop", "--cluster-id", cluster_id,
                    "--profile-dir", record["profile_dir"]], check=True, timeout=120, capture_output=True)


def kill_engines(cluster) -> None:
    cluster_id, _ = cluster.test_ids
    engines = [p for p in cluster_processes(cluster_id)  # the engines, not their rank wrappers
               if "mpinb.engine" in " ".join(p.cmdline()) and "mpinb.launch.rank" not in " ".join(p.cmdline())]
    assert engines
    for proc in engines:
        proc.kill()
    ended(cluster.test_ids[1]["launchers"][0])  # between cells: once the MPI launcher has ended the job


def kill_controller(cluster) -> None:
    os.kill(cluster.test_ids[1]["controller"]["pid"], signal.SIGKILL)
    ended(cluster.test_ids[1]["controller"])


def kill_launcher(cluster) -> None:
    os.kill(cluster.test_ids[1]["launchers"][0]["pid"], signal.SIGKILL)
    ended(cluster.test_ids[1]["launchers"][0])


def ended(entry: dict) -> None:
    """Wait until the process of a registry entry has ended (a signal is delivered a moment later)."""
    end = time.monotonic() + GONE_WITHIN
    while identity.running(entry) and time.monotonic() < end:
        time.sleep(0.02)


#: each way, and what the next cell says happened
WAYS = {
    "ipyparallel_stop": (ipyparallel_stop, "the cluster was stopped outside this notebook"),
    "ipcluster_stop": (ipcluster_stop, "the cluster was stopped outside this notebook"),
    "engines_killed": (kill_engines, "the cluster's MPI job ended outside this notebook (ranks 0-1 killed by "
                                     "signal 9 (SIGKILL))"),
    "controller_killed": (kill_controller, "the cluster's controller ended outside this notebook (killed by "
                                           "signal 9 (SIGKILL))"),
    "launcher_killed": (kill_launcher, "the cluster's MPI job ended outside this notebook"),
}
WHAT_TO_DO = "%mpijax restart starts it again and replays 1 --setup cell"


def assert_nothing_left(cluster) -> None:
    cluster_id, record = cluster.test_ids
    end = time.monotonic() + GONE_WITHIN
    while True:
        left = cluster_processes(cluster_id) + [p for p in [watchdog.same_process(record["watchdog"])] if p]
        if not left or time.monotonic() > end:
            break
        time.sleep(0.2)
    assert not left, [(p.pid, " ".join(p.cmdline())[:100]) for p in left]
    assert registry.read(cluster_id) is None
    assert not os.path.exists(record["ipp_cluster_file"]), "the panel would still list it"


def assert_said(cluster, happened: str) -> None:
    """The next cell raises at once with the sentence; status says it too."""
    started = time.monotonic()
    with pytest.raises(ClusterLost) as raised:
        cluster.run_cell("rank")
    seconds = time.monotonic() - started
    assert str(raised.value).startswith(happened) and str(raised.value).endswith(WHAT_TO_DO), str(raised.value)
    assert seconds < SAID_WITHIN, seconds
    status = cluster.status()
    assert status["running"] is False
    assert f"ended        {happened}" in StatusTable(status).text(), StatusTable(status).text()


@pytest.mark.parametrize("way", WAYS)
def test_between_cells_the_next_cell_says_how_it_ended_and_nothing_is_left(cluster, way):
    end, happened = WAYS[way]
    end(cluster)
    assert_said(cluster, happened)
    assert_nothing_left(cluster)


@pytest.mark.parametrize("way", ["ipyparallel_stop", "controller_killed", "launcher_killed"])
def test_a_cell_under_way_ends_with_its_cluster(cluster, way):
    end, happened = WAYS[way]
    printed = threading.Event()

    def stream(rank, kind, text):
        if "sleeping" in text:
            printed.set()

    ending = threading.Thread(target=lambda: printed.wait(60) and end(cluster))
    ending.start()
    result = cluster.run_cell("import time\nprint('sleeping', flush=True)\ntime.sleep(120)", stream=stream)
    ending.join()
    assert set(result.states.values()) == {"dead"}, result.text()
    said = result.text()
    if way == "launcher_killed":  # the ranks' deaths say it: the MPI launcher ended them
        assert "the MPI job ended because rank" in said, said
    else:
        assert f"note: {happened}" in said, said
    with pytest.raises(ClusterLost):
        cluster.run_cell("rank")
    assert_nothing_left(cluster)


@pytest.mark.parametrize("way", ["ipyparallel_stop", "controller_killed"])
def test_a_holder_that_runs_no_cell_finds_it_ended_by_the_watchdog(cluster, way):
    """The watchdog ends what is left after its grace (10 s: ipyparallel's stop takes a few) and
    keeps the facts for the next cell."""
    end, happened = WAYS[way]
    cluster_id, _ = cluster.test_ids
    end(cluster)
    deadline = time.monotonic() + watchdog.HELD_GRACE + GONE_WITHIN
    while (registry.read(cluster_id) or {}).get("ended") is None and time.monotonic() < deadline:
        time.sleep(0.5)
    assert registry.read(cluster_id)["ended"]["cause"] in ("stopped_outside", "controller_ended")
    while cluster_processes(cluster_id) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not cluster_processes(cluster_id)
    assert_said(cluster, happened.split(" (")[0])
    assert_nothing_left(cluster)


def test_a_killed_watchdog_is_replaced_at_the_next_cell(cluster):
    cluster_id, record = cluster.test_ids
    first = watchdog.same_process(record["watchdog"])
    first.kill()
    first.wait(10)
    result = cluster.run_cell("rank")
    assert result.ok and "note: the cluster's watchdog had ended (killed?); a new one watches the cluster" \
        in result.text(), result.text()
    assert watchdog.watched(cluster_id)
    assert "watchdog" not in cluster.run_cell("rank").text()  # said once


def test_the_magic_says_it_in_one_line_and_restart_brings_it_back():
    shell = ipython_shell()
    shell.run_line_magic("load_ext", "mpinb")
    shell.run_line_magic("mpijax", "start -n 2")
    magics = shell.magics_manager.registry["MpiJaxMagics"]
    cluster = magics.cluster
    cluster.test_ids = (cluster.cluster_id, registry.read(cluster.cluster_id))
    try:
        shell.run_cell_magic("mpijax", "--setup", SETUP)
        ipyparallel_stop(cluster)
        result = shell.run_cell("%%mpijax\nrank")
        assert type(result.error_in_exec).__name__ == "UsageError"
        assert str(result.error_in_exec) == (f"%%mpijax: {WAYS['ipyparallel_stop'][1]} (ipyparallel's stop: the STOP "
                                             f"button of the IPython Parallel panel, or ipcluster stop); {WHAT_TO_DO}")
        status = shell.run_line_magic("mpijax", "status")
        assert "stopped outside this notebook" in status.text()
        assert_nothing_left(cluster)
        shell.run_line_magic("mpijax", "restart")
        shell.run_cell_magic("mpijax", "", "rank")
        assert shell.user_ns["_mpijax"].ok
    finally:
        shell.run_line_magic("mpijax", "stop")


def test_the_count_finds_a_running_cluster_s_processes_and_none_after_its_stop():
    """The count the tests above make finds what runs (so that finding nothing means something)."""
    c = make_cluster(2).start()
    cluster_id, record = c.cluster_id, registry.read(c.cluster_id)
    try:
        found = cluster_processes(cluster_id)
        assert any("mpinb.engine" in " ".join(p.cmdline()) for p in found)
        assert any(p.pid == record["controller"]["pid"] for p in found)
    finally:
        c.stop()
    c.test_ids = (cluster_id, record)
    assert_nothing_left(c)


def reap_as_ipyparallel_does(process: psutil.Process) -> None:
    """ipyparallel's waiter thread for a process it launched: a psutil wait, every 30 ms."""
    while True:
        try:
            process.wait(timeout=0.03)
            return
        except psutil.TimeoutExpired:
            continue


def dead(process: psutil.Process) -> None:
    """Wait until a killed process has ended (a zombie, or reaped already)."""
    with contextlib.suppress(psutil.NoSuchProcess):
        while process.status() != psutil.STATUS_ZOMBIE:
            time.sleep(0.001)


@pytest.mark.parametrize("delay", [0.0, 0.003, 0.03])
def test_a_killed_controller_s_status_is_read_whoever_reaps_it_first(delay):
    """The exit status that tells a kill from a stop (health.controller_exit), asked beside
    ipyparallel's waiter, which reaps the controller: read at any moment after the kill, never
    lost. A process spawned without subprocess.Popen (whose own cleanup would reap it too)."""
    for _ in range(3):
        pid = os.posix_spawnp("sleep", ["sleep", "60"], os.environ)
        process = psutil.Process(pid)
        waiter = threading.Thread(target=reap_as_ipyparallel_does, args=(process,), daemon=True)
        waiter.start()
        cluster = types.SimpleNamespace(_cluster=types.SimpleNamespace(
            controller=types.SimpleNamespace(process=process, _wait_thread=waiter)))
        assert health.controller_exit(cluster) is None  # running
        os.kill(pid, signal.SIGKILL)
        dead(process)
        time.sleep(delay)
        assert health.controller_exit(cluster) == -signal.SIGKILL
        waiter.join(5)


#: a process whose main thread ends first (a zombie in /proc) while another thread ends it 0.5 s later
MAIN_THREAD_FIRST = ("import ctypes, os, threading, time\n"
                     "threading.Thread(target=lambda: (time.sleep(0.5), os._exit(3))).start()\n"
                     "ctypes.CDLL(None).pthread_exit(None)")


def test_a_controller_whose_main_thread_ended_first_is_waited_for_its_status():
    """A multi-threaded controller killed: its main thread is a zombie in /proc (mpinb takes it for
    ended) a moment before the process can be waited for; the status is read once it can."""
    pid = os.posix_spawnp(sys.executable, [sys.executable, "-c", MAIN_THREAD_FIRST], os.environ)
    process = psutil.Process(pid)
    cluster = types.SimpleNamespace(_cluster=types.SimpleNamespace(
        controller=types.SimpleNamespace(process=process, _wait_thread=None)))
    dead(process)  # its main thread
    assert health._exit_seen(pid) is None  # not waitable yet: its other thread runs
    assert health.controller_exit(cluster) == 3
    os.waitpid(pid, 0)
