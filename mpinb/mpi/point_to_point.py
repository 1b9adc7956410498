"""Point-to-point operations: ``send``, ``recv``, ``sendrecv`` (mpi4jax's API), with their
vmap rules and ``sendrecv``'s autodiff (a send the other way).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from mpi4py import MPI

from . import validation as v
from .jax_compat import ad, batched_like_vmap, batching
from .primitives import make_primitive
from .rules import aval, instantiate, move, not_differentiable, same

send_p = make_primitive(
    "send",
    lambda x, **_: [],
    lambda *, comm, dest, tag: {"comm": comm.handle, "dest": dest, "tag": tag},
    multiple_results=True,
)
not_differentiable(send_p, "send cannot be differentiated (use sendrecv)")


def _send_batch(args, dims, **p):
    return send_p.bind(move(args[0], dims[0], 0), **p), []


batching.primitive_batchers[send_p] = _send_batch

recv_p = make_primitive(
    "recv",
    same,
    lambda *, comm, source, tag, status: {"comm": comm.handle, "source": source, "tag": tag, "status": status},
    operands_passed=lambda **_: (),
)
not_differentiable(recv_p, "recv cannot be differentiated (use sendrecv)")
batching.primitive_batchers[recv_p] = lambda args, dims, **p: (recv_p.bind(move(args[0], dims[0], 0), **p), 0)


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
    "sendrecv", lambda s, r, **_: aval(r.shape, r.dtype), _sendrecv_attrs, operands_passed=lambda **_: (0,)
)


def _sendrecv_transpose(ct, sendbuf, recvbuf, *, comm, source, dest, sendtag, recvtag, status):
    if source == MPI.ANY_SOURCE:
        raise TypeError("sendrecv: cannot differentiate a sendrecv with source=MPI.ANY_SOURCE")
    send_aval = sendbuf.aval
    back = sendrecv_p.bind(
        instantiate(ct),
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
    s = move(s, ds, 0, size)
    r = move(r, dr, 0, size)
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
