"""A cluster's life: nothing it started outlives the process that started it (a kernel killed by
SIGKILL, the OOM killer, a culler), whatever the launcher; a computation without a word for long
is not taken for a dead holder.

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
from pathlib import Path

import psutil
import pytest
from support.topology import OTHER_HOST, SLURM

from mpinb.client import registry

TESTS = Path(__file__).resolve().parent
#: the issue's bound: every process gone within a minute of the holder's death
BOUND = 60.0

HOLDER = """
import sys, time
sys.path.insert(0, {tests!r})
from support.topology import make_cluster
cluster = make_cluster(2, **{options!r}).start()
print("STARTED", cluster.cluster_id, flush=True)
time.sleep(3600)
"""


def cluster_processes(cluster_id: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.pid == os.getpid():
                continue
            if proc.environ().get("MPINB_CLUSTER_ID") == cluster_id or cluster_id in " ".join(proc.cmdline()):
                found.append(proc)
        except psutil.Error:  # ended meanwhile, or a zombie
            continue
    return found


def start_holder(**options) -> tuple[subprocess.Popen, str]:
    script = HOLDER.format(tests=str(TESTS), options=options)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if line.startswith("STARTED "):
            return proc, line.split()[1]
    proc.wait()
    pytest.fail("the holder did not start its cluster:\n" + "".join(lines[-40:]))


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


def test_a_long_silent_cell_is_not_taken_for_a_dead_holder():
    """The watchdog watches the holder's process, never the engines' messages: a cell that says
    nothing for longer than the watchdog's period finishes, and the cluster stays registered."""
    from support.topology import make_cluster

    with make_cluster(2) as cluster:
        cluster_id = cluster.cluster_id
        res = cluster.run_cell("import time\ntime.sleep(6)\nx = 1", timeout=120)
        assert res.ok, res.text()
        record = registry.read(cluster_id)
        assert record is not None and registry.alive(record["holder"])
        assert record["holder"]["pid"] == os.getpid()
    assert registry.read(cluster_id) is None  # stopped by its holder: unregistered
