"""Program order of collectives across nested computations, without a JAX effect.

Every mpinb custom call consumes a 1-byte *ordering buffer* and produces the next one, so XLA
must run the collectives of one block of HLO in the order the program traced them. A program
also nests collectives in other computations: a nested ``jax.jit``, ``jax.checkpoint``,
``custom_jvp``/``custom_vjp`` functions, loop bodies and conditions (``fori_loop``, ``scan``,
``while_loop``), branches (``cond``, ``switch``). If each nested block started a chain of its
own, XLA could run two of them in either order once it inlines them, and a rank-dependent
program (``send`` on rank 0 where rank 1 does ``recv``) would swap messages or hang. So the
chain is threaded through every nested computation that holds a collective:

- every other construct is lowered in the caller's block, where the chain simply continues:
  JAX >= 0.7 would lower each equation of a primitive into a function of its own (cached, then
  inlined), so every primitive is marked uncacheable (``lower_every_primitive_in_place``), as
  all were before JAX 0.7. A construct whose rule lowers its computation through JAX's own
  implementation (``custom_linear_solve`` behind ``cg``/``gmres``/``bicgstab``,
  ``custom_vmap_call``, ``linear_call``, ``checkpoint``, ``custom_jvp``/``custom_vjp``, ...) thus
  lowers it in place; call-like constructs whose rule makes a function (nested ``jit``,
  ``closed_call``) are lowered inline by mpinb when they hold a collective;
- ``while`` and ``cond`` get the chain as one more loop carry or branch operand and result:
  their bodies, conditions and branches start from the value passed in (``order_enter``) and
  hand back the last one (``order_exit``);
- ``shard_map`` gets it as one more replicated operand and result, the same way. Its body runs
  once per device of the mesh, so a collective there is refused when the mesh has more than one
  device of this process (MPI talks between processes: each would call it several times).

Computations without an mpinb collective are lowered as JAX lowers them (without its per-equation
cache). A collective that still lands in a function of its own (a construct whose rule makes one
and that mpinb does not inline, such as ``custom_partitioning`` or ``pallas_call``) is refused
when compiled, naming the op, the construct, the rank and the user's line, rather than risk a
swap. No JAX effect is declared, so jitted calls keep JAX's C++ fast dispatch path.
"""

from __future__ import annotations

import os
import sys
import weakref

import numpy as np

from .jax_compat import (
    CALLBACK_FILES,
    ClosedJaxpr,
    Jaxpr,
    Primitive,
    ShapedArray,
    block_function_name,
    block_owner,
    dce_rule,
    inline_closed_jaxpr,
    ir,
    lower_every_primitive_in_place,
    lowering_rule,
    lowering_scratch,
    mlir,
    nested_primitives,
    new_eqn,
    new_var,
    optimization_barrier,
    register_dce_rule,
    register_lowering,
    shard_map_local_devices,
    shard_map_with_replicated,
    user_line,
)

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # mpinb/: not the user's line
ORDER_DTYPE = np.dtype(np.int8)
ORDER_AVAL = ShapedArray((), ORDER_DTYPE)
_CHAINS_KEY = ("mpinb", "ordering-chains")
_ENTRY_FUNCTION = "main"

# The primitives that take and give the ordering buffer (filled by primitives.make_primitive).
ORDERED: set[Primitive] = set()


# ---------------------------------------------------------------------------------------
# The chain within one block


def take_order(ctx: mlir.LoweringRuleContext, op_name: str = "collective") -> ir.Value:
    """The ordering buffer left by the previous collective of the current block, or handed to
    the block by the construct around it (order_enter); for the first collective in the body of
    the program's entry function, a fresh constant. Anywhere else (a function or region that
    some construct made and mpinb did not thread the chain into) the collective is refused."""
    block = ir.InsertionPoint.current.block
    value = lowering_scratch(ctx, _CHAINS_KEY).get(block)
    if value is not None:
        return value
    function, owner = block_function_name(block), block_owner(block)
    if function is None or (function == _ENTRY_FUNCTION and owner == "func.func"):
        return mlir.ir_constant(np.array(0, ORDER_DTYPE))
    from mpi4py import MPI

    line = user_line(ctx, _PACKAGE)
    where = (f"{function}, a construct that JAX lowers as a function of its own" if owner == "func.func"
             else f"a {owner} region of {function} that mpinb does not thread its ordering through")
    raise NotImplementedError(
        f"mpinb: {op_name} on rank {MPI.COMM_WORLD.Get_rank()}{f' at {line}' if line else ''} is inside {where}: "
        "mpinb cannot order it against the other collectives there, so it refuses rather than risk a swapped "
        "message or a hang; call the collective outside that construct")


