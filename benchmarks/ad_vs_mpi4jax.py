"""mpinb's autodiff of allreduce(SUM) side by side with mpi4jax's, on real ranks.

    mpiexec -n 4 python benchmarks/ad_vs_mpi4jax.py     (needs mpi4jax installed beside mpinb)

For eager and jitted calls: linear_transpose, grad, vjp, jvp of allreduce(SUM), a chained
allreduce, and a column-split least-squares gradient. Prints one line per check with both
results' max difference; exits 1 on any difference.
"""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import numpy as np
from mpi4py import MPI

jax.config.update("jax_enable_x64", True)

import mpi4jax  # noqa: E402

from mpinb import mpi  # noqa: E402

rank, size = MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size()


def theirs(x):
    out = mpi4jax.allreduce(x, op=MPI.SUM)
    return out[0] if isinstance(out, tuple) else out  # older mpi4jax returned (value, token)


def ours(x):
    return mpi.allreduce(x, op=MPI.SUM)


x = jnp.linspace(0.0, 1.0, 5) + rank
ct = jnp.linspace(1.0, 2.0, 5)  # replicated: the same on every rank
A = np.arange(6.0 * size).reshape(6, size) / 7.0
b = np.linspace(-1, 1, 6)
x_c = jnp.asarray([0.3 * rank + 0.1])

CHECKS = {
    "linear_transpose": lambda f: jax.linear_transpose(f, x)(ct)[0],
    "transpose of transpose": lambda f: jax.linear_transpose(lambda c: jax.linear_transpose(f, x)(c)[0], x)(x)[0],
    "grad sum(sin(f(x)) * ct)": lambda f: jax.grad(lambda v: jnp.sum(jnp.sin(f(v)) * ct))(x),
    "vjp": lambda f: jax.vjp(f, x)[1](ct)[0],
    "jvp": lambda f: jax.jvp(f, (x,), (ct,))[1],
    "grad of chained f(f(x))": lambda f: jax.grad(lambda v: jnp.vdot(ct, f(f(v))))(x),
    "least squares, columns split": lambda f: jax.grad(
        lambda v: 0.5 * jnp.sum((f(A[:, rank:rank + 1] @ v) - b) ** 2))(x_c),
}

failed = 0
for how in ("eager", "jit"):
    for name, check in CHECKS.items():
        run = jax.jit(lambda f=None, c=check: c(f), static_argnums=0) if how == "jit" else check
        a, m = np.asarray(run(ours)), np.asarray(run(theirs))
        diff = float(np.max(np.abs(a - m))) if a.size else 0.0
        failed += diff > 1e-12
        if rank == 0:
            print(f"{size} ranks, {how:5}, {name:30}: max |mpinb - mpi4jax| = {diff:.1e}"
                  f"{'' if diff <= 1e-12 else '  DIFFERENT'}", flush=True)
total = MPI.COMM_WORLD.allreduce(failed)
if rank == 0:
    print(f"mpi4jax {mpi4jax.__version__}: {'all equal' if not total else f'{total} differences'}")
sys.exit(1 if total else 0)
