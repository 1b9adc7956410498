"""The one list of mpinb's MPI operations, from which the compiled library's tables are made.

``setup.py`` turns this table into ``ext/ops.pxi`` and ``ext/ops_registry.pxi`` (generated at
build time, like pyzmq's constants): the opcode enum, the op names, each op's attributes (as a
bit mask that ``decode_attrs`` checks: no unknown, foreign or missing attribute reaches a
handler), what checked mode compares for each op (``CHECKS``), the reduction ops of checked mode, and
``registrations()``, which pairs each target ``mpinb_<op>`` with its handler ``h_<op>`` (a
missing handler is a compile error). On the Python side, ``make_primitive`` checks that a
primitive passes exactly its op's attributes.

Adding an op: one line in ``OPS`` and one in ``CHECKS``, one handler ``h_<op>`` in
``ext/handlers.pxi``, one primitive in ``mpinb/mpi/collectives.py``. This module imports
nothing, so the build can read it by path.
"""

#: every attribute a handler may receive; the counts are int64 arrays, the rest int64 scalars
SCALAR_ATTRIBUTES = ("comm", "op", "root", "dest", "source", "tag", "sendtag", "recvtag", "status")
ARRAY_ATTRIBUTES = ("counts", "sendcounts", "recvcounts")
ATTRIBUTES = SCALAR_ATTRIBUTES + ARRAY_ATTRIBUTES

#: op name -> the attributes its handler needs (all of them, every time). The order gives the
#: opcodes, which checked mode exchanges between ranks (every rank runs the same build).
OPS = {
    "allreduce": ("comm", "op"),
    "alltoall": ("comm",),
    "allgather": ("comm",),
    "bcast": ("comm", "root"),
    "reduce": ("comm", "op", "root"),
    "gather": ("comm", "root"),
    "scatter": ("comm", "root"),
    "scan": ("comm", "op"),
    "send": ("comm", "dest", "tag"),
    "recv": ("comm", "source", "tag", "status"),
    "sendrecv": ("comm", "source", "dest", "sendtag", "recvtag", "status"),
    "barrier": ("comm",),
    "reduce_scatter": ("comm", "op"),
    "allgatherv": ("comm", "counts"),
    "alltoallv": ("comm", "sendcounts", "recvcounts"),
}

#: What the ranks of the communicator must agree on for each op, beyond the op itself: the
#: (buffer, what) that checked mode exchanges before the MPI call (ext/checked.pxi; ext/_ffi.pyx
#: ``enter`` reads it from the generated ext/ops.pxi), and what ext/ran.pxi keeps of each call
#: for the divergence finding (mpinb/analysis/divergence.py).
#:   buffer - "operand" (the first data operand), "result" (the first result) or None
#:   what   - "shape" (dtype and whole shape), "trailing" (dtype and the dimensions after the
#:            first), "op" (the op alone: no buffer) or "nothing" (no exchange at all)
#: Root and non-root pass the same operand shape; scatter's root passes (nproc, ...) and
#: allgatherv's ranks their own count of rows, so those compare the result; alltoallv's counts
#: differ by rank, so it compares the trailing dimensions; point to point ops legitimately differ
#: between ranks. Every exchange also compares the call number on the communicator, the root
#: (ops with a "root" attribute) and the reduction op (ops with an "op" attribute).
CHECKS = {
    "allreduce":      ("operand", "shape"),
    "alltoall":       ("operand", "shape"),
    "allgather":      ("operand", "shape"),
    "bcast":          ("operand", "shape"),
    "reduce":         ("operand", "shape"),
    "gather":         ("operand", "shape"),
    "scatter":        ("result", "shape"),
    "scan":           ("operand", "shape"),
    "send":           (None, "nothing"),
    "recv":           (None, "nothing"),
    "sendrecv":       (None, "nothing"),
    "barrier":        (None, "op"),
    "reduce_scatter": ("operand", "shape"),
    "allgatherv":     ("result", "shape"),
    "alltoallv":      ("operand", "trailing"),
}

#: the (buffer, what) pairs that mean something: a buffer's shape, or the op alone, or nothing
CHECK_RULES = (("operand", "shape"), ("result", "shape"), ("operand", "trailing"), (None, "op"),
               (None, "nothing"))
#: the rule's words in the order of their codes in ext/ops.pxi (CHECK_*, CHECK_BUFFER_*)
CHECK_KINDS = ("nothing", "op", "shape", "trailing")
CHECK_BUFFERS = (None, "operand", "result")

#: the point-to-point ops: nothing to agree on (not matched between ranks in the timeline)
POINT_TO_POINT = tuple(name for name, rule in CHECKS.items() if rule == (None, "nothing"))


#: MPI's predefined reduction ops that mpinb accepts, in the order of their checked-mode codes,
#: each with the kinds of dtype it accepts (MPI standard, section 6.9.2; the dtypes of each kind
#: are in mpinb/mpi/validation.py)
REDUCTIONS = {
    "SUM": ("integer", "real", "complex"),
    "PROD": ("integer", "real", "complex"),
    "MAX": ("integer", "real"),
    "MIN": ("integer", "real"),
    "LAND": ("integer", "bool"),
    "LOR": ("integer", "bool"),
    "LXOR": ("integer", "bool"),
    "BAND": ("integer",),
    "BOR": ("integer",),
    "BXOR": ("integer",),
}