#: source files known not to be one of CALLBACK_FILES: every eager collective walks its stack,
#: and one dictionary lookup per frame costs less than matching each file name again
_NOT_CALLBACK_FILES: dict[str, bool] = {}
#: id() -> code of the functions under whose frames no host callback's function can be called
#: (end_walks_at); the code is kept alive so that its id stays its own
_WALK_ENDS: dict[int, object] = {}


def end_walks_at(function) -> None:
    """Stop looking for a host callback at ``function``'s frames: what runs below them is not
    reached from a host callback. The engine's cell runner (mpinb.engine.code.execute_code):
    in a cell, 20 of the 25 frames of an eager collective's stack are the kernel's, below it."""
    _WALK_ENDS[id(function.__code__)] = function.__code__


def host_callback_frame():
    """The frame of JAX's host-callback machinery this thread is running inside, or None."""
    frame = sys._getframe(1)
    known = _NOT_CALLBACK_FILES.get
    while frame is not None:
        code = frame.f_code
        if id(code) in _WALK_ENDS:
            return None
        file_name = code.co_filename
        if known(file_name) is None:
            if file_name.endswith(CALLBACK_FILES):
                return frame
            if len(_NOT_CALLBACK_FILES) >= 4096:  # a notebook names each cell's code anew: bounded
                _NOT_CALLBACK_FILES.clear()
            _NOT_CALLBACK_FILES[file_name] = True
        frame = frame.f_back
    return None


def refuse_inside_host_callback(op_name: str) -> None:
    """A collective called from a host callback's Python function (``jax.pure_callback``,
    ``io_callback``, ``jax.debug.callback``): XLA runs the callback whenever its operands are
    ready, unordered with the collectives of the computation around it, so it is refused (a
    ``RuntimeError`` on this rank, which XLA reports from the computation)."""
    if host_callback_frame() is None:
        return
    import traceback

    from mpi4py import MPI

    user = [f for f in traceback.extract_stack() if not f.filename.startswith(_PACKAGE) and "/jax/" not in f.filename]
    line = f" at {user[-1].filename}:{user[-1].lineno}" if user else ""
    raise RuntimeError(
        f"mpinb: {op_name} on rank {MPI.COMM_WORLD.Get_rank()}{line} is called inside a host callback "
        "(jax.pure_callback, io_callback or debug.callback): XLA runs a callback whenever its operands are "
        "ready, unordered with the collectives around it, so mpinb refuses rather than risk a swapped message "
        "or a hang; return the data from the callback and call the collective in the traced program")


def leave_order(ctx: mlir.LoweringRuleContext, value: ir.Value) -> None:
    """Record ``value`` as the ordering buffer the next collective of this block consumes."""
    lowering_scratch(ctx, _CHAINS_KEY)[ir.InsertionPoint.current.block] = value


# order_enter(o): the chain of the current block starts from o (a loop carry, a branch operand).
# order_exit() -> o: the chain's last value, handed back to the enclosing block.
order_enter_p = Primitive("mpinb_order_enter")
order_enter_p.multiple_results = True
order_enter_p.def_abstract_eval(lambda o: [])
register_dce_rule(order_enter_p, lambda used, eqn: ([True], eqn))

order_exit_p = Primitive("mpinb_order_exit")
order_exit_p.def_abstract_eval(lambda: ORDER_AVAL)


def _enter_lowering(ctx, o):
    leave_order(ctx, o)
    return []


def _exit_lowering(ctx):
    # Behind an optimization barrier: a loop body without a collective of its own (its loop's
    # condition has one) would otherwise hand back its input unchanged, and XLA would drop the
    # loop-invariant carry and let the code after the loop start from the chain before it.
    return [optimization_barrier(take_order(ctx))]


