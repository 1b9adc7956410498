"""Soak: 200 consecutive %%mpijax cells and 1,000 jitted collectives on 2 ranks; memory and
file descriptors of the engines and of the notebook process must not grow, and what mpinb keeps
per cell (ipyparallel's message records, the engines' cell labels) stays bounded."""

import contextlib
import io

import psutil
import pytest
from support.shell import ipython_shell

CELLS = 200
COLLECTIVES = 1000
MEMORY_SLACK_MB = 40
FD_SLACK = 3


@pytest.fixture(scope="module")
def ip():
    shell = ipython_shell()
    shell.run_line_magic("load_ext", "mpinb")
    shell.run_line_magic("mpijax", "start -n 2")
    yield shell
    shell.run_line_magic("mpijax", "stop")


def usage(ip):
    cluster = ip.magics_manager.registry["MpiJaxMagics"].cluster
    procs = [psutil.Process(e["pid"]) for e in cluster.engines] + [psutil.Process()]
    return [(p.memory_info().rss / 2**20, p.num_fds()) for p in procs]


def run(ip, line, code):
    with contextlib.redirect_stdout(io.StringIO()):
        ip.run_cell_magic("mpijax", line, code)
    res = ip.user_ns["_mpijax"]
    assert res.ok, res.text()
    return res


def test_soak(ip):
    run(ip, "", "import jax, jax.numpy as jnp\nfrom mpi4py import MPI\nfrom mpinb import mpi\n"
                "f = jax.jit(lambda v: mpi.allreduce(v, op=MPI.SUM))\nx = jnp.ones(1024)\n")
    for i in range(20):  # warm up caches, pools and imports
        run(ip, "--show y", f"y = f(x) * {i}")
    run(ip, "", "for _ in range(100):\n    f(x).block_until_ready()")
    before = usage(ip)
    for i in range(CELLS):
        run(ip, "--show y", f"y = f(x) * {i}")
    res = run(ip, "", f"calls0 = mpi.counters()['calls']\nfor _ in range({COLLECTIVES}):\n"
                      f"    f(x).block_until_ready()\nmpi.counters()['calls'] - calls0")
    assert res.records[0].result["repr"] == str(COLLECTIVES)
    after = usage(ip)
    cluster = ip.magics_manager.registry["MpiJaxMagics"].cluster  # what mpinb keeps per cell is bounded
    assert len(cluster.client.history) < 20 and len(cluster.client.metadata) < 20, len(cluster.client.history)
    labels = run(ip, "", "from mpinb.engine.state import STATE\nlen(STATE.cell_labels)")
    assert int(labels.records[0].result["repr"]) < 40, labels.records[0].result
    for (mem0, fd0), (mem1, fd1) in zip(before, after, strict=False):
        assert mem1 - mem0 < MEMORY_SLACK_MB, (before, after)
        assert fd1 - fd0 <= FD_SLACK, (before, after)
