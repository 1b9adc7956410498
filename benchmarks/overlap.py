"""Overlap of communication with computation: a halo-exchange step with sendrecv blocking (the
default) and with overlap on (mpinb.mpi.set_overlap: the transfer runs on a progress thread while
XLA computes what does not need the halos), against the communication alone, the computation
alone (the same step, its sendrecv calls to MPI_PROC_NULL: XLA compiles the same program), their sum (what
blocking can reach at best) and their max (what perfect overlap reaches).

    mpiexec -n 2 python benchmarks/overlap.py [--rows 1024] [--cols 1024] [--halo 256,64] [--sweeps 1,4]
    mpiexec -n 2 python benchmarks/overlap.py --xla-one-thread   # XLA computes on one core per rank

Each rank holds rows x cols float32 of a field split by rows on a ring; a step sends its top
`halo` rows up and its bottom ones down (two sendrecv) while it computes `sweeps` Jacobi sweeps
of the interior from its own rows, then adds the received halos into its edge rows. Every
configuration checks that overlap on gives the same array as off (bitwise). Per step, the time
is the slowest rank's (barrier first); mean and worst over --steps. Each variant runs 10 steps in a row (a
time-step loop repeats one step; switching programs every call costs each of them more, and
unequally), the variants in rotating order, so that a slow phase of the machine hits them alike.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

BLOCK = 10  # steps of one variant in a row, as a time-step loop runs them


def parse() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1024, help="rows of the field per rank")
    ap.add_argument("--cols", type=int, default=1024)
    ap.add_argument("--halo", default="256,64", help="halo rows, comma-separated configurations")
    ap.add_argument("--sweeps", default="1,4", help="Jacobi sweeps per step, comma-separated")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--xla-one-thread", action="store_true",
                    help="XLA computes on one thread per rank (no intra-op parallelism)")
    return ap.parse_args()


def main() -> None:
    args = parse()
    if args.xla_one_thread:
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                                   + " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
    import jax
    import jax.numpy as jnp
    import numpy as np
    from mpi4py import MPI

    from mpinb import mpi

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    up, down = (rank - 1) % size, (rank + 1) % size

    def sweeps(u, k):
        for _ in range(k):
            u = u.at[1:-1, 1:-1].set(0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]))
        return u

    def halos(u, h, up=up, down=down):
        top = mpi.sendrecv(u[:h], u[:h], source=down, dest=up)
        bottom = mpi.sendrecv(u[-h:], u[-h:], source=up, dest=down)
        return top, bottom

    def no_halos(u, h):  # the same calls to no rank (MPI_PROC_NULL): zeros, nothing sent
        return halos(u, h, MPI.PROC_NULL, MPI.PROC_NULL)

    def timed(fn, u) -> float:
        comm.Barrier()
        t0 = time.perf_counter()
        jax.block_until_ready(fn(u))
        return comm.allreduce(time.perf_counter() - t0, op=MPI.MAX)

    u = jnp.asarray(np.random.default_rng(rank).standard_normal((args.rows, args.cols)), jnp.float32)
    rows = []
    for h in (int(x) for x in args.halo.split(",")):
        for k in (int(x) for x in args.sweeps.split(",")):
            def step(u, h=h, k=k, exchange=halos):
                top, bottom = exchange(u, h)
                inner = sweeps(u, k)
                return inner.at[:h].add(top).at[-h:].add(bottom)

            step = jax.jit(step)
            comm_only = jax.jit(lambda u, h=h: halos(u, h))
            # the same program exchanging with no rank: XLA compiles it as the step
            compute_only = jax.jit(lambda u, h=h, k=k, run=step.__wrapped__: run(u, h, k, no_halos))
            mpi.set_overlap(False)
            blocking = np.asarray(step(u))
            mpi.set_overlap(True)
            if not np.array_equal(np.asarray(step(u)), blocking):
                sys.exit(f"rank {rank}: overlap changed the result (halo {h}, sweeps {k})")
            variants = {"blocking": (False, step), "overlap": (True, step),
                        "comm alone": (False, comm_only), "compute alone": (False, compute_only)}
            for on, fn in variants.values():  # compiled and run once before timing
                mpi.set_overlap(on)
                jax.block_until_ready(fn(u))
            times = {name: [] for name in variants}
            names = list(variants)
            for i in range(max(1, args.steps // BLOCK)):
                for name in names[i % 4:] + names[:i % 4]:  # each variant in each place in turn
                    on, fn = variants[name]
                    mpi.set_overlap(on)
                    times[name] += [timed(fn, u) for _ in range(BLOCK)]
            mpi.set_overlap(False)
            rows.append((h, k, {name: (statistics.mean(t) * 1e3, max(t) * 1e3) for name, t in times.items()}))

    if rank:
        return
    nbytes = 4 * args.cols
    print(f"\nhalo exchange, {size} ranks, {args.rows}x{args.cols} float32 per rank, {args.steps} steps"
          + (", XLA on one thread" if args.xla_one_thread else ""))
    print(f"{'halo':>10} {'sweeps':>6} | {'blocking':>15} {'overlap':>15} {'ratio':>6} | "
          f"{'comm':>6} {'compute':>8} {'sum':>6} {'max':>6}   (ms: mean (worst))")
    for h, k, t in rows:
        block, over = t["blocking"], t["overlap"]
        c, w = t["comm alone"][0], t["compute alone"][0]
        print(f"{h * nbytes / 2**10:>6.0f} KiB {k:>6} | {block[0]:7.2f} ({block[1]:5.1f}) "
              f"{over[0]:7.2f} ({over[1]:5.1f}) {over[0] / block[0]:6.2f} | "
              f"{c:6.2f} {w:8.2f} {c + w:6.2f} {max(c, w):6.2f}")

if __name__ == "__main__":
    main()
