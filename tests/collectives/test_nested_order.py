"""Program order of exchanges nested in other computations, with a program that differs by rank.

The pattern of every halo exchange: ranks are paired (0-1, 2-3, ...); the lower rank of a pair
sends its interior row and then receives its upper halo, the upper rank receives and then sends.
Two such exchanges (of ``a`` and of ``b``), each nested in a construct (a jit, a checkpoint, a
loop body, a branch, a custom-derivative function, a vmap), run in one jitted step. If the
ranks ran the two exchanges in different orders, the halos would be swapped (``a``'s data in
``b``'s halo) or both ranks would wait in ``recv``. Unpaired ranks talk to ``MPI.PROC_NULL``.
"""

import importlib.util

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from mpi4py import MPI

from mpinb import mpi


def _partner(rank, size):
    p = rank ^ 1
    return p if p < size else MPI.PROC_NULL


def _halo(arr, rank, peer):
    """(3, n) array: row 1 the interior, rows 0 and 2 the halos below and above."""
    if peer == MPI.PROC_NULL:
        return arr
    if rank < peer:
        mpi.send(arr[1], dest=peer)
        return arr.at[2].set(mpi.recv(arr[2], source=peer))
    arr = arr.at[0].set(mpi.recv(arr[0], source=peer))
    mpi.send(arr[1], dest=peer)
    return arr


def _custom_jvp(f):
    g = jax.custom_jvp(f)
    g.defjvp(lambda primals, tangents: (g(*primals), tangents[0]))
    return g


def _custom_vjp(f):
    g = jax.custom_vjp(f)
    g.defvjp(lambda x: (g(x), None), lambda _, ct: (ct,))
    return g


def _shard_map(f):
    """``shard_map`` over a mesh of this process's first device: the body runs once per process,
    as on a ``--jax-distributed`` cluster with one device per process."""
    from jax.sharding import Mesh, PartitionSpec

    shard_map, unchecked = getattr(jax, "shard_map", None), {}
    if shard_map is None:  # before JAX 0.7, which wants a replication rule for every primitive
        from jax.experimental.shard_map import shard_map
        unchecked = {"check_rep": False}
    # (out_specs P("x"): mpinb's results vary over the mesh's axis, even of a replicated operand)
    return shard_map(f, mesh=Mesh(jax.devices()[:1], ("x",)), in_specs=PartitionSpec("x"),
                     out_specs=PartitionSpec("x"), **unchecked)


def _custom_linear_solve(f):
    """``lax.custom_linear_solve`` (behind ``cg``, ``gmres``, ``bicgstab``): f as its solve."""
    return lambda x: lax.custom_linear_solve(lambda v: v, x, solve=lambda _, b: f(b))


def _custom_vmap(f):
    from jax.custom_batching import custom_vmap

    g = custom_vmap(f)
    g.def_vmap(lambda axis_size, in_batched, x: (jax.vmap(f)(x), in_batched[0]))
    return g


def _linear_call(f):
    from jax.custom_derivatives import linear_call

    return lambda x: linear_call(lambda _, v: f(v), lambda _, v: v, (), x)


def _checkify(f):
    from jax.experimental import checkify

    return lambda x: checkify.checkify(f)(x)[1]


def _custom_vjp_optimize_remat(f):
    """A custom_vjp whose forward pass is staged on its own (``remat_opt`` on JAX 0.10)."""
    g = jax.custom_vjp(f)
    g.defvjp(lambda x: (f(x), None), lambda _, ct: (ct,), optimize_remat=True)
    return lambda x: jax.grad(lambda v: jnp.sum(g(v)), allow_int=True)(x) * 0 + g(x)


def _pallas_interpret(f):
    """A Pallas kernel in interpret mode (the one Pallas runs on CPU), f on its block."""
    from jax.experimental import pallas as pl

    def kernel(x_ref, o_ref):
        o_ref[...] = f(x_ref[...])
    return lambda x: pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=True)(x)


