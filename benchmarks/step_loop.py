"""A large collective as programs call it: once per step of a Python time-step loop, between a
jitted update of the field and other arrays of the session coming and going. Mean, median and
worst per call (a tuning that wins the median of a tight repeat can lose the mean here), for
raw mpi4py on the step's NumPy view with a fresh result buffer each step (the baseline, same
run), mpinb, and mpi4jax when it is importable, each called in a jitted function of its own and
(mpinb; mpi4jax only with --columns mpi4jax_eager) eagerly, outside jit, as a notebook cell does;
a jitted call that does nothing but add 1 to 16 bytes (JAX's dispatch, which any jitted call
pays and raw mpi4py does not); and two floors: a memory copy of the same size (the physical one)
and raw mpi4py followed by that jitted call (JAX's floor: the transfer and one dispatch, after
the transfer has pushed the dispatch's code and data out of the core's cache, about the least a
collective called through JAX pays; one whose transfer runs inside the dispatched computation
has no Python call of the transfer and can come in under it). One more row, for context only: raw mpi4py with its result
handed back to JAX (``jax.device_put``), as a JAX program that calls mpi4py between its jitted
steps must do before the next step.

    mpiexec -n 2 python benchmarks/step_loop.py [--mib 1,16] [--steps 80] [--ops alltoall,allreduce]
    MPINB_HUGE_PAGES=1 mpiexec -n 2 python benchmarks/step_loop.py   # the huge-page tuning on (off by default)
    mpiexec -n 2 python benchmarks/step_loop.py --columns raw,mpinb   # only these two (and the floors) take the steps

Each step: the field is updated by a jitted function, 1-8 MiB NumPy arrays are made and dropped,
then one column's call runs on that step's field (barrier first; the time of a call is the
slowest rank's), the columns and floors taking the steps in turn, in a new order each round
(``in_turn``): every call follows the same work, never another column's call on the same field,
which would leave it a warm cache or a cold one by the other's doing (the same code, raw mpi4py
then a jitted ``x + 1``, read 1.43x raw taking turns right after the other columns on one field,
1.15-1.24x measured after all of them). Each column is compiled before the loop, on other
memory; its first call in the loop, on new memory, is counted: a program pays it too.
"""

from __future__ import annotations

import argparse
import statistics
import time
from functools import partial

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


def timed(call) -> float:
    COMM.Barrier()
    t0 = time.perf_counter()
    call()
    return COMM.allreduce(time.perf_counter() - t0, op=MPI.MAX)


#: --columns' names for the columns (the two floors, step_loop.floors, are always measured)
COLUMN_KEYS = {"raw": "raw mpi4py", "mpinb": "mpinb", "mpi4jax": "mpi4jax",
               "mpinb_eager": "mpinb, called eagerly", "mpi4jax_eager": "mpi4jax, called eagerly",
               "handed": "raw mpi4py, result handed to JAX", "dispatch": "jitted x + 1 on 16 B (JAX's dispatch)"}

#: the columns of a run without --columns: all but mpi4jax's eager call, which (mpi4jax 0.9.1,
#: JAX 0.10) compiles its computation anew at every call, about 16 ms, leaving every other
#: column's caches cold
DEFAULT_COLUMNS = [key for key in COLUMN_KEYS if key != "mpi4jax_eager"]


def raw_call(op: str, send: np.ndarray, recv: np.ndarray) -> None:
    """Raw mpi4py's call of ``op`` from ``send`` into ``recv``."""
    if op == "alltoall":
        COMM.Alltoall(send, recv)
    else:
        COMM.Allreduce(send, recv, op=MPI.SUM)


def eager_calls(op: str) -> dict:
    """{"mpinb": its call of ``op``, "mpi4jax": its call (where it can be imported)}: functions of
    the operand, the result returned, not waited for; jitted or not, as the caller wraps them."""
    if op == "alltoall":
        out = {"mpinb": mpinb_mpi.alltoall, "mpi4jax": lambda x: _first(mpi4jax.alltoall(x, comm=COMM))}
    else:
        out = {"mpinb": partial(mpinb_mpi.allreduce, op=MPI.SUM),
               "mpi4jax": lambda x: _first(mpi4jax.allreduce(x, op=MPI.SUM, comm=COMM))}
    return out if mpi4jax else {"mpinb": out["mpinb"]}


def columns(op: str) -> dict:
    """key of COLUMN_KEYS -> function(field) doing one call and waiting for its result (no
    mpi4jax column where it cannot be imported)."""
    def raw(field):
        send = np.asarray(field)
        recv = np.empty_like(send)
        raw_call(op, send, recv)
        return recv

    eager = eager_calls(op)
    ours_eager, theirs_eager = eager["mpinb"], eager.get("mpi4jax")
    ours = jax.jit(ours_eager)
    theirs = theirs_eager and jax.jit(theirs_eager)
    tiny = jnp.ones(4, jnp.float32)
    add_one = jax.jit(lambda x: x + 1)
    out = {"raw": raw, "mpinb": lambda f: ours(f).block_until_ready(),
           "mpinb_eager": lambda f: ours_eager(f).block_until_ready()}
    if theirs:
        out["mpi4jax"] = lambda f: theirs(f).block_until_ready()
        out["mpi4jax_eager"] = lambda f: theirs_eager(f).block_until_ready()
    out["handed"] = lambda f: jax.device_put(raw(f)).block_until_ready()
    out["dispatch"] = lambda f: add_one(tiny).block_until_ready()
    return out


