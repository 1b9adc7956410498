"""Every construct of the installed JAX that holds a computation, with an mpinb collective inside.

The constructs are found by walking JAX's own registry (``constructs()``): every ``Primitive``
defined by the installed JAX's modules that its public modules import (importing each public
module; the private ones come in as they need them, in their own order), and among them those
whose rules take a computation as a parameter (their parameter names say so: a jaxpr, branches, a callee, a callback, a
computation). Each must have a row in ``ROWS``, one of:

- ``Ordered(wrapper)``: a user program puts a collective inside it, and mpinb keeps program
  order there: the wrapper of test_nested_order.py runs two rank-dependent halo exchanges nested
  in it (at 1, 2 and 4 ranks), and this file checks that the wrapper's program really holds the
  collective inside an equation of that construct;
- ``Refused(program)``: mpinb cannot order a collective there, and refuses it with the op, the
  rank, the user's line and the construct, before any message is sent;
- ``Unreachable(reason)``: no user program can put a collective inside it on a CPU process.

A JAX that adds a construct fails ``test_every_construct_has_a_row`` until it gets one: a new
construct never runs a collective silently unordered.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import inspect
import pkgutil
import re
import sys
import warnings
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from mpi4py import MPI
from test_nested_order import WRAPPERS

from mpinb import mpi
from mpinb.mpi import ordering
from mpinb.mpi.jax_compat import ClosedJaxpr, Jaxpr, Primitive, ad, mlir

# --------------------------------------------------------------------------- JAX's registry

#: parts of JAX not imported to find constructs: GPU/TPU back ends, tests, tools, converters
_SKIPPED_MODULES = ("test", "mosaic_gpu", "triton", "cuda", "rocm", "jax2tf", "tools", "colocated", "mock_gpu",
                    "jaxlib", "pallas.mosaic_gpu")
#: a rule parameter named so holds a computation
_COMPUTATION = re.compile(r"^(call|callee|callback|branches|computation)$|jaxpr")


@functools.cache
def constructs() -> dict[str, list[str]]:
    """{primitive name: the parameters of its rules that hold a computation}, for every primitive
    of the installed JAX that its public modules (importable on this machine) bring in."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # (onerror: a package that fails to import while the walk looks into it is skipped too)
        for info in pkgutil.walk_packages(jax.__path__, "jax.", onerror=lambda name: None):
            public = not any(part.startswith("_") for part in info.name.split("."))
            if public and not any(part in info.name for part in _SKIPPED_MODULES):
                try:
                    importlib.import_module(info.name)
                except Exception:  # noqa: BLE001, S112 - a module that needs a GPU, TPU or extra package
                    continue
    found = {}
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] != "jax":
            continue
        for value in list(getattr(module, "__dict__", {}).values()):
            if isinstance(value, Primitive):
                params = sorted(p for p in _rule_parameters(value) if _COMPUTATION.search(p))
                if params:
                    found[value.name] = params
    return found


def _rule_parameters(prim: Primitive) -> set[str]:
    names = set()
    tables = [mlir._lowerings, *getattr(mlir, "_platform_specific_lowerings", {}).values()]
    rules = [getattr(prim, "impl", None), getattr(prim, "abstract_eval", None),
             ad.primitive_jvps.get(prim), ad.primitive_transposes.get(prim)]
    rules += [getattr(t[prim], "rule", t[prim]) for t in tables if prim in t]
    for rule in rules:
        names |= _parameters(rule)
    return names


def _parameters(fn, depth: int = 0) -> set[str]:
    """Parameter names of ``fn``, through partials, wrappers and the callables it closes over."""
    if fn is None or depth > 4:
        return set()
    if isinstance(fn, functools.partial):
        return set(fn.keywords or {}) | _parameters(fn.func, depth + 1)
    names = set()
    with contextlib.suppress(TypeError, ValueError):  # a builtin without a signature
        names |= set(inspect.signature(fn).parameters)
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            inner = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if callable(inner) and not isinstance(inner, type):
            names |= _parameters(inner, depth + 1)
    return names | _parameters(getattr(fn, "__wrapped__", None), depth + 1)


# --------------------------------------------------------------------------- the rows

@dataclasses.dataclass(frozen=True)
class Ordered:
    wrapper: str  # a key of test_nested_order.WRAPPERS
    #: where the construct appears only while JAX lowers another one, why its equation is not
    #: in the traced program (the nested-order tests still run it)
    staged_by_lowering: str = ""


@dataclasses.dataclass(frozen=True)
class Refused:
    program: Callable  # x -> y, with an allreduce inside the construct


@dataclasses.dataclass(frozen=True)
class Unreachable:
    reason: str


def _allreduce(x):
    return mpi.allreduce(x, op=MPI.SUM)


def _reduce(x):
    return lax.reduce(x, 0.0, lambda a, b: a + _allreduce(b), (0,))


def _reduce_window(x):
    return lax.reduce_window(x, 0.0, lambda a, b: a + _allreduce(b), (2,), (1,), "VALID")


