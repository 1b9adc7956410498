"""Per-call time of a jitted shard_map whose body is one collective, over JAX's own multi-process
stack (``jax.distributed``, one CPU device per process, Gloo): JAX's ``lax.psum`` /
``lax.all_to_all`` (the baseline) against mpinb's ``allreduce`` / ``alltoall`` in the same body,
and, as floors, mpinb in a plain jit (no shard_map) and raw mpi4py on preallocated buffers.

    mpiexec -n 2 python benchmarks/shard_map.py [--sizes 16,1024,65536,1048576,16777216] [--seconds 0.3]

A size is the bytes each process contributes (its block). Each cell is the median over 5
rounds of (time for a batch of calls) / (calls in the batch), the rounds interleaving the
columns (benchmarks/collectives.py's method, whose helpers this reuses). "lax / mpinb" is how
many times longer JAX's collective takes than mpinb's in the same shard_map body.
Two ranks on two cores is the intended setting (more ranks are oversubscribed here).
"""

from __future__ import annotations

import argparse
import sys

import jax
import jax.numpy as jnp
import numpy as np
from collectives import COMM, RANK, SIZE, fmt, human, interleaved, raw_calls
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from mpi4py import MPI

from mpinb import mpi as mpinb_mpi
from mpinb.engine import jax_processes

BODIES = {  # op -> (JAX's body, mpinb's body), on a block of shape (SIZE, m)
    "allreduce": (lambda b: jax.lax.psum(b, "x"), lambda b: mpinb_mpi.allreduce(b, op=MPI.SUM)),
    "alltoall": (lambda b: jax.lax.all_to_all(b, "x", 0, 0, tiled=True), mpinb_mpi.alltoall),
}


def block_shape(nbytes: int) -> tuple[int, int]:
    return SIZE, max(1, nbytes // 4 // SIZE)


def in_shard_map(body, mesh, nbytes: int):
    """``body`` as a jitted shard_map over the processes, on a global array of one block each."""
    shape = block_shape(nbytes)
    x = jax.make_array_from_process_local_data(NamedSharding(mesh, P("x")), np.ones(shape, np.float32))
    f = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P("x"), out_specs=P("x")))
    return lambda: f(x).block_until_ready()


def plain_jit(body, nbytes: int):
    x = jnp.ones(block_shape(nbytes), jnp.float32)
    f = jax.jit(body)
    return lambda: f(x).block_until_ready()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="16,1024,65536,1048576,16777216", help="bytes per process")
    parser.add_argument("--seconds", type=float, default=0.3, help="target duration of one batch")
    parser.add_argument("--reps", type=int, default=5, help="batches per cell (median)")
    args = parser.parse_args(argv)
    jax_processes.initialize(COMM)
    mesh = jax.make_mesh((jax.device_count(),), ("x",))
    if jax.local_device_count() != 1:
        sys.exit("benchmarks/shard_map.py: needs one CPU device per process")

    rows = []
    for op, (lax_body, mpinb_body) in BODIES.items():
        for nbytes in (int(s) for s in args.sizes.split(",")):
            calls = {"lax": in_shard_map(lax_body, mesh, nbytes), "mpinb": in_shard_map(mpinb_body, mesh, nbytes),
                     "mpinb_jit": plain_jit(mpinb_body, nbytes), "raw": raw_calls(op, nbytes)}
            rows.append((op, nbytes, interleaved(calls, args.seconds, args.reps)))

    if RANK == 0:
        print(f"{SIZE} ranks, jax {jax.__version__}, one CPU device per process; microseconds per call "
              f"(median of {args.reps} batches)")
        print(f"{'op':<10}{'bytes':>8} {'lax.*':>9} {'mpinb':>9} {'mpinb jit':>9} {'raw':>9}   "
              f"{'lax / mpinb':>11} {'mpinb / raw':>11}")
        for op, nbytes, t in rows:
            print(f"{op:<10}{human(nbytes):>8} {fmt(t['lax'])} {fmt(t['mpinb'])} {fmt(t['mpinb_jit'])} "
                  f"{fmt(t['raw'])}   {t['lax'] / t['mpinb']:10.1f}x {t['mpinb'] / t['raw']:10.1f}x")


if __name__ == "__main__":
    main()
