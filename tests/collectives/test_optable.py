"""The one table of ops (mpinb/optable.py) is what the compiled library and the Python layer
were made from, and the handlers refuse attributes outside their op's row."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mpinb import mpi, optable
from mpinb.mpi import collectives as ops
from mpinb.mpi import library, primitives
from mpinb.mpi.jax_compat import ffi
from mpinb.mpi.validation import resolve_comm


def test_every_op_of_the_table_is_registered_and_has_a_primitive():
    assert sorted(library.load().registrations()) == sorted(f"mpinb_{name}" for name in optable.OPS)
    prims = {p.name for p in vars(ops).values() if isinstance(p, jax.extend.core.Primitive)}
    assert {f"mpinb_{name}" for name in optable.OPS} <= prims


def test_a_primitive_must_name_an_op_of_the_table():
    with pytest.raises(ValueError, match=r"'allreducee' is not an op of mpinb/optable\.py"):
        primitives.make_primitive("allreducee", lambda x: x, lambda: {})


def test_a_primitive_with_other_attributes_than_its_row_is_refused_at_lowering():
    bad = primitives.make_primitive("bcast", lambda x, **_: x, lambda *, comm: {"comm": comm.handle})
    with pytest.raises(TypeError, match=r"mpinb_bcast: lowered with attributes \['comm'\], but its handler "
                                        r"reads \['comm', 'root'\]"):
        jax.jit(lambda x: bad.bind(x, comm=resolve_comm("bcast", None)[1])).lower(jnp.ones(2))


def _raw_call(target, x, **attrs):
    """A custom call made by hand, as a buggy lowering would: data, then the ordering buffer."""
    out = (jax.ShapeDtypeStruct(x.shape, x.dtype), jax.ShapeDtypeStruct((), primitives.ORDER_DTYPE))
    call = ffi.ffi_call(target, out, has_side_effect=True)
    return call(x, jnp.zeros((), primitives.ORDER_DTYPE), **{k: np.int64(v) for k, v in attrs.items()})


@pytest.mark.parametrize(("attrs", "message"), [
    ({"roott": 0}, "unknown attribute roott"),
    ({"root": 0, "op": 0}, "attribute op is not one of this op's"),
    ({}, "missing attribute root"),
])
def test_handlers_refuse_attributes_outside_their_row(world, attrs, message):
    rank, _ = world
    mpi.barrier()  # loads and registers the library
    comm = resolve_comm("bcast", None)[1].handle
    with pytest.raises(Exception, match=f"mpinb.bcast: rank {rank}: {message}"):
        jax.block_until_ready(_raw_call("mpinb_bcast", jnp.ones(3), comm=comm, **attrs))


def test_every_op_has_its_agreement_rule():
    assert optable.AGREEMENT.keys() == optable.OPS.keys()
    assert set(optable.AGREEMENT.values()) <= {"operand", "result", "trailing", "nothing"}


def test_generated_tables_list_every_op_and_reduction():
    pxi = optable.generate_ops_pxi()
    for i, name in enumerate(optable.OPS):
        assert f"OP_{name.upper()} = {i}" in pxi
        assert f'return b"{name}"' in pxi
    for r in optable.REDUCTIONS:
        assert f"MPI_{r}" in pxi
    registry = optable.generate_registry_pxi()
    assert all(f"<void*>h_{name}" in registry for name in optable.OPS)
