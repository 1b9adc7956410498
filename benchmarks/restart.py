"""Starts and restarts against the floor any cluster of JAX processes pays, measured interleaved
in one run: the floor is ``mpiexec -n N python -c "import jax, jax.numpy as jnp; from mpi4py
import MPI; import mpinb.mpi; jnp.ones(1).block_until_ready()"`` (the processes, MPI, JAX and
mpinb's library, nothing of a cluster).

    python benchmarks/restart.py [-n 2] [--repeats 5]

Rows: the floor; a cold start (``MPICluster(n).start()``); a restart with the standby ready (the
usual case: mpinb/cluster/standby.py); a restart without one (``standby=False``); a restart
after a rank died, and one while ranks are blocked in MPI, both with the standby. Each restart
replays one --setup cell (the JAX import), which its time includes. Mean, worst and best of each,
and the mean's ratio to the floor's.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time

from mpinb.cluster.mpi_cluster import MPICluster
from mpinb.launch.mpi_impl import find_launcher, loaded_mpi, shared_core_env

SETUP = "import jax, jax.numpy as jnp\nfrom mpi4py import MPI\nfrom mpinb import mpi\nrank = MPI.COMM_WORLD.Get_rank()"
FLOOR = "import jax, jax.numpy as jnp; from mpi4py import MPI; import mpinb.mpi; jnp.ones(1).block_until_ready()"
FAULTS = {
    "after a rank died": "import os, signal\nif rank == 1:\n    os.kill(os.getpid(), signal.SIGKILL)\n"
                         "import time; time.sleep(60)",
    "ranks blocked in MPI": "import time\nif rank == 1:\n    time.sleep(600)\nmpi.allreduce(jnp.ones(2), MPI.SUM)",
}


def floor(n: int) -> float:
    import os
    import sys

    mpi = loaded_mpi()
    cmd = [find_launcher(mpi), "-n", str(n), *mpi.implementation.oversubscribe, sys.executable, "-c", FLOOR]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, env={**os.environ, **shared_core_env(mpi, os.environ)})
    return time.perf_counter() - t0


def cold_start(n: int) -> float:
    t0 = time.perf_counter()
    cluster = MPICluster(n=n, progress=False, standby=False).start()
    assert cluster.run_cell(SETUP, setup=True).ok
    seconds = time.perf_counter() - t0
    cluster.stop()
    return seconds


def standby_ready(cluster: MPICluster, within: float = 300.0) -> None:
    end = time.monotonic() + within
    while time.monotonic() < end:
        if cluster._standby is not None and cluster._standby.state == "ready":
            return
        time.sleep(0.1)
    raise RuntimeError(f"no standby after {within} s: {cluster.standby_facts()}")


def timed_restart(cluster: MPICluster, fault: str | None = None) -> float:
    if cluster.standby:
        standby_ready(cluster)
    if fault is not None:
        cluster.run_cell(fault, timeout=5)
    t0 = time.perf_counter()
    cluster.restart()
    seconds = time.perf_counter() - t0
    assert cluster.run_cell("int(mpi.allreduce(jnp.int32(1), MPI.SUM))", timeout=60).ok
    return seconds


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=2, help="ranks (default 2)")
    parser.add_argument("--repeats", type=int, default=5, help="measurements per row")
    args = parser.parse_args(argv)

    rows = ["floor: mpiexec + import jax + mpinb", "cold start (+ setup cell)", "restart, standby ready",
            "restart, no standby", *(f"restart {name}, standby ready" for name in FAULTS)]
    samples: dict[str, list[float]] = {row: [] for row in rows}
    with_standby = MPICluster(n=args.n, progress=False).start()
    without = MPICluster(n=args.n, progress=False, standby=False).start()
    try:
        for cluster in (with_standby, without):
            assert cluster.run_cell(SETUP, setup=True).ok
        for _ in range(args.repeats):  # interleaved: each round measures every row once
            standby_ready(with_standby)  # a standby being prepared would slow what is measured beside it
            samples[rows[0]].append(floor(args.n))
            samples[rows[1]].append(cold_start(args.n))
            samples[rows[2]].append(timed_restart(with_standby))
            samples[rows[3]].append(timed_restart(without))
            for name, fault in FAULTS.items():
                samples[f"restart {name}, standby ready"].append(timed_restart(with_standby, fault))
    finally:
        with_standby.stop()
        without.stop()

    base = statistics.fmean(samples[rows[0]])
    print(f"\n{args.n} ranks, {args.repeats} runs each, interleaved\n")
    print("| what | mean s | worst s | best s | mean / floor |")
    print("|---|---|---|---|---|")
    for name, values in samples.items():
        mean = statistics.fmean(values)
        print(f"| {name} | {mean:.2f} | {max(values):.2f} | {min(values):.2f} | {mean / base:.2f} |")


if __name__ == "__main__":
    main()