def _bit(attribute: str) -> int:
    return 1 << ATTRIBUTES.index(attribute)


def check_table() -> None:
    """Raise ValueError unless every op has exactly one rule of CHECK_RULES (the build refuses
    a table the compiled library would misread)."""
    if CHECKS.keys() != OPS.keys():
        raise ValueError(f"mpi_ops: CHECKS names {sorted(CHECKS)}, OPS {sorted(OPS)}")
    for name, rule in CHECKS.items():
        if rule not in CHECK_RULES:
            raise ValueError(f"mpi_ops: {name}: unknown rule {rule!r}; known: {CHECK_RULES}")


def _code(word) -> str:
    return "NONE" if word is None else word.upper()


def generate_ops_pxi() -> str:
    """Cython declarations included at the top of ext/_ffi.pyx."""
    check_table()
    lines = ["# Generated by setup.py from mpinb/mpi_ops.py: do not edit.", "", "cdef enum:"]
    lines += [f"    OP_{name.upper()} = {i}" for i, name in enumerate(OPS)]
    lines += [f"    NUM_OPS = {len(OPS)}", "", "cdef enum:"]
    lines += [f"    ATTR_{a.upper()} = {_bit(a)}" for a in ATTRIBUTES]
    lines += [f"    ARRAY_ATTRS = {sum(_bit(a) for a in ARRAY_ATTRIBUTES)}", ""]
    lines += ["", "cdef const char* op_name(int opcode) noexcept nogil:"]
    lines += [f'    if opcode == OP_{name.upper()}: return b"{name}"' for name in OPS]
    lines += ['    return b"unknown"', ""]
    lines += ["", "cdef bint op_point_to_point(int opcode) noexcept nogil:"]
    lines += ["    return " + " or ".join(f"opcode == OP_{name.upper()}" for name in POINT_TO_POINT), ""]
    lines += ["", "# checked mode: what is compared (CHECKS[op][1]), and of which buffer ([0])",
              "cdef enum:"]
    lines += [f"    CHECK_{_code(k)} = {i}" for i, k in enumerate(CHECK_KINDS)]
    lines += ["", "cdef enum:"]
    lines += [f"    CHECK_BUFFER_{_code(b)} = {i}" for i, b in enumerate(CHECK_BUFFERS)]
    lines += ["", "", "cdef int op_check(int opcode) noexcept nogil:",
              '    """What checked mode compares before the MPI call of ``opcode`` (CHECK_*)."""']
    lines += [f"    if opcode == OP_{name.upper()}: return CHECK_{_code(c[1])}" for name, c in CHECKS.items()]
    lines += ["    return CHECK_NOTHING", ""]
    lines += ["", "cdef int op_check_buffer(int opcode) noexcept nogil:",
              '    """Whose dtype and shape checked mode compares for ``opcode`` (CHECK_BUFFER_*)."""']
    lines += [f"    if opcode == OP_{name.upper()}: return CHECK_BUFFER_{_code(c[0])}"
              for name, c in CHECKS.items()]
    lines += ["    return CHECK_BUFFER_NONE", ""]
    lines += ["", "cdef int64_t op_attributes(int opcode) noexcept nogil:",
              '    """Bit mask of the attributes the handler of ``opcode`` needs."""']
    for name, attrs in OPS.items():
        mask = " | ".join(f"ATTR_{a.upper()}" for a in attrs)
        lines.append(f"    if opcode == OP_{name.upper()}: return {mask}")
    lines += ["    return 0", ""]
    lines += ["", "cdef int64_t attribute_bit(const char* name, size_t n) noexcept nogil:",
              '    """The bit of attribute ``name`` (not NUL-terminated, ``n`` bytes), 0 if unknown."""']
    for a in ATTRIBUTES:
        lines.append(f'    if n == {len(a)} and memcmp(name, b"{a}", {len(a)}) == 0: return ATTR_{a.upper()}')
    lines += ["    return 0", ""]
    lines += ["", "cdef const char* attribute_name(int64_t bit) noexcept nogil:"]
    lines += [f'    if bit == ATTR_{a.upper()}: return b"{a}"' for a in ATTRIBUTES]
    lines += ['    return b"?"', ""]
    lines += ["", "cdef int64_t reduction_code(MPI_Op op) noexcept nogil:",
              '    """1.. for the reductions of the table, 99 for another op (checked mode)."""']
    lines += [f"    if op == MPI_{r}: return {i + 1}" for i, r in enumerate(REDUCTIONS)]
    lines += ["    return 99", ""]
    lines += ["", "cdef const char* reduction_name(int64_t code) noexcept nogil:"]
    lines += [f'    if code == {i + 1}: return b" {r}"' for i, r in enumerate(REDUCTIONS)]
    lines += ['    if code == 99: return b" (other op)"', '    return b""', ""]
    return "\n".join(lines)


def generate_registry_pxi() -> str:
    """``registrations()``, included at the end of ext/_ffi.pyx (after the handlers)."""
    lines = ["# Generated by setup.py from mpinb/mpi_ops.py: do not edit.", "",
             "def registrations():",
             '    """Map of custom-call target name -> PyCapsule of the XLA FFI handler."""',
             "    return {"]
    lines += [f'        "mpinb_{name}": PyCapsule_New(<void*>h_{name}, NULL, NULL),' for name in OPS]
    lines += ["    }", ""]
    return "\n".join(lines)
