"""No output is lost: the first cell of fresh clusters prints from every rank and every line
arrives, in the result and in the stream, even when the result comes before the output."""

import os

import pytest
from support.topology import make_cluster

LINES = 3000
FRESH_CLUSTERS = int(os.environ.get("MPINB_FRESH_CLUSTERS", "4"))  # 100 for the soak figure in the note


@pytest.fixture(scope="module")
def cluster():
    c = make_cluster(2)
    yield c
    c.stop()


def test_first_cell_of_fresh_clusters_loses_no_line(cluster):
    code = ("import sys\nfrom mpi4py import MPI\nr = MPI.COMM_WORLD.Get_rank()\nprint('hello', r)\n"
            f"for i in range({LINES}):\n    print(f'rank {{r}} line {{i}}')\nsys.stderr.write('done\\n')")
    for attempt in range(FRESH_CLUSTERS):
        if cluster.running:
            cluster.restart()
        else:
            cluster.start()
        streamed = {0: "", 1: ""}

        def stream(rank, kind, text, streamed=streamed):
            if kind == "stdout":
                streamed[rank] += text

        res = cluster.run_cell(code, stream=stream, timeout=120)
        assert res.ok, res.text()
        for r in (0, 1):
            lines = res.stdout[r].splitlines()
            assert lines[0] == f"hello {r}", (attempt, r, lines[:3])
            assert lines[1:] == [f"rank {r} line {i}" for i in range(LINES)], (attempt, r, len(lines))
            assert streamed[r] == res.stdout[r], (attempt, r)
            assert res.stderr[r] == "done\n", (attempt, r, res.stderr[r])


def test_stop_leaves_no_process_behind(cluster):
    """Engines, nannies, launcher and controller all end with stop(), even with a rank blocked in
    MPI and another sleeping (signals go through ipyparallel, not local PIDs)."""
    import psutil

    if not cluster.running:
        cluster.start()
    res = cluster.run_cell("import time\nfrom mpi4py import MPI\nfrom mpinb import mpi\n"
                           "if MPI.COMM_WORLD.Get_rank() == 1:\n    time.sleep(300)\nmpi.barrier()", timeout=3)
    assert res.timed_out
    before = psutil.Process().children(recursive=True)
    assert len(before) >= 4
    cluster.stop()
    survivors = []
    for proc in before:
        try:
            proc.wait(timeout=10)
        except psutil.TimeoutExpired:
            survivors.append(" ".join(proc.cmdline()[:4]))
        except psutil.NoSuchProcess:
            pass
    assert not survivors, survivors
