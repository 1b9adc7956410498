# In-place alltoall. Inside a loop body XLA may let the result share the operand's buffer (the
# loop carry), which saves the copy of the whole carry it makes every iteration otherwise
# (16 MiB: 2.2x raw per iteration with the copy). The exchange is done pairwise: in round k
# rank r and rank (k - r) mod size swap their blocks for each other through a scratch buffer;
# the own block stays where it is. Measured with mpi4py on 2 ranks at 1 MiB: this swap 101-103 us,
# MPICH's own MPI_IN_PLACE alltoall 105 us, an out-of-place alltoall ping-ponging two buffers
# 87-89 us. The messages travel on a duplicate of the communicator, made once
# per communicator (a collective call, which every rank reaches here), so they never match a
# receive of the program. Called with the collective lock held.

cdef extern from "<stdlib.h>" nogil:
    int posix_memalign(void** memptr, size_t alignment, size_t size)

cdef int g_shadow_keyval = MPI_KEYVAL_INVALID
cdef char* g_scratch = NULL
cdef size_t g_scratch_size = 0


cdef int _free_shadow(MPI_Comm comm, int keyval, void* value, void* extra) noexcept nogil:
    MPI_Comm_free(<MPI_Comm*>value)
    free(value)
    return MPI_SUCCESS


cdef int shadow_comm(Call* c, MPI_Comm* out) noexcept nogil:
    """The duplicate of c.comm for internal messages; 1 (with c.err) on failure."""
    cdef MPI_Comm* shadow = NULL
    cdef int found = 0
    if MPI_Comm_get_attr(c.comm, g_shadow_keyval, &shadow, &found) != MPI_SUCCESS:
        return fail(c, XLA_FFI_Error_Code_INTERNAL, b"MPI_Comm_get_attr failed")
    if not found or shadow == NULL:
        shadow = <MPI_Comm*>malloc(sizeof(MPI_Comm))
        if shadow == NULL:
            return fail(c, XLA_FFI_Error_Code_INTERNAL, b"out of memory")
        if MPI_Comm_dup(c.comm, shadow) != MPI_SUCCESS:
            free(shadow)
            return fail(c, XLA_FFI_Error_Code_INTERNAL, b"MPI_Comm_dup failed")
        if MPI_Comm_set_attr(c.comm, g_shadow_keyval, shadow) != MPI_SUCCESS:
            MPI_Comm_free(shadow)
            free(shadow)
            return fail(c, XLA_FFI_Error_Code_INTERNAL, b"MPI_Comm_set_attr failed")
    out[0] = shadow[0]
    return 0


cdef char* scratch(Call* c, size_t nbytes) noexcept nogil:
    """A buffer of at least ``nbytes``, kept and reused (in huge pages where it is large)."""
    global g_scratch, g_scratch_size
    cdef void* p = NULL
    if nbytes <= g_scratch_size:
        return g_scratch
    if posix_memalign(&p, HUGE_PAGE, nbytes) != 0:
        fail(c, XLA_FFI_Error_Code_INTERNAL, b"out of memory for the in-place exchange")
        return NULL
    if g_huge_on and nbytes >= HUGE_MIN_BYTES:
        madvise(p, nbytes, ADVISE_HUGEPAGE)
    free(g_scratch)
    g_scratch = <char*>p
    g_scratch_size = nbytes
    return g_scratch


cdef int alltoall_in_place(Call* c, char* y, int n, MPI_Datatype t, int64_t w) noexcept nogil:
    """Alltoall of ``n`` elements per block with the result in ``y`` itself; an MPI return code
    (MPI_SUCCESS with c.err set when no scratch or duplicate could be had)."""
    cdef MPI_Comm shadow
    cdef size_t block = <size_t>n * <size_t>w
    cdef char* tmp
    cdef int k, partner, rc
    if shadow_comm(c, &shadow):
        return MPI_SUCCESS
    tmp = scratch(c, block if block > 0 else 1)
    if tmp == NULL:
        return MPI_SUCCESS
    for k in range(c.size):
        partner = (k - c.rank + c.size) % c.size
        if partner == c.rank:
            continue
        rc = MPI_Sendrecv(y + partner * block, n, t, partner, 0, tmp, n, t, partner, 0, shadow,
                          MPI_STATUS_IGNORE)
        if rc != MPI_SUCCESS:
            return rc
        memcpy(y + partner * block, tmp, block)
    return MPI_SUCCESS
