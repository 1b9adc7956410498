"""Fixtures of the collective-library suite.

Every test here runs at any world size and compares against ``size``: plain ``pytest`` runs it
on one process, and tests/test_ranks.py runs the same files under ``mpiexec -n 2`` and ``-n 4``.
64-bit types are switched on for these tests only (and switched back after each module), so
that int64/float64 survive and the rest of the suite sees JAX's default.
"""

import pytest
from mpi4py import MPI


@pytest.fixture(scope="module", autouse=True)
def _x64_for_the_suite(x64):
    """Every module here runs with 64-bit types (the ``x64`` fixture of tests/conftest.py)."""
    return


@pytest.fixture(scope="session")
def world():
    comm = MPI.COMM_WORLD
    return comm.Get_rank(), comm.Get_size()


@pytest.fixture(autouse=True)
def _in_step():
    """Keep ranks in lock-step between tests so that one failing test cannot make the next
    one match messages of the previous."""
    yield
    MPI.COMM_WORLD.Barrier()
