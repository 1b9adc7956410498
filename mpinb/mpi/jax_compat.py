"""Every use of JAX's internals, in one place.

mpinb defines primitives with custom lowerings, which JAX's public API does not fully cover.
Whatever is reached here beyond ``jax``/``jax.ffi``/``jax.extend`` may change between JAX
releases, so it is named once, with what it is for:

- ``apply_primitive`` (``jax._src.dispatch``): the eager implementation of a primitive (compile
  the one-equation computation once, cache it, run it).
- ``ir`` (``jax._src.lib.mlir.ir``): MLIR types and values in lowering rules.
- ``register_dce_rule`` (``jax.interpreters.partial_eval.dce_rules``): keeps a collective whose
  result is unused in the jaxpr (every rank must take part).
- ``lowering_scratch`` (``LoweringRuleContext.module_context.cached_primitive_lowerings``): a
  dict that lives as long as one module's lowering, where the ordering chain between
  collectives is kept (primitives/_take_order).
- ``ad``, ``batching``, ``mlir`` (``jax.interpreters``): the AD, vmap and lowering rule tables.
- ``ffi``: ``jax.ffi`` (``jax.extend.ffi`` before JAX 0.5.0).
- ``build_ffi_lowering_function``, ``register_lowering``, ``ir_attribute``: ``jax.ffi``'s and
  ``mlir``'s as in JAX 0.10, also on the older releases where one is private or lacks a keyword.

Works with JAX 0.4.36 to 0.10.2 (the collective suite passed on 0.4.36, 0.4.38, 0.5.0, 0.6.0, 0.7.0
and 0.10.2 at 1, 2 and 4 ranks). CI runs the whole suite on the newest release allowed and the
collective suite on the floor, the lower bound of ``jax>=0.4.36,<0.11`` in ``pyproject.toml``
(.ci/floor); the upper bound is kept as mpi4jax keeps one. When a new JAX breaks something, this
module is where to adapt; when an old one would need too much here, raise that lower bound.
"""

from __future__ import annotations

import inspect

from jax._src.dispatch import apply_primitive
from jax._src.interpreters import mlir as _mlir_internal
from jax._src.lib.mlir import ir
from jax.core import ShapedArray, Tracer
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir
from jax.interpreters import partial_eval as _pe

try:  # JAX >= 0.5.0
    from jax import ffi
    from jax._src import ffi as _ffi_internal
except ImportError:  # JAX 0.4.3x
    from jax.extend import ffi

    _ffi_internal = None

__all__ = [
    "Primitive",
    "ShapedArray",
    "Tracer",
    "ad",
    "apply_primitive",
    "batching",
    "build_ffi_lowering_function",
    "ffi",
    "ir",
    "ir_attribute",
    "lowering_scratch",
    "mlir",
    "register_dce_rule",
    "register_lowering",
]


def register_dce_rule(prim: Primitive, rule) -> None:
    """``rule(used_outputs, eqn) -> (used_inputs, new_eqn)`` decides what of ``prim`` survives
    dead-code elimination of jaxprs. (JAX asks the rule from 0.4.36 on; before, an equation with
    no used result and no effect was dropped unasked, which is why 0.4.36 is the floor.)"""
    _pe.dce_rules[prim] = rule


def lowering_scratch(ctx: mlir.LoweringRuleContext, key) -> dict:
    """A dict private to ``key`` that lives while one module is lowered."""
    return ctx.module_context.cached_primitive_lowerings.setdefault(key, {})


# An MLIR attribute from a Python or NumPy value; public in jax.interpreters.mlir from JAX 0.7.1.
ir_attribute = _mlir_internal.ir_attribute

# jax.ffi.build_ffi_lowering_function: public from JAX 0.7.1, in jax._src.ffi in 0.6.0..0.7.0, absent
# before; skip_ffi_layout_processing (no layout constraints at all) from 0.7.0.
_build_ffi_lowering_function = getattr(ffi, "build_ffi_lowering_function", None) or getattr(
    _ffi_internal, "build_ffi_lowering_function", None)
_HAS_SKIP_LAYOUTS = _build_ffi_lowering_function is not None and (
    "skip_ffi_layout_processing" in inspect.signature(_build_ffi_lowering_function).parameters)


def build_ffi_lowering_function(target: str, *, skip_ffi_layout_processing: bool = False, **kwargs):
    """``jax.ffi.build_ffi_lowering_function`` of JAX 0.10: ``(ctx, *operands) -> ir.Operation``."""
    if _HAS_SKIP_LAYOUTS:
        return _build_ffi_lowering_function(target, skip_ffi_layout_processing=skip_ffi_layout_processing,
                                            **kwargs)
    if _build_ffi_lowering_function is not None and not skip_ffi_layout_processing:
        return _build_ffi_lowering_function(target, **kwargs)
    # Older JAX: the same FFI custom call, made as the builder makes it.
    kwargs["backend_config"] = kwargs.get("backend_config") or {}

    def lowering(ctx: mlir.LoweringRuleContext, *operands: ir.Value):
        return _mlir_internal.custom_call(target, operands=list(operands), api_version=4, **kwargs)

    return lowering


# Primitive lowerings are cached per module (and ``cacheable=False`` opts out) from JAX 0.7.0;
# before, nothing was cached unless a rule asked for it, and the keyword did not exist.
_HAS_CACHEABLE = "cacheable" in inspect.signature(mlir.register_lowering).parameters


def register_lowering(prim: Primitive, rule, *, platform: str | None = None, cacheable: bool = True) -> None:
    """``mlir.register_lowering`` of JAX 0.10."""
    mlir.register_lowering(prim, rule, platform=platform, **({"cacheable": cacheable} if _HAS_CACHEABLE else {}))
