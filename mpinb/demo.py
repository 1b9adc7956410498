"""``mpinb demo``: the seed's distributed transpose on N ranks, jitted and eager, shown once in
the grouped view (its HLO findings and the jit-vs-eager comparison included), then one verdict
line. Exit status 0 only if every rank's jitted result equals its eager result and NumPy's
transpose, and XLA laid out no collective's operand wrongly."""

from __future__ import annotations

import sys
import time

from .options.cluster_options import ClusterOptions

SEED_CELL = """\
import jax, jax.numpy as jnp, numpy as np
from mpi4py import MPI
from mpinb import mpi
rank, size = MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size()

def distributed_transpose(block):
    # this rank's rows of A (n, M) -> this rank's rows of A.T (M/size, N)
    n, cols = block.shape
    pieces = block.reshape(n, size, cols // size).transpose(1, 0, 2)   # piece s goes to rank s
    return mpi.alltoall(pieces).reshape(size * n, cols // size).T

N, M = 8 * size, 6 * size
A = np.arange(N * M, dtype=np.float32).reshape(N, M)
block = A[rank * (N // size):(rank + 1) * (N // size)]
jitted = jax.jit(distributed_transpose)(block)
eager = distributed_transpose(block)
expected = A.T[rank * (M // size):(rank + 1) * (M // size)]
matches_numpy = bool(np.array_equal(np.asarray(jitted), expected))
print(f"rank {rank}: block {block.shape} -> transposed {jitted.shape}, equals numpy: {matches_numpy}")
"""


def run(options: ClusterOptions | None = None, out=sys.stdout) -> int:
    """The demo on a cluster of these options (default 4 ranks), its report written to ``out``;
    0 if every rank agrees with NumPy, jit with eager, and no layout is wrong."""
    from .cluster.mpi_cluster import MPICluster

    options = options or ClusterOptions()
    n = options.n
    t0 = time.perf_counter()
    print(f"starting {n} MPI engines ...", file=out, flush=True)
    with MPICluster(options, progress=out.isatty() if hasattr(out, "isatty") else False) as cluster:
        print(f"{n} engines ready in {cluster.start_seconds:.1f} s\n", file=out, flush=True)
        result = cluster.run_cell(SEED_CELL, compare=True, show=("matches_numpy",), label="demo")
        print(result.text(), file=out)
        numpy_ok = all(rec and rec.show["matches_numpy"].get("value") is True for rec in result.records.values())
        cmp_ok = all(c.status == "equal" for c in result.comparisons) and result.comparisons
        bad_layout = [w for w in result.warnings if w.kind in ("non-row-major", "unconstrained", "divergent")]
        ok = result.ok and numpy_ok and bool(cmp_ok) and not bad_layout
    print(f"\n{'OK' if ok else 'MISMATCH'}: {n} ranks, jitted == eager == numpy: {bool(numpy_ok and cmp_ok)}, "
          f"layout errors: {len(bad_layout)} ({time.perf_counter() - t0:.1f} s in all)", file=out)
    return 0 if ok else 1
