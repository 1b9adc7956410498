"""The mpi4jax-compatible collectives: argument checks, shapes, autodiff and vmap rules.

Every function works eagerly, under ``jax.jit`` and under ``jax.disable_jit()``; shapes that
depend on the rank (``gather`` at root, ``scatter`` at root) use the rank known at trace time.
Linear collectives always run their transposed collective in the backward pass, even for a
symbolically zero cotangent, so that every rank takes part in the same sequence of collectives.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from mpi4py import MPI

from . import validation as v
from .jax_compat import Primitive, ShapedArray, ad, batched_like_vmap, batching, mlir
from .primitives import make_primitive

# ---------------------------------------------------------------------------------------
# Helpers for rules


def _aval(shape, dtype) -> ShapedArray:
    return ShapedArray(tuple(shape), dtype)


def _same(x, **_):
    return _aval(x.shape, x.dtype)


def _instantiate(ct):
    """Materialise a symbolic-zero cotangent so the transposed collective still runs."""
    if type(ct) is ad.Zero:
        return jnp.zeros(ct.aval.shape, ct.aval.dtype)
    return ct


def _move(x, src, dst, size=None):
    """Move batch dimension ``src`` of x to ``dst``; an unbatched x (src None) is broadcast."""
    if src is None:
        x = jnp.broadcast_to(x[None], (size, *x.shape))
        src = 0
    return jnp.moveaxis(x, src, dst)


def _linear_jvp(prim):
    """JVP of a linear primitive: the primitive applied to the (materialised) tangents."""

    def jvp(primals, tangents, **params):
        out = prim.bind(*primals, **params)
        tans = [jnp.zeros(p.shape, p.dtype) if type(t) is ad.Zero else t
                for p, t in zip(primals, tangents, strict=True)]
        return out, prim.bind(*tans, **params)

    return jvp


def _linear(prim, transpose):
    ad.primitive_jvps[prim] = _linear_jvp(prim)
    ad.primitive_transposes[prim] = transpose


def _linear_for_sum(prim, transpose):
    """A reduction that is linear (and differentiable) only when its op is MPI.SUM."""
    name = prim.name[len("mpinb_"):]
    linear = _linear_jvp(prim)

    def jvp(primals, tangents, **params):
        if params["op"].name == "SUM":
            return linear(primals, tangents, **params)
        if any(type(t) is not ad.Zero for t in tangents):
            raise TypeError(f"{name}: only MPI.SUM can be differentiated, got {params['op']!r}")
        out = prim.bind(*primals, **params)
        return out, ad.Zero(out.aval.to_tangent_aval())

    def checked_transpose(ct, x, **params):
        if params["op"].name != "SUM":
            raise TypeError(f"{name}: only MPI.SUM can be differentiated, got {params['op']!r}")
        return transpose(ct, x, **params)

    ad.primitive_jvps[prim] = jvp
    ad.primitive_transposes[prim] = checked_transpose


def _not_differentiable(prim, why: str):
    def jvp(primals, tangents, **params):
        if any(type(t) is not ad.Zero for t in tangents):
            raise TypeError(f"{prim.name[len('mpinb_'):]}: {why}")
        out = prim.bind(*primals, **params)
        outs = out if prim.multiple_results else [out]
        zeros = [ad.Zero(o.aval.to_tangent_aval()) for o in outs]
        return out, (zeros if prim.multiple_results else zeros[0])

    ad.primitive_jvps[prim] = jvp


# ---------------------------------------------------------------------------------------
# allreduce


def _allreduce_attrs(*, comm, op):
    return {"comm": comm.handle, "op": op.handle}


# The result may share the operand's buffer (MPI_IN_PLACE, ext/_ffi.pyx send_ptr): XLA does so
# when the operand dies here (a donated argument, a loop carry, an intermediate) and copies it
# otherwise. Measured here at 16 MiB on 2 ranks: in place 2.8 ms, out of place 4.6 ms.
allreduce_p = make_primitive("allreduce", _same, _allreduce_attrs, aliases=lambda **_: {0: 0})

# The transpose of allreduce(SUM), as mpi4jax defines it (its ``transpose=True`` flag): the
# result of allreduce is replicated, one value held by every rank, so the cotangent each rank
# holds is already the whole cotangent, and the transpose is the identity on each rank. No MPI
# call, no custom call. Transposing it gives allreduce again.
allreduce_transpose_p = Primitive("mpinb_allreduce_transpose")
allreduce_transpose_p.def_impl(lambda x, **_: x)
allreduce_transpose_p.def_abstract_eval(_same)
mlir.register_lowering(allreduce_transpose_p, lambda ctx, x, **_: [x])
_linear(allreduce_transpose_p, lambda ct, x, *, comm, op: [allreduce_p.bind(_instantiate(ct), comm=comm, op=op)])
batching.primitive_batchers[allreduce_transpose_p] = lambda args, dims, **p: (
    allreduce_transpose_p.bind(*args, **p), dims[0])

_linear_for_sum(allreduce_p,
                lambda ct, x, *, comm, op: [allreduce_transpose_p.bind(_instantiate(ct), comm=comm, op=op)])
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


scan_p = make_primitive("scan", _same, _scan_attrs)
_not_differentiable(scan_p, "scan cannot be differentiated")
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
    return _aval(x.shape, x.dtype)


# In a loop body the result shares the carry's buffer from 64 KiB on (ext/in_place.pxi): the
# carry is not copied each iteration. Outside loops the operand usually lives on (an argument,
# a value used again), and sharing would make XLA copy it first: out of place there.
alltoall_p = make_primitive("alltoall", _alltoall_abstract, lambda *, comm: {"comm": comm.handle},
                            loop_alias_min_bytes=64 << 10)
_linear(alltoall_p, lambda ct, x, *, comm: [alltoall_p.bind(_instantiate(ct), comm=comm)])


def _alltoall_batch(args, dims, *, comm):
    (x,), (d,) = args, dims
    return alltoall_p.bind(_move(x, d, 1), comm=comm), 1


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
    return _aval((comm.size, *x.shape), x.dtype)


allgather_p = make_primitive("allgather", _allgather_abstract, lambda *, comm: {"comm": comm.handle})


def _reduce_scatter_abstract(x, *, comm, op):
    if not x.shape or x.shape[0] != comm.size:
        lead = x.shape[0] if x.shape else "none (a scalar)"
        raise ValueError(f"reduce_scatter input must have shape (nproc, ...): "
                         f"leading dimension {lead} is not the number of ranks {comm.size}")
    return _aval(x.shape[1:], x.dtype)


reduce_scatter_p = make_primitive(
    "reduce_scatter", _reduce_scatter_abstract, lambda *, comm, op: {"comm": comm.handle, "op": op.handle}
)

_SUM = None


def _sum_ref():
    global _SUM
    if _SUM is None:
        _SUM = v.OpRef(v.handle_of(MPI.SUM), "SUM")
    return _SUM


_linear(allgather_p, lambda ct, x, *, comm: [reduce_scatter_p.bind(_instantiate(ct), comm=comm, op=_sum_ref())])
batching.primitive_batchers[allgather_p] = lambda args, dims, *, comm: (
    allgather_p.bind(_move(args[0], dims[0], 0), comm=comm),
    1,
)


_linear_for_sum(reduce_scatter_p, lambda ct, x, *, comm, op: [allgather_p.bind(_instantiate(ct), comm=comm)])
batching.primitive_batchers[reduce_scatter_p] = lambda args, dims, **p: (
    reduce_scatter_p.bind(_move(args[0], dims[0], 1), **p),
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
    _same,
    lambda *, comm, root: {"comm": comm.handle, "root": root},
    aliases=lambda **_: {0: 0},
)


def _reduce_attrs(*, comm, op, root):
    return {"comm": comm.handle, "op": op.handle, "root": root}


reduce_p = make_primitive("reduce", _same, _reduce_attrs, aliases=lambda **_: {0: 0})


def _bcast_transpose(ct, x, *, comm, root):
    ct = _instantiate(ct)
    summed = reduce_p.bind(ct, comm=comm, op=_sum_ref(), root=root)
    return [summed if comm.rank == root else jnp.zeros_like(ct)]


_linear(bcast_p, _bcast_transpose)
batching.primitive_batchers[bcast_p] = lambda args, dims, **p: (bcast_p.bind(*args, **p), dims[0])
_not_differentiable(reduce_p, "reduce cannot be differentiated (use allreduce with MPI.SUM)")
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
    if comm.rank == root:
        return _aval((comm.size, *x.shape), x.dtype)
    return _aval(x.shape, x.dtype)


gather_p = make_primitive(
    "gather",
    _gather_abstract,
    lambda *, comm, root: {"comm": comm.handle, "root": root},
    aliases=lambda *, comm, root: {} if comm.rank == root else {0: 0},
)
_not_differentiable(gather_p, "gather cannot be differentiated (use allgather)")
batching.primitive_batchers[gather_p] = lambda args, dims, *, comm, root: (
    gather_p.bind(_move(args[0], dims[0], 0), comm=comm, root=root),
    1 if comm.rank == root else 0,
)


def _scatter_abstract(x, *, comm, root):
    if comm.rank == root:
        if not x.shape or x.shape[0] != comm.size:
            lead = x.shape[0] if x.shape else "none (a scalar)"
            raise ValueError(f"Scatter input must have shape (nproc, ...): "  # mpi4jax's words, then the values
                             f"scatter: leading dimension {lead} at root is not the number of ranks {comm.size}")
        return _aval(x.shape[1:], x.dtype)
    return _aval(x.shape, x.dtype)


scatter_p = make_primitive("scatter", _scatter_abstract, lambda *, comm, root: {"comm": comm.handle, "root": root})
_not_differentiable(scatter_p, "scatter cannot be differentiated")
batching.primitive_batchers[scatter_p] = lambda args, dims, *, comm, root: (
    scatter_p.bind(_move(args[0], dims[0], 1 if comm.rank == root else 0), comm=comm, root=root),
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
# point to point


send_p = make_primitive(
    "send",
    lambda x, **_: [],
    lambda *, comm, dest, tag: {"comm": comm.handle, "dest": dest, "tag": tag},
    multiple_results=True,
)
_not_differentiable(send_p, "send cannot be differentiated (use sendrecv)")


def _send_batch(args, dims, **p):
    return send_p.bind(_move(args[0], dims[0], 0), **p), []


batching.primitive_batchers[send_p] = _send_batch

recv_p = make_primitive(
    "recv",
    _same,
    lambda *, comm, source, tag, status: {"comm": comm.handle, "source": source, "tag": tag, "status": status},
    operands_passed=lambda **_: (),
)
_not_differentiable(recv_p, "recv cannot be differentiated (use sendrecv)")
batching.primitive_batchers[recv_p] = lambda args, dims, **p: (recv_p.bind(_move(args[0], dims[0], 0), **p), 0)


def _sendrecv_attrs(*, comm, source, dest, sendtag, recvtag, status):
    return {
        "comm": comm.handle,
        "source": source,
        "dest": dest,
        "sendtag": sendtag,
        "recvtag": recvtag,
        "status": status,
    }


sendrecv_p = make_primitive(
    "sendrecv", lambda s, r, **_: _aval(r.shape, r.dtype), _sendrecv_attrs, operands_passed=lambda **_: (0,)
)


def _sendrecv_transpose(ct, sendbuf, recvbuf, *, comm, source, dest, sendtag, recvtag, status):
    if source == MPI.ANY_SOURCE:
        raise TypeError("sendrecv: cannot differentiate a sendrecv with source=MPI.ANY_SOURCE")
    send_aval = sendbuf.aval
    back = sendrecv_p.bind(
        _instantiate(ct),
        jnp.zeros(send_aval.shape, send_aval.dtype),
        comm=comm,
        source=dest,
        dest=source,
        sendtag=sendtag,
        recvtag=MPI.ANY_TAG,
        status=0,
    )
    recv_ct = ad.Zero(recvbuf.aval.to_tangent_aval()) if isinstance(recvbuf, ad.UndefinedPrimal) else None
    return [back, recv_ct]


def _sendrecv_jvp(primals, tangents, **p):
    s, r = primals
    ts, _ = tangents
    out = sendrecv_p.bind(s, r, **p)
    ts = jnp.zeros(s.shape, s.dtype) if type(ts) is ad.Zero else ts
    return out, sendrecv_p.bind(ts, jnp.zeros(r.shape, r.dtype), **p)


ad.primitive_jvps[sendrecv_p] = _sendrecv_jvp
ad.primitive_transposes[sendrecv_p] = _sendrecv_transpose


def _sendrecv_batch(args, dims, **p):
    s, r = args
    ds, dr = dims
    size = s.shape[ds] if ds is not None else r.shape[dr]
    s = _move(s, ds, 0, size)
    r = _move(r, dr, 0, size)
    return sendrecv_p.bind(s, r, **p), 0


batching.primitive_batchers[sendrecv_p] = _sendrecv_batch


def send(x, dest, *, tag=0, comm=None):
    """Send ``x`` to rank ``dest`` (blocking standard-mode send)."""
    x = v.as_array("send", x)
    _, c = v.resolve_comm("send", comm)
    send_p.bind(x, comm=c, dest=v.rank_arg("send", "dest", dest, c), tag=v.tag_arg("send", "tag", tag))


def recv(x, source=MPI.ANY_SOURCE, *, tag=MPI.ANY_TAG, comm=None, status=None):
    """Receive an array shaped like ``x`` from ``source`` (a new array; ``x``'s data is unused).

    ``status``, an ``mpi4py.MPI.Status``, is filled in when the receive executes. Under
    ``jax.vmap`` the receive is batched even when ``x`` is not (``jnp.zeros_like`` of a batched
    value is not): it receives the batch a vmapped ``send`` sends.
    """
    x = batched_like_vmap(v.as_array("recv", x), lambda t, n: jnp.broadcast_to(t, (n, *jnp.shape(t))))
    _, c = v.resolve_comm("recv", comm)
    return recv_p.bind(
        x,
        comm=c,
        source=v.rank_arg("recv", "source", source, c, wildcard=True),
        tag=v.tag_arg("recv", "tag", tag, wildcard=True),
        status=v.status_arg("recv", status),
    )


def sendrecv(sendbuf, recvbuf, source, dest, *, sendtag=0, recvtag=MPI.ANY_TAG, comm=None, status=None):
    """Send ``sendbuf`` to ``dest`` and receive an array shaped like ``recvbuf`` from ``source``,
    deadlock-free. Differentiable with respect to ``sendbuf``."""
    sendbuf = v.as_array("sendrecv", sendbuf, "sendbuf")
    recvbuf = v.as_array("sendrecv", recvbuf, "recvbuf")
    if sendbuf.dtype != recvbuf.dtype:
        raise TypeError(
            f"sendrecv: sendbuf dtype {np.dtype(sendbuf.dtype).name} differs from recvbuf dtype "
            f"{np.dtype(recvbuf.dtype).name}; the data would be reinterpreted"
        )
    _, c = v.resolve_comm("sendrecv", comm)
    return sendrecv_p.bind(
        sendbuf,
        recvbuf,
        comm=c,
        source=v.rank_arg("sendrecv", "source", source, c, wildcard=True),
        dest=v.rank_arg("sendrecv", "dest", dest, c),
        sendtag=v.tag_arg("sendrecv", "sendtag", sendtag),
        recvtag=v.tag_arg("sendrecv", "recvtag", recvtag, wildcard=True),
        status=v.status_arg("sendrecv", status),
    )


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
    return _aval((sum(counts), *x.shape[1:]), x.dtype)


allgatherv_p = make_primitive(
    "allgatherv", _allgatherv_abstract, lambda *, comm, counts: {"comm": comm.handle, "counts": counts}
)


def _allgatherv_transpose(ct, x, *, comm, counts):
    total = allreduce_p.bind(_instantiate(ct), comm=comm, op=_sum_ref())
    start = sum(counts[: comm.rank])
    return [jax.lax.slice_in_dim(total, start, start + counts[comm.rank], axis=0)]


_linear(allgatherv_p, _allgatherv_transpose)
batching.primitive_batchers[allgatherv_p] = lambda args, dims, **p: (
    allgatherv_p.bind(_move(args[0], dims[0], 1), **p),
    1,
)


def _alltoallv_abstract(x, *, comm, sendcounts, recvcounts):
    if not x.shape or x.shape[0] != sum(sendcounts):
        lead = x.shape[0] if x.shape else "none (a scalar)"
        raise ValueError(f"alltoallv: leading dimension {lead} is not sum(sendcounts) = {sum(sendcounts)}")
    return _aval((sum(recvcounts), *x.shape[1:]), x.dtype)


alltoallv_p = make_primitive(
    "alltoallv",
    _alltoallv_abstract,
    lambda *, comm, sendcounts, recvcounts: {"comm": comm.handle, "sendcounts": sendcounts, "recvcounts": recvcounts},
)


def _alltoallv_transpose(ct, x, *, comm, sendcounts, recvcounts):
    return [alltoallv_p.bind(_instantiate(ct), comm=comm, sendcounts=recvcounts, recvcounts=sendcounts)]


_linear(alltoallv_p, _alltoallv_transpose)
batching.primitive_batchers[alltoallv_p] = lambda args, dims, **p: (
    alltoallv_p.bind(_move(args[0], dims[0], 1), **p),
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
