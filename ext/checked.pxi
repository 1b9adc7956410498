# Checked mode: before a collective, the ranks of its communicator exchange a signature (call
# number on that communicator, op, dtype, shape, root, reduction op) with one MPI_Allgather
# and refuse to go on if they disagree. A mismatch then becomes the same clear error on every
# rank ("rank 1 called allreduce float32[4] (#3), rank 0 called alltoall float32[4,64,64] (#3)")
# instead of a hang, wrong data or a crash. Point-to-point operations are not checked.
#
# Call numbers are counted per communicator, in an MPI attribute, so they stay meaningful
# with sub-communicators and disappear with the communicator.

cdef enum:
    SIG_LEN = 12
    SIG_DIMS = 5
    SIG_MAGIC = 0x6d70696e62
    JOIN_MAGIC = 0x6a6f696e  # a rank that joins only to free the others (ext/withdraw.pxi)

cdef int g_checked = 0
cdef int64_t g_freed = 0  # calls freed where they waited: receives withdrawn, exchanges joined (ext/withdraw.pxi)
cdef int g_counter_keyval = MPI_KEYVAL_INVALID

# signature fields
cdef enum:
    S_MAGIC = 0
    S_SEQ
    S_OP
    S_DTYPE
    S_REDUCE
    S_ROOT
    S_NDIM
    S_DIM0


cdef int _free_counter(MPI_Comm comm, int keyval, void* value, void* extra) noexcept nogil:
    free(value)
    return MPI_SUCCESS


cdef int64_t next_call_number(Call* c) noexcept nogil:
    """1, 2, 3, ... per communicator; 0 if the counter could not be kept."""
    cdef int64_t* counter = NULL
    cdef int found = 0
    if g_counter_keyval == MPI_KEYVAL_INVALID:
        return 0
    if MPI_Comm_get_attr(c.comm, g_counter_keyval, &counter, &found) != MPI_SUCCESS:
        return 0
    if not found or counter == NULL:
        counter = <int64_t*>malloc(sizeof(int64_t))
        if counter == NULL:
            return 0
        counter[0] = 0
        if MPI_Comm_set_attr(c.comm, g_counter_keyval, counter) != MPI_SUCCESS:
            free(counter)
            return 0
    counter[0] += 1
    return counter[0]


cdef int64_t reduce_code(Call* c) noexcept nogil:
    """Checked-mode code of the call's reduction op (the table's order), 0 without one."""
    if not c.has_op:
        return 0
    return reduction_code(c.op)


cdef void describe_sig(const int64_t* s, char* out, int n) noexcept nogil:
    """'alltoall float32[4,64,64] root 0 SUM (#3)'; trailing-only shapes print as [*,...]."""
    cdef char dims[160]
    cdef int used = 0
    cdef int64_t i
    cdef int64_t nd = s[S_NDIM]
    dims[0] = 0
    for i in range(min(nd, SIG_DIMS)):
        if s[S_DIM0 + i] < 0:
            used += snprintf(dims + used, 160 - used, b"%s*", b"," if i else b"")
        else:
            used += snprintf(dims + used, 160 - used, b"%s%lld", b"," if i else b"",
                             <long long>s[S_DIM0 + i])
        if used >= 150:
            break
    if nd > SIG_DIMS and used < 150:
        snprintf(dims + used, 160 - used, b",...")
    if s[S_MAGIC] != SIG_MAGIC:
        snprintf(out, n, b"something that is not a checked mpinb collective")
        return
    if s[S_ROOT] >= 0:
        snprintf(out, n, b"%s %s[%s] root %lld%s (#%lld)", op_name(<int>s[S_OP]),
                 dtype_name(<XLA_FFI_DataType>s[S_DTYPE]), dims, <long long>s[S_ROOT],
                 reduction_name(s[S_REDUCE]), <long long>s[S_SEQ])
    else:
        snprintf(out, n, b"%s %s[%s]%s (#%lld)", op_name(<int>s[S_OP]),
                 dtype_name(<XLA_FFI_DataType>s[S_DTYPE]), dims, reduction_name(s[S_REDUCE]),
                 <long long>s[S_SEQ])


cdef void fill_signature(Call* c, const XLA_FFI_Buffer* b, bint trailing_only, int64_t root,
                         int64_t* sig) noexcept nogil:
    """Checked mode's signature of c (SIG_LEN fields) without its call number."""
    cdef int i
    memset(sig, 0, SIG_LEN * sizeof(int64_t))
    sig[S_MAGIC] = SIG_MAGIC
    sig[S_OP] = c.opcode
    sig[S_REDUCE] = reduce_code(c)
    sig[S_ROOT] = root
    if b != NULL:
        sig[S_DTYPE] = <int64_t>b.dtype
        sig[S_NDIM] = b.rank
        for i in range(min(<int>b.rank, <int>SIG_DIMS)):
            sig[S_DIM0 + i] = -1 if (trailing_only and i == 0) else b.dims[i]


cdef int check_agreement(Call* c, const XLA_FFI_Buffer* b, bint trailing_only,
                         int64_t root) noexcept nogil:
    """Collective signature exchange; 0 if every rank agrees, else 1 with c.err set."""
    global g_freed
    cdef int64_t mine[SIG_LEN]
    cdef int64_t* every
    cdef int i, j, other = -1
    cdef int rc
    cdef char a[300]
    cdef char b_[300]
    cdef char what[MSG_LEN - 40]
    fill_signature(c, b, trailing_only, root, mine)
    mine[S_SEQ] = next_call_number(c)
    every = <int64_t*>malloc(SIG_LEN * c.size * sizeof(int64_t))
    if every == NULL:
        return fail(c, XLA_FFI_Error_Code_INTERNAL, b"checked mode: out of memory")
    rc = MPI_Allgather(mine, SIG_LEN, MPI_INT64_T, every, SIG_LEN, MPI_INT64_T, c.comm)
    if rc != MPI_SUCCESS:
        free(every)
        return fail(c, XLA_FFI_Error_Code_INTERNAL, b"checked mode: signature exchange failed")
    for i in range(c.size):
        if every[i * SIG_LEN + S_MAGIC] == JOIN_MAGIC:
            free(every)
            g_freed += 1
            snprintf(what, sizeof(what), b"withdrawn before it ran: rank %d of its communicator (and any other "
                     b"that left the cell without calling it) joined only to free this rank (mpinb freed it: "
                     b"a proven deadlock or the stop button); nothing was exchanged", i)
            return fail(c, XLA_FFI_Error_Code_ABORTED, what)
    for i in range(c.size):
        for j in range(SIG_LEN):
            if every[i * SIG_LEN + j] != every[j]:
                other = i
                break
        if other >= 0:
            break
    if other < 0:
        free(every)
        return 0
    # every rank finds the same first disagreeing pair (rank 0 against rank `other`)
    describe_sig(every, a, 300)
    describe_sig(every + other * SIG_LEN, b_, 300)
    free(every)
    snprintf(what, sizeof(what), b"checked mode: ranks disagree on the collective: rank %d called %s, "
             b"rank 0 called %s", other, b_, a)
    return fail(c, XLA_FFI_Error_Code_FAILED_PRECONDITION, what)
