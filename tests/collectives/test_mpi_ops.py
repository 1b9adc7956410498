"""The one table of ops (mpinb/mpi_ops.py) is what the compiled library and the Python layer
were made from, and the handlers refuse attributes outside their op's row."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mpinb import mpi, mpi_ops
from mpinb.analysis import timeline
from mpinb.mpi import collectives as ops
from mpinb.mpi import library, point_to_point, primitives, validation
from mpinb.mpi.jax_compat import ffi
from mpinb.mpi.validation import resolve_comm


def test_every_op_of_the_table_is_registered_and_has_a_primitive():
    assert sorted(library.load().registrations()) == sorted(f"mpinb_{name}" for name in mpi_ops.OPS)
    prims = {p.name for module in (ops, point_to_point) for p in vars(module).values()
             if isinstance(p, jax.extend.core.Primitive)}
    assert {f"mpinb_{name}" for name in mpi_ops.OPS} <= prims


def test_a_primitive_must_name_an_op_of_the_table():
    with pytest.raises(ValueError, match=r"'allreducee' is not an op of mpinb/mpi_ops\.py"):
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


def _word(word) -> str:
    """A word of a handler rule as the generated constants spell it (None: NONE)."""
    return "NONE" if word is None else word.upper()


def _returns(pxi: str, function: str) -> dict[str, str]:
    """{OP_X: constant} of a generated ``if opcode == OP_X: return CONSTANT`` function, and
    what it returns for an unknown opcode under the key None."""
    body = pxi.split(f"cdef int {function}(int opcode) noexcept nogil:\n", 1)[1].split("\n\n", 1)[0]
    out: dict = dict(re.findall(r"^    if opcode == (OP_\w+): return (\w+)$", body, re.MULTILINE))
    out[None] = re.findall(r"^    return (\w+)$", body, re.MULTILINE)[-1]
    return out


def test_every_op_has_one_known_rule():
    assert mpi_ops.CHECKS.keys() == mpi_ops.OPS.keys()
    for name, rule in mpi_ops.CHECKS.items():
        buffer, what = rule
        assert rule in mpi_ops.CHECK_RULES, name
        assert buffer in mpi_ops.CHECK_BUFFERS and what in mpi_ops.CHECK_KINDS, name
        assert (buffer is None) == (what in ("op", "nothing")), name  # a buffer exactly when a shape is compared
    # ranks pass different shapes by design: scatter's root (nproc, ...), allgatherv's own rows,
    # alltoallv's counts; point to point ops agree on nothing
    assert mpi_ops.CHECKS["scatter"][0] == mpi_ops.CHECKS["allgatherv"][0] == "result"
    assert mpi_ops.CHECKS["alltoallv"] == ("operand", "trailing")
    assert set(mpi_ops.POINT_TO_POINT) == {"send", "recv", "sendrecv"}
    mpi_ops.check_table()  # what the build runs


@pytest.mark.parametrize(("name", "rule"), [
    ("allgatherv", ("result", "trailing")),
    ("send", ("operand", "nothing")),
    ("barrier", (None, "everything")),
])
def test_the_build_refuses_a_rule_it_would_misread(monkeypatch, name, rule):
    monkeypatch.setitem(mpi_ops.CHECKS, name, rule)
    with pytest.raises(ValueError, match=f"mpi_ops: {name}: unknown rule"):
        mpi_ops.generate_ops_pxi()
    monkeypatch.delitem(mpi_ops.CHECKS, name)
    with pytest.raises(ValueError, match="mpi_ops: CHECKS names"):
        mpi_ops.generate_ops_pxi()


def test_generated_check_tables_equal_the_table():
    """ext/ops.pxi's op_check and op_check_buffer say, for every opcode, the handler rule of
    the op's row, with constants numbered as mpinb/mpi_ops.py orders them."""
    pxi = mpi_ops.generate_ops_pxi()
    enums = {k: int(v) for k, v in re.findall(r"^    (CHECK_\w+) = (\d+)$", pxi, re.MULTILINE)}
    assert enums == {**{f"CHECK_{_word(k)}": i for i, k in enumerate(mpi_ops.CHECK_KINDS)},
                     **{f"CHECK_BUFFER_{_word(b)}": i for i, b in enumerate(mpi_ops.CHECK_BUFFERS)}}
    kinds = {f"OP_{name.upper()}": f"CHECK_{_word(c[1])}" for name, c in mpi_ops.CHECKS.items()}
    buffers = {f"OP_{name.upper()}": f"CHECK_BUFFER_{_word(c[0])}" for name, c in mpi_ops.CHECKS.items()}
    assert _returns(pxi, "op_check") == {**kinds, None: "CHECK_NOTHING"}
    assert _returns(pxi, "op_check_buffer") == {**buffers, None: "CHECK_BUFFER_NONE"}
    p2p = pxi.split("cdef bint op_point_to_point(int opcode) noexcept nogil:\n", 1)[1].split("\n", 1)[0]
    assert re.findall(r"opcode == OP_(\w+)", p2p) == [name.upper() for name in mpi_ops.POINT_TO_POINT]


def test_the_compiled_library_checks_what_the_table_says():
    """What the built extension's enter() reads (a stale build after a change of the table
    fails here: rebuild with ``pip install -e .``)."""
    want = {name: (mpi_ops.CHECK_BUFFERS.index(c[0]), mpi_ops.CHECK_KINDS.index(c[1]))
            for name, c in mpi_ops.CHECKS.items()}
    assert library.load().check_rules() == want


def test_the_python_layer_takes_point_to_point_ops_and_reductions_from_the_table():
    assert timeline.POINT_TO_POINT is mpi_ops.POINT_TO_POINT
    assert list(validation.REDUCTION_DTYPES) == list(mpi_ops.REDUCTIONS)  # names and order
    dtypes = validation.REDUCTION_DTYPES
    assert np.dtype("float32") in dtypes["SUM"] and np.dtype("float32") not in dtypes["BAND"]
    assert np.dtype("bool") in dtypes["LAND"] and np.dtype("bool") not in dtypes["SUM"]
    assert np.dtype("complex64") in dtypes["PROD"] and np.dtype("complex64") not in dtypes["MAX"]
    assert all(np.dtype("int32") in accepted for accepted in dtypes.values())


def test_generated_tables_list_every_op_and_reduction():
    pxi = mpi_ops.generate_ops_pxi()
    for i, name in enumerate(mpi_ops.OPS):
        assert f"OP_{name.upper()} = {i}" in pxi
        assert f'return b"{name}"' in pxi
    for r in mpi_ops.REDUCTIONS:
        assert f"MPI_{r}" in pxi
    registry = mpi_ops.generate_registry_pxi()
    assert all(f"<void*>h_{name}" in registry for name in mpi_ops.OPS)
