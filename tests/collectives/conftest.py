"""Fixtures of the collective-library suite.

Every test here runs at any world size and compares against ``size``: plain ``pytest`` runs it
on one process, and tests/test_ranks.py runs the same files under ``mpiexec -n 2`` and ``-n 4``.
"""

import numpy as np
import pytest
from mpi4py import MPI

import jax
import jax.numpy as jnp

jax.config.update("jax_enable_x64", True)

from mpinb import mpi  # noqa: E402  (after the x64 switch, so int64/float64 survive)

MODES = ("eager", "jit", "nojit")


def run(mode, f, *args):
    """Run f eagerly, under jax.jit, or under jax.disable_jit()."""
    if mode == "eager":
        return f(*args)
    if mode == "jit":
        return jax.jit(f)(*args)
    with jax.disable_jit():
        return f(*args)


def make(shape, dtype, rank, salt=0):
    """Deterministic data of ``rank``: every rank can build every other rank's input."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape, dtype=np.int64))
    base = (np.arange(n) + 7 * rank + 3 * salt) % 11
    if dtype == np.bool_:
        out = base % 3 == 0
    elif dtype.kind == "c":
        out = (base + 1j * ((base + rank) % 5)).astype(dtype)
    else:
        out = base.astype(dtype)
    return out.reshape(shape)


def assert_same(got, want):
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    if want.dtype == jnp.bfloat16:
        got, want = got.astype(np.float32), want.astype(np.float32)
    if want.dtype.kind in "fc":
        np.testing.assert_allclose(got.astype(np.complex128), want.astype(np.complex128), rtol=1e-3, atol=1e-3)
    else:
        np.testing.assert_array_equal(got, want)


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


__all__ = ["MODES", "run", "make", "assert_same", "mpi"]
