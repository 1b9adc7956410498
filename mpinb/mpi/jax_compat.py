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

Tested with JAX 0.10.2 (CI installs the newest release allowed); ``pyproject.toml`` asks for
``jax>=0.10.2,<0.11`` (and the same ``jaxlib`` to build against), an upper bound as mpi4jax keeps
one. When a new JAX breaks something, this module is where to adapt.
"""

from __future__ import annotations

from jax._src.dispatch import apply_primitive
from jax._src.lib.mlir import ir
from jax.core import ShapedArray, Tracer
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir
from jax.interpreters import partial_eval as _pe

__all__ = [
    "Primitive",
    "ShapedArray",
    "Tracer",
    "ad",
    "apply_primitive",
    "batching",
    "ir",
    "lowering_scratch",
    "mlir",
    "register_dce_rule",
]


def register_dce_rule(prim: Primitive, rule) -> None:
    """``rule(used_outputs, eqn) -> (used_inputs, new_eqn)`` decides what of ``prim`` survives
    dead-code elimination of jaxprs."""
    _pe.dce_rules[prim] = rule


def lowering_scratch(ctx: mlir.LoweringRuleContext, key) -> dict:
    """A dict private to ``key`` that lives while one module is lowered."""
    return ctx.module_context.cached_primitive_lowerings.setdefault(key, {})
