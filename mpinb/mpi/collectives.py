"""The mpi4jax-compatible collectives: argument checks, shapes, autodiff and vmap rules
(point-to-point operations are in mpinb.mpi.point_to_point).

Every function works eagerly, under ``jax.jit`` and under ``jax.disable_jit()``; shapes that
depend on the rank (``gather`` at root, ``scatter`` at root) use the rank known at trace time.
Linear collectives always run their transposed collective in the backward pass, even for a
symbolically zero cotangent, so that every rank takes part in the same sequence of collectives.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from mpi4py import MPI

from . import validation as v
from .jax_compat import Primitive, batching, mlir, shard_map_manual_axes, varying_like_inputs
from .primitives import make_primitive
from .rules import aval, instantiate, linear, linear_for_sum, move, not_differentiable, same

# ---------------------------------------------------------------------------------------
# allreduce


def _allreduce_attrs(*, comm, op):
    return {"comm": comm.handle, "op": op.handle}


# The result may share the operand's buffer (MPI_IN_PLACE, ext/_ffi.pyx send_ptr): XLA does so
# when the operand dies here (a donated argument, a loop carry, an intermediate) and copies it
# otherwise. Measured here at 16 MiB on 2 ranks: in place 2.8 ms, out of place 4.6 ms.
allreduce_p = make_primitive("allreduce", same, _allreduce_attrs, aliases=lambda **_: {0: 0})

# The transpose of allreduce(SUM), as mpi4jax defines it (its ``transpose=True`` flag): the
# result of allreduce is replicated, one value held by every rank, so the cotangent each rank
# holds is already the whole cotangent, and the transpose is the identity on each rank. No MPI
# call, no custom call. Transposing it gives allreduce again.
allreduce_transpose_p = Primitive("mpinb_allreduce_transpose")
allreduce_transpose_p.def_impl(lambda x, **_: x)
allreduce_transpose_p.def_abstract_eval(varying_like_inputs(same))
mlir.register_lowering(allreduce_transpose_p, lambda ctx, x, **_: [x])
linear(allreduce_transpose_p, lambda ct, x, *, comm, op: [allreduce_p.bind(instantiate(ct), comm=comm, op=op)])
batching.primitive_batchers[allreduce_transpose_p] = lambda args, dims, **p: (
    allreduce_transpose_p.bind(*args, **p), dims[0])


def _allreduce_transpose(ct, x, *, comm, op):
    """Outside shard_map, mpi4jax's rule (each rank's replicated result counts once: the
    identity). Inside a shard_map body each process's copy of the result is an element of its
    own in the global output, as for ``lax.psum`` there: the cotangents are summed."""
    if shard_map_manual_axes():
        return [allreduce_p.bind(instantiate(ct), comm=comm, op=op)]
    return [allreduce_transpose_p.bind(instantiate(ct), comm=comm, op=op)]


linear_for_sum(allreduce_p, _allreduce_transpose)
batching.primitive_batchers[allreduce_p] = lambda args, dims, **p: (allreduce_p.bind(*args, **p), dims[0])


def allreduce(x, op, *, comm=None):
    """Combine ``x`` from all ranks with ``op`` (e.g. ``MPI.SUM``); every rank gets the result.

    Differentiable for ``MPI.SUM``, as in mpi4jax: the JVP is the allreduce of the tangents, the
    transpose is the identity on each rank (the replicated result counts once).
    """
    x = v.as_array("allreduce", x)
    _, c = v.resolve_comm("allreduce", comm)
    return allreduce_p.bind(x, comm=c, op=v.resolve_op("allreduce", op, x.dtype))


# ---------------------------------------------------------------------------------------
# scan


def _scan_attrs(*, comm, op):
    return {"comm": comm.handle, "op": op.handle}


scan_p = make_primitive("scan", same, _scan_attrs)
not_differentiable(scan_p, "scan cannot be differentiated")
batching.primitive_batchers[scan_p] = lambda args, dims, **p: (scan_p.bind(*args, **p), dims[0])


def scan(x, op, *, comm=None):
    """Inclusive prefix reduction: rank r gets ``op`` over the ``x`` of ranks 0..r."""
    x = v.as_array("scan", x)
    _, c = v.resolve_comm("scan", comm)
    return scan_p.bind(x, comm=c, op=v.resolve_op("scan", op, x.dtype))


# ---------------------------------------------------------------------------------------
# alltoall


def _alltoall_abstract(x, *, comm):
    if not x.shape or x.shape[0] != comm.size:
        lead = x.shape[0] if x.shape else "none (a scalar)"
        raise ValueError(f"alltoall input must have shape (nproc, ...): "  # mpi4jax's words, then the values
                         f"leading dimension {lead} is not the number of ranks {comm.size}")
    return aval(x.shape, x.dtype)


# In a loop body the result shares the carry's buffer from 64 KiB on (ext/in_place.pxi): the
# carry is not copied each iteration. Outside loops the operand usually lives on (an argument,
# a value used again), and sharing would make XLA copy it first: out of place there.
alltoall_p = make_primitive("alltoall", _alltoall_abstract, lambda *, comm: {"comm": comm.handle},
                            loop_alias_min_bytes=64 << 10)
linear(alltoall_p, lambda ct, x, *, comm: [alltoall_p.bind(instantiate(ct), comm=comm)])


def _alltoall_batch(args, dims, *, comm):
    (x,), (d,) = args, dims
    return alltoall_p.bind(move(x, d, 1), comm=comm), 1


batching.primitive_batchers[alltoall_p] = _alltoall_batch


def alltoall(x, *, comm=None):
    """Rank r sends ``x[s]`` to rank s and receives rank s's ``x[r]`` into ``result[s]``.

    ``x.shape[0]`` must equal the number of ranks. Its own transpose (differentiable).
    """
    x = v.as_array("alltoall", x)
    _, c = v.resolve_comm("alltoall", comm)
    return alltoall_p.bind(x, comm=c)


# ---------------------------------------------------------------------------------------
# allgather and reduce_scatter (each other's transpose)


def _allgather_abstract(x, *, comm):
    return aval((comm.size, *x.shape), x.dtype)


allgather_p = make_primitive("allgather", _allgather_abstract, lambda *, comm: {"comm": comm.handle})


def _reduce_scatter_abstract(x, *, comm, op):
    if not x.shape or x.shape[0] != comm.size:
        lead = x.shape[0] if x.shape else "none (a scalar)"
        raise ValueError(f"reduce_scatter input must have shape (nproc, ...): "
                         f"leading dimension {lead} is not the number of ranks {comm.size}")
    return aval(x.shape[1:], x.dtype)


reduce_scatter_p = make_primitive(
    "reduce_scatter", _reduce_scatter_abstract, lambda *, comm, op: {"comm": comm.handle, "op": op.handle}
)

_SUM = None


def _sum_ref():
    global _SUM
    if _SUM is None:
        _SUM = v.OpRef(v.handle_of(MPI.SUM), "SUM")
    return _SUM


linear(allgather_p, lambda ct, x, *, comm: [reduce_scatter_p.bind(instantiate(ct), comm=comm, op=_sum_ref())])
batching.primitive_batchers[allgather_p] = lambda args, dims, *, comm: (
    allgather_p.bind(move(args[0], dims[0], 0), comm=comm),
    1,
)


linear_for_sum(reduce_scatter_p, lambda ct, x, *, comm, op: [allgather_p.bind(instantiate(ct), comm=comm)])
batching.primitive_batchers[reduce_scatter_p] = lambda args, dims, **p: (
    reduce_scatter_p.bind(move(args[0], dims[0], 1), **p),
    0,
)


def allgather(x, *, comm=None):
    """Every rank gets ``result[s] = x`` of rank s; shape ``(size, *x.shape)``."""
    x = v.as_array("allgather", x)
    _, c = v.resolve_comm("allgather", comm)
    return allgather_p.bind(x, comm=c)


def reduce_scatter(x, op, *, comm=None):
    """Rank r gets ``op`` over ranks of ``x[r]``; ``x.shape[0]`` must equal the number of ranks.

    The transpose of ``allgather`` (differentiable for ``MPI.SUM``).
    """
    x = v.as_array("reduce_scatter", x)
    _, c = v.resolve_comm("reduce_scatter", comm)
    return reduce_scatter_p.bind(x, comm=c, op=v.resolve_op("reduce_scatter", op, x.dtype))


# ---------------------------------------------------------------------------------------
# bcast and reduce


bcast_p = make_primitive(
    "bcast",
    same,
    lambda *, comm, root: {"comm": comm.handle, "root": root},
    aliases=lambda **_: {0: 0},
)


def _reduce_attrs(*, comm, op, root):
    return {"comm": comm.handle, "op": op.handle, "root": root}


reduce_p = make_primitive("reduce", same, _reduce_attrs, aliases=lambda **_: {0: 0})


def _bcast_transpose(ct, x, *, comm, root):
    ct = instantiate(ct)
    summed = reduce_p.bind(ct, comm=comm, op=_sum_ref(), root=root)
    return [summed if comm.rank == root else jnp.zeros_like(ct)]


linear(bcast_p, _bcast_transpose)
batching.primitive_batchers[bcast_p] = lambda args, dims, **p: (bcast_p.bind(*args, **p), dims[0])
not_differentiable(reduce_p, "reduce cannot be differentiated (use allreduce with MPI.SUM)")
batching.primitive_batchers[reduce_p] = lambda args, dims, **p: (reduce_p.bind(*args, **p), dims[0])


def bcast(x, root, *, comm=None):
    """Every rank gets root's ``x`` (a new array); on other ranks ``x`` only gives shape and
    dtype. Differentiable (the transpose sums cotangents onto root)."""
    x = v.as_array("bcast", x)
    _, c = v.resolve_comm("bcast", comm)
    return bcast_p.bind(x, comm=c, root=v.root_arg("bcast", root, c))


def reduce(x, op, root, *, comm=None):
    """Root gets ``op`` over all ranks' ``x``; other ranks get their ``x`` back unchanged."""
    x = v.as_array("reduce", x)
    _, c = v.resolve_comm("reduce", comm)
    r = v.root_arg("reduce", root, c)
    return reduce_p.bind(x, comm=c, op=v.resolve_op("reduce", op, x.dtype), root=r)


