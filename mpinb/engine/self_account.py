"""What each rank says of itself before the engines are set up (mpinb.analysis.rank_accounts compares
the ranks with each other and with the notebook): host, cores, Python, mpinb, JAX, jaxlib and
mpi4py versions, the MPI library mpi4py loaded, and whether mpinb's compiled library loads with
it. Imports neither JAX nor mpinb.mpi (the engine's setup must be the first to start JAX, for
the HLO dump folder), so a rank that could not even be set up still answers.
"""

from __future__ import annotations

import os
import platform
import socket
from importlib.metadata import PackageNotFoundError, version

#: the distributions whose versions every rank must share (and with the notebook, where it has them)
PACKAGES = ("mpinb", "jax", "jaxlib", "mpi4py")


def package_versions() -> dict[str, str | None]:
    """{distribution: version, or None when not installed}, read from the metadata (no import)."""
    found = {}
    for name in PACKAGES:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = None
    return {"python": platform.python_version(), **found}


def library_status(loaded_family: str) -> str:
    """'ok', or why mpinb's compiled library cannot serve the MPI mpi4py loaded."""
    from ..variant import abi

    try:
        variant = abi.chosen()
        _ffi = abi.import_library()
    except ImportError as exc:
        return f"does not load: {exc}"
    built = _ffi.build_info()["mpi_family"]
    if variant.families and loaded_family != "unknown" and loaded_family not in variant.families:
        return f"built for {built}, but mpi4py loaded {loaded_family}"
    return "ok"


def report() -> dict:
    """This rank's account of itself (run on every engine before setup)."""
    from mpi4py import MPI

    from ..variant.abitable import family_of, first_line

    loaded = MPI.Get_library_version()
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return {
        "rank": MPI.COMM_WORLD.Get_rank(),
        "host": socket.gethostname(),
        "cores": cores,
        **package_versions(),
        "mpi_library": first_line(loaded),
        "mpinb_library": library_status(family_of(loaded)),
    }
