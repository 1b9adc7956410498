"""Property-based tests of the collectives' argument validation (one process: every generated
case either raises the documented error at trace time or runs correctly)."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mpi4py import MPI

from mpinb import mpi
from mpinb.mpi.validation import REDUCTION_DTYPES, SUPPORTED_DTYPES

SIZE = MPI.COMM_WORLD.Get_size()
RANK = MPI.COMM_WORLD.Get_rank()
OPS = sorted(REDUCTION_DTYPES)
DTYPES = sorted(d.name for d in SUPPORTED_DTYPES)
pytestmark = pytest.mark.usefixtures("x64")  # every dtype, int64 and float64 included
FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

shapes = st.lists(st.integers(0, 4), min_size=0, max_size=3).map(tuple)


@FAST
@given(shape=shapes)
def test_alltoall_leading_dimension(shape):
    x = jnp.zeros(shape, jnp.float32)
    if shape and shape[0] == SIZE:
        assert mpi.alltoall(x).shape == shape
    else:
        want = (r"alltoall input must have shape \(nproc, \.\.\.\): "
                rf"leading dimension .* is not the number of ranks {SIZE}")
        with pytest.raises(ValueError, match=want):
            jax.jit(mpi.alltoall)(x)


def _root_reference(op, x, root):
    """What ``op`` gives this rank when every rank passes ``x`` (NumPy)."""
    if op == "bcast":
        return x
    if op == "reduce":
        return x * SIZE if root == RANK else x
    if op == "gather":
        return np.stack([x] * SIZE) if root == RANK else x
    return x[RANK]  # scatter


@FAST
@given(root=st.integers(-5, 5), op=st.sampled_from(["bcast", "gather", "scatter", "reduce"]))
def test_roots(root, op):
    """A root is a rank of the communicator; MPI.PROC_NULL (no root on an intracommunicator)
    and every other value outside [0, size) are refused before MPI sees them."""
    x = np.arange(SIZE * 2, dtype=np.float32).reshape(SIZE, 2) + 1
    arg = x[0] if op == "scatter" and root != RANK else x
    call = {
        "bcast": lambda: mpi.bcast(arg, root),
        "gather": lambda: mpi.gather(arg, root),
        "scatter": lambda: mpi.scatter(arg, root),
        "reduce": lambda: mpi.reduce(arg, MPI.SUM, root),
    }[op]
    if 0 <= root < SIZE:
        np.testing.assert_array_equal(np.asarray(call()), _root_reference(op, x, root))
    else:
        with pytest.raises(ValueError, match=f"{op}: root {root} is out of range for a communicator of size {SIZE}"):
            call()


@FAST
@given(op=st.sampled_from(OPS), dtype=st.sampled_from(DTYPES))
def test_dtype_op_pairs(op, dtype):
    x = jnp.zeros((3,), dtype)
    assert x.dtype.name == dtype  # 64-bit types are on here, not silently narrowed
    if np.dtype(x.dtype) in REDUCTION_DTYPES[op]:
        out = mpi.allreduce(x, getattr(MPI, op))
        assert out.dtype == x.dtype and out.shape == (3,)
    else:
        with pytest.raises(TypeError, match=f"MPI.{op} does not support dtype"):
            mpi.allreduce(x, getattr(MPI, op))


@FAST
@given(value=st.one_of(st.text(max_size=3), st.none(), st.builds(object), st.just(b"x")))
def test_non_arrays_are_refused(value):
    with pytest.raises(TypeError, match="must be an array or scalar"):
        mpi.allgather(value)


@FAST
@given(counts=st.lists(st.integers(-2, 3), min_size=0, max_size=4))
def test_variable_counts(counts):
    rows = counts[0] if counts else 0
    x = jnp.zeros((max(rows, 0), 2))
    if len(counts) != SIZE:
        with pytest.raises(ValueError, match="allgatherv: counts has"):
            mpi.allgatherv(x, counts)
    elif any(c < 0 for c in counts):
        with pytest.raises(ValueError, match="allgatherv: counts must be non-negative"):
            mpi.allgatherv(x, counts)
    else:
        assert mpi.allgatherv(x, counts).shape == (sum(counts), 2)


@FAST
@given(tag=st.integers(-3, 10), dest=st.integers(-3, 3))
def test_tags_and_destinations(tag, dest):
    """Every (tag, dest) pair is refused with its reason or accepted: a send to PROC_NULL runs
    (and does nothing); a send to a real rank is traced with that dest and tag in its HLO."""
    x = jnp.zeros(2)
    if not (0 <= dest < SIZE or dest == MPI.PROC_NULL):
        with pytest.raises(ValueError, match=f"send: dest {dest} is out of range"):
            mpi.send(x, dest, tag=tag)
    elif tag < 0:
        with pytest.raises(ValueError, match=f"send: tag {tag} is not a valid MPI tag"):
            mpi.send(x, dest, tag=tag)
    elif dest == MPI.PROC_NULL:
        assert mpi.send(x, dest, tag=tag) is None
    else:
        # lowered, not run: a blocking send to a real rank needs a matching receive
        hlo = jax.jit(lambda v: mpi.send(v, dest, tag=tag)).lower(x).as_text()
        assert "mpinb_send" in hlo
        assert re.search(rf"\bdest = {dest} : i64", hlo) and re.search(rf"\btag = {tag} : i64", hlo), hlo
