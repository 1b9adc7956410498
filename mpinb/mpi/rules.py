"""Helpers shared by the collectives' rules: abstract values, moving a batch axis, linear
collectives' JVP and transpose, and the error of an op that has no derivative.
"""

from __future__ import annotations

import jax.numpy as jnp

from .jax_compat import ShapedArray, ad


def aval(shape, dtype) -> ShapedArray:
    return ShapedArray(tuple(shape), dtype)


def same(x, **_):
    return aval(x.shape, x.dtype)


def instantiate(ct):
    """Materialise a symbolic-zero cotangent so the transposed collective still runs."""
    if type(ct) is ad.Zero:
        return jnp.zeros(ct.aval.shape, ct.aval.dtype)
    return ct


def move(x, src, dst, size=None):
    """Move batch dimension ``src`` of x to ``dst``; an unbatched x (src None) is broadcast."""
    if src is None:
        x = jnp.broadcast_to(x[None], (size, *x.shape))
        src = 0
    return jnp.moveaxis(x, src, dst)


def linear_jvp(prim):
    """JVP of a linear primitive: the primitive applied to the (materialised) tangents."""

    def jvp(primals, tangents, **params):
        out = prim.bind(*primals, **params)
        tans = [jnp.zeros(p.shape, p.dtype) if type(t) is ad.Zero else t
                for p, t in zip(primals, tangents, strict=True)]
        return out, prim.bind(*tans, **params)

    return jvp


def linear(prim, transpose):
    ad.primitive_jvps[prim] = linear_jvp(prim)
    ad.primitive_transposes[prim] = transpose


def linear_for_sum(prim, transpose):
    """A reduction that is linear (and differentiable) only when its op is MPI.SUM."""
    name = prim.name[len("mpinb_"):]
    linear = linear_jvp(prim)

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


def not_differentiable(prim, why: str):
    def jvp(primals, tangents, **params):
        if any(type(t) is not ad.Zero for t in tangents):
            raise TypeError(f"{prim.name[len('mpinb_'):]}: {why}")
        out = prim.bind(*primals, **params)
        outs = out if prim.multiple_results else [out]
        zeros = [ad.Zero(o.aval.to_tangent_aval()) for o in outs]
        return out, (zeros if prim.multiple_results else zeros[0])

    ad.primitive_jvps[prim] = jvp
