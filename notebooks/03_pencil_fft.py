# ---
# jupyter:
#   jupytext:
#     formats: mpinb/tutorials///ipynb,notebooks///py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # A pencil-decomposed 3-D FFT
#
# Distributed N-body and spectral codes split a 3-D grid over a 2-D grid of ranks
# (P1 × P2 "pencils"). A 3-D FFT is three rounds of 1-D FFTs along the locally complete axis,
# with a transpose (an `alltoall` inside a row or column sub-communicator) between rounds:
#
# x-pencils (Nx, Ny/P1, Nz/P2) → FFT x → transpose in row comm → y-pencils (Nx/P1, Ny, Nz/P2)
# → FFT y → transpose in column comm → z-pencils (Nx/P1, Ny/P2, Nz) → FFT z.

# %%
import os

# 4 ranks, or as many as this machine has cores if that is fewer (more ranks than cores are
# right but slow); MPINB_NOTEBOOK_RANKS=N chooses another number
n = int(os.environ.get("MPINB_NOTEBOOK_RANKS", min(4, os.cpu_count() or 1)))
# %load_ext mpinb
# %mpijax start -n $n

# %%
# %%mpijax --setup
import time
import jax
import jax.numpy as jnp
import numpy as np
from mpi4py import MPI
from mpinb import mpi

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
P1 = 2 if size % 2 == 0 else 1          # process grid P1 x P2
P2 = size // P1
r1, r2 = rank // P2, rank % P2
row = world.Split(color=r2, key=r1)      # the P1 ranks sharing a z-block
col = world.Split(color=P2 + r1, key=r2) # the P2 ranks sharing an x-block
N = (8 * P1 * P2, 4 * P1 * P2, 6 * P1 * P2)
print(f"rank {rank}: grid position ({r1}, {r2}) of {P1} x {P2}")

# %% [markdown]
# The transpose: split one axis into one piece per rank of the sub-communicator, exchange,
# and stack the received pieces along the other axis.

# %%
# %%mpijax --setup
def swap(a, comm, split_axis, concat_axis):
    p = comm.Get_size()
    pieces = jnp.stack(jnp.split(a, p, axis=split_axis))           # (p, ...): piece s -> rank s
    got = mpi.alltoall(pieces, comm=comm)                             # got[s] from rank s
    got = jnp.moveaxis(got, 0, concat_axis)                           # put the source index next to its axis
    shape = list(a.shape)
    shape[split_axis] //= p
    shape[concat_axis] *= p
    return got.reshape(shape)

@jax.jit
def fft3d(x_pencil):
    a = jnp.fft.fft(x_pencil, axis=0)                 # x complete
    a = swap(a, row, split_axis=0, concat_axis=1)     # -> y-pencil
    a = jnp.fft.fft(a, axis=1)
    a = swap(a, col, split_axis=1, concat_axis=2)     # -> z-pencil
    return jnp.fft.fft(a, axis=2)

rng = np.random.default_rng(0)
G = rng.standard_normal(N).astype(np.complex64)      # the same global grid on every rank
ny, nz = N[1] // P1, N[2] // P2
x_pencil = jnp.asarray(G[:, r1 * ny:(r1 + 1) * ny, r2 * nz:(r2 + 1) * nz])

# %% [markdown]
# Run it, time it, and check against `numpy.fft.fftn` of the gathered array on rank 0.

# %%
# %%mpijax --compare --show max_error
spectrum = fft3d(x_pencil).block_until_ready()
t0 = time.perf_counter()
for _ in range(10):
    fft3d(x_pencil).block_until_ready()
seconds = (time.perf_counter() - t0) / 10

gathered_in = mpi.gather(x_pencil, 0)                # (size, Nx, ny, nz) at rank 0
gathered_out = mpi.gather(spectrum, 0)               # (size, Nx/P1, Ny/P2, Nz) at rank 0
if rank == 0:
    full = np.zeros(N, np.complex64)
    for s in range(size):
        s1, s2 = s // P2, s % P2
        full[:, s1 * ny:(s1 + 1) * ny, s2 * nz:(s2 + 1) * nz] = gathered_in[s]
    reference = np.fft.fftn(full)
    mx, my = N[0] // P1, N[1] // P2
    max_error = max(
        float(np.abs(np.asarray(gathered_out[s]) - reference[(s // P2) * mx:(s // P2 + 1) * mx,
                                                             (s % P2) * my:(s % P2 + 1) * my]).max())
        for s in range(size))
    t0 = time.perf_counter()
    np.fft.fftn(full)
    print(f"distributed fft3d {seconds * 1e3:.2f} ms per call on {size} ranks; "
          f"numpy.fft.fftn on one rank {(time.perf_counter() - t0) * 1e3:.2f} ms; max error {max_error:.2e}")
else:
    max_error = None

# %% [markdown]
# ## What each rank holds
#
# One x-y slice of each rank's x-pencil (input) and the magnitude of its z-pencil of the
# spectrum, drawn per rank with `--images`.

# %%
# %%mpijax --images --show my_input_slice,my_spectrum_slice
my_input_slice = np.real(np.asarray(x_pencil[:, :, 0]))
my_spectrum_slice = np.abs(np.asarray(spectrum[:, :, 1]))

# %%
# %mpijax stop
