"""How an MPI collective becomes a JAX primitive and an XLA custom call.

Ordering without the cost of a JAX effect
-----------------------------------------
A collective must run on every rank, in program order, exactly once per execution, and never
concurrently with another one. JAX's way to say so is an effect (``has_side_effect=True`` in
``jax.ffi.ffi_call``), but any effect sends every call of the jitted function through JAX's
Python dispatch path, which costs about 60 us per call here. mpinb keeps the C++ fast path and
gets the same guarantees from three cheaper mechanisms:

1. **Never dead code.** The custom call is emitted with ``has_side_effect=True`` at the HLO level
   (XLA keeps it even when its result is unused) and the primitive has a DCE rule that keeps it
   in jaxprs. Neither is a JAX effect, so dispatch stays on the fast path.
2. **Program order by data dependency.** Every custom call takes one extra operand and returns
   one extra result, a 1-byte *ordering buffer*. Each collective consumes the ordering buffer
   produced by the previous one, so XLA's scheduler and its concurrent thunk executor must run
   them in program order; mpinb/mpi/ordering.py threads that chain through nested jits, loops,
   branches and custom-derivative functions.
3. **No concurrency.** The handlers hold a process-wide mutex while inside MPI (ext/_ffi.pyx),
   so collectives in separate computations (loop bodies, branches) never overlap either.

Eager calls: a collective called outside any transformation runs the same one-equation
computation JAX's ``bind`` would compile for it (``apply_primitive``), but reaches it directly
(``Collective.bind``): JAX's bind machinery cost 8-10 us of a 23 us eager call of a 16-byte
alltoall on one process, and more with the colder caches of a program's loop.

Layouts: every operand and result is pinned row-major (minor-to-major ``(n-1, ..., 0)``), so a
transposed value reaches MPI in the order its indices say, not in whatever physical layout XLA
preferred (the bug behind mpi4jax issue 176).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache, partial

import numpy as np

from ..mpi_ops import OPS
from . import library
from .jax_compat import (
    Primitive,
    apply_primitive,
    at_top_level,
    build_ffi_lowering_function,
    eager_constant_folding,
    ir,
    ir_attribute,
    lower_every_primitive_in_place,
    mlir,
    register_dce_rule,
    register_lowering,
    varying_like_inputs,
)
from .ordering import ORDER_AVAL, ORDER_DTYPE, ORDERED, leave_order, refuse_inside_host_callback, take_order


def row_major(ndim: int) -> tuple[int, ...]:
    """Minor-to-major layout of a row-major array of rank ``ndim``."""
    return tuple(range(ndim - 1, -1, -1))


def _tensor_type(shape, dtype) -> ir.Type:
    return ir.RankedTensorType.get(list(shape), mlir.dtype_to_ir_type(np.dtype(dtype)))


def _in_loop_body() -> bool:
    """Whether the current block is the body (or condition) of a while loop."""
    owner = ir.InsertionPoint.current.block.owner
    return owner is not None and owner.operation.name == "stablehlo.while"


def _nbytes(aval) -> int:
    return int(np.prod(aval.shape, dtype=np.int64)) * np.dtype(aval.dtype).itemsize


def _ir_attr(value) -> ir.Attribute:
    if isinstance(value, (tuple, list, np.ndarray)):
        return ir_attribute(np.asarray(value, dtype=np.int64))
    return ir_attribute(np.int64(value))


def _keep_alive_dce(used_outputs: list[bool], eqn):
    """A collective is never dead code: every rank must take part."""
    return [True] * len(eqn.invars), eqn


def make_primitive(
    name: str,
    abstract_eval: Callable,
    attributes: Callable[..., dict],
    *,
    multiple_results: bool = False,
    operands_passed: Callable[..., Sequence[int]] | None = None,
    aliases: Callable[..., dict[int, int]] | None = None,
    loop_alias_min_bytes: int | None = None,
    operand_layouts: Callable[..., Sequence[Sequence[int]] | None] | None = None,
) -> Primitive:
    """Define primitive ``mpinb_<name>`` lowered to the FFI target ``mpinb_<name>``; ``name`` is
    an op of mpinb/mpi_ops.py, whose row says which attributes the handler reads.

    abstract_eval(*avals, **params) -> aval or list of avals
    attributes(**params) -> {attribute name: int or sequence of ints} for the handler
    operands_passed(**params) -> indices of the primitive's operands given to the handler
        (default: all); the others only determine shapes.
    aliases(**params) -> {operand index: result index} buffers XLA may share.
    loop_alias_min_bytes: inside a loop body, operand 0 and result 0 may share their buffer
        when the operand has at least this many bytes (the loop carry is then not copied).
    operand_layouts(args, avals) -> minor-to-major layouts of the passed operands, or None for no
        layout constraints at all. Only mpinb.mpi.teaching overrides the row-major default, to
        reproduce the seed bug on purpose.
    """
    if name not in OPS:
        raise ValueError(f"mpinb: {name!r} is not an op of mpinb/mpi_ops.py")
    prim = Collective(f"mpinb_{name}", name)
    prim.multiple_results = multiple_results
    prim.def_impl(partial(_eager, prim, name))
    prim.def_abstract_eval(_noting_new_rules(name, varying_like_inputs(abstract_eval)))
    register_dce_rule(prim, _keep_alive_dce)
    target = f"mpinb_{name}"

    def lowering(ctx: mlir.LoweringRuleContext, *args: ir.Value, **params):
        library.load()
        passed = list(range(len(args))) if operands_passed is None else list(operands_passed(**params))
        operands = [args[i] for i in passed] + [take_order(ctx, name)]
        avals_out = list(ctx.avals_out)
        result_types = [_tensor_type(a.shape, a.dtype) for a in avals_out] + [_tensor_type((), ORDER_DTYPE)]
        if aliases is not None:
            alias_map = {passed.index(i): o for i, o in aliases(**params).items() if not _kept_parameter(args[i])}
        else:
            alias_map = _loop_alias(ctx, loop_alias_min_bytes)
        build = build_ffi_lowering_function(
            target,
            **_layout_kwargs(ctx, args, passed, operand_layouts),
            backend_config={k: _ir_attr(v) for k, v in _checked_attributes(name, attributes(**params)).items()},
            result_types=result_types,
            has_side_effect=True,
            operand_output_aliases=alias_map or None,
        )
        op = build(ctx.replace(avals_in=[ctx.avals_in[i] for i in passed] + [ORDER_AVAL],
                               avals_out=[*avals_out, ORDER_AVAL]), *operands)
        results = list(op.results)
        leave_order(ctx, results[-1])
        return results[:-1]

    # Not cacheable: each equation must take the ordering buffer of the one before it.
    register_lowering(prim, lowering, platform="cpu", cacheable=False)
    for platform in UNSERVED_PLATFORMS:
        register_lowering(prim, partial(_unserved, name), platform=platform, cacheable=False)
    ORDERED.add(prim)
    return prim


class Collective(Primitive):
    """An mpinb primitive: called eagerly (no transformation tracing on this thread, no named
    axis in scope), it runs its compiled one-equation computation straight away; traced, it binds
    as any primitive."""

    def __init__(self, name: str, op: str):
        super().__init__(name)
        self.op = op
        #: (params, computation) of the last eager call: a loop calls with the same parameters,
        #: the same objects (mpinb.mpi.validation keeps the default communicator's), which compare
        #: equal without hashing them for the cache
        self._last_eager: tuple = ({}, None)

    def bind(self, *args, **params):
        if not at_top_level():
            return super().bind(*args, **params)
        refuse_inside_host_callback(self.op)
        last_params, run = self._last_eager
        if run is None or last_params != params:
            try:
                run = _eager_computation(self, tuple(params.items()))
            except TypeError:  # a parameter that cannot be a cache key: JAX's own path
                return super().bind(*args, **params)
            self._last_eager = (params, run)
        return run(*args)


@lru_cache(maxsize=4096)
def _eager_computation(prim: Collective, params: tuple) -> Callable:
    """The jitted one-equation computation of ``prim`` with ``params``, as JAX's
    ``apply_primitive`` makes it (same name, so the same module name in HLO dumps). Under
    ``jax.disable_jit`` it runs ``Primitive.bind``, whose eager rule compiles it regardless."""
    import jax

    kwargs = dict(params)

    def computation(*args):
        with eager_constant_folding(False):  # else, under ensure_compile_time_eval, an operandless
            return Primitive.bind(prim, *args, **kwargs)  # barrier would run once, at trace time

    computation.__name__ = computation.__qualname__ = prim.name
    computation._apply_primitive = True  # JAX's FloatingPointError names the primitive, as for bind
    return jax.jit(computation)


def _eager(prim: Primitive, name: str, *args, **params):
    """A collective run eagerly (compiled alone, cached), unless called inside a host callback."""
    refuse_inside_host_callback(name)
    return apply_primitive(prim, *args, **params)


#: accelerator platforms whose buffers the compiled library (host memory, MPI) does not serve
UNSERVED_PLATFORMS = ("cuda", "rocm", "tpu")


def _unserved(name: str, ctx: mlir.LoweringRuleContext, *args, **params):
    """A collective compiled for an accelerator: refused, naming the platform and what to do
    (instead of JAX's 'MLIR translation rule ... not found for platform')."""
    from mpi4py import MPI

    platforms = "/".join(getattr(ctx.module_context, "platforms", None) or ["an accelerator"])
    raise NotImplementedError(
        f"mpinb: {name} on rank {MPI.COMM_WORLD.Get_rank()}: mpinb's collectives move arrays in host memory, but "
        f"this computation is compiled for {platforms}. Run the engines' JAX on the CPU (the default of %mpijax "
        "start and MPICluster; in a script, JAX_PLATFORMS=cpu), or put the arrays on the CPU first "
        "(jax.device_put(x, jax.devices('cpu')[0])) and run the collective there")


def _noting_new_rules(name: str, abstract_eval):
    """``abstract_eval`` that first refuses a collective traced inside a host callback and
    lowers in place a primitive registered since mpinb was imported (ordering.py): a construct
    the program holds the collective in is traced before it is lowered."""
    def evaluate(*avals, **params):
        refuse_inside_host_callback(name)
        lower_every_primitive_in_place()
        return abstract_eval(*avals, **params)
    return evaluate


def _layout_kwargs(ctx, args, passed, operand_layouts) -> dict:
    """Layouts of the passed operands (row-major unless operand_layouts says otherwise; None:
    unconstrained) and of the results (row-major), plus the ordering token's."""
    layouts = [row_major(len(ctx.avals_in[i].shape)) for i in passed]
    if operand_layouts is not None:
        layouts = operand_layouts([args[i] for i in passed], [ctx.avals_in[i] for i in passed])
    if layouts is None:
        return {"skip_ffi_layout_processing": True}
    result_layouts = [row_major(len(a.shape)) for a in ctx.avals_out] + [()]
    return {"operand_layouts": [*layouts, ()], "result_layouts": result_layouts}


#: argument attributes by which JAX marks a donated argument of the entry function
DONATION_ATTRIBUTES = ("tf.aliasing_output", "jax.buffer_donor")


def _kept_parameter(value: ir.Value) -> bool:
    """Whether ``value`` is an argument of the compiled function that the caller keeps (not
    donated). XLA would copy it to let a result share its buffer: the copy costs more than
    the in-place call saves (16 MiB allreduce, 2 ranks, in a step loop: 1.07x raw with the copy
    against 1.0x out of place), so such an operand is not aliased. Arguments of the inner
    functions XLA inlines later (nested jit, loop bodies) may be anything and stay aliased."""
    if not isinstance(value, ir.BlockArgument):
        return False
    func = value.owner.owner
    if func.operation.name != "func.func" or "sym_visibility" not in func.attributes:
        return False
    if ir.StringAttr(func.attributes["sym_visibility"]).value != "public":
        return False
    if "arg_attrs" not in func.attributes:
        return True
    attrs = ir.DictAttr(ir.ArrayAttr(func.attributes["arg_attrs"])[value.arg_number])
    return not any(name in attrs for name in DONATION_ATTRIBUTES)


def _loop_alias(ctx, min_bytes: int | None) -> dict[int, int]:
    """Inside a loop body, operand 0 and result 0 share their buffer from min_bytes on."""
    if min_bytes is not None and _in_loop_body() and _nbytes(ctx.avals_in[0]) >= min_bytes:
        return {0: 0}
    return {}


def _checked_attributes(name: str, attrs: dict) -> dict:
    """attrs, if they are exactly those the op's handler reads (its row in mpinb/mpi_ops.py)."""
    if sorted(attrs) != sorted(OPS[name]):  # the handler would refuse it: say where
        raise TypeError(f"mpinb_{name}: lowered with attributes {sorted(attrs)}, but its handler "
                        f"reads {sorted(OPS[name])} (mpinb/mpi_ops.py)")
    return attrs
