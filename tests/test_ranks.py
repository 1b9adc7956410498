"""Runs the collective suite (tests/collectives) on real MPI ranks: mpiexec -n 2 and -n 4, with
the launcher of the MPI mpi4py loads (the mpich wheel's, or a system Open MPI's: as clusters do).

The same files also run in this process (world size 1) as part of the plain pytest run.
Each rank writes its own report; on failure every rank's tail is shown.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mpinb.launch.mpi_impl import find_launcher, loaded_mpi, shared_core_env

HERE = Path(__file__).resolve().parent
#: seconds the whole collective suite gets on its ranks before it counts as hung: it takes
#: 150-370 s in CI's lanes, and 610 s was seen on 2 ranks when the machine was busier than CI
TIMEOUT = int(os.environ.get("MPINB_RANKS_TIMEOUT", "1200"))


def mpiexec(nranks: int) -> list[str]:
    """The MPI's launcher, allowed to put more ranks than cores on this host (Open MPI refuses
    unless told; MPICH does it anyway). Its ranks get what a cluster's ranks on this host get
    (``environment``)."""
    mpi = loaded_mpi()
    return [find_launcher(mpi), "-n", str(nranks), *mpi.implementation.oversubscribe]


def environment() -> dict:
    """This process's environment, with what a local cluster's ranks get so that a rank waiting in
    MPI gives its core away (Open MPI, Intel MPI: mpi_impl.shared_core_env): with the machine
    busy, ranks that spin take a time slice per message."""
    return {**os.environ, **shared_core_env(loaded_mpi(), os.environ)}


#: the world sizes the suite runs at: 2 and 4, or those MPINB_TEST_RANKS lists ("2"): CI runs
#: the 4-rank suite on two configurations, the newest JAX on MPICH and Debian's Open MPI (.ci/floor)
RANKS = [int(n) for n in os.environ.get("MPINB_TEST_RANKS", "2,4").split(",")]


@pytest.mark.parametrize("nranks", RANKS)
def test_collective_suite_on_ranks(nranks, tmp_path):
    script = (
        "import sys, pytest; from mpi4py import MPI; r = MPI.COMM_WORLD.Get_rank(); "
        f"out = open(r'{tmp_path}/rank%d.log' % r, 'w'); sys.stdout = sys.stderr = out; "
        f"code = pytest.main(['-q', '-x', '-p', 'no:cacheprovider', r'{HERE / 'collectives'}']); "
        "out.flush(); sys.exit(int(code))"
    )
    cmd = [*mpiexec(nranks), sys.executable, "-c", script]
    try:
        # env: Python's copy of the environment, as it was before MPI started in this process (the
        # collective suite runs here too): an Open MPI singleton's variables would make the new
        # mpiexec join this process's runtime instead of starting ranks
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, cwd=HERE.parent,
                              env=environment())
        code, tail = proc.returncode, proc.stdout[-2000:] + proc.stderr[-2000:]
    except subprocess.TimeoutExpired:
        code, tail = "timeout", f"no result after {TIMEOUT} s (a rank is blocked in a collective)"
    logs = sorted(tmp_path.glob("rank*.log"))
    assert len(logs) == nranks, tail
    reports = {p.name: p.read_text() for p in logs}
    summary = "\n".join(f"--- {name}\n{text[-3000:]}" for name, text in reports.items())
    assert code == 0, f"mpiexec -n {nranks}: exit {code}\n{tail}\n{summary}"
    for name, text in reports.items():
        assert " passed" in text and "failed" not in text, f"{name}:\n{text[-3000:]}"
