"""Real programs of the shapes people run, each against the same computation on ONE process.

The reference never uses mpinb: it computes the whole global domain with NumPy (or, for the
derivatives, single-process JAX) on every rank, and each rank checks its own part.

1. A 2-D stencil (heat, and upwind advection with diffusion) on a field split into row blocks,
   one per rank, with one halo row above and one below. Halos are exchanged by send/recv pairs
   in a deadlock-free order (even ranks send first, odd ranks receive first) or by sendrecv;
   periodic (neighbours wrap around; at one rank the neighbour is the rank itself) or with
   fixed boundary rows (edge ranks talk to ``MPI.PROC_NULL``). The exchange is a jitted helper
   called from a jitted step, as real codes write it, and the steps run in a Python loop of the
   jitted step or inside a jitted ``lax.fori_loop``; one program advances two coupled fields,
   each with its own exchange, in one step.
2. Slab- and pencil-decomposed FFTs: local FFTs along the undistributed axes, a distributed
   transpose by reshape -> transpose -> alltoall, the FFT along the remaining axis; compared with
   ``numpy.fft.fftn`` of the global array, and the inverse gives the input back.
3. A differentiated solver: explicit steps of 1-D viscous Burgers with a periodic halo exchange
   by sendrecv, and the loss ``allreduce(SUM)`` of per-rank sums of squares. ``jvp``, ``vjp``
   and ``grad`` equal those of the global function on one process, block by block.

Global sizes are divisible by 4, so every program runs at world size 1, 2 and 4.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from mpi4py import MPI

from mpinb import mpi

STEPS = 5
TIGHT = {"rtol": 1e-12, "atol": 1e-12}

# ---------------------------------------------------------------------------------------------
# 1. 2-D stencils on row blocks with halo rows

NY, NX = 16, 12           # global field; rows are distributed
TOP, BOTTOM = 1.0, -0.5   # fixed boundary rows of the non-periodic domain (above row 0, below row NY-1)
ALPHA = 0.2               # diffusion number (stable below 0.25)
CY, CX = 0.3, 0.25        # Courant numbers of the upwind advection (velocity +y and +x)


def initial_field(salt=0):
    y, x = np.meshgrid(np.arange(NY), np.arange(NX), indexing="ij")
    return np.sin(0.7 * y + 0.3 * salt) * np.cos(0.5 * x) + 0.01 * ((3 * y + 5 * x + salt) % 7)


def heat_local(p):
    """One explicit heat step of the interior of ``p`` (halo rows 0 and -1; x periodic)."""
    c = p[1:-1]
    return c + ALPHA * (p[:-2] + p[2:] + jnp.roll(c, 1, axis=1) + jnp.roll(c, -1, axis=1) - 4 * c)


def advection_local(p):
    """Upwind advection along +y and +x with a little diffusion, on the interior of ``p``."""
    c = p[1:-1]
    lap = p[:-2] + p[2:] + jnp.roll(c, 1, axis=1) + jnp.roll(c, -1, axis=1) - 4 * c
    return c - CY * (c - p[:-2]) - CX * (c - jnp.roll(c, 1, axis=1)) + 0.05 * lap


STENCILS = {"heat": heat_local, "advection": advection_local}


def reference_step(kind, u, periodic):
    """The same step on the whole (NY, NX) field, written independently in NumPy."""
    if periodic:
        above, below = np.roll(u, 1, axis=0), np.roll(u, -1, axis=0)
    else:
        above = np.concatenate([np.full((1, NX), TOP), u[:-1]])
        below = np.concatenate([u[1:], np.full((1, NX), BOTTOM)])
    left, right = np.roll(u, 1, axis=1), np.roll(u, -1, axis=1)
    lap = above + below + left + right - 4 * u
    if kind == "heat":
        return u + ALPHA * lap
    return u - CY * (u - above) - CX * (u - left) + 0.05 * lap


def neighbours(rank, size, periodic):
    """(up, down): the ranks holding the rows just above and just below this rank's block."""
    up = (rank - 1) % size if periodic or rank > 0 else MPI.PROC_NULL
    down = (rank + 1) % size if periodic or rank < size - 1 else MPI.PROC_NULL
    return up, down