# ---------------------------------------------------------------------------------------
# gather and scatter (shapes differ between root and the other ranks)


def _gather_abstract(x, *, comm, root):
    if comm.size > 1 and shard_map_manual_axes():
        raise NotImplementedError(
            "mpinb: gather inside shard_map: its result has shape (size, ...) on the root and x's shape "
            "on the other ranks, which would make a global array of a different shape on each process; "
            "use allgather (or jax.lax.all_gather)")
    if comm.rank == root:
        return aval((comm.size, *x.shape), x.dtype)
    return aval(x.shape, x.dtype)


gather_p = make_primitive(
    "gather",
    _gather_abstract,
    lambda *, comm, root: {"comm": comm.handle, "root": root},
    aliases=lambda *, comm, root: {} if comm.rank == root else {0: 0},
)
not_differentiable(gather_p, "gather cannot be differentiated (use allgather)")
batching.primitive_batchers[gather_p] = lambda args, dims, *, comm, root: (
    gather_p.bind(move(args[0], dims[0], 0), comm=comm, root=root),
    1 if comm.rank == root else 0,
)


def _scatter_abstract(x, *, comm, root):
    if comm.rank == root:
        if not x.shape or x.shape[0] != comm.size:
            lead = x.shape[0] if x.shape else "none (a scalar)"
            raise ValueError(f"Scatter input must have shape (nproc, ...): "  # mpi4jax's words, then the values
                             f"scatter: leading dimension {lead} at root is not the number of ranks {comm.size}")
        return aval(x.shape[1:], x.dtype)
    return aval(x.shape, x.dtype)


