"""A large collective in each way programs call it, in one run: mean, median and worst per call
of raw mpi4py (the baseline of each pattern, same run), mpinb called in a jitted function and
eagerly, and mpi4jax (jitted) when it is importable, beside benchmarks/step_loop.py's two floors
(a memory copy of the same size, the physical one, in the step loop; raw mpi4py followed by a
jitted ``x + 1`` on 16 bytes, JAX's floor, in the burst and the step loop), each measured as a
column, for each pattern:

- **first call**: a column's first call on an operand of a shape it has not seen before, so
  compiling included for the JAX columns (``--firsts`` new shapes each);
- **burst**: ``--burst`` calls back to back on one operand, each timed, after a jitted step and
  other arrays coming and going (``--bursts`` of each column);
- **step loop**: benchmarks/step_loop.py's loop, one call per step (``--steps`` of each column);
- **fori_loop**: the collective alone as the body of a jitted ``lax.fori_loop`` of
  ``--iterations``, each result the next operand, per iteration (``--loops`` runs of each
  column; a run's mean is one sample); raw mpi4py makes the same number of calls in a Python
  loop, ping-ponging two preallocated buffers, out of place, where mpinb's loop body runs in
  place (docs/library.md, "In place"). An eager call has no such pattern.

    mpiexec -n 2 python benchmarks/patterns.py [--mib 1,16] [--ops alltoall,allreduce]

Except for first calls (where the columns take turns going first, each shape new to all), each
round runs one column's calls, the columns and floors in turn, in a new order each round
(step_loop.in_turn): between two columns' calls, other arrays come and go (and, in the burst and
the step loop, the jitted step runs). The time of a call is the slowest rank's. Two ranks on two
cores is the intended setting.
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
import step_loop  # benchmarks/step_loop.py: its columns, its loop
from jax import lax
from mpi4py import MPI

COMM = step_loop.COMM
#: the columns compared, by step_loop.COLUMN_KEYS key (mpi4jax where it is importable)
KEYS = ("raw", "mpinb", "mpinb_eager", "mpi4jax")


def first_calls(op: str, shape: tuple, firsts: int) -> dict:
    """{column: [seconds]}: each column's first call on ``firsts`` shapes it has not seen (after
    one call on a one-column shape, which pays what a library sets up once per process)."""
    for call in _calls(op).values():
        call(jnp.ones((shape[0], 1), jnp.float32))
    times = {}
    for j in range(firsts):
        new = (shape[0], shape[1] - 1 - j)  # a shape no column has compiled for
        calls = _calls(op)
        for name in step_loop.rotated(list(calls), j):
            operand = jnp.ones(new, jnp.float32)
            times.setdefault(name, []).append(step_loop.timed(lambda call=calls[name], x=operand: call(x)))
    return times


def bursts(calls: dict, shape: tuple, rounds: int, burst: int, rng) -> dict:
    """{column: [seconds per call]} over ``rounds`` bursts of ``burst`` calls of each of
    ``calls`` (columns or floors), one column's burst a round, in turn, after a jitted step and
    other arrays coming and going."""
    field = jnp.ones(shape, jnp.float32)
    for call in calls.values():  # compiled first: compiling is the first call's pattern
        call(field)
    times = {name: [] for name in calls}
    for name in step_loop.in_turn(list(calls), rounds):
        field = step_loop.step(field)
        others = step_loop.junk(rng)
        times[name].extend(_burst(calls[name], field, burst))
        del others
    return times


def _burst(call, field, burst: int) -> list:
    """Seconds of each of ``burst`` calls back to back, the slowest rank's."""
    mine = np.empty(burst)
    COMM.Barrier()
    for k in range(burst):
        t0 = time.perf_counter()
        call(field)
        mine[k] = time.perf_counter() - t0
    slowest = np.empty(burst)
    COMM.Allreduce(mine, slowest, op=MPI.MAX)
    return slowest.tolist()


