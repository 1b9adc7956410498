"""%%mpijax against %%px on the same cluster, measured side by side in one run: a trivial cell's
round trip, and a cell printing many lines per rank (time until the magic has produced its
output, and how many bytes of output it produced: what the browser then has to render and the
saved notebook to carry); cluster start-up against a bare ipyparallel MPI cluster plus the JAX
import.

    python benchmarks/magic.py [-n 4] [--cells 50] [--lines 20000]
    python benchmarks/magic.py -n 16 --lines 0 --cells 10     # many ranks (oversubscribed here)
"""

from __future__ import annotations

import argparse
import statistics
import time

from IPython.testing.globalipapp import start_ipython


def per_call(fn, count):
    fn()
    samples = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(count):
            fn()
        samples.append((time.perf_counter() - t0) / count)
    return statistics.median(samples)


def interleaved(fns: dict, count: int, rounds: int = 20) -> dict:
    """name -> (mean, worst batch) seconds per call, the functions' batches of ``count`` calls
    taking turns for ``rounds`` rounds: a drift of the machine (another process, a cache) then
    falls on all of them alike, where batches run one function after the other would not."""
    for fn in fns.values():
        fn()
    batches = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            for _ in range(count):
                fn()
            batches[name].append((time.perf_counter() - t0) / count)
    return {name: (statistics.mean(b), max(b)) for name, b in batches.items()}


def captured(fn) -> str:
    """Run ``fn`` with stdout and the display hook's output captured; what it printed."""
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        fn()
    return out.getvalue()


def bare_start(n):
    import ipyparallel as ipp

    from mpinb.cluster.mpi_cluster import MPICluster

    t0 = time.perf_counter()
    cluster = ipp.Cluster(config=MPICluster(n=n).config(), log_level=40)
    client = cluster.start_and_connect_sync()
    client.wait_for_engines(n, timeout=120, interactive=False)
    client[:].execute("import jax", block=True)
    seconds = time.perf_counter() - t0
    client.close()
    cluster.stop_cluster_sync()
    return seconds


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=4, help="ranks (default 4)")
    parser.add_argument("--cells", type=int, default=50, help="cells per timing batch")
    parser.add_argument("--lines", type=int, default=20_000, help="lines per rank of the output case (0: skip)")
    args = parser.parse_args(argv)

    ip = start_ipython()
    ip.run_line_magic("load_ext", "mpinb")
    bare = bare_start(args.n)
    t0 = time.perf_counter()
    ip.run_line_magic("mpijax", f"start -n {args.n}")
    ours_start = time.perf_counter() - t0
    magics = ip.magics_manager.registry["MpiJaxMagics"]
    cluster = magics.cluster
    view = cluster.client[:]
    cluster.run_cell("import jax; x = jax.numpy.ones(3)")

    px = per_call(lambda: view.execute("a = 1", block=True), args.cells)
    api = per_call(lambda: cluster.run_cell("a = 1"), args.cells)
    api_nohlo = per_call(lambda: cluster.run_cell("a = 1", hlo=False), args.cells)
    import contextlib
    import io

    def magic():
        with contextlib.redirect_stdout(io.StringIO()):
            ip.run_cell_magic("mpijax", "", "a = 1")

    view.block = True
    view.activate()  # registers %%px for this view (blocking, as %%px is used)
    magics_side_by_side = interleaved({"px": lambda: captured(lambda: ip.run_cell_magic("px", "", "a = 1")),
                                       "mpijax": magic}, max(1, args.cells // 5))
    (px_magic, px_worst), (mag, mag_worst) = magics_side_by_side["px"], magics_side_by_side["mpijax"]
    rows_lines = []
    if args.lines:
        code = f"for i in range({args.lines}):\n    print('rank line', i)"
        for name, run in (("%%px", lambda: ip.run_cell_magic("px", "", code)),
                          ("%%mpijax", lambda: ip.run_cell_magic("mpijax", "", code))):
            times, size = [], 0
            for _ in range(3):
                t0 = time.perf_counter()
                size = len(captured(run))
                times.append(time.perf_counter() - t0)
            rows_lines.append((name, statistics.median(times), size))
    ip.run_line_magic("mpijax", "stop")

    print(f"\n{args.n} ranks")
    print(f"{'what':<44} {'ms':>8} {'ratio':>7}")
    print(f"{'%%px round trip (view.execute)':<44} {px * 1e3:8.2f} {1.0:7.2f}")
    print(f"{'run_cell, HLO capture on':<44} {api * 1e3:8.2f} {api / px:7.2f}")
    print(f"{'run_cell, HLO capture off':<44} {api_nohlo * 1e3:8.2f} {api_nohlo / px:7.2f}")
    print("the two magics taking turns (20 rounds of batches), mean per cell (worst batch):")
    print(f"{'%%mpijax magic (text view rendered)':<44} {mag * 1e3:8.2f} {mag / px:7.2f}   ({mag_worst * 1e3:.2f})")
    print(f"{'%%px magic, trivial cell':<44} {px_magic * 1e3:8.2f} {px_magic / px:7.2f}   ({px_worst * 1e3:.2f})")
    print(f"{'%%mpijax / %%px, trivial cell (means)':<44} {'':>8} {mag / px_magic:7.2f}")
    if rows_lines:
        base_t, base_size = rows_lines[0][1], rows_lines[0][2]
        print(f"\n{args.lines:,} lines per rank, {args.n} ranks")
        print(f"{'magic':<12} {'s':>8} {'ratio':>7} {'output bytes':>14} {'ratio':>7}")
        for name, seconds, size in rows_lines:
            print(f"{name:<12} {seconds:8.2f} {seconds / base_t:7.2f} {size:14,} {size / base_size:7.2f}")
    print(f"{'bare ipyparallel MPI start + import jax (s)':<44} {bare:8.2f} {1.0:7.2f}")
    print(f"{'%mpijax start: engines ready (s)':<44} {ours_start:8.2f} {ours_start / bare:7.2f}")


if __name__ == "__main__":
    main()
