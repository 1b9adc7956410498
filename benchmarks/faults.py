"""Time to report each fault case, on the cluster the given launcher starts, in one run: the
closing-note table of the fault handling, reproducible on a laptop, on "another host" and under
Slurm (inside an allocation: ``salloc -N 2 -n 4``, or with SLURM_JOB_ID set).

    python benchmarks/faults.py [-n 3] [--launcher local|slurm] [--engine-env UCX_NET_DEVICES=lo]
    python benchmarks/faults.py --mpi-cmd "tests/support/other_host.sh .venv/bin/mpiexec.gforker" \
        --engine-env UCX_TLS=self,sm       # "another host" (root: namespaces), as the tests do

Each row: the case, the seconds from the cell's start (or from the stop button) until the view
has every rank's state, the bound that is the feature (grace period, timeout), the ratio to that
bound, and whether the diagnosis was the expected one. The baseline row is a healthy cell with
one allreduce, measured in the same run. The tests assert the diagnoses; this prints the times.
"""

from __future__ import annotations

import argparse
import time

from mpinb.cells.cell_run import DEFAULT_GRACE
from mpinb.cluster.mpi_cluster import MPICluster

SETUP = ("import jax, jax.numpy as jnp\nfrom mpi4py import MPI\nfrom mpinb import mpi\n"
         "rank, size = MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size()")
HEALTHY = "int(mpi.allreduce(jnp.int32(1), MPI.SUM))"
TIMEOUT = 3.0
#: the issue's target for a proven deadlock: reported within 10 s of the last rank blocking
DEADLOCK_BOUND = 10.0
RING = "x = jnp.ones(4)\ny = mpi.sendrecv(x, x, source=(rank + 1) % size, dest=(rank + 1) % size)"

# name -> (cell, run_cell options, bound in seconds or None, check(result) -> bool)
CASES = {
    "healthy cell (baseline)": (HEALTHY, {}, None, lambda r: r.ok),
    "raise before a collective": (
        "if rank == 1:\n    raise ValueError('bad input')\nmpi.allreduce(jnp.ones(2), MPI.SUM)", {},
        DEFAULT_GRACE, lambda r: r.states[1] == "failed"),
    "checked mismatch": (
        "mpi.allreduce(jnp.ones(2 + rank), MPI.SUM)", {}, None,
        lambda r: set(r.states.values()) == {"failed"}),
    f"timeout {TIMEOUT:g} s": (
        "import time\nif rank == 1:\n    time.sleep(60)\nmpi.allreduce(jnp.ones(2), MPI.SUM)", {"timeout": TIMEOUT},
        TIMEOUT, lambda r: r.states[1] == "running"),
    # deadlock="keep": the seconds until the proof, without the restart (the restart row below)
    "deadlock: ring of receives": (RING, {"deadlock": "keep"}, DEADLOCK_BOUND,
                                   lambda r: r.deadlock is not None and len(r.deadlock.cycle()) == len(r.ranks)),
    "deadlock: collective others left": (
        "if rank == 0:\n    mpi.allreduce(jnp.ones(2), MPI.SUM)", {"deadlock": "keep"}, DEADLOCK_BOUND,
        lambda r: r.deadlock is not None and r.deadlock.left == r.ranks[1:]),
    "SIGKILL": ("import os, signal, time\nif rank == 1:\n    os.kill(os.getpid(), signal.SIGKILL)\ntime.sleep(60)",
                {}, None, lambda r: (r.dead.get(1) or {}).get("returncode") == -9),
    "os._exit(3)": ("import os, time\nif rank == 1:\n    os._exit(3)\ntime.sleep(60)", {}, None,
                    lambda r: (r.dead.get(1) or {}).get("returncode") == 3),
    "segfault": ("import ctypes, time\nif rank == 1:\n    ctypes.string_at(0)\ntime.sleep(60)", {}, None,
                 lambda r: (r.dead.get(1) or {}).get("returncode") == -11 and "Segmentation fault" in r.faults[1]),
}


class StopButton:
    """A stream callback that presses the stop button once every rank but 1 is inside allreduce."""

    def __init__(self, cluster: MPICluster):
        self.cluster, self.pressed_at = cluster, None

    def __call__(self, rank, kind, text):
        if self.pressed_at is not None or "in" not in text:
            return
        others = [r for r in range(self.cluster.n) if r != 1]
        while not all((self.cluster.inflight(r) or {}).get("op") == "allreduce" for r in others):
            time.sleep(0.05)
        self.pressed_at = time.perf_counter()
        raise KeyboardInterrupt


def stop_button(cluster: MPICluster) -> tuple[float, bool]:
    button = StopButton(cluster)
    code = ("import time\nprint('in', flush=True)\nif rank == 1:\n    time.sleep(60)\n"
            "mpi.allreduce(jnp.ones(2), MPI.SUM)")
    res = cluster.run_cell(code, stream=button)
    return time.perf_counter() - button.pressed_at, res.states[1] == "failed"


def run_case(cluster: MPICluster, name: str) -> tuple[float, bool]:
    code, options, _, check = CASES[name]
    t0 = time.perf_counter()
    res = cluster.run_cell(code, **options)
    return time.perf_counter() - t0, bool(check(res))


def recover(cluster: MPICluster) -> float | None:
    """Restart when the case left the cluster lost or busy; the restart's seconds."""
    if not cluster.lost and cluster.wait_idle(timeout=0):
        return None
    t0 = time.perf_counter()
    cluster.restart()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=3)
    ap.add_argument("--launcher", default=None, choices=("local", "mpiexec", "slurm"))
    ap.add_argument("--mpi-cmd", default="", help="launcher command (implies --launcher mpiexec)")
    ap.add_argument("--engine-env", action="append", default=[], help="NAME=VALUE for the engines")
    args = ap.parse_args()
    env = dict(item.split("=", 1) for item in args.engine_env)
    cluster = MPICluster(n=args.n, launcher=args.launcher, mpi_cmd=args.mpi_cmd.split() or None, engine_env=env,
                         progress=False).start()
    rows, restarts = [], []
    try:
        assert cluster.run_cell(SETUP, setup=True).ok
        cluster.run_cell(HEALTHY)  # compile once
        for name in CASES:
            seconds, ok = run_case(cluster, name)
            rows.append((name, seconds, CASES[name][2], ok))
            restarted = recover(cluster)
            if restarted is not None:
                restarts.append(restarted)
        seconds, ok = stop_button(cluster)
        rows.append(("stop button, ranks in MPI", seconds, DEFAULT_GRACE, ok))
        restarted = recover(cluster)
        if restarted is not None:
            restarts.append(restarted)
    finally:
        cluster.stop()
    hosts = cluster.launcher + (f" {args.mpi_cmd}" if args.mpi_cmd else "")
    hosts += f" ({', '.join(f'{k}={v}' for k, v in env.items())})" if env else ""
    print(f"\nfault reports, {args.n} ranks, launcher {hosts}\n")
    print("| case | seconds to report | bound s | ratio to bound | expected diagnosis |")
    print("|---|---|---|---|---|")
    for name, seconds, bound, ok in rows:
        ratio = f"{seconds / bound:.2f}" if bound else "-"
        print(f"| {name} | {seconds:.2f} | {bound if bound else '-'} | {ratio} | {'yes' if ok else 'NO'} |")
    if restarts:
        span = f"{min(restarts):.1f}-{max(restarts):.1f}"
        print(f"| restart (after the cases above, {len(restarts)}x) | {span} | - | - | - |")


if __name__ == "__main__":
    main()
