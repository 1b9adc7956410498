# Decoding of one XLA FFI call frame: the metadata query, the execute stage, buffers,
# attributes by name, dtype -> MPI datatype, and the single path by which every failure
# (bad frame, unsupported dtype, MPI return code) becomes an XLA FFI error. Nothing here
# touches the GIL or raises; every function returns a status and leaves a message in Call.

cdef enum:
    MSG_LEN = 640

cdef struct Call:
    XLA_FFI_CallFrame* f        # NULL once an asynchronous call was handed off (ext/overlap.pxi)
    const XLA_FFI_Api* api      # what makes errors and futures, valid for the whole process
    int opcode
    MPI_Comm comm
    MPI_Op op
    bint has_op
    int64_t root
    int64_t dest
    int64_t source
    int64_t tag
    int64_t sendtag
    int64_t recvtag
    int64_t status_addr
    const int64_t* counts
    int64_t ncounts
    const int64_t* sendcounts
    int64_t nsendcounts
    const int64_t* recvcounts
    int64_t nrecvcounts
    int rank
    int size
    double t0
    int64_t nbytes
    bint locked
    bint withdrawn              # its receive was withdrawn (ext/withdraw.pxi)
    XLA_FFI_Error* err


cdef inline XLA_FFI_Error* make_error(const XLA_FFI_Api* api, XLA_FFI_Error_Code code,
                                      const char* msg) noexcept nogil:
    cdef XLA_FFI_Error_Create_Args args
    args.struct_size = XLA_FFI_Error_Create_Args_STRUCT_SIZE
    args.extension_start = NULL
    args.message = msg
    args.errc = code
    return api.XLA_FFI_Error_Create(&args)


cdef int fail(Call* c, XLA_FFI_Error_Code code, const char* what) noexcept nogil:
    """Record an error "mpinb.<op>: rank R: <what>" on the call; always returns 1."""
    cdef char msg[MSG_LEN]
    snprintf(msg, MSG_LEN, b"mpinb.%s: rank %d: %s", op_name(c.opcode), c.rank, what)
    c.err = make_error(c.api, code, msg)
    return 1


cdef inline bint answer_metadata(XLA_FFI_CallFrame* f) noexcept nogil:
    """XLA asks each handler once which FFI API version it speaks; answer and return True."""
    cdef XLA_FFI_Metadata_Extension* ext
    if f.extension_start == NULL or f.extension_start.type != XLA_FFI_Extension_Metadata:
        return False
    ext = <XLA_FFI_Metadata_Extension*>f.extension_start
    ext.metadata.api_version.struct_size = XLA_FFI_Api_Version_STRUCT_SIZE
    ext.metadata.api_version.extension_start = NULL
    ext.metadata.api_version.major_version = XLA_FFI_API_MAJOR
    ext.metadata.api_version.minor_version = XLA_FFI_API_MINOR
    ext.metadata.traits = 0
    return True


