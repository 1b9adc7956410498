"""The standby (mpinb/cluster/standby.py): the next restart's engines, prepared once the notebook
is idle, stopped while a cell runs, swapped in by restart(): the setup cells replayed on them, the
old processes gone, a new standby begun; not listed by ipyparallel until swapped in; none with
standby=False or a Slurm batch job; a standby that died is a start anew. Real processes, 2 ranks.
How long a restart takes is benchmarks/restart.py's to say."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import time
import types

import psutil
import pytest
from support.holders import cluster_processes
from support.topology import make_cluster

from mpinb.cluster import identity, registry, standby
from mpinb.view.tables import StatusTable

SETUP = "from mpi4py import MPI\nrank = MPI.COMM_WORLD.Get_rank()\nprepared = 42"
READY_WITHIN = 300.0


def ready(cluster, within: float = READY_WITHIN):
    """The cluster's standby once it is ready."""
    end = time.monotonic() + within
    while time.monotonic() < end:
        waiting = cluster._standby
        if waiting is not None and waiting.state == "ready":
            return waiting
        assert waiting is None or waiting.state in ("waiting", "preparing"), waiting.facts()
        time.sleep(0.2)
    raise AssertionError(f"no standby ready after {within} s: {cluster.standby_facts()}")


@pytest.fixture
def cluster():
    c = make_cluster(2, standby=True).start()
    assert c.run_cell(SETUP, setup=True).ok
    yield c
    c.stop()


def states(cluster_id: str) -> set[str]:
    found = set()
    for proc in cluster_processes(cluster_id):
        try:
            found.add(proc.status())
        except psutil.Error:
            continue
    return found


def test_restart_swaps_in_the_standby_and_replays_the_setup(cluster):
    first_id = cluster.cluster_id
    waiting = ready(cluster)
    standby_id = waiting.cluster.cluster_id
    assert not os.path.exists(os.path.join(cluster._cluster.profile_dir, "security", f"cluster-{standby_id}.json"))
    status = StatusTable(cluster.status())
    assert re.search(r"standby for restarts +ready: a restart takes about a second, \d", status.text()), status.text()
    assert cluster.status()["standby"]["memory"] > 0
    cluster.restart()
    assert cluster.cluster_id == standby_id != first_id
    assert cluster.replayed and cluster.replayed[0][0] == "from mpi4py import MPI"
    result = cluster.run_cell("(rank, prepared)")
    assert result.ok and [r.result["repr"] for r in result.records.values()] == ["(0, 42)", "(1, 42)"]
    assert os.path.exists(cluster.record["ipp_cluster_file"])  # listed now, as a started cluster is
    end = time.monotonic() + 30
    while cluster_processes(first_id) and time.monotonic() < end:
        time.sleep(0.2)
    assert not cluster_processes(first_id) and registry.read(first_id) is None
    assert cluster._standby is not None and cluster._standby.cluster is not None  # the next one begun


def test_a_standby_that_prepares_is_stopped_while_a_cell_runs(cluster):
    cluster.idle_since = time.monotonic() - standby.IDLE  # idle long enough: it begins at once
    waiting = cluster._standby
    end = time.monotonic() + 60
    while not (waiting.cluster.cluster_id and registry.read(waiting.cluster.cluster_id)) and time.monotonic() < end:
        time.sleep(0.05)
    if waiting.state != "preparing":
        pytest.skip(f"the standby was {waiting.state} before a cell could run beside its preparation")
    seen = {}

    def look(rank, stream, text):
        if "looking" in text and not seen:
            seen["during"] = states(waiting.cluster.cluster_id)
            seen["paused"] = waiting.paused

    cluster.run_cell("import time\nprint('looking', flush=True)\ntime.sleep(2)", stream=look)
    assert seen["paused"] and psutil.STATUS_STOPPED in seen["during"], seen
    assert not waiting.paused and psutil.STATUS_STOPPED not in states(waiting.cluster.cluster_id)
    ready(cluster)


def test_stop_ends_the_standby_too(cluster):
    standby_id = ready(cluster).cluster.cluster_id
    assert cluster_processes(standby_id)
    cluster.stop()
    end = time.monotonic() + 30
    while cluster_processes(standby_id) and time.monotonic() < end:
        time.sleep(0.2)
    assert not cluster_processes(standby_id) and registry.read(standby_id) is None


def test_a_standby_that_died_leaves_a_restart_that_starts_anew(cluster):
    waiting = ready(cluster)
    standby_id = waiting.cluster.cluster_id  # a cluster that ended forgets its id
    engines = [p for p in cluster_processes(standby_id)  # the engines, not their rank wrappers
               if "mpinb.engine" in " ".join(p.cmdline()) and "mpinb.launch.rank" not in " ".join(p.cmdline())]
    assert engines
    for proc in engines:
        with contextlib.suppress(psutil.NoSuchProcess):  # its job ended already, with the first one killed
            proc.send_signal(signal.SIGKILL)
    launcher = registry.read(standby_id)["launchers"][0]
    end = time.monotonic() + 30
    while identity.running(launcher) and time.monotonic() < end:  # the standby's job has ended
        time.sleep(0.05)
    cluster.restart()
    assert waiting.state == "failed" and not cluster_processes(standby_id)
    assert cluster.run_cell("(rank, prepared)").ok


def test_no_standby_when_asked_for_none_or_for_a_slurm_batch_job():
    def cluster(**changes):
        return types.SimpleNamespace(**{"standby": True, "listed": True, "launcher": "local", "slurm_mode": None,
                                        "devices": "cpu", **changes})

    assert standby.usable(cluster(standby=False)) == "off"
    assert standby.usable(cluster(launcher="slurm", slurm_mode="batch")) == "slurm_batch"
    assert standby.usable(cluster(launcher="slurm", slurm_mode="step")) is None
    assert standby.usable(cluster(listed=False)) == "is_standby"  # a standby has none of its own
    assert standby.usable(cluster(devices="per-rank")) == "per_rank_devices"  # the accelerators are taken
    c = make_cluster(2).start()  # the tests' clusters: standby=False
    try:
        assert c._standby is None and c.status()["standby"] == {"state": "off"}
        assert re.search(r"standby for restarts +off \(--no-standby\)", StatusTable(c.status()).text())
    finally:
        c.stop()