def _custom_transpose(f):
    """``jax.custom_transpose`` (a public module up to JAX 0.5): f as the function."""
    from jax.custom_transpose import custom_transpose

    @custom_transpose
    def t(_, x):
        return f(x)

    t.def_transpose(lambda _, ct: ct)
    return lambda x: t(jax.ShapeDtypeStruct(x.shape, x.dtype), (), x)


WRAPPERS = {
    "jit": jax.jit,
    "checkpoint": jax.checkpoint,
    "fori_loop": lambda f: lambda x: lax.fori_loop(0, 1, lambda i, c: f(c), x),
    "scan": lambda f: lambda x: lax.scan(lambda c, _: (f(c), None), x, None, length=1)[0],
    "while_loop": lambda f: lambda x: lax.while_loop(lambda c: c[0] < 1, lambda c: (c[0] + 1, f(c[1])), (0, x))[1],
    "cond": lambda f: lambda x: lax.cond(x[1, 0] > -1e9, f, f, x),
    "switch": lambda f: lambda x: lax.switch((x[1, 0] > -1e9).astype(jnp.int32), [f, f], x),
    "custom_jvp": _custom_jvp,
    "custom_vjp": _custom_vjp,
    "vmap": lambda f: lambda x: jax.vmap(f)(jnp.stack([x, x + 0.0]))[1],
    "shard_map": _shard_map,
    "checkpoint(policy)": lambda f: jax.checkpoint(f, policy=jax.checkpoint_policies.dots_saveable),
    "lax.map": lambda f: lambda x: lax.map(f, x[None])[0],
    "custom_linear_solve": _custom_linear_solve,
    "custom_vmap": _custom_vmap,
    "linear_call": _linear_call,
    "checkify": _checkify,
    "custom_vjp(optimize_remat)": _custom_vjp_optimize_remat,
    "scan(unroll=2)": lambda f: lambda x: lax.scan(lambda c, _: (f(c), None), x, None, length=2, unroll=2)[0],
    "pallas_call(interpret)": _pallas_interpret,
    "pmap": lambda f: lambda x: jax.pmap(f)(x[None])[0],
    "jit(cond(fori_loop))": lambda f: jax.jit(WRAPPERS["cond"](WRAPPERS["fori_loop"](f))),
    "shard_map(cond)": lambda f: _shard_map(WRAPPERS["cond"](f)),
}
if importlib.util.find_spec("jax.custom_transpose") is not None:
    WRAPPERS["custom_transpose"] = _custom_transpose


def _expected(rank, peer, a0, b0):
    """The halo rows each exchange should have received: the partner's interiors."""
    if peer == MPI.PROC_NULL:
        return None
    return (a0 + 10 * peer, 2 * (b0 + 10 * peer) + 1)


def _inputs(rank):
    return jnp.full((3, 2), 1.0 + 10 * rank), jnp.full((3, 2), 2.0 + 10 * rank)


@pytest.mark.parametrize("construct", list(WRAPPERS))
def test_two_nested_exchanges_keep_program_order(world, construct):
    rank, size = world
    peer = _partner(rank, size)
    nested = WRAPPERS[construct](lambda arr: _halo(arr, rank, peer))
    step = jax.jit(lambda a, b: (nested(a), nested(b * 2 + 1)))
    ha, hb = step(*_inputs(rank))
    want = _expected(rank, peer, 1.0, 2.0)
    if want is None:
        np.testing.assert_array_equal(ha, _inputs(rank)[0])
        return
    row = 2 if rank < peer else 0
    assert (float(ha[row, 0]), float(hb[row, 0])) == want


