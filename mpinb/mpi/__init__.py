"""MPI collectives callable inside ``jax.jit``: a drop-in for mpi4jax's API.

    from mpinb import mpi as mpi4jax   # instead of: import mpi4jax
    y = mpi4jax.allreduce(x, op=MPI.SUM)

Beyond mpi4jax: ``reduce_scatter``, ``allgatherv``, ``alltoallv``, ``set_debug``, ``inflight``.
Importing this module initialises MPI (through mpi4py) and registers the compiled library.
"""

from ..variant import abi as _abi

_abi.chosen()  # the variant of the ABI mpi4py chose: one it has no module for is named here, in mpinb's words

try:
    from mpi4py import MPI  # noqa: F401  (initialises MPI and loads libmpi before the extension)
except RuntimeError as _exc:  # mpi4py's own: no MPI library could be loaded
    raise ImportError(
        f"mpinb: mpi4py finds no MPI library ({_exc}). Install one: pip install mpich (or mpinb[mpich]), "
        "or your system's MPI and build mpinb against it (docs/how-to/choose-mpi.md)") from _exc

from . import library as _library  # noqa: E402 - after the variant is known

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
    reduce,
    reduce_scatter,
    scan,
    scatter,
)
from .library import (  # noqa: E402
    build_info,
    counters,
    get_checked,
    get_debug,
    get_overlap,
    inflight,
    set_checked,
    set_debug,
    set_overlap,
)
from .point_to_point import recv, send, sendrecv  # noqa: E402
from .validation import REDUCTION_DTYPES, SUPPORTED_DTYPES, default_comm  # noqa: E402

__all__ = [
    "REDUCTION_DTYPES",
    "SUPPORTED_DTYPES",
    "allgather",
    "allgatherv",
    "allreduce",
    "alltoall",
    "alltoallv",
    "barrier",
    "bcast",
    "build_info",
    "counters",
    "default_comm",
    "gather",
    "get_checked",
    "get_debug",
    "get_overlap",
    "has_cuda_support",
    "has_sycl_support",
    "inflight",
    "recv",
    "reduce",
    "reduce_scatter",
    "scan",
    "scatter",
    "send",
    "sendrecv",
    "set_checked",
    "set_debug",
    "set_overlap",
]