def exchange_send_recv(block, rank, up, down, tag=0):
    """Halo rows by blocking send/recv: even ranks send first, odd ranks receive first, so that
    every send meets a posted receive (no reliance on MPI buffering). Returns (top, bottom).
    A rank that is its own neighbour (one periodic rank) copies: a blocking send to oneself
    before the receive is posted waits forever (MPICH does, as the standard allows)."""
    first, last = block[0], block[-1]
    if up == down == rank:
        return last, first
    if rank % 2 == 0:
        mpi.send(last, dest=down, tag=tag + 1)                 # data moving down
        top = mpi.recv(last, source=up, tag=tag + 1)
        mpi.send(first, dest=up, tag=tag + 2)                  # data moving up
        bottom = mpi.recv(first, source=down, tag=tag + 2)
    else:
        top = mpi.recv(last, source=up, tag=tag + 1)
        mpi.send(last, dest=down, tag=tag + 1)
        bottom = mpi.recv(first, source=down, tag=tag + 2)
        mpi.send(first, dest=up, tag=tag + 2)
    return top, bottom


def exchange_sendrecv(block, rank, up, down, tag=0):
    del rank
    first, last = block[0], block[-1]
    top = mpi.sendrecv(last, jnp.zeros_like(last), source=up, dest=down, sendtag=tag + 1, recvtag=tag + 1)
    bottom = mpi.sendrecv(first, jnp.zeros_like(first), source=down, dest=up, sendtag=tag + 2, recvtag=tag + 2)
    return top, bottom


EXCHANGES = {"send_recv": exchange_send_recv, "sendrecv": exchange_sendrecv}


def make_halo(exchange, rank, size, periodic, tag=0):
    """A jitted helper: this rank's (n, NX) block -> (n + 2, NX) with halo rows filled. Edge ranks
    of a non-periodic domain talk to PROC_NULL (receiving nothing) and use the boundary rows."""
    up, down = neighbours(rank, size, periodic)
    swap = EXCHANGES[exchange]

    @jax.jit
    def halo(block):
        top, bottom = swap(block, rank, up, down, tag)
        if up == MPI.PROC_NULL:
            top = jnp.full_like(top, TOP)
        if down == MPI.PROC_NULL:
            bottom = jnp.full_like(bottom, BOTTOM)
        return jnp.concatenate([top[None], block, bottom[None]])

    return halo


def my_rows(a, rank, size):
    n = a.shape[0] // size
    return a[rank * n:(rank + 1) * n]


def run_steps(step, u, loop):
    """STEPS applications of the jitted ``step``: a Python loop, or a jitted lax.fori_loop."""
    if loop == "python":
        for _ in range(STEPS):
            u = step(u)
        return u
    return jax.jit(lambda v: lax.fori_loop(0, STEPS, lambda i, w: step(w), v))(u)


@pytest.mark.parametrize("loop", ["python", "fori_loop"])
@pytest.mark.parametrize("periodic", [True, False], ids=["periodic", "fixed"])
@pytest.mark.parametrize("exchange", list(EXCHANGES))
@pytest.mark.parametrize("kind", list(STENCILS))
def test_stencil_on_row_blocks(world, kind, exchange, periodic, loop):
    rank, size = world
    halo = make_halo(exchange, rank, size, periodic)
    stencil = STENCILS[kind]
    step = jax.jit(lambda b: stencil(halo(b)))

    u0 = initial_field()
    got = run_steps(step, jnp.asarray(my_rows(u0, rank, size)), loop)

    want = u0
    for _ in range(STEPS):
        want = reference_step(kind, want, periodic)
    np.testing.assert_allclose(np.asarray(got), my_rows(want, rank, size), **TIGHT)
    # The gathered field: every rank checks every block.
    whole = jax.jit(mpi.allgather)(got).reshape(NY, NX)
    np.testing.assert_allclose(np.asarray(whole), want, **TIGHT)


