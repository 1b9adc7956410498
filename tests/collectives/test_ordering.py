"""Program order, no dead-code elimination, no effects (the fast dispatch path stays on)."""

import jax
import jax.numpy as jnp
import numpy as np
from mpi4py import MPI
from reference import assert_same, make

from mpinb import mpi


def test_many_independent_collectives_in_one_jit(world):
    """Twelve collectives on independent, differently sized buffers (> 512 bytes each, so
    XLA:CPU may schedule them concurrently): every rank must run them in the same order."""
    rank, size = world
    shapes = [(37 + 13 * i,) for i in range(12)]
    xs = [make(s, np.float64, rank, salt=i) for i, s in enumerate(shapes)]

    def f(*arrays):
        outs = [mpi.allreduce(a * 2.0, MPI.SUM) for a in arrays[:6]]
        outs += [mpi.allgather(a + 1.0) for a in arrays[6:]]
        return outs

    got = jax.jit(f)(*xs)
    for i, s in enumerate(shapes):
        every = [make(s, np.float64, r, salt=i) for r in range(size)]
        want = np.sum(every, axis=0) * 2.0 if i < 6 else np.stack(every) + 1.0
        assert_same(got[i], want)


def test_nested_jit_and_loop_bodies(world):
    rank, size = world
    inner = jax.jit(lambda b: mpi.alltoall(b) * 2)

    def f(a, b):
        s = mpi.allreduce(a, MPI.SUM)
        t = inner(b)

        def body(i, c):
            return mpi.allreduce(c, MPI.SUM) / size

        u = jax.lax.fori_loop(0, 3, body, a)
        return s, t, u

    a = make((300,), np.float64, rank)
    b = make((size, 100), np.float64, rank, salt=2)
    s, t, u = jax.jit(f)(a, b)
    every_a = [make((300,), np.float64, r) for r in range(size)]
    assert_same(s, np.sum(every_a, axis=0))
    assert_same(t, 2 * np.stack([make((size, 100), np.float64, r, salt=2)[rank] for r in range(size)]))
    assert_same(u, np.mean(every_a, axis=0))


def test_unused_results_still_run(world):
    calls = mpi.counters()["calls"]
    f = jax.jit(lambda x: (mpi.allreduce(x, MPI.SUM), mpi.alltoall(jnp.zeros((world[1], 1))), x)[-1])
    f(jnp.ones(3))
    f(jnp.ones(3))
    assert mpi.counters()["calls"] == calls + 4


def test_no_jax_effects(world):
    _rank, size = world
    def f(x):
        mpi.send(x, MPI.PROC_NULL)
        mpi.barrier()
        return mpi.allreduce(mpi.alltoall(x), MPI.SUM)

    jaxpr = jax.make_jaxpr(f)(jnp.zeros((size, 2)))
    assert not jaxpr.effects
    names = [e.primitive.name for e in jaxpr.eqns]
    assert names == ["mpinb_send", "mpinb_barrier", "mpinb_alltoall", "mpinb_allreduce"]


def test_every_custom_call_is_ordered_and_side_effecting(world):
    _, size = world
    def f(x):
        a = mpi.allreduce(x, MPI.SUM)
        b = mpi.bcast(x, 0)
        mpi.barrier()
        return a, b

    text = jax.jit(f).lower(jnp.ones((size, 4))).as_text()
    calls = [line for line in text.splitlines() if "stablehlo.custom_call @mpinb_" in line]
    assert len(calls) == 3
    assert all("has_side_effect = true" in line for line in calls)
    # each call consumes the ordering buffer (second result) of the previous one
    first = calls[0].split("=")[0].strip().split(":")[0]
    assert f"{first}#1" in calls[1]
    second = calls[1].split("=")[0].strip().split(":")[0]
    assert f"{second}#1" in calls[2]