scatter_p = make_primitive("scatter", _scatter_abstract, lambda *, comm, root: {"comm": comm.handle, "root": root})
not_differentiable(scatter_p, "scatter cannot be differentiated")
batching.primitive_batchers[scatter_p] = lambda args, dims, *, comm, root: (
    scatter_p.bind(move(args[0], dims[0], 1 if comm.rank == root else 0), comm=comm, root=root),
    0,
)


def gather(x, root, *, comm=None):
    """Root gets ``result[s] = x`` of rank s, shape ``(size, *x.shape)``; other ranks get their
    ``x`` back unchanged."""
    x = v.as_array("gather", x)
    _, c = v.resolve_comm("gather", comm)
    return gather_p.bind(x, comm=c, root=v.root_arg("gather", root, c))


def scatter(x, root, *, comm=None):
    """Rank s gets root's ``x[s]``. At root ``x.shape[0]`` must equal the number of ranks; on
    other ranks ``x`` only gives the result's shape and dtype."""
    x = v.as_array("scatter", x)
    _, c = v.resolve_comm("scatter", comm)
    return scatter_p.bind(x, comm=c, root=v.root_arg("scatter", root, c))


# ---------------------------------------------------------------------------------------
# barrier


barrier_p = make_primitive(
    "barrier", lambda **_: [], lambda *, comm: {"comm": comm.handle}, multiple_results=True
)