register_lowering(order_enter_p, _enter_lowering, cacheable=False)
register_lowering(order_exit_p, _exit_lowering, cacheable=False)
ORDERED.update((order_enter_p, order_exit_p))


# ---------------------------------------------------------------------------------------
# Which computations hold a collective


def _sub_jaxprs(params: dict):
    for value in params.values():
        for item in value if isinstance(value, (tuple, list)) else (value,):
            if isinstance(item, Jaxpr):
                yield item
            elif isinstance(item, ClosedJaxpr):
                yield item.jaxpr


_HOLDS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # jaxpr -> answer, while it lives


def holds_collective(jaxpr: Jaxpr) -> bool:
    """Whether ``jaxpr`` or any computation nested in it calls an mpinb collective."""
    answer = _HOLDS.get(jaxpr)
    if answer is None:
        answer = _HOLDS[jaxpr] = any(eqn.primitive in ORDERED or _eqn_holds_collective(eqn) for eqn in jaxpr.eqns)
    return answer


def _eqn_holds_collective(eqn) -> bool:
    """Whether a computation nested in ``eqn`` (a loop body, a branch, a called jaxpr) holds one."""
    return any(holds_collective(j) for j in _sub_jaxprs(eqn.params))


def _kept(rule):
    """JAX's dead-code rule of a construct, except that a construct holding a collective is
    never removed, even when none of its results is used (a loop of sends, a branch that only
    receives into a discarded value): every rank must take part."""
    def dce(used_outputs, eqn):
        used_inputs, new_eqn = rule(used_outputs, eqn)
        if new_eqn is None and _eqn_holds_collective(eqn):
            return [True] * len(eqn.invars), eqn
        return used_inputs, new_eqn
    return dce


def _threaded(closed: ClosedJaxpr, at: int, out: bool) -> ClosedJaxpr:
    """``closed`` with the chain as input ``at`` (and, if ``out``, as output 0)."""
    return ClosedJaxpr(_threaded_open(closed.jaxpr, at, out), closed.consts)


def _threaded_open(jaxpr: Jaxpr, at: int, out: bool) -> Jaxpr:
    """``jaxpr`` with the chain as input ``at`` (and, if ``out``, as output 0)."""
    o_in = new_var(ORDER_AVAL)
    eqns = [new_eqn([o_in], [], order_enter_p), *jaxpr.eqns]
    outvars = list(jaxpr.outvars)
    if out:
        o_out = new_var(ORDER_AVAL)
        eqns.append(new_eqn([], [o_out], order_exit_p))
        outvars.insert(0, o_out)
    invars = list(jaxpr.invars)
    invars.insert(at, o_in)
    return jaxpr.replace(invars=invars, outvars=outvars, eqns=eqns)


def _call(rule, ctx, args, avals_in, avals_out, **params):
    """Apply JAX's ``rule`` with changed operands; keep the token effects it produced."""
    inner = ctx.replace(avals_in=avals_in, avals_out=avals_out)
    outs = rule(inner, *args, **params)
    if inner.tokens_out is not None:
        ctx.set_tokens_out(inner.tokens_out)
    return outs


# ---------------------------------------------------------------------------------------
# The lowering rules that thread the chain


def _inlined(rule, jaxpr_param: str):
    """A call-like construct: lowered inline in the caller's block when it holds a collective."""
    def lowering(ctx, *args, **params):
        jaxpr = params[jaxpr_param]
        if holds_collective(jaxpr.jaxpr if isinstance(jaxpr, ClosedJaxpr) else jaxpr):
            if isinstance(jaxpr, Jaxpr):
                jaxpr = ClosedJaxpr(jaxpr, ())
            return inline_closed_jaxpr(ctx, jaxpr, *args)
        return rule(ctx, *args, **params)
    return lowering


def _uncached(rule, jaxpr_param: str):
    """A construct whose own rule already lowers in place: only never cached as a function."""
    del jaxpr_param
    return lambda ctx, *args, **params: rule(ctx, *args, **params)


