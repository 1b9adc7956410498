"""The one table of MPI ABIs that mpinb's wheel carries a build of: each variant's name (mpi4py's
word for the ABI, ``mpi4py._mpiabi``), the libmpi soname its libraries link, the MPI families it
serves and the PyPI wheel that provides such an MPI; and which family an MPI's version string
names (``family_of``). setup.py reads it (by path: it imports
nothing) to name what it builds; mpinb.variant.abi reads it to choose at import.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Variant:
    """One MPI ABI, and the compiled libraries built for it."""

    name: str                   # mpi4py's word for the ABI: 'mpich', 'openmpi', 'mpiabi'
    soname: str                 # the libmpi its libraries need (DT_NEEDED)
    families: tuple[str, ...]   # what MPI_Get_library_version names (family_of below)
    wheel: str                  # the PyPI distribution giving such an MPI ('' when none)
    marker: str                 # a macro the MPI's mpi.h defines (setup.py: which ABI a header is)
    aliases: tuple[str, ...] = ()  # other sonames of libraries of this ABI (the loader finds them by ``soname``)

    def module(self, kind: str) -> str:
        """The file name stem of this variant's library ``kind`` ('ffi' or 'mpi_watch')."""
        return f"_{kind}_{self.name}"


#: the variants, in the order setup.py builds them
VARIANTS: dict[str, Variant] = {
    v.name: v
    for v in (
        # MPICH, Intel MPI, MVAPICH, Cray MPICH (the MPICH ABI initiative)
        Variant("mpich", "libmpi.so.12", ("MPICH", "Intel MPI"), "mpich", "MPICH_VERSION",
                aliases=("libmpich.so.12",)),  # Debian's MPICH: libmpi.so.12 links to it
        # Open MPI 4.x and 5.x
        Variant("openmpi", "libmpi.so.40", ("Open MPI",), "openmpi", "OPEN_MPI"),
        # the MPI-5 standard ABI (MPICH 5's libmpi_abi; Open MPI from 6.0)
        Variant("mpiabi", "libmpi_abi.so.1", (), "", "MPI_ABI_VERSION"),
    )
}

#: the compiled libraries each variant has
KINDS = ("ffi", "mpi_watch")

#: the sonames mpinb's wheel leaves out (auditwheel repair --exclude): the user's MPI provides them
EXCLUDED_SONAMES = tuple(v.soname for v in VARIANTS.values())


def family_of(version_string: str) -> str:
    """'MPICH', 'Open MPI', 'Intel MPI' or 'unknown' from an MPI library version string (Intel MPI
    is MPICH-derived: its launcher is hydra)."""
    if "Open MPI" in version_string:
        return "Open MPI"
    if "Intel(R) MPI" in version_string:
        return "Intel MPI"
    if "MPICH" in version_string:
        return "MPICH"
    return "unknown"


def first_line(version_string: str) -> str:
    """The first line of an MPI library version string (Open MPI's ends in a NUL)."""
    lines = version_string.replace("\x00", "").strip().splitlines()
    return lines[0].strip() if lines else "?"