def _composite(x):
    return lax.composite(_allreduce, name="mpinb.test")(x)


def _pure_callback(x):
    shape = jax.ShapeDtypeStruct(x.shape, x.dtype)
    return jax.pure_callback(lambda v: np.asarray(_allreduce(jnp.asarray(v))), shape, x)


def _io_callback(x):
    from jax.experimental import io_callback

    return io_callback(lambda v: np.asarray(_allreduce(jnp.asarray(v))), jax.ShapeDtypeStruct(x.shape, x.dtype), x)


def _debug_callback(x):
    jax.debug.callback(lambda v: _allreduce(jnp.asarray(v)), x)
    return x


def _compute_on(x):
    from jax.experimental.compute_on import compute_on2

    return compute_on2(_allreduce, compute_type="device_host", out_memory_spaces=jax.memory.Space.Device)(x)


def _scheduling_group(x):
    from jax.experimental.scheduling_groups import scheduling_group

    return scheduling_group("mpinb")(_allreduce)(x)


_KERNEL = ("a piece of a Pallas kernel (lowered for a GPU or TPU, or evaluated inside a kernel in interpret "
           "mode: see pallas_call)")
_COMBINER = "its computation is built by JAX from lax operations (a scatter's or select's combiner), never user code"

ROWS = {
    # lowered in place, or threaded by mpinb (ordering.py)
    "jit": Ordered("jit"),
    "pjit": Ordered("jit"),
    "closed_call": Ordered("scan(unroll=2)", staged_by_lowering="an unrolled scan's body, when the scan is lowered"),
    "remat2": Ordered("checkpoint"),
    "checkpoint": Ordered("checkpoint"),
    "custom_jvp_call": Ordered("custom_jvp"),
    "custom_vjp_call": Ordered("custom_vjp"),
    "custom_vjp_call_jaxpr": Ordered("custom_vjp"),
    "remat_opt": Ordered("custom_vjp(optimize_remat)"),
    "scan": Ordered("scan"),
    "while": Ordered("while_loop"),
    "cond": Ordered("cond"),
    "shard_map": Ordered("shard_map"),
    "custom_linear_solve": Ordered("custom_linear_solve"),
    "custom_vmap_call": Ordered("custom_vmap"),
    "linear_call": Ordered("linear_call"),
    "pallas_call": Ordered("pallas_call(interpret)"),
    "xla_pmap": Ordered("pmap"),  # before JAX 0.10 staged pmap as a shard_map
    "custom_transpose_call": Ordered("custom_transpose"),
    # a function or region of its own: refused
    "reduce": Refused(_reduce),
    "reduce_window": Refused(_reduce_window),
    "composite": Refused(_composite),
    "compute_on": Refused(_compute_on),
    "xla_metadata_call": Refused(_scheduling_group),
    "pure_callback": Refused(_pure_callback),
    "io_callback": Refused(_io_callback),
    "debug_callback": Refused(_debug_callback),
    # no user program puts a collective there
    "call": Unreachable("core.call_p: an internal call primitive of JAX's transformations, staged as jit"),
    "eval_jaxpr": Unreachable("staged as closed_call when traced (see closed_call)"),
    "custom_partitioning": Unreachable("its partitioned body is only lowered by SPMD partitioning over several "
                                       "devices of a process, which mpinb refuses (shard_map)"),
    "inspect_sharding": Unreachable("a callback given a sharding at compile time, not data at run time"),
    "buffer_callback": Unreachable("jax.experimental.buffer_callback runs on GPU buffers only"),
    "cudnn_fusion": Unreachable("a cuDNN (GPU) fusion"),
    "fused_call": Unreachable("jax.experimental.fused has no CPU lowering (memory spaces of a GPU)"),
    "mpmd_map": Unreachable(_KERNEL),
    "core_map": Unreachable(_KERNEL),
    "custom_fusion": Unreachable(_KERNEL),
    "emit_pipeline": Unreachable(_KERNEL),
    "fusible": Unreachable(_KERNEL),
    "jaxpr_call": Unreachable(_KERNEL),
    "parallel_loop": Unreachable(_KERNEL),
    "pipeline_body": Unreachable(_KERNEL),
    "run_scoped": Unreachable(_KERNEL),
    "run_state": Unreachable(_KERNEL + "; outside kernels, mutable refs are discharged before lowering"),
    "for": Unreachable("private (jax._src.lax.control_flow.for_loop), used by Pallas' GPU kernels"),
    "scatter": Unreachable(_COMBINER),
    "scatter-add": Unreachable(_COMBINER),
    "scatter-sub": Unreachable(_COMBINER),
    "scatter-mul": Unreachable(_COMBINER),
    "scatter-min": Unreachable(_COMBINER),
    "scatter-max": Unreachable(_COMBINER),
    "select_and_scatter": Unreachable(_COMBINER),
}


# --------------------------------------------------------------------------- the checks

