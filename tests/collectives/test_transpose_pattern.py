"""The seed bug's pattern: reshape -> transpose -> alltoall -> reshape -> transpose under jit.

mpi4jax issue 176: XLA handed the alltoall a buffer whose physical layout was not row-major, so
the jitted distributed transpose was wrong while eager mode was right. mpinb pins row-major
layouts on every operand and result; here the jitted result must equal NumPy's global
transpose exactly, and the compiled HLO must show the constraint.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from reference import assert_same

from mpinb import mpi


def distributed_transpose(block):
    """Row-distributed (N, M) matrix -> row-distributed transpose (M, N).

    block: this rank's rows, shape (N/size, M). Returns this rank's rows of A.T, (M/size, N).
    """
    size = mpi.default_comm().Get_size()
    n, cols = block.shape
    m = cols // size
    pieces = block.reshape(n, size, m).transpose(1, 0, 2)   # (size, n, m): piece s goes to rank s
    received = mpi.alltoall(pieces)                          # received[s] = rank s's rows, my columns
    return received.reshape(size * n, m).T                   # (m, N)


def global_matrix(N, M, dtype):
    a = np.arange(N * M).reshape(N, M) % 97
    if np.dtype(dtype).kind == "c":
        a = a + 1j * (a % 13)
    return a.astype(dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "int32"])
@pytest.mark.parametrize("per_rank", [(1, 1), (3, 2), (16, 8), (64, 64)])
def test_distributed_transpose_exact_under_jit(world, dtype, per_rank):
    rank, size = world
    N, M = per_rank[0] * size, per_rank[1] * size
    A = global_matrix(N, M, dtype)
    rows = N // size
    block = A[rank * rows:(rank + 1) * rows]
    want = A.T[rank * (M // size):(rank + 1) * (M // size)]
    jitted = jax.jit(distributed_transpose)(block)
    np.testing.assert_array_equal(np.asarray(jitted), want)
    np.testing.assert_array_equal(np.asarray(distributed_transpose(block)), want)


def test_round_trip_is_identity(world):
    rank, size = world
    block = global_matrix(4 * size, 6 * size, "float32")[rank * 4:(rank + 1) * 4]
    twice = jax.jit(lambda b: distributed_transpose(distributed_transpose(b)))(block)
    np.testing.assert_array_equal(np.asarray(twice), block)


def test_pencil_transpose_3d(world):
    """The f32[4,64,64]-style pencil swap of a 3-D FFT: split axis 1 among ranks, gather axis 0."""
    rank, size = world
    nz, ny, nx = 4 * size, 8 * size, 6
    G = global_matrix(nz, ny * nx, "float32").reshape(nz, ny, nx)
    local = G[rank * 4:(rank + 1) * 4]                           # z-slab (4, ny, nx)

    def swap(a):
        z, y, x = a.shape
        p = a.reshape(z, size, y // size, x).transpose(1, 0, 2, 3)   # (size, z, y/size, x)
        r = mpi.alltoall(p)                                          # (size, z, y/size, x)
        return r.reshape(size * z, y // size, x).transpose(1, 0, 2)  # y-slab (y/size, nz, x)

    want = G.transpose(1, 0, 2)[rank * 8:(rank + 1) * 8]
    assert_same(jax.jit(swap)(local), want)


def test_compiled_hlo_pins_row_major_layouts(world):
    _, size = world
    block = jnp.zeros((4, 8 * size), jnp.float32)
    text = jax.jit(distributed_transpose).lower(block).compile().as_text()
    call = [line for line in text.splitlines() if 'custom_call_target="mpinb_alltoall"' in line]
    assert len(call) == 1, text
    assert f"operand_layout_constraints={{f32[{size},4,8]{{2,1,0}}" in call[0], call[0]
    result_shape = call[0].split("=", 1)[1].split("custom-call")[0]
    assert f"f32[{size},4,8]{{2,1,0}}" in result_shape, call[0]
