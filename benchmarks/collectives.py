"""Per-call time of jitted alltoall and allreduce: mpinb against raw mpi4py (the floor: same MPI,
preallocated NumPy buffers, same run), mpinb in checked mode (the cost of the agreement
exchange), and mpi4jax when it is importable.

    mpiexec -n 2 python benchmarks/collectives.py [--sizes 16,65536,1048576,16777216] [--seconds 0.3]
                                                  [--warm-up SECONDS]

Each cell is the median over 5 rounds of (time for a batch of calls) / (calls in the batch); the
rounds interleave the columns (raw, raw pp, mpinb, checked, loop, mpi4jax), so drift of the machine
affects all alike. The raw baseline reuses preallocated NumPy buffers that earlier calls already
touched; "raw pp" ping-pongs two of them (each result is the next operand, as a loop carry is)
and is the floor the "in loop" column (the collective alone as a fori_loop body, per iteration)
is divided by.
Ranks are synchronised with a barrier before every batch and rank 0 reports the slowest rank's
time. ``--warm-up S`` first runs S seconds of other work, as a long notebook session does before
a measurement: jitted collectives of random shapes (new compiled programs, new XLA buffers) and
NumPy arrays of random sizes allocated and dropped (a fragmented heap and page cache).
Two ranks on two cores is the intended setting (more ranks are oversubscribed here).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from mpi4py import MPI

from mpinb import mpi as mpinb_mpi

try:  # optional comparison
    import mpi4jax
except Exception:  # noqa: BLE001 - any import failure just means "not compared"
    mpi4jax = None

COMM = MPI.COMM_WORLD
RANK, SIZE = COMM.Get_rank(), COMM.Get_size()


def calibrate(call, seconds: float) -> int:
    """Warm ``call`` up and return how many calls make a batch of about ``seconds``."""
    call()
    call()
    COMM.Barrier()
    t0 = time.perf_counter()
    for _ in range(5):  # the same number of calls on every rank: they are collectives
        call()
    per_call = COMM.allreduce((time.perf_counter() - t0) / 5, op=MPI.MAX)
    return max(3, int(seconds / max(per_call, 1e-7)))


def batch_seconds(call, batch: int) -> float:
    """Seconds per call over one batch, the slowest rank's."""
    COMM.Barrier()
    t0 = time.perf_counter()
    for _ in range(batch):
        call()
    return COMM.allreduce((time.perf_counter() - t0) / batch, op=MPI.MAX)


def interleaved(calls: dict, seconds: float, reps: int) -> dict:
    """Median seconds per call of each of ``calls``, measured in ``reps`` rounds that each run
    one batch of every call in turn (so that drift of the machine hits every column alike)."""
    batches = {name: calibrate(call, seconds) for name, call in calls.items()}
    samples = {name: [] for name in calls}
    for _ in range(reps):
        for name, call in calls.items():
            samples[name].append(batch_seconds(call, batches[name]))
    return {name: statistics.median(values) for name, values in samples.items()}


def in_checked_mode(call):
    """``call`` with the library in checked mode (switched back after each call)."""
    def run():
        mpinb_mpi.set_checked(True)
        try:
            call()
        finally:
            mpinb_mpi.set_checked(False)
    return run


