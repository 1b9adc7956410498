"""Every environment variable mpinb reads, in one table: its name, who reads it, its values and
what it does. The code reads each name from here, and the documentation's table of variables
(docs/reference/environment.md) is made from it. Imports nothing: setup.py reads it by path.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Variable:
    """One environment variable: ``name``, who reads it (``read_by``), its ``values`` and their
    meaning (``meaning``), and its ``default``."""

    name: str
    read_by: str
    values: str
    default: str
    meaning: str


# -------------------------------------------------------------------------------- the library
MPIABI = Variable(
    "MPINB_MPIABI", "any process that imports mpinb.mpi", "mpich, openmpi, mpiabi",
    "the ABI mpi4py loaded", "Load this compiled variant of mpinb's libraries, whatever MPI mpi4py loaded.")
DEBUG = Variable(
    "MPINB_DEBUG", "any process that imports mpinb.mpi", "1", "off",
    "Print a line per collective a rank runs to its stderr: op, bytes, seconds (mpinb.mpi.set_debug).")
CHECKED = Variable(
    "MPINB_CHECKED", "any process that imports mpinb.mpi", "1", "off in scripts, on in engines",
    "Turn checked mode on: the ranks compare each collective before it runs (mpinb.mpi.set_checked).")
MALLOC_TUNING = Variable(
    "MPINB_MALLOC_TUNING", "any process that imports mpinb.mpi", "0", "on",
    "Leave glibc's malloc as it is. By default large freed buffers stay mapped, which saves page faults.")
HUGE_PAGES = Variable(
    "MPINB_HUGE_PAGES", "any process that imports mpinb.mpi", "1", "off",
    "Back large message buffers with transparent huge pages.")
OVERLAP = Variable(
    "MPINB_OVERLAP", "any process that imports mpinb.mpi", "1", "off",
    "Let sendrecv run beside other XLA work (mpinb.mpi.set_overlap).")

# -------------------------------------------------------------------------------- the engines
LIBMPI = Variable(
    "MPINB_LIBMPI", "engines", "a path to libmpi", "set by mpinb's launchers",
    "The libmpi mpi4py loads, so that the MPI watch loads before mpi4py. Set it with a launcher of your own.")
MPI_WATCH = Variable(
    "MPINB_MPI_WATCH", "engines", "0", "on",
    "Turn the MPI watch off: deadlocks in mpi4py's own calls are then found by --timeout only.")
WITHDRAW = Variable(
    "MPINB_WITHDRAW", "engines", "0", "on",
    "Make receives block in MPI: a proven deadlock then restarts the engines instead of freeing them.")
TRACEBACK = Variable(
    "MPINB_TRACEBACK", "engines", "full", "short",
    "Keep every frame of a rank's traceback, JAX's and mpinb's included.")
CLUSTER_ID = Variable(
    "MPINB_CLUSTER_ID", "engines, the controller", "a cluster id", "set by mpinb",
    "The cluster a process belongs to (mpinb sets it; tests count a cluster's processes by it).")
STATUS_DIR = Variable(
    "MPINB_STATUS_DIR", "engines", "a folder", "set by mpinb's rank wrapper",
    "Where an engine writes its fault report, which its rank wrapper reads when it dies.")

# -------------------------------------------------------------------------------- the tutorials
NOTEBOOK_RANKS = Variable(
    "MPINB_NOTEBOOK_RANKS", "the tutorials", "a number", "4, or the number of cores if fewer",
    "How many ranks the tutorials start.")

# -------------------------------------------------------------------------------- the build
MPICC = Variable(
    "MPINB_MPICC", "the build (pip install, setup.py)", "a path to mpicc", "the mpich wheel's, else mpicc on PATH",
    "Build one variant, against the MPI of this mpicc.")
VARIANTS = Variable(
    "MPINB_VARIANTS", "the build (setup.py)", "NAME=MPICC ...", "one variant",
    "Build one variant per ABI, each against its own mpicc (how .ci/wheel builds the wheel).")
WHEEL_ABI = Variable(
    "MPINB_WHEEL_ABI", ".ci/wheel", "1", "off",
    "Add the MPI-5 standard ABI's variant (mpiabi) to the wheel.")

#: what a user may set or meet, in the order the documentation lists them
VARIABLES = (MPIABI, DEBUG, CHECKED, MALLOC_TUNING, HUGE_PAGES, OVERLAP, LIBMPI, MPI_WATCH, WITHDRAW, TRACEBACK,
             CLUSTER_ID, STATUS_DIR, NOTEBOOK_RANKS, MPICC, VARIANTS, WHEEL_ABI)

# -------------------------------------------------------------------------------- tests and CI
TEST_VARIABLES = (
    Variable("MPINB_REQUIRE_BROWSER", "the tests", "1", "off",
             "Fail, rather than skip, the browser tests when Chromium is missing (CI sets it)."),
    Variable("MPINB_REQUIRE_SLURM", "the tests", "1", "off",
             "Fail, rather than skip, the Slurm tests when Slurm is missing (CI sets it)."),
    Variable("MPINB_REQUIRE_NAMESPACES", "the tests", "1", "off",
             "Fail, rather than skip, the other-host tests when namespaces cannot be made (CI sets it)."),
    Variable("MPINB_TEST_OTHER_HOST", "the tests", "1", "off",
             "Run the tests' clusters under another host's stand-in (tests/test_other_host.py sets it)."),
    Variable("MPINB_TEST_SLURM", "the tests", "1", "off",
             "Run the tests' clusters as a Slurm job step (tests/test_slurm.py sets it)."),
    Variable("MPINB_TEST_RANKS", "the tests", "2,4", "2,4",
             "The world sizes tests/test_ranks.py runs the collective suite at."),
    Variable("MPINB_FRESH_CLUSTERS", "the tests", "a number", "4",
             "How many fresh clusters tests/test_output.py starts to look for lost output."),
    Variable("MPINB_RANKS_TIMEOUT", "the tests", "seconds", "1200",
             "How long the collective suite may run on its ranks before it counts as hung."),
    Variable("MPINB_DOCS_SITE", "the tests", "a folder", "docs/_build/html",
             "The built documentation site that tests/test_docs_site.py opens."),
    Variable("MPINB_CI_UV", ".ci/uv.sh", "a path to uv", "uv installed by .ci/run",
             "The uv that makes the side steps' virtual environments."),
)
