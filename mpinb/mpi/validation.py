"""Trace-time checks of everything a collective is given, so that a mistake is a clear Python
error on the calling rank instead of a hang, a crash or wrong data.

Also the static, hashable forms in which communicators and reduction ops travel as primitive
parameters (``CommRef``, ``OpRef``), and which dtype each MPI reduction op accepts.
"""

from __future__ import annotations

import dataclasses
import threading

import jax
import jax.numpy as jnp
import numpy as np
from mpi4py import MPI

from ..mpi_ops import REDUCTIONS
from .jax_compat import Tracer

# --------------------------------------------------------------------------------------
# Communicators


def handle_of(obj) -> int:
    """An MPI handle as a signed int64 attribute. MPICH handles are C ints (mpi4py reports
    negative ones sign-extended to 64 unsigned bits), Open MPI handles are pointers."""
    h = int(MPI._handleof(obj))
    return h - (1 << 64) if h >= (1 << 63) else h


@dataclasses.dataclass(frozen=True)
class CommRef:
    """A communicator as a static primitive parameter: its handle plus rank and size."""

    handle: int
    rank: int
    size: int
    name: str

    def __repr__(self) -> str:  # shown in jaxprs
        return f"{self.name}(rank={self.rank}, size={self.size})"


_default_lock = threading.Lock()
_default_comm: MPI.Intracomm | None = None


def default_comm() -> MPI.Intracomm:
    """The private clone of COMM_WORLD used when ``comm=None`` (created on first use, which is
    collective: every rank must reach its first mpinb collective)."""
    global _default_comm
    if _default_comm is None:
        with _default_lock:
            if _default_comm is None:
                comm = MPI.COMM_WORLD.Clone()
                comm.Set_name("mpinb COMM_WORLD clone")
                _default_comm = comm
    return _default_comm


_default_ref: list[tuple[MPI.Intracomm, CommRef]] = []  # resolve_comm's answer for comm=None, once made


def resolve_comm(op: str, comm) -> tuple[MPI.Intracomm, CommRef]:
    if comm is None:  # mpinb's own clone: asked once (a name given it later is not seen), unless freed
        if _default_ref and _default_ref[0][0] != MPI.COMM_NULL:
            return _default_ref[0]
        resolved = _resolved(op, default_comm())  # freed: the error a freed communicator gets
        _default_ref[:] = [resolved]
        return resolved
    return _resolved(op, comm)


def _resolved(op: str, comm) -> tuple[MPI.Intracomm, CommRef]:
    if isinstance(comm, Tracer):
        raise TypeError(f"{op}: comm must be an mpi4py communicator, got a traced value")
    if not isinstance(comm, MPI.Comm):
        raise TypeError(f"{op}: comm must be an mpi4py.MPI.Comm, got {type(comm).__name__}")
    if comm == MPI.COMM_NULL:
        raise ValueError(f"{op}: comm is MPI.COMM_NULL")
    if comm.Is_inter():
        raise ValueError(f"{op}: intercommunicators are not supported")
    name = comm.Get_name() or "comm"
    return comm, CommRef(handle_of(comm), comm.Get_rank(), comm.Get_size(), name)


# --------------------------------------------------------------------------------------
# Reduction ops and dtypes


@dataclasses.dataclass(frozen=True)
class OpRef:
    handle: int
    name: str

    def __repr__(self) -> str:
        return f"MPI.{self.name}"


