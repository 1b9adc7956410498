"""Halo exchanges, with a core per rank and with more ranks than cores (a workshop laptop): mean
and worst per exchange of mpinb, mpi4jax (when importable) and raw mpi4py, measured in the same
run, for

- **ring**: a jitted step of four ``sendrecv`` exchanges of a 100-float row, each rank sending
  to the next rank and receiving from the one before;
- **pairs**: a jitted step of four ``send``/``recv`` exchanges of that row between rank pairs
  (0-1, 2-3, ...; the even rank sends first);
- **shallow water** (``--shallow-water PATH``): mpi4jax's own example ``shallow_water.py``
  loaded unchanged, once with ``mpi4jax`` standing for mpinb (``import mpinb.mpi as mpi4jax``)
  and once for the real mpi4jax, its jitted ``do_multistep`` timed per model step; the two
  runs' fields are compared at the end (they must be equal).

Raw mpi4py runs the same exchanges on NumPy buffers (``Sendrecv``, ``Send``/``Recv``), in a
Python loop: the baseline. The columns take turns (rounds, in a new order each round), so that
a busy moment of the machine falls on all of them. The time of a step is the slowest rank's.

    python benchmarks/halo.py                                   # 2 ranks, and 4 and 8 ranks
    python benchmarks/halo.py --ranks 2,4 --shallow-water ~/src/mpi4jax/examples/shallow_water.py
    python benchmarks/halo.py --csv docs/data/halo.csv          # also write the table's numbers

The driver starts each rank count with ``mpiexec -n N`` (the launcher of the MPI that mpi4py
loads, allowed to oversubscribe); with 2 cores, 4 and 8 ranks share them. Fetch mpi4jax's
example yourself (it is not part of mpinb): https://github.com/mpi4jax/mpi4jax/tree/master/examples
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys

EXCHANGES = 4        # exchanges per jitted step of the ring and the pairs
ROW = 100            # floats per exchanged row
MULTISTEP = 10       # model steps per call of the example's do_multistep
COLUMNS = ("mpinb", "mpi4jax", "raw")
LABELS = {"mpinb": "mpinb", "mpi4jax": "mpi4jax", "raw": "raw mpi4py"}


# ---------------------------------------------------------------- one rank of a job (under mpiexec)

def load_example(path: str, library, name: str):
    """mpi4jax's shallow-water example as a module whose ``mpi4jax`` is ``library``."""
    import importlib.util

    saved = sys.modules.get("mpi4jax")
    sys.modules["mpi4jax"] = library
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        if saved is None:
            sys.modules.pop("mpi4jax", None)
        else:
            sys.modules["mpi4jax"] = saved
    return module


