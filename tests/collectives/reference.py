"""Shared helpers of the collective-library suite: run modes, deterministic data, comparison.

A plain module (not a conftest): test files import it by name, pytest adds this folder to the
import path.
"""

import jax
import jax.numpy as jnp
import numpy as np

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
