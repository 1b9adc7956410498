# What a blocked rank waits for, told to the notebook (inflight()): besides the op, its peers
# and tags, and the communicator's members as world ranks, so that the notebook can draw the
# ranks' wait-for graph and prove a deadlock (mpinb/analysis/deadlock.py).
#
# The members of a communicator are translated to world ranks once per communicator (main
# thread, on its first call) and kept in an MPI attribute that is freed with it; the record of
# the call in flight points at them. The status thread reads that record without the lock and
# trusts what it read only if the same call is still in flight afterwards (a seqlock on the
# call number): while a call is in flight, its communicator cannot be freed.

cdef int g_members_keyval = MPI_KEYVAL_INVALID

cdef enum:
    NO_PEER = -32766  # the op has no such peer (a send's source)


cdef int _free_members(MPI_Comm comm, int keyval, void* value, void* extra) noexcept nogil:
    free(value)
    return MPI_SUCCESS


cdef const int* comm_members(MPI_Comm comm, int size) noexcept nogil:
    """World ranks of comm's ranks (an array of size ints, kept with the communicator), NULL
    for COMM_WORLD itself or when they cannot be had."""
    cdef int* members = NULL
    cdef int found = 0
    cdef MPI_Group group, wgroup
    cdef int* local
    cdef int i, rc
    if comm == MPI_COMM_WORLD or g_members_keyval == MPI_KEYVAL_INVALID:
        return NULL
    if MPI_Comm_get_attr(comm, g_members_keyval, &members, &found) != MPI_SUCCESS:
        return NULL
    if found:
        return members
    members = <int*>malloc(2 * size * sizeof(int))
    if members == NULL:
        return NULL
    local = members + size
    for i in range(size):
        local[i] = i
    rc = MPI_Comm_group(comm, &group)
    if rc == MPI_SUCCESS:
        rc = MPI_Comm_group(MPI_COMM_WORLD, &wgroup)
        if rc == MPI_SUCCESS:
            rc = MPI_Group_translate_ranks(group, size, local, wgroup, members)
            MPI_Group_free(&wgroup)
        MPI_Group_free(&group)
    if rc != MPI_SUCCESS or MPI_Comm_set_attr(comm, g_members_keyval, members) != MPI_SUCCESS:
        free(members)
        return NULL
    return members


cdef void record_waits(Call* c) noexcept nogil:
    """Publish whom this call waits for (g_inflight; the caller holds g_lock)."""
    cdef int opcode = c.opcode
    g_inflight.source = <int>c.source if opcode == OP_RECV or opcode == OP_SENDRECV else NO_PEER
    g_inflight.dest = <int>c.dest if opcode == OP_SEND or opcode == OP_SENDRECV else NO_PEER
    g_inflight.sendtag = <int>(c.sendtag if opcode == OP_SENDRECV else c.tag)
    g_inflight.recvtag = <int>(c.recvtag if opcode == OP_SENDRECV else c.tag)
    g_inflight.root = <int>c.root if op_attributes(opcode) & ATTR_ROOT else NO_PEER
    g_inflight.comm_size = c.size
    g_inflight.members = comm_members(c.comm, c.size)
    g_inflight.world = c.comm == MPI_COMM_WORLD
    g_inflight.received = 0
    g_inflight.comm = c.comm


cdef int to_world(int r, const int* members, int size, bint world) noexcept nogil:
    """A rank of a communicator (its world ranks ``members``) as a world rank; -1 for
    ANY_SOURCE, PROC_NULL, no peer or a rank that cannot be translated (all negative or out of
    range)."""
    if r < 0 or r >= size:
        return -1
    if world:
        return r
    return members[r] if members != NULL else -1


cdef object world_rank(int r, const int* members, int size, bint world):
    """A rank of the call's communicator as a world rank: 'any' for ANY_SOURCE, None for
    PROC_NULL, no peer or a rank that cannot be translated."""
    if r == MPI_ANY_SOURCE:
        return "any"
    cdef int w = to_world(r, members, size, world)
    return w if w >= 0 else None