@pytest.mark.parametrize("loop", ["python", "fori_loop"])
@pytest.mark.parametrize("periodic", [True, False], ids=["periodic", "fixed"])
@pytest.mark.parametrize("exchange", list(EXCHANGES))
def test_two_coupled_fields_each_with_its_own_exchange(world, exchange, periodic, loop):
    """Heat in ``u``, advection in ``v``, coupled by a linear exchange term: two jitted halo
    helpers in one jitted step, with the same tags (as most codes leave them), the way a
    multi-field code is written. If the ranks ran the exchanges of the two fields in different
    orders, halos would be swapped between the fields (the messages match by source and tag
    only) or the ranks would wait for each other forever."""
    rank, size = world
    halo_u = make_halo(exchange, rank, size, periodic)
    halo_v = make_halo(exchange, rank, size, periodic)
    k = 0.1

    @jax.jit
    def step(state):
        u, v = state
        nu, nv = heat_local(halo_u(u)), advection_local(halo_v(v))
        return nu + k * (v - u), nv + k * (u - v)

    u0, v0 = initial_field(0), 2.0 + initial_field(3)
    state = (jnp.asarray(my_rows(u0, rank, size)), jnp.asarray(my_rows(v0, rank, size)))
    got_u, got_v = run_steps(step, state, loop)

    want_u, want_v = u0, v0
    for _ in range(STEPS):
        nu, nv = reference_step("heat", want_u, periodic), reference_step("advection", want_v, periodic)
        want_u, want_v = nu + k * (want_v - want_u), nv + k * (want_u - want_v)
    np.testing.assert_allclose(np.asarray(got_u), my_rows(want_u, rank, size), **TIGHT)
    np.testing.assert_allclose(np.asarray(got_v), my_rows(want_v, rank, size), **TIGHT)


# ---------------------------------------------------------------------------------------------
# 2. Distributed FFTs


def global_complex(shape, salt=0):
    n = int(np.prod(shape))
    i = np.arange(n, dtype=np.float64)
    return (np.sin(0.37 * i + salt) + 1j * np.cos(0.11 * i * i + 2 * salt)).reshape(shape)


