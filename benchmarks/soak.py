"""Memory over a long session: N small cells (each a jitted alltoall of a new 32 KiB array and a
print) run through ``%%mpijax`` and then the same cells through ipyparallel's ``%%px`` on the same
engines; each engine's and the notebook process's growth per cell (resident memory, after a
garbage collection, over the cells that follow a warm-up).

    python benchmarks/soak.py [-n 2] [--cells 500] [--warmup 100]

The two magics share the engines, JAX and ipyparallel: what one grows and the other does not is
the magic's own (its records, views, messages).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io

import psutil
from IPython.testing.globalipapp import start_ipython

SETUP = """
import gc, jax, jax.numpy as jnp
from mpi4py import MPI
from mpinb import mpi
size = MPI.COMM_WORLD.Get_size()
"""

CELL = """
x = jnp.full((size, 8192 // size), {i}, jnp.float32)
y = jax.jit(mpi.alltoall)(x)
print({i}, float(y.sum()))
"""


def rss_kib(pids) -> list[float]:
    return [psutil.Process(p).memory_info().rss / 1024 for p in pids]


def soak(run, collect, pids, cells: int, warmup: int, start: int) -> list[float]:
    """KiB per cell that each process of ``pids`` grew over ``cells`` cells after ``warmup``."""
    for i in range(start, start + warmup):
        run(CELL.format(i=i))
    collect()
    before = rss_kib(pids)
    for i in range(start + warmup, start + warmup + cells):
        run(CELL.format(i=i))
    collect()
    after = rss_kib(pids)
    return [(b - a) / cells for a, b in zip(before, after, strict=True)]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=2, help="ranks (default 2)")
    parser.add_argument("--cells", type=int, default=500, help="measured cells per magic (default 500)")
    parser.add_argument("--warmup", type=int, default=100, help="cells before the measured ones (default 100)")
    args = parser.parse_args(argv)

    ip = start_ipython()
    ip.run_line_magic("load_ext", "mpinb")
    ip.run_line_magic("mpijax", f"start -n {args.n}")
    cluster = ip.magics_manager.registry["MpiJaxMagics"].cluster
    view = cluster.client[:]
    view.block = True
    view.activate()  # %%px on the same engines
    pids = [e["pid"] for e in cluster.engines] + [psutil.Process().pid]

    def quiet(magic, line=""):
        def run(code):
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                ip.run_cell_magic(magic, line, code)
        return run

    def collect():
        view.execute("gc.collect()")
        gc.collect()

    quiet("mpijax")(SETUP)
    rows = {"%%mpijax": soak(quiet("mpijax"), collect, pids, args.cells, args.warmup, 0),
            "%%px": soak(quiet("px"), collect, pids, args.cells, args.warmup, 10_000)}
    ip.run_line_magic("mpijax", "stop")

    names = [f"engine {r}" for r in range(args.n)] + ["notebook"]
    print(f"\n{args.n} ranks, {args.cells} cells after {args.warmup} of warm-up: KiB per cell")
    print(f"{'magic':<10}" + "".join(f"{n:>12}" for n in names))
    for magic, growth in rows.items():
        print(f"{magic:<10}" + "".join(f"{g:12.2f}" for g in growth))


if __name__ == "__main__":
    main()
