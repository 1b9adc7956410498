"""Another benchmark run with the MPI watch loaded and started, as the engines run it
(mpinb.engine.mpi4py_waits): the cost of watching, against a run of the same benchmark without it.
With ``--withdrawable`` first, receives are also made withdrawable as on the engines
(mpinb.engine.rank_release: they poll MPI_Improbe instead of blocking): the cost of that.

    mpiexec -n 2 python benchmarks/watched.py benchmarks/collectives.py --sizes 16,1048576
    mpiexec -n 2 python benchmarks/collectives.py --sizes 16,1048576        # the same, unwatched
    mpiexec -n 2 python benchmarks/watched.py --withdrawable benchmarks/overlap.py --steps 200

Every MPI call of the main thread is then watched: mpinb's collectives, and the raw mpi4py
baseline's calls too.
"""

from __future__ import annotations

import runpy
import sys

from mpinb.engine import mpi4py_waits

if __name__ == "__main__":
    withdrawable = sys.argv[1:2] == ["--withdrawable"]
    if withdrawable:
        del sys.argv[1]
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    if not mpi4py_waits.preload():
        sys.exit("benchmarks/watched.py: the MPI watch could not be loaded (set MPINB_LIBMPI to the libmpi "
                 "mpi4py loads; MPINB_MPI_WATCH=0 turns it off)")
    mpi4py_waits.start()
    if withdrawable:
        from mpi4py import MPI  # noqa: F401 - MPI initialised before the wake is installed

        from mpinb.engine import rank_release

        rank_release.install()
    sys.argv = sys.argv[1:]
    runpy.run_path(sys.argv[0], run_name="__main__")
