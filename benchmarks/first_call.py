"""The first call of a jitted step that holds many collectives: how long tracing, lowering,
compiling and the first run take with mpinb and with mpi4jax, the same code for both (``import
mpinb.mpi as mpi4jax``), on real ranks. Most of a short model run is this, not stepping.

    mpiexec -n 2 python benchmarks/first_call.py [--collectives 50,100,200] [--repeats 3]
    (needs mpi4jax installed beside mpinb; without it, mpinb alone)

The step: halo exchanges with both neighbours (sendrecv) and global sums (allreduce), half of
them in a ``lax.fori_loop`` and a ``lax.cond`` branch, as a stencil solver's step holds them.
Each repeat builds a new step (a new constant), so nothing comes from JAX's caches. Each phase
is timed on every rank and the slowest rank counts. Mean and worst of each, mpinb's mean over
mpi4jax's.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import time

import jax
import jax.numpy as jnp
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
PHASES = ("trace", "lower", "compile", "first run")


def make_step(lib, collectives: int, salt: float):
    """A step holding about ``collectives`` collectives of ``lib`` (mpinb.mpi or mpi4jax)."""
    left, right = (rank - 1) % size, (rank + 1) % size
    rounds = max(1, collectives // 4)  # each round: two sendrecv and an allreduce, a third of them nested

    def exchange(u):
        from_left = lib.sendrecv(u[-1:], u[:1], source=left, dest=right, comm=comm)
        from_right = lib.sendrecv(u[:1], u[-1:], source=right, dest=left, comm=comm)
        u = u.at[0].add(1e-3 * from_left[0]).at[-1].add(1e-3 * from_right[0])
        total = lib.allreduce(jnp.sum(u), op=MPI.SUM, comm=comm)
        return u * 0.999 + 1e-6 * total + salt

    def step(u):
        for _ in range(rounds - rounds // 3):
            u = exchange(u)
        u = jax.lax.fori_loop(0, 2, lambda _, v: exchange(v), u)
        return jax.lax.cond(jnp.sum(u) > -1e30, exchange, lambda v: v, u)  # the same branch on every rank

    return step


def first_call(lib, collectives: int, salt: float) -> dict[str, float]:
    """Seconds of each phase, the slowest rank's."""
    u = jnp.arange(64.0) + rank
    comm.Barrier()
    seconds = {}
    t = time.perf_counter()
    traced = jax.jit(make_step(lib, collectives, salt)).trace(u)
    seconds["trace"] = time.perf_counter() - t
    t = time.perf_counter()
    lowered = traced.lower()
    seconds["lower"] = time.perf_counter() - t
    t = time.perf_counter()
    compiled = lowered.compile()
    seconds["compile"] = time.perf_counter() - t
    comm.Barrier()
    t = time.perf_counter()
    compiled(u).block_until_ready()
    seconds["first run"] = time.perf_counter() - t
    return {phase: comm.allreduce(value, op=MPI.MAX) for phase, value in seconds.items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--collectives", default="50,100,200")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    libs = {"mpinb": importlib.import_module("mpinb.mpi")}
    try:
        libs["mpi4jax"] = importlib.import_module("mpi4jax")
    except ImportError:
        if rank == 0:
            print("mpi4jax is not installed: mpinb alone")
    counts = [int(c) for c in args.collectives.split(",")]
    for lib in libs.values():  # each library's own first use (its registration) left out
        first_call(lib, 4, -1.0)
    samples = {(name, k, phase): [] for name in libs for k in counts for phase in (*PHASES, "total")}
    for repeat in range(args.repeats):  # interleaved: each round measures every row once
        for k in counts:
            for name, lib in libs.items():
                got = first_call(lib, k, float(repeat * 1000 + k))
                for phase, value in got.items():
                    samples[(name, k, phase)].append(value)
                samples[(name, k, "total")].append(sum(got.values()))
    if rank == 0:
        print(f"\n{size} ranks, {args.repeats} runs each, the slowest rank's seconds\n")
        print("| collectives | phase | mpinb mean | mpinb worst | mpi4jax mean | mpi4jax worst | mpinb / mpi4jax |")
        print("|---|---|---|---|---|---|---|")
        for k in counts:
            for phase in (*PHASES, "total"):
                ours = samples[("mpinb", k, phase)]
                theirs = samples.get(("mpi4jax", k, phase)) or [float("nan")]
                ratio = statistics.fmean(ours) / statistics.fmean(theirs)
                print(f"| {k} | {phase} | {statistics.fmean(ours):.3f} | {max(ours):.3f} | "
                      f"{statistics.fmean(theirs):.3f} | {max(theirs):.3f} | {ratio:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
