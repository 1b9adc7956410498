"""Loading the compiled collective library once: MPI consistency checks, target registration
and the debug log switch.

The extension ``mpinb._ffi_<abi>`` (the variant of the MPI ABI mpi4py chose: mpinb.variant.abi) links
against ``libmpi`` by soname and resolves it to the library mpi4py has already loaded, so
mpi4py.MPI is always imported first. If the extension was built for a different MPI than the one
mpi4py loaded (MPICH's ``int`` handles against Open MPI's pointers), every handle would be
garbage: that is refused here with instructions.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import platform
import threading

from mpi4py import MPI

from .. import environment
from ..errors import MPIVariantError
from ..variant import abi
from ..variant.abitable import family_of as mpi_family
from ..variant.abitable import first_line
from .jax_versions import check_jaxlib_version, future_shift, release

DEBUG_ENV = environment.DEBUG.name
CHECKED_ENV = environment.CHECKED.name
MALLOC_ENV = environment.MALLOC_TUNING.name
HUGE_PAGES_ENV = environment.HUGE_PAGES.name
OVERLAP_ENV = environment.OVERLAP.name

# glibc mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20  # glibc's maximum on 64-bit
TRIM_THRESHOLD = 256 << 20

_lock = threading.Lock()
_ffi = None


REBUILD_HINT = (
    "Either rebuild mpinb against the MPI that mpi4py uses (and mpi4py itself, if it was not built for it):\n"
    "    pip install cython 'setuptools>=77' jaxlib\n"
    "    MPICC=/path/to/mpicc pip install --no-binary mpi4py --no-build-isolation --force-reinstall mpi4py\n"
    "    MPINB_MPICC=/path/to/mpicc pip install --no-build-isolation --force-reinstall --no-deps . "
    "(in a clone; for an installed release: --no-binary mpinb mpinb)\n"
    "or let mpi4py load the MPI mpinb was built for (MPICH: pip install mpich, and unset MPI4PY_LIBMPI / "
    "LD_LIBRARY_PATH overrides). See docs/how-to/choose-mpi.md."
)


def unloadable_message(error: str, loaded_by_mpi4py: str) -> str:
    """Why the chosen variant's collective library did not load (its file is known to fit the
    libmpi mpi4py loaded: mpinb.variant.abi checked), and the fix."""
    spec = None
    with contextlib.suppress(ImportError):  # no variant fits: named below as missing
        spec = abi.library_file(abi.chosen(), "ffi")
    if spec is None and not abi.built_variants():
        return ("mpinb: the compiled collective library is missing: this is a source tree "
                "that was never built. Install it: pip install -e '.[mpich]' (docs/contributing.md, 'Working "
                "from a clone').")
    return (f"mpinb: cannot load the compiled collective library {spec} ({error}) with the MPI mpi4py "
            f"loaded ({first_line(loaded_by_mpi4py)}).\n" + REBUILD_HINT)


def check_mpi_match(build: dict, families: tuple[str, ...], loaded_by_ffi: str, loaded_by_mpi4py: str) -> None:
    """Raise ImportError when the extension (serving the MPI ``families``) and mpi4py disagree
    on the MPI implementation, or two MPI libraries are loaded."""
    runtime = mpi_family(loaded_by_mpi4py)
    if families and runtime != "unknown" and runtime not in families:
        first = first_line(loaded_by_mpi4py)
        raise ImportError(
            f"mpinb: the collective library was built against {build['mpi_family']} "
            f"(mpicc {build['mpicc']}), but mpi4py loaded {runtime} ({first}).\n" + REBUILD_HINT
        )
    if loaded_by_ffi and loaded_by_mpi4py and loaded_by_ffi.split() != loaded_by_mpi4py.split():
        raise ImportError(
            "mpinb: two different MPI libraries are loaded in this process "
            f"(mpinb: {loaded_by_ffi.splitlines()[0]!r}, mpi4py: {loaded_by_mpi4py.splitlines()[0]!r}).\n"
            + REBUILD_HINT
        )


def check_jaxlib_match(built_with: str, installed: str) -> None:
    """Raise ImportError when the extension was compiled against a newer jaxlib than the one
    installed: XLA would refuse its handlers' FFI API version when the CPU backend starts,
    and no JAX computation would run in this process (older headers work with newer XLA)."""
    if release(built_with) and release(installed) and release(built_with) > release(installed):
        raise ImportError(
            f"mpinb: the collective library was compiled against jaxlib {built_with}, newer than "
            f"the installed jaxlib {installed}. Rebuild it against the installed one:\n"
            "    pip install cython setuptools && pip install --no-build-isolation --force-reinstall --no-deps -e .\n"
            "(a build with isolation compiles against the newest jaxlib allowed)."
        )


def _off(value: str) -> bool:
    return value.strip().lower() in ("0", "false", "no", "off")


def tune_malloc() -> bool:
    """Keep large freed buffers in the heap instead of returning them to the kernel.

    XLA allocates every result buffer afresh. With glibc's defaults a 16 MiB result is an
    ``mmap`` that the collective then page-faults in, page by page, on every call (about
    1.5 ms per 16 MiB here, a third of the alltoall itself). Raising the mmap threshold to 32 MiB
    and the trim threshold to 256 MiB lets glibc hand back the same, already mapped memory.
    Disabled by ``MPINB_MALLOC_TUNING=0``; a no-op on non-glibc systems. Returns True if applied.
    """
    if _off(os.environ.get(MALLOC_ENV, "1")) or platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    ok = mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
    ok = mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1 and ok
    return ok


def load():
    """Import, check and register the extension (idempotent, thread-safe); returns the module."""
    global _ffi
    if _ffi is not None:
        return _ffi
    with _lock:
        if _ffi is not None:
            return _ffi
        try:
            ext = abi.import_library()
        except MPIVariantError:
            raise
        except ImportError as exc:
            raise ImportError(unloadable_message(str(exc), MPI.Get_library_version())) from exc
        check_mpi_match(ext.build_info(), abi.chosen().families, ext.loaded_library_version(),
                        MPI.Get_library_version())
        provided = MPI.Query_thread()
        if provided < MPI.THREAD_SERIALIZED:
            raise ImportError(
                f"mpinb: MPI was initialised with thread level {provided}, but XLA may run "
                "collectives from its worker threads, which needs at least MPI_THREAD_SERIALIZED. "
                "Do not set mpi4py.rc.thread_level below 'serialized'."
            )
        from jaxlib.version import __version__ as jaxlib_version

        check_jaxlib_version(jaxlib_version)
        check_jaxlib_match(ext.build_info().get("jaxlib", ""), jaxlib_version)
        ext.set_future_shift(future_shift(ext.build_info().get("jaxlib", ""), jaxlib_version))
        ext.initialize()
        from .jax_compat import ffi

        for name, capsule in ext.registrations().items():
            ffi.register_ffi_target(name, capsule, platform="cpu", api_version=1)
        if os.environ.get(DEBUG_ENV, "").strip() and not _off(os.environ[DEBUG_ENV]):
            ext.set_debug(True)
        if os.environ.get(CHECKED_ENV, "").strip() and not _off(os.environ[CHECKED_ENV]):
            ext.set_checked(True)
        tune_malloc()
        # off unless asked: it wins a tight repeat on one buffer and loses a step loop (benchmarks/step_loop.py)
        ext.set_huge_pages(not _off(os.environ.get(HUGE_PAGES_ENV, "0")))
        if not _off(os.environ.get(OVERLAP_ENV, "0")):
            ext.set_overlap(True)  # a RuntimeError naming the thread level when it cannot
        _ffi = ext
        return ext


def set_debug(enabled: bool = True) -> None:
    """Print one line per executed collective to stderr: ``r{rank} | op, bytes, seconds``.

    Also enabled at import by the environment variable ``MPINB_DEBUG=1``.
    """
    load().set_debug(bool(enabled))


def set_checked(enabled: bool = True) -> None:
    """Checked mode: before each collective the ranks of its communicator exchange what they
    are about to call (op, dtype, shape, root, reduction op, call number on that communicator)
    and all raise the same clear error if they disagree, instead of hanging or corrupting data.
    Costs one small extra allgather per collective. Off by default in scripts
    (``MPINB_CHECKED=1`` turns it on), on by default on %%mpijax engines. Every rank must use
    the same setting."""
    load().set_checked(bool(enabled))


def set_overlap(enabled: bool = True) -> None:
    """Overlap: ``sendrecv`` hands its transfer to a progress thread and returns to XLA at once,
    so that computation that does not need the received data (a stencil's interior) runs while
    the messages travel; what needs them waits for them. Results are the same either way. Off by
    default (``MPINB_OVERLAP=1`` turns it on at import): on XLA:CPU it gained nothing reliable
    (benchmarks/overlap.py). Not used in checked mode nor with huge pages on. Needs MPI
    initialised with MPI_THREAD_MULTIPLE (mpi4py's default); RuntimeError otherwise."""
    load().set_overlap(bool(enabled))


def get_overlap() -> bool:
    return load().overlap()["enabled"]


def get_checked() -> bool:
    return load().get_checked()


def get_debug() -> bool:
    return load().get_debug()


def inflight():
    """The collective this process is blocked in right now (op, call, bytes, peer, seconds), or
    None. Safe to call from another thread while the main thread waits inside MPI."""
    return load().inflight()


def counters() -> dict:
    """Number of collectives started and of handler errors in this process."""
    return load().counters()


def build_info() -> dict:
    """What the compiled library was built against, and which MPI is loaded now."""
    info = dict(load().build_info())
    info["loaded_mpi"] = first_line(MPI.Get_library_version())
    return info