cdef int decode_attrs(Call* c) noexcept nogil:
    """Read the attributes by name, against the op's row of the table (ext/ops.pxi, made from
    mpinb/mpi_ops.py): an unknown name, an attribute of another op, a repeated one, a wrong
    type or a missing one is an error naming it, never a value silently left at 0."""
    cdef XLA_FFI_Attrs* attrs = &c.f.attrs
    cdef const XLA_FFI_ByteSpan* name
    cdef XLA_FFI_Scalar* scalar
    cdef XLA_FFI_Array* array
    cdef int64_t v
    cdef int64_t i
    cdef int64_t bit
    cdef int64_t seen = 0
    cdef int64_t wanted = op_attributes(c.opcode)
    cdef char what[200]
    for i in range(attrs.size):
        name = attrs.names[i]
        bit = attribute_bit(name.ptr, name.len)
        if bit == 0:
            snprintf(what, 200, b"unknown attribute %.*s", <int>name.len, name.ptr)
            return fail(c, XLA_FFI_Error_Code_INVALID_ARGUMENT, what)
        if not (bit & wanted) or (bit & seen):
            snprintf(what, 200, b"attribute %.*s %s", <int>name.len, name.ptr,
                     b"given twice" if bit & seen else b"is not one of this op's")
            return fail(c, XLA_FFI_Error_Code_INVALID_ARGUMENT, what)
        seen |= bit
        if bit & ARRAY_ATTRS:
            array = <XLA_FFI_Array*>attrs.attrs[i]
            if attrs.types[i] != XLA_FFI_AttrType_ARRAY or array.dtype != XLA_FFI_DataType_S64:
                snprintf(what, 200, b"attribute %.*s must be an int64 array", <int>name.len, name.ptr)
                return fail(c, XLA_FFI_Error_Code_INVALID_ARGUMENT, what)
            if bit == ATTR_COUNTS:
                c.counts = <const int64_t*>array.data
                c.ncounts = <int64_t>array.size
            elif bit == ATTR_SENDCOUNTS:
                c.sendcounts = <const int64_t*>array.data
                c.nsendcounts = <int64_t>array.size
            else:
                c.recvcounts = <const int64_t*>array.data
                c.nrecvcounts = <int64_t>array.size
            continue
        scalar = <XLA_FFI_Scalar*>attrs.attrs[i]
        if attrs.types[i] != XLA_FFI_AttrType_SCALAR or scalar.dtype != XLA_FFI_DataType_S64:
            snprintf(what, 200, b"attribute %.*s must be an int64 scalar", <int>name.len, name.ptr)
            return fail(c, XLA_FFI_Error_Code_INVALID_ARGUMENT, what)
        v = (<int64_t*>scalar.value)[0]
        if bit == ATTR_COMM:
            c.comm = <MPI_Comm><intptr_t>v
        elif bit == ATTR_OP:
            c.op = <MPI_Op><intptr_t>v
            c.has_op = True
        elif bit == ATTR_ROOT:
            c.root = v
        elif bit == ATTR_DEST:
            c.dest = v
        elif bit == ATTR_SOURCE:
            c.source = v
        elif bit == ATTR_TAG:
            c.tag = v
        elif bit == ATTR_SENDTAG:
            c.sendtag = v
        elif bit == ATTR_RECVTAG:
            c.recvtag = v
        elif bit == ATTR_STATUS:
            c.status_addr = v
    if wanted & ~seen:
        bit = wanted & ~seen
        bit = bit & -bit  # the first one missing
        snprintf(what, 200, b"missing attribute %s", attribute_name(bit))
        return fail(c, XLA_FFI_Error_Code_INVALID_ARGUMENT, what)
    return 0


cdef inline XLA_FFI_Buffer* arg(Call* c, int i) noexcept nogil:
    return <XLA_FFI_Buffer*>c.f.args.args[i]


cdef inline XLA_FFI_Buffer* ret(Call* c, int i) noexcept nogil:
    return <XLA_FFI_Buffer*>c.f.rets.rets[i]


cdef inline int64_t nelems(const XLA_FFI_Buffer* b) noexcept nogil:
    cdef int64_t n = 1
    cdef int64_t i
    for i in range(b.rank):
        n *= b.dims[i]
    return n


cdef inline int64_t row_elems(const XLA_FFI_Buffer* b) noexcept nogil:
    """Elements per index of the leading dimension."""
    cdef int64_t n = 1
    cdef int64_t i
    for i in range(1, b.rank):
        n *= b.dims[i]
    return n


cdef const char* dtype_name(XLA_FFI_DataType t) noexcept nogil:
    if t == XLA_FFI_DataType_PRED: return b"bool"
    if t == XLA_FFI_DataType_S8: return b"int8"
    if t == XLA_FFI_DataType_S16: return b"int16"
    if t == XLA_FFI_DataType_S32: return b"int32"
    if t == XLA_FFI_DataType_S64: return b"int64"
    if t == XLA_FFI_DataType_U8: return b"uint8"
    if t == XLA_FFI_DataType_U16: return b"uint16"
    if t == XLA_FFI_DataType_U32: return b"uint32"
    if t == XLA_FFI_DataType_U64: return b"uint64"
    if t == XLA_FFI_DataType_F16: return b"float16"
    if t == XLA_FFI_DataType_BF16: return b"bfloat16"
    if t == XLA_FFI_DataType_F32: return b"float32"
    if t == XLA_FFI_DataType_F64: return b"float64"
    if t == XLA_FFI_DataType_C64: return b"complex64"
    if t == XLA_FFI_DataType_C128: return b"complex128"
    return b"unsupported"


