# What this rank ran in the current cell: each collective it called, as the signature its
# communicator's ranks must agree on (op, dtype, shape by the op's rule, root, reduction op:
# the fields checked mode exchanges) and the communicator it was called on. The notebook
# compares the ranks' sequences (mpinb/analysis/divergence.py): a computation that one rank
# compiled in the cell and another took from JAX's cache runs the same sequence on both.
#
# Consecutive equal calls (a loop) are kept as one run with a count; RAN_KEPT runs are kept
# per cell, the rest only counted. Point-to-point calls are not kept (ranks call different
# ones by design). A call is kept when it is entered, before checked mode's exchange: a call
# that waited and was freed, or that the ranks disagreed on, was still called. Its own lock,
# held only to write or copy: the engine reads it while a call of an earlier cell waits.

cdef enum:
    RAN_KEPT = 2048
    RAN_WORLD = 0   # the communicator key of every world rank (COMM_WORLD or a copy of it)

cdef struct Run:
    int64_t sig[SIG_LEN]   # checked mode's signature fields (ext/checked.pxi); S_SEQ left 0
    int64_t comm           # RAN_WORLD, or a hash of the communicator's members' world ranks
    int comm_size
    int64_t first          # the call's place in this cell's collectives, from 0
    int64_t count          # consecutive equal calls

cdef Run g_runs[RAN_KEPT]
cdef int g_nruns = 0
cdef int64_t g_ran_total = 0    # collectives called in this cell, kept or not
cdef pthread_mutex_t g_ran_lock
pthread_mutex_init(&g_ran_lock, NULL)


cdef int g_world_size_cached = 0


cdef int g_world_size_now() noexcept nogil:
    if g_world_size_cached == 0:
        MPI_Comm_size(MPI_COMM_WORLD, &g_world_size_cached)
    return g_world_size_cached


cdef int64_t comm_key(const int* members, int size, bint world) noexcept nogil:
    """RAN_WORLD for a communicator of every world rank in order, else a hash (FNV-1a) of its
    members' world ranks, never RAN_WORLD; -1 when they are unknown."""
    cdef uint64_t h = 14695981039346656037ULL
    cdef int i
    cdef bint identity = True
    if world:
        return RAN_WORLD
    if members == NULL:
        return -1
    for i in range(size):
        identity = identity and members[i] == i
        h = (h ^ <uint64_t>(members[i] + 1)) * 1099511628211ULL
    if identity and size == g_world_size_now():
        return RAN_WORLD
    h = h & 0x3fffffffffffffffULL
    return <int64_t>h if h != RAN_WORLD else 1


cdef void note_ran(Call* c, const XLA_FFI_Buffer* b, bint trailing_only, int64_t root) noexcept nogil:
    """Keep the collective c is about to call (enter(); g_lock held, g_inflight describes it)."""
    global g_nruns, g_ran_total
    cdef int64_t sig[SIG_LEN]
    cdef int64_t key
    cdef Run* last
    if op_point_to_point(c.opcode):
        return
    fill_signature(c, b, trailing_only, root, sig)
    key = comm_key(g_inflight.members, c.size, g_inflight.world)
    pthread_mutex_lock(&g_ran_lock)
    last = &g_runs[g_nruns - 1] if g_nruns > 0 else NULL
    if (last != NULL and last.first + last.count == g_ran_total and last.comm == key
            and memcmp(last.sig, sig, sizeof(sig)) == 0):
        last.count += 1
    elif g_nruns < RAN_KEPT:
        last = &g_runs[g_nruns]
        memcpy(last.sig, sig, sizeof(sig))
        last.comm = key
        last.comm_size = c.size
        last.first = g_ran_total
        last.count = 1
        g_nruns += 1
    g_ran_total += 1
    pthread_mutex_unlock(&g_ran_lock)


cdef tuple dims_of(const int64_t* s):
    dims = []
    cdef int d
    for d in range(min(<int>s[S_NDIM], <int>SIG_DIMS)):
        dims.append(None if s[S_DIM0 + d] < 0 else s[S_DIM0 + d])
    return tuple(dims)


def ran_begin():
    """Forget what ran: a new cell begins (never waits for a call in progress)."""
    global g_nruns, g_ran_total
    with nogil:
        pthread_mutex_lock(&g_ran_lock)
        g_nruns = 0
        g_ran_total = 0
        pthread_mutex_unlock(&g_ran_lock)


def ran():
    """The collectives called since ran_begin(): {"total": how many, "runs": [{"op", "dtype"
    (None without a data buffer), "dims" (None for a dimension that may differ by rank),
    "root" (None without one), "reduce" (the reduction op's name, None without one), "comm"
    (0: every world rank; else a key equal on the ranks of one communicator; -1: unknown),
    "comm_size", "first" (place among the cell's collectives, from 0), "count"}], "complete"
    (False when runs beyond the kept ones were only counted)}."""
    cdef Run* copy = <Run*>malloc(sizeof(Run) * RAN_KEPT)
    cdef int n, i
    cdef int64_t total
    cdef int64_t* s
    if copy == NULL:
        raise MemoryError("mpinb.ran")
    try:
        with nogil:
            pthread_mutex_lock(&g_ran_lock)
            n = g_nruns
            total = g_ran_total
            memcpy(copy, g_runs, sizeof(Run) * n)
            pthread_mutex_unlock(&g_ran_lock)
        runs = []
        for i in range(n):
            s = copy[i].sig
            has_buffer = s[S_NDIM] > 0 or s[S_DTYPE] != 0
            runs.append({
                "op": op_name(<int>s[S_OP]).decode(),
                "dtype": dtype_name(<XLA_FFI_DataType>s[S_DTYPE]).decode() if has_buffer else None,
                "dims": dims_of(s) if has_buffer else None,
                "ndim": s[S_NDIM],
                "root": s[S_ROOT] if s[S_ROOT] >= 0 else None,
                "reduce": reduction_name(s[S_REDUCE]).decode().strip() or None,
                "comm": copy[i].comm, "comm_size": copy[i].comm_size,
                "first": copy[i].first, "count": copy[i].count,
            })
        last = copy[n - 1].first + copy[n - 1].count if n else 0
        return {"total": total, "runs": runs, "complete": last == total}
    finally:
        free(copy)
