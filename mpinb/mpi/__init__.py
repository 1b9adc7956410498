"""MPI collectives callable inside ``jax.jit``: a drop-in for mpi4jax's API.

    from mpinb import mpi as mpi4jax   # instead of: import mpi4jax
    y = mpi4jax.allreduce(x, op=MPI.SUM)

Beyond mpi4jax: ``reduce_scatter``, ``allgatherv``, ``alltoallv``, ``set_debug``, ``inflight``.
Importing this module initialises MPI (through mpi4py) and registers the compiled library.
"""

from mpi4py import MPI  # noqa: F401  (initialises MPI and loads libmpi before the extension)

from . import library as _library

_library.load()

from .collectives import (  # noqa: E402
    allgather,
    allgatherv,
    allreduce,
    alltoall,
    alltoallv,
    barrier,
    bcast,
    gather,
    has_cuda_support,
    has_sycl_support,
    recv,
    reduce,
    reduce_scatter,
    scan,
    scatter,
    send,
    sendrecv,
)
from .library import build_info, counters, get_checked, get_debug, inflight, set_checked, set_debug  # noqa: E402
from .validation import SUPPORTED_DTYPES, REDUCTION_DTYPES, default_comm  # noqa: E402

__all__ = [
    "allgather",
    "allgatherv",
    "allreduce",
    "alltoall",
    "alltoallv",
    "barrier",
    "bcast",
    "gather",
    "has_cuda_support",
    "has_sycl_support",
    "recv",
    "reduce",
    "reduce_scatter",
    "scan",
    "scatter",
    "send",
    "sendrecv",
    "build_info",
    "counters",
    "get_debug",
    "inflight",
    "set_debug",
    "set_checked",
    "get_checked",
    "default_comm",
    "SUPPORTED_DTYPES",
    "REDUCTION_DTYPES",
]