def raw_calls(op: str, nbytes: int):
    count = max(1, nbytes // 4)
    send = np.ones(count, np.float32)
    recv = np.empty_like(send)
    if op == "alltoall":
        return lambda: COMM.Alltoall(send, recv)
    return lambda: COMM.Allreduce(send, recv, op=MPI.SUM)


def raw_ping_pong(op: str, nbytes: int):
    """The raw floor of a loop: each call's result is the next call's operand (two preallocated,
    touched buffers used in turn), as a loop carry is; the data changes between calls."""
    count = max(1, nbytes // 4)
    bufs = [np.ones(count, np.float32), np.ones(count, np.float32)]
    turn = [0]

    def call():
        a, b = bufs[turn[0]], bufs[1 - turn[0]]
        if op == "alltoall":
            COMM.Alltoall(a, b)
        else:
            COMM.Allreduce(a, b, op=MPI.SUM)
            b *= 0.5  # keep the values bounded (NumPy in place; small next to the allreduce)
        turn[0] = 1 - turn[0]
    return call


def jax_input(op: str, nbytes: int):
    count = max(1, nbytes // 4)
    if op == "alltoall":
        return jnp.ones((SIZE, max(1, count // SIZE)), jnp.float32)
    return jnp.ones((count,), jnp.float32)


def jitted(module, op: str, nbytes: int):
    x = jax_input(op, nbytes)
    if op == "alltoall":
        f = jax.jit(lambda a: module.alltoall(a))
    else:
        f = jax.jit(lambda a: module.allreduce(a, op=MPI.SUM))
    return lambda: f(x).block_until_ready()


LOOP = 50  # collectives per call in the fori_loop column


def in_loop(op: str, nbytes: int):
    """LOOP collectives inside one jitted fori_loop, per collective: no dispatch per call. The
    body is the collective alone, as the raw column is (allreduce's values grow by the number of
    ranks per iteration: 2**50 after 50 iterations on 2 ranks, finite in float32)."""
    x = jax_input(op, nbytes)

    def body(i, a):
        return mpinb_mpi.alltoall(a) if op == "alltoall" else mpinb_mpi.allreduce(a, op=MPI.SUM)

    f = jax.jit(lambda a: jax.lax.fori_loop(0, LOOP, body, a))
    return lambda: f(x).block_until_ready()


def noop(nbytes: int):
    x = jax_input("allreduce", nbytes)
    f = jax.jit(lambda a: a)
    return lambda: f(x).block_until_ready()


def warm_up(seconds: float) -> int:
    """Other work for ``seconds`` (the same number of steps on every rank); returns the steps."""
    rng = np.random.default_rng(RANK)
    shared = np.random.default_rng(0)  # shapes every rank agrees on
    kept, steps = [], 0
    end = COMM.bcast(time.perf_counter() + seconds, root=0)
    while COMM.allreduce(time.perf_counter() < end, op=MPI.LAND):
        rows = int(shared.integers(1, 2048))
        a = jnp.ones((SIZE, rows, int(shared.integers(1, 512))), jnp.float32)
        jax.jit(lambda v, k=steps: mpinb_mpi.alltoall(v) * k)(a).block_until_ready()
        jax.jit(lambda v: mpinb_mpi.allreduce(v, op=MPI.SUM))(a[0]).block_until_ready()
        kept.append(np.ones(int(rng.integers(1, 8 << 20)), np.uint8))
        if len(kept) > 8:
            kept.pop(int(rng.integers(0, len(kept))))
        steps += 1
    return steps


def human(nbytes: int) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes // scale} {unit}"
    return f"{nbytes} B"


def fmt(seconds: float) -> str:
    return f"{seconds * 1e6:9.1f}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="16,65536,1048576,16777216", help="message sizes in bytes")
    parser.add_argument("--seconds", type=float, default=0.3, help="target duration of one batch")
    parser.add_argument("--reps", type=int, default=5, help="batches per cell (median)")
    parser.add_argument("--warm-up", type=float, default=0.0, metavar="SECONDS",
                        help="run other collectives and allocations this long before measuring")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    steps = warm_up(args.warm_up) if args.warm_up > 0 else 0

    rows = []
    for op in ("alltoall", "allreduce"):
        for nbytes in sizes:
            calls = {"raw": raw_calls(op, nbytes), "raw_pp": raw_ping_pong(op, nbytes),
                     "mpinb": jitted(mpinb_mpi, op, nbytes)}
            calls["checked"] = in_checked_mode(calls["mpinb"])
            calls["loop"] = in_loop(op, nbytes)
            if mpi4jax:
                calls["mpi4jax"] = jitted(mpi4jax, op, nbytes)
            t = interleaved(calls, args.seconds, args.reps)
            rows.append((op, nbytes, t["raw"], t["raw_pp"], t["mpinb"], t["checked"], t["loop"] / LOOP,
                         t.get("mpi4jax")))
            if RANK == 0:
                print(f"  measured {op} {human(nbytes)}", file=sys.stderr, flush=True)
    floor = interleaved({"noop": noop(16)}, args.seconds, args.reps)["noop"]

    if RANK != 0:
        return
    version = getattr(mpi4jax, "__version__", None)
    print(f"\n{SIZE} ranks, {MPI.Get_library_version().splitlines()[0].strip()}, jax {jax.__version__}"
          f", mpi4jax {version or 'not installed'}")
    print(f"jitted no-op (dispatch floor): {floor * 1e6:.1f} us per call")
    print(f"warm-up: {args.warm_up:g} s ({steps} steps of other collectives and allocations); "
          f"huge pages: {mpinb_mpi.library.load().huge_pages()}\n")
    head = (f"{'op':<10} {'size':>8} | {'raw us':>9} {'raw pp us':>9} {'mpinb us':>9} {'checked us':>10} "
            f"{'in loop us':>10} {'mpi4jax us':>10} | {'mpinb/raw':>9} {'checked/mpinb':>13} {'loop/raw pp':>11} "
            f"{'mpi4jax/raw':>11} {'mpinb/mpi4jax':>13}")
    print(head)
    print("-" * len(head))
    for op, nbytes, raw, raw_pp, ours, checked, loop, theirs in rows:
        t = f"{fmt(theirs):>10}" if theirs else f"{'-':>10}"
        r2 = f"{theirs / raw:11.2f}" if theirs else f"{'-':>11}"
        r3 = f"{ours / theirs:13.2f}" if theirs else f"{'-':>13}"
        print(f"{op:<10} {human(nbytes):>8} | {fmt(raw)} {fmt(raw_pp)} {fmt(ours)} {fmt(checked):>10} "
              f"{fmt(loop):>10} {t} | {ours / raw:9.2f} {checked / ours:13.2f} {loop / raw_pp:11.2f} {r2} {r3}")


if __name__ == "__main__":
    main()
