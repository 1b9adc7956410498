"""Deliberately unsafe variants of ``alltoall``, for workshops on the seed bug. Never use them
in real code.

* ``alltoall_unconstrained``: the custom call carries no layout constraints at all (as mpi4jax
  before 0.3.11). XLA:CPU happens to choose row-major, so results are right here, but the HLO
  analysis reports warning 2 ("unconstrained").
* ``alltoall_follow_producer``: reproduces on CPU what GPU layout assignment did to such a call.
  When the operand is produced by a transpose in the same computation, the call accepts the
  transpose's physical layout, so XLA passes the untransposed buffer (a free bitcast) while the
  handler reads it as row-major. Under ``jax.jit`` after a transpose the result is wrong; eagerly
  (the operand is a materialised, row-major array) it is right. The HLO analysis reports warning 1.
"""

from __future__ import annotations

from . import validation as v
from .collectives import _alltoall_abstract
from .jax_compat import ir
from .primitives import make_primitive, row_major


def _transpose_permutation(value: ir.Value) -> list[int] | None:
    """The permutation of the stablehlo.transpose that defines ``value``, if it is one."""
    try:
        owner = value.owner
        op = owner.opview if hasattr(owner, "opview") else owner
    except (AttributeError, ValueError):
        return None
    if getattr(op, "OPERATION_NAME", "") != "stablehlo.transpose":
        name = getattr(getattr(op, "operation", op), "name", "")
        if name != "stablehlo.transpose":
            return None
    perm = op.attributes["permutation"]
    return [int(p) for p in (perm if not hasattr(perm, "__array__") else perm.__array__())]


def _follow_producer(args, avals):
    layouts = []
    for arg, aval in zip(args, avals, strict=True):
        perm = _transpose_permutation(arg)
        n = len(aval.shape)
        if perm is None:
            layouts.append(row_major(n))
            continue
        inverse = [0] * n
        for k, p in enumerate(perm):
            inverse[p] = k
        # the layout in which the transposed value occupies its input's row-major memory
        layouts.append(tuple(inverse[j] for j in range(n - 1, -1, -1)))
    return layouts


_unconstrained_p = make_primitive(
    "alltoall", _alltoall_abstract, lambda *, comm: {"comm": comm.handle},
    operand_layouts=lambda args, avals: None,
)
_unconstrained_p.name = "mpinb_alltoall_unconstrained"

_follow_p = make_primitive(
    "alltoall", _alltoall_abstract, lambda *, comm: {"comm": comm.handle},
    operand_layouts=_follow_producer,
)
_follow_p.name = "mpinb_alltoall_follow_producer"


def alltoall_unconstrained(x, *, comm=None):
    """``alltoall`` lowered without layout constraints (teaching only)."""
    x = v.as_array("alltoall_unconstrained", x)
    _, c = v.resolve_comm("alltoall_unconstrained", comm)
    return _unconstrained_p.bind(x, comm=c)


def alltoall_follow_producer(x, *, comm=None):
    """``alltoall`` that lets a preceding transpose choose its operand layout (teaching only:
    reproduces the seed bug, jitted wrong and eager right)."""
    x = v.as_array("alltoall_follow_producer", x)
    _, c = v.resolve_comm("alltoall_follow_producer", comm)
    return _follow_p.bind(x, comm=c)
