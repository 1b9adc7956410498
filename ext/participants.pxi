# Cells restricted to some ranks (%%mpijax --ranks): the engine tells the library which world
# ranks run the current cell. A collective over a communicator that includes a rank outside
# that set, or a point-to-point call to such a rank, would wait forever; it fails at once
# instead, on the ranks that reached it, naming the missing ranks. Costs nothing when every
# rank runs the cell (the default).

cdef unsigned char* g_running = NULL   # g_running[world rank] = 1 if it runs the cell
cdef int g_world_size = 0
cdef bint g_restricted = False


cdef int world_ranks(Call* c, int n, const int* local, int* world) noexcept nogil:
    """Translate ranks of c.comm into COMM_WORLD ranks; 1 (with c.err) on failure."""
    cdef MPI_Group group, wgroup
    if MPI_Comm_group(c.comm, &group) != MPI_SUCCESS:
        return fail(c, XLA_FFI_Error_Code_INTERNAL, b"MPI_Comm_group failed")
    if MPI_Comm_group(MPI_COMM_WORLD, &wgroup) != MPI_SUCCESS:
        MPI_Group_free(&group)
        return fail(c, XLA_FFI_Error_Code_INTERNAL, b"MPI_Comm_group failed")
    cdef int rc = MPI_Group_translate_ranks(group, n, <int*>local, wgroup, world)
    MPI_Group_free(&group)
    MPI_Group_free(&wgroup)
    if rc != MPI_SUCCESS:
        return fail(c, XLA_FFI_Error_Code_INTERNAL, b"MPI_Group_translate_ranks failed")
    return 0


cdef int check_participants(Call* c) noexcept nogil:
    """0 when every rank this call waits for runs the cell, else 1 with c.err set."""
    cdef int n = 0, i, r
    cdef int* local
    cdef int* world
    cdef char missing[160]
    cdef char what[400]
    cdef int used = 0, count = 0
    cdef int64_t peers[2]
    if not g_restricted:
        return 0
    local = <int*>malloc(2 * (c.size + 2) * sizeof(int))
    if local == NULL:
        return fail(c, XLA_FFI_Error_Code_INTERNAL, b"out of memory")
    world = local + c.size + 2
    if op_point_to_point(c.opcode):  # the peers it waits for (not PROC_NULL, not ANY_SOURCE)
        peers[0] = c.source if c.opcode == OP_RECV else c.dest
        peers[1] = c.source if c.opcode == OP_SENDRECV else -1
        for i in range(2):
            if 0 <= peers[i] < c.size:
                local[n] = <int>peers[i]
                n += 1
    else:
        for i in range(c.size):
            local[i] = i
        n = c.size
    if n == 0:
        free(local)
        return 0
    if world_ranks(c, n, local, world):
        free(local)
        return 1
    missing[0] = 0
    for i in range(n):
        r = world[i]
        if 0 <= r < g_world_size and not g_running[r]:
            count += 1
            if used < 140:
                used += snprintf(missing + used, 160 - used, b"%s%d", b", " if count > 1 else b"", r)
    free(local)
    if count == 0:
        return 0
    snprintf(what, sizeof(what), b"%s rank%s %s, which do%s not run this cell (%%%%mpijax --ranks): "
             b"the call would wait forever; run it on every rank it needs",
             b"it waits for" if op_point_to_point(c.opcode) else b"its communicator includes",
             b"s" if count > 1 else b"", missing, b"" if count > 1 else b"es")
    return fail(c, XLA_FFI_Error_Code_FAILED_PRECONDITION, what)