_INTS = {np.dtype(t) for t in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")}
_REALS = {np.dtype("float32"), np.dtype("float64")}
_COMPLEX = {np.dtype("complex64"), np.dtype("complex128")}
_BOOL = {np.dtype("bool")}
_HALF = {np.dtype("float16"), np.dtype(jnp.bfloat16)}

#: Every dtype the library moves. float16 and bfloat16 are moved as raw 16-bit words.
SUPPORTED_DTYPES = frozenset(_INTS | _REALS | _COMPLEX | _BOOL | _HALF)

#: MPI predefined reduction op name -> dtypes it accepts (MPI standard, section 6.9.2): the
#: reductions of mpinb/mpi_ops.py, each with the dtypes of the kinds its row names.
_KINDS = {"integer": _INTS, "real": _REALS, "complex": _COMPLEX, "bool": _BOOL}
REDUCTION_DTYPES = {name: set().union(*(_KINDS[k] for k in kinds)) for name, kinds in REDUCTIONS.items()}


def _op_name(op) -> str | None:
    for name in REDUCTION_DTYPES:
        if op == getattr(MPI, name):
            return name
    return None


def resolve_op(opname: str, op, dtype) -> OpRef:
    if isinstance(op, Tracer):
        raise TypeError(f"{opname}: op must be an mpi4py.MPI.Op, got a traced value")
    if not isinstance(op, MPI.Op):
        raise TypeError(f"{opname}: op must be an mpi4py.MPI.Op such as MPI.SUM, got {op!r}")
    name = _op_name(op)
    if name is None:
        raise ValueError(
            f"{opname}: only the predefined MPI ops {', '.join(REDUCTION_DTYPES)} are supported "
            "inside jit (user-defined ops would need the GIL inside XLA)"
        )
    dtype = np.dtype(dtype)
    if dtype not in REDUCTION_DTYPES[name]:
        hint = "; cast to float32 first" if dtype in _HALF else ""
        raise TypeError(f"{opname}: MPI.{name} does not support dtype {dtype.name}{hint}")
    return OpRef(handle_of(op), name)


# --------------------------------------------------------------------------------------
# Arrays and static integers


def as_array(op: str, x, label: str = "x"):
    if isinstance(x, jax.Array):  # the usual case, first: a JAX array or a traced value
        return x if x.dtype in SUPPORTED_DTYPES else _supported(op, x, label)
    if isinstance(x, (str, bytes)) or x is None:
        raise TypeError(f"{op}: {label} must be an array or scalar, got {type(x).__name__}")
    if isinstance(x, dict) or (not isinstance(x, (list, tuple)) and not jax.tree_util.treedef_is_leaf(
            jax.tree_util.tree_structure(x))):
        raise TypeError(f"{op}: {label} must be an array, got a {type(x).__name__} (a pytree); apply "
                        f"{op} to each leaf, e.g. jax.tree.map(lambda a: mpi.{op}(a, ...), tree)")
    try:
        arr = jnp.asarray(x)
    except TypeError as exc:
        raise TypeError(f"{op}: {label} must be an array or scalar, got {type(x).__name__}") from exc
    return _supported(op, arr, label)


def _supported(op: str, arr, label: str):
    """``arr``, if mpinb moves its dtype."""
    dtype = np.dtype(arr.dtype)
    if dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"{op}: dtype {dtype.name} of {label} is not supported")
    return arr


def static_int(op: str, label: str, value) -> int:
    if isinstance(value, Tracer):
        raise TypeError(
            f"{op}: {label} must be a static Python int, got a traced value "
            "(mark it static with jax.jit(..., static_argnums=...))"
        )
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{op}: {label} must be an int, got {type(value).__name__}")
    return int(value)


def rank_arg(op: str, label: str, value, comm: CommRef, *, wildcard: bool = False) -> int:
    r = static_int(op, label, value)
    if r == MPI.PROC_NULL or (wildcard and r == MPI.ANY_SOURCE):
        return r
    if not 0 <= r < comm.size:
        raise ValueError(f"{op}: {label} {r} is out of range for a communicator of size {comm.size}")
    return r


def root_arg(op: str, value, comm: CommRef) -> int:
    """The root of a collective: a rank of ``comm`` (MPI.PROC_NULL names no root on an
    intracommunicator, so it is refused here rather than by MPI inside the handler)."""
    r = static_int(op, "root", value)
    if not 0 <= r < comm.size:
        raise ValueError(f"{op}: root {r} is out of range for a communicator of size {comm.size}")
    return r


def tag_arg(op: str, label: str, value, *, wildcard: bool = False) -> int:
    t = static_int(op, label, value)
    if wildcard and t == MPI.ANY_TAG:
        return t
    upper = MPI.COMM_WORLD.Get_attr(MPI.TAG_UB)
    if t < 0 or (upper is not None and t > upper):
        raise ValueError(f"{op}: {label} {t} is not a valid MPI tag (0..{upper})")
    return t


def counts_arg(op: str, label: str, counts, comm: CommRef) -> tuple[int, ...]:
    if isinstance(counts, Tracer):
        raise TypeError(f"{op}: {label} must be static (a sequence of ints), got a traced value")
    try:
        entries = tuple(counts)
    except TypeError as exc:
        raise TypeError(f"{op}: {label} must be a sequence of ints, got {counts!r}") from exc
    if not any(isinstance(c, Tracer) for c in entries) and not all(
            isinstance(c, (int, np.integer)) and not isinstance(c, (bool, np.bool_)) for c in entries):
        raise TypeError(f"{op}: {label} must be a sequence of ints, got {counts!r}")
    values = tuple(static_int(op, label, c) for c in entries)  # a traced entry: static_int says so
    if len(values) != comm.size:
        raise ValueError(f"{op}: {label} has {len(values)} entries, expected one per rank ({comm.size})")
    if any(v < 0 for v in values):
        raise ValueError(f"{op}: {label} must be non-negative, got {values}")
    return values


# Every MPI.Status a receive was given, by address: a compiled receive writes into its status
# each time it runs, also after the caller dropped the object (recv(..., status=MPI.Status())),
# so the object must live as long as the process.
_STATUSES: dict[int, MPI.Status] = {}


def status_arg(op: str, status) -> int:
    """Address of an MPI.Status to fill in (kept alive for the process's lifetime), or 0."""
    if status is None:
        return 0
    if not isinstance(status, MPI.Status):
        raise TypeError(f"{op}: status must be an mpi4py.MPI.Status or None, got {type(status).__name__}")
    address = int(MPI._addressof(status))
    _STATUSES[address] = status
    return address