def job(args) -> None:
    import time

    import jax
    import jax.numpy as jnp
    import numpy as np
    from mpi4py import MPI

    import mpinb.mpi as mpinb_mpi

    try:
        import mpi4jax
    except Exception:  # noqa: BLE001 - any import failure just means "not compared"
        mpi4jax = None
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    right, left = (rank + 1) % size, (rank - 1) % size
    partner = rank ^ 1
    libraries = {"mpinb": mpinb_mpi, "mpi4jax": mpi4jax}
    libraries = {k: v for k, v in libraries.items() if v is not None}

    def ring_step(lib):
        @jax.jit
        def step(x):
            for _ in range(EXCHANGES):
                x = lib.sendrecv(x, x, source=left, dest=right, comm=comm) + 1
            return x
        return step

    def pairs_step(lib):
        @jax.jit
        def step(x):
            for _ in range(EXCHANGES):
                if rank % 2 == 0:
                    lib.send(x, dest=partner, comm=comm)
                    x = lib.recv(x, source=partner, comm=comm) + 1
                else:
                    x = lib.recv(x, source=partner, comm=comm) + 1
                    lib.send(x, dest=partner, comm=comm)
            return x
        return step

    send_buf, recv_buf = np.ones(ROW, np.float32), np.empty(ROW, np.float32)

    def raw_ring(_):
        for _ in range(EXCHANGES):
            comm.Sendrecv(send_buf, dest=right, recvbuf=recv_buf, source=left)
        return recv_buf

    def raw_pairs(_):
        for _ in range(EXCHANGES):
            if rank % 2 == 0:
                comm.Send(send_buf, dest=partner)
                comm.Recv(recv_buf, source=partner)
            else:
                comm.Recv(recv_buf, source=partner)
                comm.Send(recv_buf, dest=partner)
        return recv_buf

    def timed_rounds(calls: dict, start_values: dict, steps: int, rounds: int) -> dict:
        """{column: [seconds of each step, the slowest rank's]}, the columns in turn."""
        values = dict(start_values)
        for name, call in calls.items():  # compile and warm up
            values[name] = call(values[name])
            jax.block_until_ready(values[name])
        mine = {name: [] for name in calls}
        names = list(calls)
        per_round = max(1, steps // rounds)
        for r in range(rounds):
            for name in names[r % len(names):] + names[:r % len(names)]:
                comm.Barrier()
                for _ in range(per_round):
                    t0 = time.perf_counter()
                    values[name] = calls[name](values[name])
                    jax.block_until_ready(values[name])
                    mine[name].append(time.perf_counter() - t0)
        slowest = {}
        for name, times in mine.items():
            every = comm.allgather(times)
            slowest[name] = [max(ts) for ts in zip(*every, strict=True)]
        return slowest, values

    rows = []
    row = jnp.ones(ROW, jnp.float32)
    for pattern, make, raw in (("ring", ring_step, raw_ring), ("pairs", pairs_step, raw_pairs)):
        calls = {name: make(lib) for name, lib in libraries.items()}
        calls["raw"] = raw
        times, _ = timed_rounds(calls, dict.fromkeys(calls, row), args.steps, args.rounds)
        rows.append({"pattern": pattern, "unit": "exchange",
                     "times": {k: [t / EXCHANGES for t in v] for k, v in times.items()}})
    if args.shallow_water:
        examples = {name: load_example(args.shallow_water, lib, f"shallow_water_{name}")
                    for name, lib in libraries.items()}

        def start(example):
            h, u, v = example.get_initial_conditions()
            du, dv, dh = (jnp.zeros((example.ny_local, example.nx_local)) for _ in range(3))
            return example.shallow_water_step(example.ModelState(h, u, v, dh, du, dv), True)

        calls = {name: (lambda state, e=e: e.do_multistep(state, MULTISTEP)) for name, e in examples.items()}
        starts = {name: start(e) for name, e in examples.items()}
        times, finals = timed_rounds(calls, starts, args.model_calls, args.rounds)
        equal = None
        if len(finals) == 2:
            equal = all(np.array_equal(np.asarray(a), np.asarray(b))
                        for a, b in zip(finals["mpinb"], finals["mpi4jax"], strict=True))
            equal = all(comm.allgather(equal))
        rows.append({"pattern": "shallow water", "unit": "model step", "equal": equal,
                     "times": {k: [t / MULTISTEP for t in v] for k, v in times.items()}})
    if rank == 0:
        print("HALO " + json.dumps({"ranks": size, "rows": rows}), flush=True)


# ---------------------------------------------------------------- the driver

def run_ranks(nranks: int, args) -> dict:
    from mpinb.launch.mpi_impl import find_launcher, loaded_mpi

    mpi = loaded_mpi()
    command = [find_launcher(mpi), "-n", str(nranks), *mpi.implementation.oversubscribe,
               sys.executable, os.path.abspath(__file__), "--job", "--steps", str(args.steps),
               "--rounds", str(args.rounds), "--model-calls", str(args.model_calls)]
    if args.shallow_water:
        command += ["--shallow-water", os.path.abspath(os.path.expanduser(args.shallow_water))]
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    print(f"... {nranks} ranks: {' '.join(command[:3])} ...", file=sys.stderr, flush=True)
    proc = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    found = [line for line in proc.stdout.splitlines() if line.startswith("HALO ")]
    if proc.returncode != 0 or not found:
        raise SystemExit(f"{nranks} ranks failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    return json.loads(found[-1][5:])


def summary(times: list) -> tuple[float, float]:
    return sum(times) / len(times), max(times)


def table(results: list, cores: int) -> list[dict]:
    """The printed table's rows, as dicts (also what --csv writes)."""
    out = []
    for result in results:
        for row in result["rows"]:
            entry = {"pattern": row["pattern"], "ranks": result["ranks"], "cores": cores, "unit": row["unit"]}
            for name in COLUMNS:
                if name in row["times"]:
                    entry[f"{name}_mean_us"], entry[f"{name}_worst_us"] = (1e6 * t for t in summary(row["times"][name]))
            if "mpi4jax_mean_us" in entry:
                entry["mpinb_vs_mpi4jax"] = entry["mpinb_mean_us"] / entry["mpi4jax_mean_us"]
            if "raw_mean_us" in entry:
                entry["mpinb_vs_raw"] = entry["mpinb_mean_us"] / entry["raw_mean_us"]
            if row.get("equal") is not None:
                entry["fields_equal"] = row["equal"]
            out.append(entry)
    return out


def show(rows: list) -> None:
    def cell(entry, name):
        if f"{name}_mean_us" not in entry:
            return "-"
        return f"{entry[f'{name}_mean_us']:.0f} / {entry[f'{name}_worst_us']:.0f}"

    def ratio(entry, key):
        return f"{entry[key]:.2f}" if key in entry else "-"

    head = ["pattern", "ranks on cores", "per"] + [f"{LABELS[n]} mean / worst (us)" for n in COLUMNS] \
        + ["mpinb / mpi4jax", "mpinb / raw"]
    lines = [head]
    for e in rows:
        lines.append([e["pattern"], f"{e['ranks']} on {e['cores']}", e["unit"]] + [cell(e, n) for n in COLUMNS]
                     + [ratio(e, "mpinb_vs_mpi4jax"), ratio(e, "mpinb_vs_raw")])
    widths = [max(len(str(line[i])) for line in lines) for i in range(len(head))]
    for i, line in enumerate(lines):
        print("  ".join(str(c).ljust(w) for c, w in zip(line, widths, strict=True)))
        if i == 0:
            print("  ".join("-" * w for w in widths))
    for e in rows:
        if "fields_equal" in e:
            print(f"shallow water on {e['ranks']} ranks: mpinb's fields "
                  f"{'equal' if e['fields_equal'] else 'DIFFER FROM'} mpi4jax's")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", default="2,4,8", help="rank counts, comma-separated (default 2,4,8)")
    parser.add_argument("--steps", type=int, default=240, help="jitted steps of the ring and the pairs per column")
    parser.add_argument("--model-calls", type=int, default=24,
                        help=f"calls of the example's do_multistep ({MULTISTEP} model steps each) per column")
    parser.add_argument("--rounds", type=int, default=6, help="turns the columns take")
    parser.add_argument("--shallow-water", metavar="PATH", help="mpi4jax's examples/shallow_water.py")
    parser.add_argument("--csv", metavar="PATH", help="also write the table's numbers here")
    parser.add_argument("--job", action="store_true", help=argparse.SUPPRESS)  # one rank of a run
    args = parser.parse_args()
    if args.steps < 1 or args.rounds < 1 or args.model_calls < 1:
        parser.error("--steps, --rounds and --model-calls must be at least 1")
    if args.shallow_water and not os.path.isfile(os.path.expanduser(args.shallow_water)):
        parser.error(f"--shallow-water: no file {args.shallow_water}")
    if args.job:
        job(args)
        return
    try:
        counts = [int(n) for n in args.ranks.split(",")]
    except ValueError:
        parser.error(f"--ranks: not a list of numbers: {args.ranks!r}")
    if any(n < 2 or n % 2 for n in counts):
        parser.error("--ranks: even counts of 2 or more (the pairs pattern pairs ranks)")
    cores = len(os.sched_getaffinity(0))
    rows = table([run_ranks(n, args) for n in counts], cores)
    show(rows)
    if args.csv:
        keys = sorted({k for e in rows for k in e}, key=lambda k: (k not in ("pattern", "ranks", "cores", "unit"), k))
        with open(args.csv, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=keys)
            writer.writeheader()
            for e in rows:
                writer.writerow({k: (f"{v:.4g}" if isinstance(v, float) else v) for k, v in e.items()})


if __name__ == "__main__":
    main()
