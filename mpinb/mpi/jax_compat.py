"""Every use of JAX's internals, in one place.

mpinb defines primitives with custom lowerings, which JAX's public API does not fully cover.
Whatever is reached here beyond ``jax``/``jax.ffi``/``jax.extend`` may change between JAX
releases, so it is named once, with what it is for:

- ``apply_primitive`` (``jax._src.dispatch``): the eager implementation of a primitive (compile
  the one-equation computation once, cache it, run it).
- ``backends_are_initialized`` (``jax._src.xla_bridge``): whether JAX's backend was started,
  asked without starting it (mpinb/engine/settle.py).
- ``ir`` (``jax._src.lib.mlir.ir``): MLIR types and values in lowering rules.
- ``register_dce_rule`` (``jax.interpreters.partial_eval.dce_rules``): keeps a collective whose
  result is unused in the jaxpr (every rank must take part).
- ``lowering_scratch`` (``LoweringRuleContext.module_context.cached_primitive_lowerings``): a
  dict that lives as long as one module's lowering, where the ordering chain between
  collectives is kept (mpinb/mpi/ordering.py).
- ``ad``, ``batching``, ``mlir`` (``jax.interpreters``): the AD, vmap and lowering rule tables.
- ``ffi``: ``jax.ffi`` (``jax.extend.ffi`` before JAX 0.5.0).
- ``build_ffi_lowering_function``, ``register_lowering``, ``ir_attribute``: ``jax.ffi``'s and
  ``mlir``'s as in JAX 0.10, also on the older releases where one is private or lacks a keyword.
- For threading the ordering chain through nested computations (mpinb/mpi/ordering.py): the
  primitives of nested constructs (``jax.extend.core.primitives``, some under an older name or
  in ``jax._src`` on older JAX), their current lowering rules (``mlir._lowerings``), building
  jaxprs (``Jaxpr.replace``, ``core.gensym``, ``core.new_jaxpr_eqn``), and lowering a closed
  jaxpr inline in the current block (JAX's own rule for ``custom_jvp_call``, which does exactly
  that).
- For ``shard_map`` (ordering.py): its primitive (``jax._src.shard_map`` or
  ``jax.experimental.shard_map``), its parameters (specs or names per operand, the mesh), and
  the varying axes of abstract values (``manual_axis_type``/``vma``).
- For ``recv`` under ``vmap``: the current trace (``core.trace_ctx``) and ``BatchTrace``/
  ``BatchTracer`` (``parent_trace``, ``axis_data.size``).
- ``at_top_level`` (``core.trace_ctx.is_top_level``): whether a collective is called eagerly,
  which mpinb/mpi/primitives.py then runs without JAX's ``bind``, folding off as JAX's does.
- ``lower_every_primitive_in_place`` (``mlir._uncacheable_primitives``, the rule tables),
  ``user_line`` (``source_info_util.user_frames``), ``CALLBACK_FILES`` (the files of JAX's
  host callbacks): ordering.py's rule for every construct.

Which JAX releases: mpinb/mpi/jax_versions.py. An internal a JAX no longer has is an
``ImportError`` that names it, what mpinb used it for and which JAX to install. When a new JAX
breaks something, this module is where to adapt; when an old one would need too much here, raise
the floor.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import os
import re

import jax
from jaxlib.version import __version__ as jaxlib_version

from .jax_versions import FLOOR, NEWEST_TESTED, check_jax_version, check_jaxlib_version, dotted, next_series

check_jax_version(jax.__version__)
check_jaxlib_version(jaxlib_version)


def _internal(module: str, name: str | None = None, *, purpose: str):
    """``module`` (or its attribute ``name``): a JAX internal. One this JAX lacks is an
    ImportError that names it, what mpinb needs it for and the JAX to install."""
    try:
        found = importlib.import_module(module)
        return getattr(found, name) if name else found
    except (ImportError, AttributeError) as exc:
        what = f"{module}.{name}" if name else module
        raise ImportError(
            f"mpinb: JAX {jax.__version__} has no {what} (used for {purpose}); mpinb was tested with "
            f"JAX {dotted(FLOOR)} to {dotted(NEWEST_TESTED)}.x: pip install 'jax<{next_series()}', "
            f"or an mpinb that supports JAX {jax.__version__}"
        ) from exc


_ad_checkpoint = _internal("jax._src.ad_checkpoint", purpose="ordering inside checkpoint")
_core = _internal("jax._src.core", purpose="building jaxprs and reading the current trace")
_custom_derivatives = _internal("jax._src.custom_derivatives", purpose="ordering inside custom_jvp/custom_vjp")
_pjit = _internal("jax._src.pjit", purpose="ordering inside nested jit")
apply_primitive = _internal("jax._src.dispatch", "apply_primitive", purpose="running a collective eagerly")
backends_are_initialized = _internal("jax._src.xla_bridge", "backends_are_initialized",
                                     purpose="ending a cell once its queued work ran, without starting JAX")
_mlir_internal = _internal("jax._src.interpreters.mlir", purpose="lowering the custom calls")
_pe_src = _internal("jax._src.interpreters.partial_eval", purpose="keeping collectives through dead-code removal")
at_top_level = _internal("jax._src.core", "trace_ctx", purpose="running eager collectives").is_top_level
eager_constant_folding = _internal("jax._src.config", "eager_constant_folding", purpose="running eager collectives")
BatchTrace = _internal("jax._src.interpreters.batching", "BatchTrace", purpose="recv under vmap")
BatchTracer = _internal("jax._src.interpreters.batching", "BatchTracer", purpose="recv under vmap")
ir = _internal("jax._src.lib.mlir", "ir", purpose="lowering the custom calls")
hlo = _internal("jax._src.lib.mlir.dialects", "hlo", purpose="lowering the custom calls")
ShapedArray = _internal("jax.core", "ShapedArray", purpose="abstract values of results")
Tracer = _internal("jax.core", "Tracer", purpose="telling traced operands apart")
ClosedJaxpr = _internal("jax.extend.core", "ClosedJaxpr", purpose="ordering inside nested computations")
Jaxpr = _internal("jax.extend.core", "Jaxpr", purpose="ordering inside nested computations")
Primitive = _internal("jax.extend.core", "Primitive", purpose="the collectives' primitives")
_prims = _internal("jax.extend.core.primitives", purpose="ordering inside nested computations")
ad = _internal("jax.interpreters.ad", purpose="the collectives' autodiff rules")
batching = _internal("jax.interpreters.batching", purpose="the collectives' vmap rules")
mlir = _internal("jax.interpreters.mlir", purpose="lowering the custom calls")
_pe = _internal("jax.interpreters.partial_eval", purpose="keeping collectives through dead-code removal")

_SHARD_MAP_MODULES = []
for _name in ("jax._src.shard_map", "jax.experimental.shard_map"):
    with contextlib.suppress(ImportError):
        _SHARD_MAP_MODULES.append(importlib.import_module(_name))

try:  # JAX >= 0.5.0
    from jax import ffi
    from jax._src import ffi as _ffi_internal
except ImportError:  # JAX 0.4.3x
    from jax.extend import ffi

    _ffi_internal = None

__all__ = [
    "CALLBACK_FILES",
    "ClosedJaxpr",
    "Jaxpr",
    "Primitive",
    "ShapedArray",
    "Tracer",
    "ad",
    "apply_primitive",
    "at_top_level",
    "backends_are_initialized",
    "batched_like_vmap",
    "batching",
    "block_function_name",
    "block_owner",
    "build_ffi_lowering_function",
    "dce_rule",
    "eager_constant_folding",
    "ffi",
    "inline_closed_jaxpr",
    "ir",
    "ir_attribute",
    "lower_every_primitive_in_place",
    "lowering_rule",
    "lowering_scratch",
    "mlir",
    "nested_primitives",
    "new_eqn",
    "new_var",
    "optimization_barrier",
    "register_dce_rule",
    "register_lowering",
    "shard_map_local_devices",
    "shard_map_manual_axes",
    "shard_map_with_replicated",
    "user_line",
    "varying_like_inputs",
]


def dce_rule(prim: Primitive):
    """The dead-code rule JAX applies to ``prim`` (its own, or the default one)."""
    return _pe.dce_rules.get(prim, _pe_src._default_dce_rule)


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
# before, nothing was cached unless a rule asked for it, and the keyword did not exist. So on
# JAX < 0.7 every rule is what 0.7 calls uncached, and ordering.py's uncached wrappers only
# delegate.
_HAS_CACHEABLE = "cacheable" in inspect.signature(mlir.register_lowering).parameters


def register_lowering(prim: Primitive, rule, *, platform: str | None = None, cacheable: bool = True) -> None:
    """``mlir.register_lowering`` of JAX 0.10."""
    mlir.register_lowering(prim, rule, platform=platform, **({"cacheable": cacheable} if _HAS_CACHEABLE else {}))


def _lowering_tables() -> list[dict]:
    return [mlir._lowerings, *getattr(_mlir_internal, "_platform_specific_lowerings", {}).values()]


_LOWERED_IN_PLACE = [0]  # how many rules the tables held when every primitive was last marked


def lower_every_primitive_in_place() -> None:
    """Mark every primitive JAX has a lowering rule for as uncacheable. JAX >= 0.7 lowers an
    equation of a cacheable primitive into a function of its own (cached by parameters and
    operand types), then inlines a call to it; a collective nested in a higher-order primitive
    (custom_linear_solve, custom_vmap_call, ...) would be lowered inside that function, out of
    reach of the caller's ordering chain. Uncacheable, its rule runs in the caller's block, as
    every rule did before JAX 0.7. Cheap to call again: it only works when rules were added
    since (a primitive registered after mpinb was imported)."""
    uncacheable = getattr(_mlir_internal, "_uncacheable_primitives", None)
    tables = _lowering_tables()
    count = sum(len(t) for t in tables)
    if uncacheable is None or count == _LOWERED_IN_PLACE[0]:
        return
    for table in tables:
        uncacheable.update(table)
    _LOWERED_IN_PLACE[0] = count


#: JAX's modules that call a host callback's Python function (pure_callback, io_callback,
#: debug.callback, buffer_callback): a collective with one of them on its stack is refused
CALLBACK_FILES = tuple(os.path.join("jax", "_src", name) for name in ("callback.py", "debugging.py",
                                                                      "buffer_callback.py"))


def user_line(ctx: mlir.LoweringRuleContext, own_package: str) -> str:
    """``file:line`` of the user's code that traced the equation being lowered (the innermost
    frame outside JAX and outside ``own_package``), or '' where JAX keeps no traceback."""
    from jax._src import source_info_util

    traceback = getattr(ctx, "traceback", None)
    if traceback is None:  # older JAX inside a region: the MLIR location JAX set holds the frames
        for file_name, line in re.findall(r'"([^"]+)":(\d+):\d+', str(ir.Location.current)):
            if not file_name.startswith(own_package) and f"{os.sep}jax{os.sep}" not in file_name:
                return f"{file_name}:{line}"
        return ""
    if "source_info" in inspect.signature(source_info_util.user_frames).parameters:  # JAX < 0.5
        traceback = source_info_util.SourceInfo(traceback, source_info_util.NameStack())
    for frame in source_info_util.user_frames(traceback):
        if not frame.file_name.startswith(own_package):
            return f"{frame.file_name}:{frame.start_line}"
    return ""


# Constructs named as in jax.extend.core.primitives of JAX 0.10 whose primitive this JAX has
# elsewhere or under another name (each is wrapped too where both exist):
_OTHER_PRIMITIVES = {
    # jit_p was pjit_p (jax._src.pjit, not in jax.extend.core.primitives) before JAX 0.7.0.
    "jit_p": [getattr(_pjit, "pjit_p", None)],
    # remat_p is in jax.extend.core.primitives only from JAX 0.8 (jax._src.ad_checkpoint always).
    "remat_p": [getattr(_ad_checkpoint, "remat_p", None)],
    # custom_vjp functions were staged as custom_vjp_call_jaxpr (computation in ``fun_jaxpr``,
    # lowered inline by lower_fun) up to JAX 0.6.0; custom_vjp_call from 0.6.1.
    "custom_vjp_call_p": [getattr(_custom_derivatives, "custom_vjp_call_jaxpr_p", None)],
    # shard_map_p is not in jax.extend.core.primitives: jax._src.shard_map from JAX 0.6.1 (with
    # ``in_specs``/``out_specs``), jax.experimental.shard_map before (``in_names``/``out_names``).
    "shard_map_p": [getattr(_shard_map, "shard_map_p", None) for _shard_map in _SHARD_MAP_MODULES],
}


def nested_primitives(names) -> list[tuple[str, Primitive]]:
    """``(name, primitive)`` for each of the constructs named (as in ``jax.extend.core.primitives``
    of JAX 0.10) that this JAX has, one pair per primitive it lowers that construct as (up to JAX
    0.6.0, custom_vjp_call_p exists but is never lowered: it has no rule)."""
    found = []
    for name in names:
        prims = [getattr(_prims, name, None), *_OTHER_PRIMITIVES.get(name, ())]
        for prim in dict.fromkeys(p for p in prims if p is not None and p in mlir._lowerings):
            found.append((name, prim))
    return found


def lowering_rule(prim: Primitive):
    """The lowering rule JAX has registered for ``prim`` on every platform (JAX >= 0.7 keeps an
    entry with the rule and whether it may be cached, earlier JAX the rule itself)."""
    entry = mlir._lowerings[prim]
    return getattr(entry, "rule", entry)


def inline_closed_jaxpr(ctx: mlir.LoweringRuleContext, closed: ClosedJaxpr, *args):
    """Lower ``closed`` applied to ``args`` in the current block (no function of its own)."""
    if hasattr(_custom_derivatives, "_custom_jvp_vjp_call_lowering"):  # JAX >= 0.7.0
        return _custom_derivatives._custom_jvp_vjp_call_lowering(ctx, *args, call_jaxpr=closed)
    # JAX < 0.7: what its rule for custom_jvp_call (_custom_jvp_call_mlir_translation, whose
    # parameters change between releases) does; jaxpr_subcomp's signature is that of 0.4.36..0.7.0.
    out, tokens = mlir.jaxpr_subcomp(ctx.module_context, closed.jaxpr, ctx.name_stack, ctx.tokens_in,
                                     _mlir_internal._ir_consts(closed.consts), *args,
                                     dim_var_values=ctx.dim_var_values)
    ctx.set_tokens_out(tokens)
    return out


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


def block_owner(block: ir.Block) -> str | None:
    """The kind of operation a block belongs to (``func.func`` for a function's body,
    ``stablehlo.while`` for a loop's, ...), None for a block of no operation."""
    op = block.owner
    return None if op is None else op.operation.name


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


def shard_map_with_replicated(params: dict, *, inputs_at: int, outputs_at: int) -> dict:
    """``shard_map``'s parameters with one more replicated operand (at ``inputs_at``) and one more
    replicated result (at ``outputs_at``): a ``PartitionSpec()`` in ``in_specs``/``out_specs``
    (JAX >= 0.6.1), an empty dict of names in ``in_names``/``out_names`` before."""
    from jax.sharding import PartitionSpec

    params = dict(params)
    for key, at, empty in (("in_specs", inputs_at, PartitionSpec()), ("out_specs", outputs_at, PartitionSpec()),
                           ("in_names", inputs_at, {}), ("out_names", outputs_at, {})):
        if key in params:
            specs = list(params[key])
            specs.insert(at, empty)
            params[key] = tuple(specs)
    return params


def shard_map_local_devices(ctx: mlir.LoweringRuleContext, mesh) -> int:
    """How many devices of this process the ``shard_map`` being lowered runs on: those of its
    mesh; for a mesh without devices (an abstract one, from ``jax.set_mesh``), those the module
    is compiled for (``axis_context``); failing both, all of this process's devices, or the
    mesh's size if that is smaller."""
    import jax

    try:
        devices = mesh.devices
    except (AttributeError, ValueError):  # JAX's AbstractMesh raises ValueError
        devices = None
    if not hasattr(devices, "flat"):
        axis = ctx.module_context.axis_context
        devices = getattr(axis, "device_assignment", None) or getattr(getattr(axis, "mesh", None), "devices", None)
    if devices is None:  # at most the mesh's size
        return min(getattr(mesh, "size", jax.local_device_count()), jax.local_device_count())
    flat = devices.flat if hasattr(devices, "flat") else devices
    return sum(1 for d in flat if d.process_index == jax.process_index())


def shard_map_manual_axes() -> frozenset:
    """The mesh axes a ``shard_map`` body being traced now is manual over (its values may
    differ along them); empty outside any ``shard_map``. Known on JAX 0.10 (the context's
    abstract mesh), empty before."""
    try:
        from jax._src import mesh as _mesh
    except ImportError:
        return frozenset()
    if not hasattr(_mesh, "get_abstract_mesh"):
        return frozenset()
    return frozenset(getattr(_mesh.get_abstract_mesh(), "manual_axes", ()))


def _checks_vma() -> bool:
    """Whether JAX checks how values vary over manual axes here (``shard_map(check_vma=True)``)."""
    from jax._src import config as _config

    check = getattr(_config, "_check_vma", None)
    return bool(check is not None and check.value)


def varying_like_inputs(abstract_eval):
    """``abstract_eval`` whose results, inside a ``shard_map`` body, vary over every manual axis
    (an MPI result differs per process whatever its operand: ``scan``, ``recv``, ``allreduce``
    on a sub-communicator), so that JAX's check of ``out_specs`` refuses to take one as
    replicated. Outside ``shard_map`` nothing changes. JAX keeps those axes in
    ``manual_axis_type`` (0.10, with the manual mesh in ``sharding``), in ``vma`` (0.6.1..0.9:
    there the operands' axes only), or not at all (older)."""
    def rule(*avals, **params):
        out = abstract_eval(*avals, **params)
        outs = [_varying(o, avals) for o in (out if isinstance(out, list) else [out])]
        return outs if isinstance(out, list) else outs[0]
    return rule


def _varying(out, avals):
    from jax.sharding import NamedSharding, PartitionSpec

    axes = shard_map_manual_axes() if _checks_vma() else frozenset()
    if axes and hasattr(out, "manual_axis_type"):  # JAX 0.10
        from jax._src import mesh as _mesh

        varying = axes.union(*(a.manual_axis_type.varying for a in avals if hasattr(a, "manual_axis_type")))
        return out.update(sharding=NamedSharding(_mesh.get_abstract_mesh(), PartitionSpec()),
                          manual_axis_type=_core.ManualAxisType(varying=varying))
    vma = frozenset().union(*(getattr(a, "vma", None) or () for a in avals))
    if vma and hasattr(out, "vma"):  # JAX 0.6.1..0.9
        return out.update(vma=vma)
    return out
