"""Holders for the lifetime tests: a script (as a kernel is a process) that starts a cluster where
the tests run (tests/support/topology.py) and then sleeps, to be killed; and the processes of a
cluster, counted by its id (the job's, by MPINB_CLUSTER_ID, and the watchdog, by its command line).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

TESTS = Path(__file__).resolve().parent.parent

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


def run_until_started(script: str) -> tuple[subprocess.Popen, str]:
    """A Python running ``script``, once it printed ``STARTED <cluster id>``; the id."""
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if line.startswith("STARTED "):
            return proc, line.split()[1]
    proc.wait()
    pytest.fail("the holder did not start its cluster:\n" + "".join(lines[-40:]))


def start_holder(**options) -> tuple[subprocess.Popen, str]:
    return run_until_started(HOLDER.format(tests=str(TESTS), options=options))


KEPT = """
import sys, time
sys.path.insert(0, {tests!r})
from support.topology import make_cluster
cluster = make_cluster(2, keep_alive={keep!r}).start()
assert cluster.run_cell("from mpi4py import MPI\\nx = 10 * MPI.COMM_WORLD.Get_rank()", setup=True).ok
print("STARTED", cluster.cluster_id, flush=True)
time.sleep(3600)
"""


def start_kept(keep: float) -> tuple[subprocess.Popen, str]:
    return run_until_started(KEPT.format(tests=str(TESTS), keep=keep))