def _keys(text: str) -> list[str]:
    keys = [k.strip() for k in text.split(",") if k.strip()]
    unknown = [k for k in keys if k not in COLUMN_KEYS]
    if unknown:
        raise SystemExit(f"--columns: unknown {', '.join(unknown)} (known: {', '.join(COLUMN_KEYS)})")
    return keys


def _first(result):
    return result[0] if isinstance(result, tuple) else result


def shape_of(mib: float) -> tuple[int, int]:
    """A float32 operand of about ``mib`` MiB per rank, in rows by destination (alltoall's
    operand as it is, without a reshape)."""
    size = COMM.Get_size()
    n = int(mib * 2**20) // 4 // size * size
    return size, n // size


def junk(rng) -> list:
    """Other arrays of the session: three of 1-8 MiB, to be dropped after the step's calls."""
    return [np.ones(int(rng.integers(1, 9)) << 17) for _ in range(3)]


#: the jitted update of the field before each step's calls
step = jax.jit(lambda x: x * 0.5 + 1.0)


def rotated(names: list, i: int) -> list:
    """``names`` from the ``i``-th on, then the rest: each column goes first in turn."""
    return names[i % len(names):] + names[:i % len(names)]


def in_turn(names: list, rounds: int) -> list:
    """``rounds`` turns of each of ``names``, one name a turn: the columns of a loop whose every
    step or round runs one column's calls, after the same work as the others'. Each round of
    turns has an order of its own (the same on every rank): in a fixed order a column would
    always follow the same other one, whose freed buffers shape the memory it gets."""
    return [names[i] for r in range(rounds) for i in np.random.default_rng(r).permutation(len(names))]


def floors(op: str) -> dict:
    """name -> function(field): the two floors, measured as columns (they take their turns)."""
    made = columns(op)
    raw, dispatch = made["raw"], made["dispatch"]
    return {FLOOR_NAMES["copy"]: lambda f: np.asarray(f).copy(),
            FLOOR_NAMES["jax"]: lambda f: (raw(f), dispatch(f))}


#: the floors' names in the tables
FLOOR_NAMES = {"copy": "memory copy (floor)", "jax": "raw mpi4py, then a jitted x + 1 on 16 B (JAX's floor)"}


def step_loop(calls: dict, shape: tuple, steps: int, rng) -> dict:
    """The loop: {column: [seconds per call]}, ``steps`` calls of each of ``calls`` (columns or
    floors), one call a step, in turn. Each is compiled before the loop, on other memory."""
    field = jnp.ones(shape, jnp.float32)
    for call in calls.values():
        call(jnp.zeros(shape, jnp.float32))
    times = {name: [] for name in calls}
    for name in in_turn(list(calls), steps):
        field = step(field)
        others = junk(rng)
        times[name].append(timed(lambda call=calls[name], field=field: call(field)))
        del others
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mib", default="1,16", help="message sizes in MiB (per rank)")
    ap.add_argument("--steps", type=int, default=80, help="steps of each column (and floor): a column a step")
    ap.add_argument("--ops", default="alltoall,allreduce")
    ap.add_argument("--columns", default=None,
                    help=f"which columns take the steps in turn, of {','.join(COLUMN_KEYS)} (default: all but "
                         "mpi4jax_eager, the mpi4jax ones where it is importable; raw is always one: the "
                         "baseline). The two floors are always measured, as columns of their own")
    args = ap.parse_args()
    wanted = set(DEFAULT_COLUMNS if args.columns is None else _keys(args.columns)) | {"raw"}
    if args.columns and wanted & {"mpi4jax", "mpi4jax_eager"} and mpi4jax is None:
        raise SystemExit("--columns mpi4jax, mpi4jax_eager: mpi4jax cannot be imported here")
    size, rank = COMM.Get_size(), COMM.Get_rank()
    rng = np.random.default_rng(rank)
    rows = []
    for op in args.ops.split(","):
        for mib in (float(m) for m in args.mib.split(",")):
            shape = shape_of(mib)
            calls = {COLUMN_KEYS[key]: call for key, call in columns(op).items() if key in wanted}
            times = step_loop({**calls, **floors(op)}, shape, args.steps, rng)
            base = statistics.fmean(times[COLUMN_KEYS["raw"]])
            for name, t in times.items():
                rows.append((op, mib, name, statistics.fmean(t), statistics.median(t), max(t),
                             statistics.fmean(t) / base))
    if rank == 0:
        print(f"\n{size} ranks, {args.steps} steps a column, per call in ms (mean / median / worst), "
              "ratio of means to raw\n")
        print("| op | MiB | column | mean | median | worst | mean / raw |")
        print("|---|---|---|---|---|---|---|")
        for op, mib, name, mean, med, worst, ratio in rows:
            print(f"| {op} | {mib:g} | {name} | {mean * 1e3:.2f} | {med * 1e3:.2f} | {worst * 1e3:.2f} | {ratio:.2f} |")


if __name__ == "__main__":
    main()