@pytest.mark.parametrize("construct", list(WRAPPERS))
def test_one_way_exchanges_in_opposite_directions(world, construct):
    """P sends lower -> upper, Q sends upper -> lower; each nested on its own. Run as P then Q,
    a rank that ran Q first would wait in recv for a message its partner sends only after its
    own recv: both ranks would hang."""
    rank, size = world
    peer = _partner(rank, size)
    wrap = WRAPPERS[construct]

    def one_way(sender_is_lower):
        def f(x):
            if peer == MPI.PROC_NULL:
                return x
            if (rank < peer) == sender_is_lower:
                mpi.send(x[1], dest=peer)
                return x
            return x.at[0].set(mpi.recv(x[0], source=peer))
        return wrap(f)

    p, q = one_way(True), one_way(False)
    a, b = _inputs(rank)
    pa, qb = jax.jit(lambda a, b: (p(a), q(b)))(a, b)
    if peer == MPI.PROC_NULL:
        return
    got = float(pa[0, 0]) if rank > peer else float(qb[0, 0])
    assert got == (1.0 + 10 * peer if rank > peer else 2.0 + 10 * peer)


def test_collective_in_a_while_condition_and_exchanges_beside_it(world):
    """A while loop whose condition calls allreduce, beside a halo exchange and a collective:
    the loop's collectives keep their place in the program's order."""
    rank, size = world
    peer = _partner(rank, size)

    def step(a, b):
        h = _halo(a, rank, peer)
        n = lax.while_loop(lambda c: mpi.allreduce(c, op=MPI.SUM) < 3 * size, lambda c: c + 1, jnp.int32(0))
        g = _halo(b, rank, peer)
        return h, n, mpi.allreduce(g[1], op=MPI.SUM)

    a, b = _inputs(rank)
    h, n, total = jax.jit(step)(a, b)
    assert int(n) == 3
    np.testing.assert_allclose(total, np.full(2, sum(2.0 + 10 * r for r in range(size))))
    if peer != MPI.PROC_NULL:
        row = 2 if rank < peer else 0
        assert float(h[row, 0]) == 1.0 + 10 * peer


def test_collectives_and_exchanges_interleave_in_program_order(world):
    """An allreduce in one branch, an exchange in a loop, an alltoall in a nested jit: program
    order on every rank, also where the ranks' programs differ."""
    rank, size = world
    peer = _partner(rank, size)

    @jax.jit
    def step(a, x):
        s = lax.cond(a[1, 0] > -1e9, lambda v: mpi.allreduce(v, op=MPI.SUM), lambda v: v, a[1])
        h = lax.fori_loop(0, 2, lambda i, c: _halo(c, rank, peer), a)
        t = jax.jit(mpi.alltoall)(x)
        return s, h, t

    a, _ = _inputs(rank)
    x = jnp.arange(size * 2.0).reshape(size, 2) + 100 * rank
    s, h, t = step(a, x)
    np.testing.assert_allclose(s, np.full(2, sum(1.0 + 10 * r for r in range(size))))
    np.testing.assert_allclose(t, np.stack([np.arange(size * 2.0).reshape(size, 2)[rank] + 100 * r
                                            for r in range(size)]))
    if peer != MPI.PROC_NULL:
        row = 2 if rank < peer else 0
        assert float(h[row, 0]) == 1.0 + 10 * peer


def test_jaxpr_still_has_no_effects(world):
    """The threading happens when lowering: jaxprs carry no effect (fast dispatch stays on)."""
    rank, size = world
    nested = WRAPPERS["jit(cond(fori_loop))"](lambda arr: _halo(arr, rank, _partner(rank, size)))
    assert not jax.make_jaxpr(nested)(jnp.zeros((3, 2))).effects


def test_pmap_over_one_device_runs_the_collective_once_per_process(world):
    """``pmap`` (its own construct in older JAX, a ``shard_map`` in JAX 0.10) over this
    process's one device: the chain goes through and the collective runs once per process."""
    rank, size = world
    f = jax.pmap(lambda a: mpi.allreduce(a, op=MPI.SUM))
    np.testing.assert_allclose(f(jnp.arange(4.0)[None] + rank), (np.arange(4.0) * size + sum(range(size)))[None])