def barrier(*, comm=None):
    """Block until every rank of ``comm`` reached the barrier."""
    _, c = v.resolve_comm("barrier", comm)
    barrier_p.bind(comm=c)


# ---------------------------------------------------------------------------------------
# variable-count collectives (static counts, in rows of the leading dimension)


def _allgatherv_abstract(x, *, comm, counts):
    if not x.shape or x.shape[0] != counts[comm.rank]:
        lead = x.shape[0] if x.shape else "none (a scalar)"
        raise ValueError(f"allgatherv: leading dimension {lead} is not counts[{comm.rank}] = {counts[comm.rank]}")
    return aval((sum(counts), *x.shape[1:]), x.dtype)


allgatherv_p = make_primitive(
    "allgatherv", _allgatherv_abstract, lambda *, comm, counts: {"comm": comm.handle, "counts": counts}
)


def _allgatherv_transpose(ct, x, *, comm, counts):
    total = allreduce_p.bind(instantiate(ct), comm=comm, op=_sum_ref())
    start = sum(counts[: comm.rank])
    return [jax.lax.slice_in_dim(total, start, start + counts[comm.rank], axis=0)]


linear(allgatherv_p, _allgatherv_transpose)
batching.primitive_batchers[allgatherv_p] = lambda args, dims, **p: (
    allgatherv_p.bind(move(args[0], dims[0], 1), **p),
    1,
)


def _alltoallv_abstract(x, *, comm, sendcounts, recvcounts):
    if not x.shape or x.shape[0] != sum(sendcounts):
        lead = x.shape[0] if x.shape else "none (a scalar)"
        raise ValueError(f"alltoallv: leading dimension {lead} is not sum(sendcounts) = {sum(sendcounts)}")
    return aval((sum(recvcounts), *x.shape[1:]), x.dtype)


alltoallv_p = make_primitive(
    "alltoallv",
    _alltoallv_abstract,
    lambda *, comm, sendcounts, recvcounts: {"comm": comm.handle, "sendcounts": sendcounts, "recvcounts": recvcounts},
)


def _alltoallv_transpose(ct, x, *, comm, sendcounts, recvcounts):
    return [alltoallv_p.bind(instantiate(ct), comm=comm, sendcounts=recvcounts, recvcounts=sendcounts)]


linear(alltoallv_p, _alltoallv_transpose)
batching.primitive_batchers[alltoallv_p] = lambda args, dims, **p: (
    alltoallv_p.bind(move(args[0], dims[0], 1), **p),
    1,
)


def allgatherv(x, counts, *, comm=None):
    """Concatenate along axis 0 the ``x`` of all ranks, rank s contributing ``counts[s]`` rows
    (static). Every rank gets shape ``(sum(counts), *x.shape[1:])``. Differentiable."""
    x = v.as_array("allgatherv", x)
    _, c = v.resolve_comm("allgatherv", comm)
    return allgatherv_p.bind(x, comm=c, counts=v.counts_arg("allgatherv", "counts", counts, c))


def alltoallv(x, sendcounts, recvcounts, *, comm=None):
    """Send rows ``x[offset_s : offset_s + sendcounts[s]]`` to rank s and receive
    ``recvcounts[s]`` rows from rank s, concatenated in rank order (static counts, which must
    agree across ranks: recvcounts[s] on rank r == sendcounts[r] on rank s). Differentiable."""
    x = v.as_array("alltoallv", x)
    _, c = v.resolve_comm("alltoallv", comm)
    return alltoallv_p.bind(
        x,
        comm=c,
        sendcounts=v.counts_arg("alltoallv", "sendcounts", sendcounts, c),
        recvcounts=v.counts_arg("alltoallv", "recvcounts", recvcounts, c),
    )


# ---------------------------------------------------------------------------------------


def has_cuda_support() -> bool:
    """False: this build of mpinb runs collectives on host (CPU) buffers only."""
    return False


def has_sycl_support() -> bool:
    """False: this build of mpinb runs collectives on host (CPU) buffers only."""
    return False
