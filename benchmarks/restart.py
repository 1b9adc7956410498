"""Restart of a cluster (the recovery from a rank blocked in MPI or a dead rank) against a bare
ipyparallel MPI start plus the JAX import, measured interleaved in one run.

    python benchmarks/restart.py [-n 3] [--repeats 3]

Rows: the baseline; restart of idle ranks; restart after a rank died (SIGKILL); restart while
the other ranks are blocked in an allreduce. Each restart replays one --setup cell.
The fault tests assert that restart works, not how long it takes: this is where the time is.
"""

from __future__ import annotations

import argparse
import statistics
import time

from magic import bare_start  # benchmarks/magic.py: the same baseline

from mpinb.cluster.mpi_cluster import MPICluster

SETUP = "import jax, jax.numpy as jnp\nfrom mpi4py import MPI\nfrom mpinb import mpi\nrank = MPI.COMM_WORLD.Get_rank()"

FAULTS = {
    "idle": None,
    "after a rank died": "import os, signal\nif rank == 1:\n    os.kill(os.getpid(), signal.SIGKILL)\n"
                         "import time; time.sleep(60)",
    "ranks blocked in MPI": "import time\nif rank == 1:\n    time.sleep(600)\nmpi.allreduce(jnp.ones(2), MPI.SUM)",
}


def timed_restart(cluster: MPICluster, fault: str | None) -> float:
    if fault is not None:
        cluster.run_cell(fault, timeout=5)
    t0 = time.perf_counter()
    cluster.restart()
    seconds = time.perf_counter() - t0
    assert cluster.run_cell("int(mpi.allreduce(jnp.int32(1), MPI.SUM))", timeout=60).ok
    return seconds


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=3, help="ranks (default 3, as in the fault tests)")
    parser.add_argument("--repeats", type=int, default=3, help="measurements per row (median reported)")
    args = parser.parse_args(argv)

    samples: dict[str, list[float]] = {"bare start + import jax": []}
    samples.update({f"restart, {name}": [] for name in FAULTS})
    cluster = MPICluster(n=args.n, progress=False).start()
    try:
        assert cluster.run_cell(SETUP, setup=True).ok
        for _ in range(args.repeats):  # interleaved: each round measures every row once
            samples["bare start + import jax"].append(bare_start(args.n))
            for name, fault in FAULTS.items():
                samples[f"restart, {name}"].append(timed_restart(cluster, fault))
    finally:
        cluster.stop()

    base = statistics.median(samples["bare start + import jax"])
    print(f"\n{args.n} ranks, median of {args.repeats}\n")
    print("| what | median s | min s | max s | / bare start |")
    print("|---|---|---|---|---|")
    for name, values in samples.items():
        med = statistics.median(values)
        print(f"| {name} | {med:.2f} | {min(values):.2f} | {max(values):.2f} | {med / base:.2f} |")


if __name__ == "__main__":
    main()