def _while(rule, jaxpr_param: str):
    def lowering(ctx, *args, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts, **params):
        if not (holds_collective(cond_jaxpr.jaxpr) or holds_collective(body_jaxpr.jaxpr)):
            return rule(ctx, *args, cond_jaxpr=cond_jaxpr, body_jaxpr=body_jaxpr,
                        cond_nconsts=cond_nconsts, body_nconsts=body_nconsts, **params)
        n = cond_nconsts + body_nconsts
        outs = _call(
            rule, ctx, [*args[:n], take_order(ctx, "while loop"), *args[n:]],
            [*ctx.avals_in[:n], ORDER_AVAL, *ctx.avals_in[n:]], [ORDER_AVAL, *ctx.avals_out],
            cond_jaxpr=_threaded(cond_jaxpr, cond_nconsts, out=False),
            body_jaxpr=_threaded(body_jaxpr, body_nconsts, out=True),
            cond_nconsts=cond_nconsts, body_nconsts=body_nconsts, **params)
        leave_order(ctx, outs[0])
        return outs[1:]
    del jaxpr_param
    return lowering


def _cond(rule, jaxpr_param: str):
    def lowering(ctx, index, *args, branches, **params):
        if not any(holds_collective(b.jaxpr) for b in branches):
            return rule(ctx, index, *args, branches=branches, **params)
        outs = _call(
            rule, ctx, [index, take_order(ctx, "cond"), *args],
            [ctx.avals_in[0], ORDER_AVAL, *ctx.avals_in[1:]], [ORDER_AVAL, *ctx.avals_out],
            branches=tuple(_threaded(b, 0, out=True) for b in branches), **params)
        leave_order(ctx, outs[0])
        return outs[1:]
    del jaxpr_param
    return lowering


def _shard_map(rule, jaxpr_param: str):
    """``shard_map``: the chain enters its body as one more operand and leaves as one more
    result, both replicated (every device holds the same byte). Its body runs once per device,
    so it may hold an mpinb collective only where each process has one device of the mesh."""
    def lowering(ctx, *args, **params):
        jaxpr = params[jaxpr_param]
        if not holds_collective(jaxpr):
            return rule(ctx, *args, **params)
        _refuse_several_local_devices(shard_map_local_devices(ctx, params["mesh"]))
        params = shard_map_with_replicated(params, inputs_at=0, outputs_at=0)
        params[jaxpr_param] = _threaded_open(jaxpr, 0, out=True)
        outs = _call(rule, ctx, [take_order(ctx, "shard_map"), *args], [ORDER_AVAL, *ctx.avals_in],
                     [ORDER_AVAL, *ctx.avals_out], **params)
        leave_order(ctx, outs[0])
        return outs[1:]
    return lowering


def _refuse_several_local_devices(local: int) -> None:
    if local > 1:
        raise NotImplementedError(
            f"mpinb: a collective inside shard_map (or pmap) over a mesh with {local} devices of this process; "
            "mpinb's collectives talk between MPI processes, so the body may run only once per "
            "process: use a mesh of one device per process (or JAX's lax collectives)")


# construct (its primitive in jax.extend.core.primitives of JAX 0.10; jax_compat.nested_primitives
# finds it in older JAX) -> (how its rule is wrapped, the parameter holding its computation)
THREADING = {
    "jit_p": (_inlined, "jaxpr"),
    "closed_call_p": (_inlined, "call_jaxpr"),
    "call_p": (_inlined, "call_jaxpr"),
    "remat_p": (_uncached, "jaxpr"),
    "custom_jvp_call_p": (_uncached, "call_jaxpr"),
    "custom_vjp_call_p": (_uncached, "call_jaxpr"),
    "scan_p": (_uncached, "jaxpr"),
    "while_p": (_while, "body_jaxpr"),
    "cond_p": (_cond, "branches"),
    "shard_map_p": (_shard_map, "jaxpr"),
}


def install() -> None:
    """Lower every primitive in place, and wrap JAX's lowering and dead-code rules of the nested
    constructs that need more (once per process)."""
    lower_every_primitive_in_place()
    for name, prim in nested_primitives(THREADING):
        rule = lowering_rule(prim)
        if getattr(rule, "_mpinb_threaded", False):
            continue
        wrap, param = THREADING[name]
        threaded = wrap(rule, param)
        threaded._mpinb_threaded = True
        register_lowering(prim, threaded, cacheable=False)
        register_dce_rule(prim, _kept(dce_rule(prim)))


install()