cdef int mpi_type(Call* c, const XLA_FFI_Buffer* b, bint reducing,
                  MPI_Datatype* out, int64_t* width) noexcept nogil:
    """MPI datatype and element width of a buffer. 16-bit floats travel as raw 16-bit words,
    which is exact for data movement but meaningless for reductions, so those are refused."""
    cdef char what[200]
    cdef XLA_FFI_DataType t = b.dtype
    if t == XLA_FFI_DataType_PRED: out[0] = MPI_C_BOOL; width[0] = 1
    elif t == XLA_FFI_DataType_S8: out[0] = MPI_INT8_T; width[0] = 1
    elif t == XLA_FFI_DataType_S16: out[0] = MPI_INT16_T; width[0] = 2
    elif t == XLA_FFI_DataType_S32: out[0] = MPI_INT32_T; width[0] = 4
    elif t == XLA_FFI_DataType_S64: out[0] = MPI_INT64_T; width[0] = 8
    elif t == XLA_FFI_DataType_U8: out[0] = MPI_UINT8_T; width[0] = 1
    elif t == XLA_FFI_DataType_U16: out[0] = MPI_UINT16_T; width[0] = 2
    elif t == XLA_FFI_DataType_U32: out[0] = MPI_UINT32_T; width[0] = 4
    elif t == XLA_FFI_DataType_U64: out[0] = MPI_UINT64_T; width[0] = 8
    elif t == XLA_FFI_DataType_F32: out[0] = MPI_FLOAT; width[0] = 4
    elif t == XLA_FFI_DataType_F64: out[0] = MPI_DOUBLE; width[0] = 8
    elif t == XLA_FFI_DataType_C64: out[0] = MPI_C_FLOAT_COMPLEX; width[0] = 8
    elif t == XLA_FFI_DataType_C128: out[0] = MPI_C_DOUBLE_COMPLEX; width[0] = 16
    elif (t == XLA_FFI_DataType_F16 or t == XLA_FFI_DataType_BF16) and not reducing:
        out[0] = MPI_UINT16_T; width[0] = 2
    else:
        snprintf(what, 200, b"dtype %s (code %d) is not supported%s", dtype_name(t), <int>t,
                 b" by reductions" if reducing else b"")
        return fail(c, XLA_FFI_Error_Code_INVALID_ARGUMENT, what)
    return 0


cdef int int_count(Call* c, int64_t n, int* out) noexcept nogil:
    """MPI counts are C ints; larger messages are refused rather than truncated."""
    cdef char what[200]
    if n < 0 or n > INT_MAX:
        snprintf(what, 200, b"message of %lld elements exceeds the MPI count limit %d",
                 <long long>n, INT_MAX)
        return fail(c, XLA_FFI_Error_Code_OUT_OF_RANGE, what)
    out[0] = <int>n
    return 0


cdef int check_rank_arg(Call* c, const char* label, int64_t r, bint wildcard_ok) noexcept nogil:
    cdef char what[200]
    if 0 <= r < c.size:
        return 0
    if wildcard_ok and r == MPI_ANY_SOURCE:
        return 0
    if r == MPI_PROC_NULL:
        return 0
    snprintf(what, 200, b"%s %lld is not a rank of a communicator of size %d",
             label, <long long>r, c.size)
    return fail(c, XLA_FFI_Error_Code_OUT_OF_RANGE, what)


cdef int check_leading(Call* c, const XLA_FFI_Buffer* b, int64_t expected,
                       const char* label) noexcept nogil:
    cdef char what[200]
    if b.rank < 1 or b.dims[0] != expected:
        snprintf(what, 200, b"%s leading dimension %lld is not %lld",
                 label, <long long>(b.dims[0] if b.rank >= 1 else -1), <long long>expected)
        return fail(c, XLA_FFI_Error_Code_INVALID_ARGUMENT, what)
    return 0


cdef int check_counts(Call* c, const int64_t* counts, int64_t n, const char* label) noexcept nogil:
    cdef char what[200]
    cdef int64_t i
    if counts == NULL or n != c.size:
        snprintf(what, 200, b"%s has %lld entries, expected one per rank (%d)",
                 label, <long long>n, c.size)
        return fail(c, XLA_FFI_Error_Code_INVALID_ARGUMENT, what)
    for i in range(n):
        if counts[i] < 0:
            snprintf(what, 200, b"%s[%lld] = %lld is negative", label, <long long>i,
                     <long long>counts[i])
            return fail(c, XLA_FFI_Error_Code_INVALID_ARGUMENT, what)
    return 0