def test_the_registry_walk_finds_the_constructs_it_must():
    """The walk can fail: it finds the constructs every supported JAX has, and nothing first-order."""
    found = constructs()
    assert {"cond", "while", "scan", "custom_jvp_call", "pure_callback"} <= set(found), sorted(found)
    assert not {"add", "sin", "dot_general", "broadcast_in_dim"} & set(found)


def test_every_construct_has_a_row():
    missing = {name: params for name, params in constructs().items() if name not in ROWS}
    assert not missing, (f"constructs of JAX {jax.__version__} that hold a computation and have no row in "
                         f"tests/collectives/test_constructs.py ROWS (a program with a collective inside, "
                         f"or the refusal, or why none can hold one): {missing}")


def _holds(jaxpr, construct: str) -> bool:
    """Whether ``jaxpr`` has an equation of ``construct`` with an mpinb collective inside (its
    nested computations, or, for a callback, anywhere)."""
    for eqn in jaxpr.eqns:
        subs = [j.jaxpr if isinstance(j, ClosedJaxpr) else j for v in eqn.params.values()
                for j in (v if isinstance(v, (tuple, list)) else (v,)) if isinstance(j, (Jaxpr, ClosedJaxpr))]
        if eqn.primitive.name == construct and any(_has_collective(s) for s in subs):
            return True
        if any(_holds(s, construct) for s in subs):
            return True
    return False


def _has_collective(jaxpr) -> bool:
    return any(eqn.primitive.name.startswith("mpinb_") for eqn in jaxpr.eqns) or any(
        _has_collective(j.jaxpr if isinstance(j, ClosedJaxpr) else j) for eqn in jaxpr.eqns
        for v in eqn.params.values() for j in (v if isinstance(v, (tuple, list)) else (v,))
        if isinstance(j, (Jaxpr, ClosedJaxpr)))


def _in_this_jax(rows: dict, kind) -> list[str]:
    """The rows of ``kind`` whose construct this JAX has (and, of ordered ones, appears in a
    traced program: one staged only while lowering is run by the nested-order tests alone)."""
    return sorted(name for name, row in rows.items() if isinstance(row, kind) and name in constructs()
                  and not getattr(row, "staged_by_lowering", ""))


@pytest.mark.parametrize("construct", _in_this_jax(ROWS, Ordered))
def test_the_ordered_construct_s_program_holds_the_collective_inside_it(world, construct):
    """The wrapper that test_nested_order.py runs on every rank really nests the collective in
    this construct (with a peer, so that the exchange is not elided)."""
    wrapper = WRAPPERS[ROWS[construct].wrapper]
    program = wrapper(lambda a: a.at[0].set(mpi.sendrecv(a[1], a[0], source=0, dest=0)))
    jaxpr = jax.make_jaxpr(program)(jnp.zeros((3, 2)))
    assert _holds(jaxpr.jaxpr, construct), jaxpr


@pytest.mark.parametrize("construct", _in_this_jax(ROWS, Refused))
def test_the_refused_construct_is_refused_with_op_rank_line_and_construct(world, construct):
    rank, size = world
    program = ROWS[construct].program
    line = inspect.getsourcelines(_allreduce)[1] + 1
    with pytest.raises(Exception, match=rf"mpinb: allreduce on rank {rank} at {re.escape(__file__)}:{line} is "
                                        r"(inside|called inside)") as info:
        jax.block_until_ready(jax.jit(program)(jnp.arange(4.0) + rank))
    # nothing was exchanged: the library is in step on every rank afterwards
    assert int(mpi.allreduce(jnp.int32(1), op=MPI.SUM)) == size
    del info


# ------------------------------------------------------- the host-callback check's walk end

def _cell_runner(run):
    """Stands for the engine's cell runner (mpinb.engine.code.execute_code): a walk end."""
    return run()


ordering.end_walks_at(_cell_runner)


def test_a_host_callback_above_a_walk_end_is_still_refused(world):
    rank, size = world
    with pytest.raises(Exception, match=rf"mpinb: allreduce on rank {rank} at .* is called inside a host callback"):
        _cell_runner(lambda: jax.block_until_ready(jax.jit(_pure_callback)(jnp.arange(4.0) + rank)))
    assert int(mpi.allreduce(jnp.int32(1), op=MPI.SUM)) == size  # nothing was exchanged


def test_the_walk_for_a_host_callback_stops_at_a_walk_end():
    """Inside a callback the walk finds JAX's machinery, unless a walk end lies between: what is
    below a walk end is not looked at (the check can fail: it is the only way to tell)."""
    def seen(_v):
        return np.array([ordering.host_callback_frame() is not None,
                         _cell_runner(ordering.host_callback_frame) is not None])

    shape = jax.ShapeDtypeStruct((2,), np.bool_)
    found = jax.block_until_ready(jax.jit(lambda x: jax.pure_callback(seen, shape, x))(jnp.zeros(1)))
    assert found.tolist() == [True, False]