def swap_rows_for_cols(x, comm=None):
    """Distributed transpose of the two leading axes: this rank's rows of X (n, M, ...) ->
    this rank's block of M/P "columns" with every row, (N, M/P, ...), P the ranks of ``comm``.
    reshape -> transpose -> alltoall -> reshape, the pattern of mpi4jax issue 176."""
    p = (comm or mpi.default_comm()).Get_size()
    n, m, rest = x.shape[0], x.shape[1], x.shape[2:]
    pieces = x.reshape(n, p, m // p, *rest).swapaxes(0, 1)     # piece s: my rows, s's columns
    got = mpi.alltoall(pieces, comm=comm)                      # got[s]: s's rows, my columns
    return got.reshape(p * n, m // p, *rest)


def swap_cols_for_rows(x, comm=None):
    """The inverse of ``swap_rows_for_cols``: (N, M/P, ...) -> (N/P, M, ...)."""
    p = (comm or mpi.default_comm()).Get_size()
    big_n, m, rest = x.shape[0], x.shape[1], x.shape[2:]
    pieces = x.reshape(p, big_n // p, m, *rest)                # piece s: s's rows, my columns
    got = mpi.alltoall(pieces, comm=comm)                      # got[s]: my rows, s's columns
    return got.swapaxes(0, 1).reshape(big_n // p, p * m, *rest)


def _slab_2d(block, transform):
    """``transform`` along the local axis, the distributed transpose (reshape -> transpose ->
    alltoall), ``transform`` along the other axis."""
    b = transform(block, axis=1)
    p = mpi.default_comm().Get_size()
    n, m = b.shape
    t = mpi.alltoall(b.reshape(n, p, m // p).transpose(1, 0, 2)).reshape(p * n, m // p).T
    return transform(t, axis=1)


def fft2_slab(block):
    """Rows (N0/P, N1) of A -> rows (N1/P, N0) of fft2(A).T."""
    return _slab_2d(block, jnp.fft.fft)


def ifft2_slab(block):
    """The inverse of ``fft2_slab``: rows (N1/P, N0) of fft2(A).T -> rows (N0/P, N1) of A."""
    return _slab_2d(block, jnp.fft.ifft)


def test_fft2_slab(world):
    rank, size = world
    a = global_complex((16, 12))
    f, fi = jax.jit(fft2_slab), jax.jit(ifft2_slab)
    block = jnp.asarray(my_rows(a, rank, size))
    spec = f(block)
    np.testing.assert_allclose(np.asarray(spec), my_rows(np.fft.fft2(a).T, rank, size), rtol=1e-12, atol=1e-11)
    np.testing.assert_allclose(np.asarray(fi(spec)), np.asarray(block), **TIGHT)


def fft3_slab(block):
    """Slab (N0/P, N1, N2) of A -> slab (N0, N1/P, N2) of fftn(A)."""
    b = jnp.fft.fftn(block, axes=(1, 2))
    return jnp.fft.fft(swap_rows_for_cols(b), axis=0)


def ifft3_slab(slab):
    b = jnp.fft.ifft(slab, axis=0)
    return jnp.fft.ifftn(swap_cols_for_rows(b), axes=(1, 2))


def test_fft3_slab_round_trip_under_jit(world):
    rank, size = world
    a = global_complex((8, 12, 6), salt=1)
    block = jnp.asarray(my_rows(a, rank, size))
    spec = jax.jit(fft3_slab)(block)
    m = 12 // size
    np.testing.assert_allclose(np.asarray(spec), np.fft.fftn(a)[:, rank * m:(rank + 1) * m], rtol=1e-12, atol=1e-11)
    back = jax.jit(lambda b: ifft3_slab(fft3_slab(b)))(block)
    np.testing.assert_allclose(np.asarray(back), np.asarray(block), **TIGHT)


def test_real_field_fft3_slab_in_a_jitted_loop(world):
    """A real field FFT'd and back several times in one jitted fori_loop (spectral filter with
    a factor of 1 on every mode): the alltoalls of every iteration run in program order."""
    rank, size = world
    a = global_complex((8, 12, 6), salt=2).real
    block = jnp.asarray(my_rows(a, rank, size))
    back = jax.jit(lambda b: lax.fori_loop(0, 3, lambda i, x: ifft3_slab(fft3_slab(x)).real, b))(block)
    np.testing.assert_allclose(np.asarray(back), np.asarray(block), **TIGHT)


@pytest.fixture(scope="module")
def pencil_grid(world):
    """A P0 x P1 process grid (2 x 2 at 4 ranks, 2 x 1 at 2, 1 x 1 at 1) and its two
    sub-communicators: ``c1`` joins the ranks of one grid row, ``c0`` those of one grid column."""
    rank, size = world
    p0 = 2 if size % 2 == 0 else 1
    p1 = size // p0
    r0, r1 = divmod(rank, p1)
    c1 = MPI.COMM_WORLD.Split(color=r0, key=r1)
    c0 = MPI.COMM_WORLD.Split(color=r1, key=r0)
    yield (p0, p1, r0, r1, c0, c1)
    MPI.COMM_WORLD.Barrier()
    c0.Free()
    c1.Free()


def fft3_pencil(x, c0, c1):
    """Pencil (N0/P0, N1/P1, N2) of A, rank (r0, r1) -> pencil (N0, N1/P0, N2/P1) of fftn(A)."""
    x = jnp.fft.fft(x, axis=2)
    x = swap_rows_for_cols(x.transpose(1, 2, 0), comm=c1).transpose(2, 0, 1)   # (N0/P0, N1, N2/P1)
    x = jnp.fft.fft(x, axis=1)
    x = swap_rows_for_cols(x, comm=c0)                                 # (N0, N1/P0, N2/P1)
    return jnp.fft.fft(x, axis=0)


def ifft3_pencil(x, c0, c1):
    x = jnp.fft.ifft(x, axis=0)
    x = swap_cols_for_rows(x, comm=c0)
    x = jnp.fft.ifft(x, axis=1)
    x = swap_cols_for_rows(x.transpose(1, 2, 0), comm=c1).transpose(2, 0, 1)   # (N0/P0, N1/P1, N2)
    return jnp.fft.ifft(x, axis=2)


def test_fft3_pencil_on_a_process_grid(pencil_grid):
    p0, p1, r0, r1, c0, c1 = pencil_grid
    n0, n1, n2 = 8, 8, 4
    a = global_complex((n0, n1, n2), salt=3)
    block = jnp.asarray(a[r0 * (n0 // p0):(r0 + 1) * (n0 // p0), r1 * (n1 // p1):(r1 + 1) * (n1 // p1)])
    spec = jax.jit(lambda b: fft3_pencil(b, c0, c1))(block)
    j1, k2 = n1 // p0, n2 // p1
    want = np.fft.fftn(a)[:, r0 * j1:(r0 + 1) * j1, r1 * k2:(r1 + 1) * k2]
    np.testing.assert_allclose(np.asarray(spec), want, rtol=1e-12, atol=1e-11)
    back = jax.jit(lambda s: ifft3_pencil(s, c0, c1))(spec)
    np.testing.assert_allclose(np.asarray(back), np.asarray(block), **TIGHT)


# ---------------------------------------------------------------------------------------------
# 3. A differentiated solver: 1-D viscous Burgers, periodic, halo exchange by sendrecv

N1D = 16
DT, DX, NU = 0.02, 0.25, 0.05
STEPS_1D = 3


def burgers_interior(c, left, right):
    """One explicit step: central advection of u u_x and diffusion; left/right the neighbours."""
    return c - DT * c * (right - left) / (2 * DX) + NU * DT * (right - 2 * c + left) / DX**2


def global_burgers(u):
    """The single-process program on the whole periodic domain (no mpinb)."""
    for _ in range(STEPS_1D):
        u = burgers_interior(u, jnp.roll(u, 1), jnp.roll(u, -1))
    return u


def global_loss(u):
    return jnp.sum(global_burgers(u) ** 2)


def local_program(rank, size, loop):
    """(final state, loss) of this rank's block, the exchange a jitted helper."""
    left, right = (rank - 1) % size, (rank + 1) % size

    @jax.jit
    def halo(u):
        from_left = mpi.sendrecv(u[-1:], jnp.zeros((1,), u.dtype), source=left, dest=right, sendtag=1, recvtag=1)
        from_right = mpi.sendrecv(u[:1], jnp.zeros((1,), u.dtype), source=right, dest=left, sendtag=2, recvtag=2)
        return jnp.concatenate([from_left, u, from_right])

    def step(u):
        p = halo(u)
        return burgers_interior(u, p[:-2], p[2:])

    def final(u):
        if loop == "python":
            for _ in range(STEPS_1D):
                u = step(u)
            return u
        return lax.fori_loop(0, STEPS_1D, lambda i, w: step(w), u)

    def loss(u):
        return mpi.allreduce(jnp.sum(final(u) ** 2), op=MPI.SUM)

    return final, loss


def burgers_data():
    x = np.arange(N1D) * DX
    u0 = 1.0 + 0.5 * np.sin(2 * np.pi * x / (N1D * DX)) + 0.1 * np.cos(6 * np.pi * x / (N1D * DX))
    tangent = np.cos(0.9 * np.arange(N1D)) + 0.2
    cotangent = np.sin(0.4 * np.arange(N1D) + 1.0)
    return u0, tangent, cotangent


@functools.cache
def global_derivatives():
    """The single-process program's values, jvp, vjp and gradient (computed once)."""
    @jax.jit
    def everything(u0, t, ct):
        state, dstate = jax.jvp(global_burgers, (u0,), (t,))
        val, dval = jax.jvp(global_loss, (u0,), (t,))
        back = jax.vjp(global_burgers, u0)[1](ct)[0]
        return state, dstate, val, dval, back, jax.grad(global_loss)(u0)

    state, dstate, val, dval, back, grad = everything(*(jnp.asarray(a) for a in burgers_data()))
    named = {"state": state, "dstate": dstate, "val": val, "dval": dval, "back": back, "grad": grad}
    return {k: np.asarray(v) for k, v in named.items()}


# (jit, loop): the whole derivative under jax.jit or not; the steps a Python loop or a fori_loop.
# (Eager with a Python loop only adds dispatches of the same programs.)
AD_MODES = [("jit", "python"), ("jit", "fori_loop"), ("eager", "fori_loop")]


@pytest.mark.parametrize(("how", "loop"), AD_MODES)
def test_burgers_forward_mode_matches_the_global_program(world, how, loop):
    """jvp: the state's tangent block by block, the loss's tangent replicated."""
    rank, size = world
    final, loss = local_program(rank, size, loop)
    wrap = jax.jit if how == "jit" else (lambda f: f)
    u0, t, _ = (jnp.asarray(my_rows(a, rank, size)) for a in burgers_data())
    want = global_derivatives()

    both = lambda u: (final(u), loss(u))  # noqa: E731
    (state, val), (dstate, dval) = wrap(lambda u, v: jax.jvp(both, (u,), (v,)))(u0, t)
    np.testing.assert_allclose(np.asarray(state), my_rows(want["state"], rank, size), **TIGHT)
    np.testing.assert_allclose(np.asarray(dstate), my_rows(want["dstate"], rank, size), **TIGHT)
    np.testing.assert_allclose(float(val), float(want["val"]), rtol=1e-12)
    np.testing.assert_allclose(float(dval), float(want["dval"]), rtol=1e-11)


@pytest.mark.parametrize(("how", "loop"), AD_MODES)
def test_burgers_reverse_mode_matches_the_global_program(world, how, loop):
    """vjp of the state with a per-block cotangent, and the gradient of the replicated loss:
    each rank gets its block of the global vjp / gradient (allreduce's transpose: identity)."""
    rank, size = world
    final, loss = local_program(rank, size, loop)
    u0, _, ct = (jnp.asarray(my_rows(a, rank, size)) for a in burgers_data())
    want = global_derivatives()

    if how == "jit":   # one program: the forward pass once, two pullbacks (the second is the gradient)
        def pullbacks(u, c):
            (state, val), pull = jax.vjp(lambda v: (final(v), loss(v)), u)
            return val, pull((c, jnp.zeros_like(val)))[0], pull((jnp.zeros_like(state), jnp.ones_like(val)))[0]

        val, back, grad = jax.jit(pullbacks)(u0, ct)
    else:              # as a user writes it eagerly
        back = jax.vjp(final, u0)[1](ct)[0]
        val, grad = jax.value_and_grad(loss)(u0)
    np.testing.assert_allclose(float(val), float(want["val"]), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(back), my_rows(want["back"], rank, size), **TIGHT)
    np.testing.assert_allclose(np.asarray(grad), my_rows(want["grad"], rank, size), rtol=1e-11, atol=1e-12)
