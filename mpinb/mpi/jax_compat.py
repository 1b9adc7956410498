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
- For threading the ordering chain through nested computations (mpinb/mpi/ordering.py): the
  primitives of nested constructs (``jax.extend.core.primitives``), their current lowering
  rules (``mlir._lowerings``), building jaxprs (``Jaxpr.replace``, ``core.gensym``,
  ``core.new_jaxpr_eqn``), and lowering a closed jaxpr inline in the current block (JAX's own
  rule for ``custom_jvp_call``, which does exactly that).

Tested with JAX 0.10.2 (CI installs the newest release allowed); ``pyproject.toml`` asks for
``jax>=0.10.2,<0.11`` (and the same ``jaxlib`` to build against), an upper bound as mpi4jax keeps
one. When a new JAX breaks something, this module is where to adapt.
"""

from __future__ import annotations

from jax._src import core as _core
from jax._src.custom_derivatives import _custom_jvp_vjp_call_lowering
from jax._src.dispatch import apply_primitive
from jax._src.interpreters import partial_eval as _pe_src
from jax._src.interpreters.batching import BatchTrace, BatchTracer
from jax._src.lib.mlir import ir
from jax._src.lib.mlir.dialects import hlo
from jax.core import ShapedArray, Tracer
from jax.extend.core import ClosedJaxpr, Jaxpr, Primitive
from jax.extend.core import primitives as _prims
from jax.interpreters import ad, batching, mlir
from jax.interpreters import partial_eval as _pe

__all__ = [
    "ClosedJaxpr",
    "Jaxpr",
    "Primitive",
    "ShapedArray",
    "Tracer",
    "ad",
    "apply_primitive",
    "batched_like_vmap",
    "batching",
    "block_function_name",
    "dce_rule",
    "inline_closed_jaxpr",
    "ir",
    "lowering_rule",
    "lowering_scratch",
    "mlir",
    "nested_primitives",
    "new_eqn",
    "new_var",
    "optimization_barrier",
    "register_dce_rule",
]


def dce_rule(prim: Primitive):
    """The dead-code rule JAX applies to ``prim`` (its own, or the default one)."""
    return _pe.dce_rules.get(prim, _pe_src._default_dce_rule)


def register_dce_rule(prim: Primitive, rule) -> None:
    """``rule(used_outputs, eqn) -> (used_inputs, new_eqn)`` decides what of ``prim`` survives
    dead-code elimination of jaxprs."""
    _pe.dce_rules[prim] = rule


def lowering_scratch(ctx: mlir.LoweringRuleContext, key) -> dict:
    """A dict private to ``key`` that lives while one module is lowered."""
    return ctx.module_context.cached_primitive_lowerings.setdefault(key, {})


def nested_primitives(names) -> dict[str, Primitive]:
    """Those of the primitives named (as in ``jax.extend.core.primitives``) that this JAX has."""
    return {n: getattr(_prims, n) for n in names if getattr(_prims, n, None) is not None}


def lowering_rule(prim: Primitive):
    """The lowering rule JAX has registered for ``prim`` on every platform."""
    entry = mlir._lowerings[prim]
    return getattr(entry, "rule", entry)


def inline_closed_jaxpr(ctx: mlir.LoweringRuleContext, closed: ClosedJaxpr, *args):
    """Lower ``closed`` applied to ``args`` in the current block (no function of its own)."""
    return _custom_jvp_vjp_call_lowering(ctx, *args, call_jaxpr=closed)


def new_var(aval) -> _core.Var:
    return _core.gensym()(aval)


def new_eqn(invars, outvars, prim: Primitive, params: dict | None = None):
    return _core.new_jaxpr_eqn(invars, outvars, prim, params or {}, _core.no_effects)


def block_function_name(block: ir.Block) -> str | None:
    """The name of the function an MLIR block belongs to; for a block of an operation not yet
    placed in a function (shard_map's body while it is built), that operation's name."""
    op = block.owner
    while op is not None:
        op = op.operation  # an OpView's .name is its symbol, the Operation's is its kind
        if op.name == "func.func":
            return ir.StringAttr(op.attributes["sym_name"]).value
        try:
            op = op.parent
        except ValueError:  # a detached operation: the MLIR bindings raise instead of None
            return op.name
    return None


def optimization_barrier(value: ir.Value) -> ir.Value:
    """``value`` through an optimization barrier: XLA cannot see that it is the input."""
    return hlo.OptimizationBarrierOp([value]).results[0]


def batched_like_vmap(x, broadcast):
    """Under ``jax.vmap``, ``x`` as a value batched along the innermost vmap's axis: unchanged if
    it already is, else ``broadcast(x, size)`` (computed outside that vmap) marked as batched
    along axis 0. Outside any vmap, ``x`` unchanged."""
    trace = _core.trace_ctx.trace
    if not isinstance(trace, BatchTrace) or (isinstance(x, BatchTracer) and x._trace is trace):
        return x
    with _core.set_current_trace(trace.parent_trace):
        value = broadcast(x, trace.axis_data.size)
    return BatchTracer(trace, value, 0)