def loops(op: str, shape: tuple, rounds: int, iterations: int, rng) -> dict:
    """{column: [seconds per iteration, one per round]} of the collective as a loop body."""
    compiled = {step_loop.COLUMN_KEYS[key]: jax.jit(
        lambda x, body=body: lax.fori_loop(0, iterations, lambda i, y: body(y), x))
        for key, body in step_loop.eager_calls(op).items()}
    raw_name = step_loop.COLUMN_KEYS["raw"]
    field = jnp.ones(shape, jnp.float32)
    for fn in compiled.values():
        fn(field).block_until_ready()
    ping, pong = np.ones(shape, np.float32), np.empty(shape, np.float32)

    def raw_loop():
        a, b = ping, pong
        for _ in range(iterations):
            step_loop.raw_call(op, a, b)
            a, b = b, a

    calls = {raw_name: raw_loop, **{name: (lambda fn=fn: fn(field).block_until_ready())
                                     for name, fn in compiled.items()}}
    times = {name: [] for name in calls}
    for name in step_loop.in_turn(list(calls), rounds):
        others = step_loop.junk(rng)
        times[name].append(step_loop.timed(calls[name]) / iterations)
        del others
    return times


def _calls(op: str) -> dict:
    """The compared columns of step_loop.columns, by their names."""
    return {step_loop.COLUMN_KEYS[key]: call for key, call in step_loop.columns(op).items() if key in KEYS}


def rows_of(op: str, mib: float, pattern: str, times: dict) -> list:
    base = statistics.fmean(times[step_loop.COLUMN_KEYS["raw"]])
    return [(op, mib, pattern, name, statistics.fmean(t), statistics.median(t), max(t), statistics.fmean(t) / base)
            for name, t in times.items()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mib", default="1,16", help="message sizes in MiB (per rank)")
    ap.add_argument("--ops", default="alltoall,allreduce")
    ap.add_argument("--firsts", type=int, default=4, help="new shapes per column for the first call (each "
                    "column goes first once in four)")
    ap.add_argument("--bursts", type=int, default=60, help="bursts of each column (a column a round)")
    ap.add_argument("--burst", type=int, default=4, help="calls per burst")
    ap.add_argument("--steps", type=int, default=300, help="steps of each column in the step loop (a column a step)")
    ap.add_argument("--loops", type=int, default=30, help="runs of each column's fori_loop (a column a round)")
    ap.add_argument("--iterations", type=int, default=8, help="iterations of each fori_loop")
    args = ap.parse_args()
    rng = np.random.default_rng(COMM.Get_rank())
    rows = []
    for op in args.ops.split(","):
        for mib in (float(m) for m in args.mib.split(",")):
            shape = step_loop.shape_of(mib)
            rows += rows_of(op, mib, "first call", first_calls(op, shape, args.firsts))
            floors = step_loop.floors(op)
            jax_floor = step_loop.FLOOR_NAMES["jax"]
            rows += rows_of(op, mib, f"burst of {args.burst}", bursts(
                {**_calls(op), jax_floor: floors[jax_floor]}, shape, args.bursts, args.burst, rng))
            rows += rows_of(op, mib, "step loop", step_loop.step_loop({**_calls(op), **floors}, shape, args.steps, rng))
            rows += rows_of(op, mib, "fori_loop, per iteration", loops(op, shape, args.loops, args.iterations, rng))
    if COMM.Get_rank() == 0:
        print(f"\n{COMM.Get_size()} ranks, per call in ms (mean / median / worst), ratio of means to raw's in "
              "the same pattern\n")
        print("| op | MiB | pattern | column | mean | median | worst | mean / raw |")
        print("|---|---|---|---|---|---|---|---|")
        for op, mib, pattern, name, mean, med, worst, ratio in rows:
            print(f"| {op} | {mib:g} | {pattern} | {name} | {mean * 1e3:.2f} | {med * 1e3:.2f} | "
                  f"{worst * 1e3:.2f} | {ratio:.2f} |")


if __name__ == "__main__":
    main()
