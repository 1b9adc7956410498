# Freeing a rank where it waits, so that its engine keeps its variables (after a proven
# deadlock, or at the stop button; mpinb.engine.rank_release, mpinb.cells.freeing).
#
# Receives. mpinb's receives (recv, the receive half of sendrecv) are matched by polling
# MPI_Improbe, never by blocking in MPI_Mprobe (probe_or_withdraw says why). Once
# install_wake(signum) has run, between polls they read a counter that the signal's handler
# increments. Once it moved during the
# current cell (begin_cell() keeps its value when a cell starts), a receive that has matched
# nothing gives up: nothing was consumed, and the call fails with an ABORTED error saying so.
# The MPI watch does the same for mpi4py's receives, reading the same counter (ext/mpi_watch.c).
# A sendrecv whose receive gave up still owns a send: it drains what arrives on its
# communicator meanwhile (so that a ring of them completes its sends) for up to DRAIN_LIMIT
# seconds, then waits for the send as MPI_Wait does (a send that never completes needs a restart).
#
# Collectives. In checked mode a collective first exchanges signatures (ext/checked.pxi); a rank
# waiting there for ranks that left the cell is freed by those ranks joining the exchange with a
# signature that says so (join_agreement): every rank of it then fails before the op ran.
#
# Messages left unreceived. A freed cell can leave messages that no receive took; a later cell's
# receive would take them for its own. drop_stale() drops what waits on the communicators
# involved (the client runs it on every rank once the ranks are free), with what the handlers
# drained; both are said in the view.
#
# MPI cannot take back a send under way (on MPICH 5 MPI_Cancel leaves a 4 MiB send to a rank
# that never receives pending; measured) nor a collective past its exchange, so a rank blocked
# in one of those is freed by restarting the engines.

cdef extern from *:
    """
    #include <sched.h>
    #include <signal.h>
    #include <string.h>
    static long mpinb_wakes = 0;      /* wake signals received */
    static long mpinb_wake_base = 0;  /* their number when the current cell started */
    static void mpinb_on_wake(int sig) {
        (void)sig;
        __atomic_add_fetch(&mpinb_wakes, 1, __ATOMIC_RELAXED);
    }
    static int mpinb_woken(void) {
        return __atomic_load_n(&mpinb_wakes, __ATOMIC_RELAXED) != __atomic_load_n(&mpinb_wake_base, __ATOMIC_RELAXED);
    }
    static void mpinb_begin_cell(void) {
        __atomic_store_n(&mpinb_wake_base, __atomic_load_n(&mpinb_wakes, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
    }
    static int mpinb_install_wake(int sig) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = mpinb_on_wake;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESTART;
        return sigaction(sig, &sa, NULL);
    }
    """
    long mpinb_wakes
    long mpinb_wake_base
    int mpinb_woken() noexcept nogil
    void mpinb_begin_cell() noexcept nogil
    int mpinb_install_wake(int sig) noexcept nogil
    int sched_yield() noexcept nogil

cdef enum:
    KEPT_COMMS = 16           # communicators of withdrawn receives remembered for drop_stale
    KEPT_DROPS = 64           # messages drained by handlers, remembered for drop_stale

cdef struct Dropped:
    int source                # world rank, -1 if unknown
    int tag
    int64_t nbytes

cdef int g_wake_signal = 0    # install_wake()'s signal; 0: receives are not withdrawable
cdef MPI_Comm g_withdrawn_comms[KEPT_COMMS]
cdef int g_nwithdrawn_comms = 0
cdef Dropped g_drained[KEPT_DROPS]
cdef int g_ndrained = 0
cdef int64_t g_drained_more = 0  # drained beyond KEPT_DROPS
cdef MPI_Comm g_default_comm = MPI_COMM_NULL  # mpinb's clone of COMM_WORLD (set_default_comm)
cdef double DRAIN_LIMIT = 2.0  # seconds a withdrawn sendrecv drains its communicator for its send
# A polling wait spins this long before it yields its core between polls: a message that comes
# within it (a peer on a core of its own) is seen at once; after it, every poll first offers the
# core to any rank that shares it (a yield with no one to run returns at once). 2 us keeps the
# dedicated-core exchange as fast as a blocking probe (benchmarks/halo.py).
cdef double SPIN_SECONDS = 2e-6


cdef inline void wait_turn(double spin_until) noexcept nogil:
    """Between two polls of a wait: past spin_until, give the core to whoever else can run."""
    if MPI_Wtime() >= spin_until:
        sched_yield()


cdef int world_of(MPI_Comm comm, int r) noexcept nogil:
    """A rank of comm as a world rank, -1 if unknown (ANY_SOURCE, PROC_NULL, untranslatable)."""
    cdef int size = 0
    if r < 0 or MPI_Comm_size(comm, &size) != MPI_SUCCESS:
        return -1
    return to_world(r, comm_members(comm, size), size, comm == MPI_COMM_WORLD)


cdef void remember_comm(MPI_Comm comm) noexcept nogil:
    global g_nwithdrawn_comms
    cdef int i
    for i in range(g_nwithdrawn_comms):
        if g_withdrawn_comms[i] == comm:
            return
    if g_nwithdrawn_comms < KEPT_COMMS:
        g_withdrawn_comms[g_nwithdrawn_comms] = comm
        g_nwithdrawn_comms += 1


cdef void note_withdrawn(Call* c, int source, int tag) noexcept nogil:
    """Fail the call with the words of a withdrawn receive and remember its communicator."""
    global g_freed
    cdef char what[300]
    cdef char whom[40]
    cdef char which[24]
    cdef int world = world_of(c.comm, source)
    if source == MPI_ANY_SOURCE:
        snprintf(whom, sizeof(whom), b"any rank")
    elif world >= 0:
        snprintf(whom, sizeof(whom), b"rank %d", world)
    else:
        snprintf(whom, sizeof(whom), b"rank %d of its communicator", source)
    if tag == MPI_ANY_TAG:
        snprintf(which, sizeof(which), b"any tag")
    else:
        snprintf(which, sizeof(which), b"tag %d", tag)
    snprintf(what, sizeof(what), b"receive from %s (%s) withdrawn before a message came (mpinb freed this "
             b"rank: a proven deadlock or the stop button); nothing was received", whom, which)
    fail(c, XLA_FFI_Error_Code_ABORTED, what)
    c.withdrawn = True
    g_freed += 1
    remember_comm(c.comm)


cdef int probe_or_withdraw(Call* c, int source, int tag, MPI_Message* msg,
                           MPI_Status* status) noexcept nogil:
    """Match a message as MPI_Mprobe does, but by polling MPI_Improbe, so that the wait gives
    its core away (see wait_turn) and, once install_wake() ran, the wake signal withdraws it.
    Returns an MPI return code; when withdrawn, MPI_SUCCESS with c.err set and nothing matched.

    Never MPI_Mprobe itself: on MPICH 5 a rank blocked in it keeps polling for its whole time
    slice, so with more ranks than cores the rank it waits for runs only between slices
    (measured: a 100-float recv on 2 ranks sharing a core took 7.9 ms against raw mpi4py's
    17 us; tests/test_shared_cores.py)."""
    cdef int flag = 0
    cdef int rc
    cdef double spin_until = MPI_Wtime() + SPIN_SECONDS
    while True:
        rc = MPI_Improbe(source, tag, c.comm, &flag, msg, status)
        if rc != MPI_SUCCESS or flag:
            return rc
        if g_wake_signal != 0 and mpinb_woken():
            note_withdrawn(c, source, tag)
            return MPI_SUCCESS
        wait_turn(spin_until)


cdef void note_drained(MPI_Comm comm, MPI_Status* status, int64_t nbytes) noexcept nogil:
    global g_ndrained, g_drained_more
    if g_ndrained < KEPT_DROPS:
        g_drained[g_ndrained].source = world_of(comm, status.MPI_SOURCE)
        g_drained[g_ndrained].tag = status.MPI_TAG
        g_drained[g_ndrained].nbytes = nbytes
        g_ndrained += 1
    else:
        g_drained_more += 1


cdef int drain_one(MPI_Comm comm) noexcept nogil:
    """Receive and drop one message waiting on comm, if any: 1 if one was, 0 if none, -1 on an
    MPI error. A message too large for an int count of bytes is received in MiB blocks."""
    cdef MPI_Message msg
    cdef MPI_Status status
    cdef MPI_Count nbytes = 0
    cdef MPI_Datatype block
    cdef int flag = 0
    cdef int rc
    cdef int64_t blocks
    cdef void* scratch
    if MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &flag, &msg, &status) != MPI_SUCCESS:
        return -1
    if not flag:
        return 0
    if MPI_Get_elements_x(&status, MPI_BYTE, &nbytes) != MPI_SUCCESS or nbytes < 0:
        nbytes = 0
    if nbytes <= INT_MAX:
        scratch = malloc(nbytes if nbytes > 0 else 1)
        if scratch == NULL:
            return -1
        rc = MPI_Mrecv(scratch, <int>nbytes, MPI_BYTE, &msg, MPI_STATUS_IGNORE)
    else:
        blocks = (nbytes + (1 << 20) - 1) >> 20
        scratch = malloc(blocks << 20)
        if scratch == NULL or MPI_Type_contiguous(1 << 20, MPI_BYTE, &block) != MPI_SUCCESS:
            free(scratch)
            return -1
        MPI_Type_commit(&block)
        rc = MPI_Mrecv(scratch, <int>blocks, block, &msg, MPI_STATUS_IGNORE)
        MPI_Type_free(&block)
    free(scratch)
    note_drained(comm, &status, nbytes)
    return 1 if rc == MPI_SUCCESS else -1


cdef int finish_send_draining(MPI_Comm comm, MPI_Request* sending) noexcept nogil:
    """After a sendrecv's receive was withdrawn: complete its send, draining what arrives on comm
    meanwhile (the peer's own send may be what keeps it from receiving ours), for up to
    DRAIN_LIMIT seconds; then wait for it as MPI_Wait does. Returns an MPI return code."""
    cdef int done = 0
    cdef int rc
    cdef double end = MPI_Wtime() + DRAIN_LIMIT
    while MPI_Wtime() < end:
        while drain_one(comm) == 1:  # first what is there: another freed rank's send may wait on it
            pass
        rc = MPI_Test(sending, &done, MPI_STATUS_IGNORE)
        if rc != MPI_SUCCESS or done:
            return rc
        sched_yield()  # a freed rank has no hurry: its peers may share its core
    return MPI_Wait(sending, MPI_STATUS_IGNORE)


cdef object joinable_name(InFlight snap):
    """"world" or "default" if the call waits in checked mode's signature exchange on
    COMM_WORLD or mpinb's clone of it (every engine holds both), else None."""
    if not snap.agreeing:
        return None
    if snap.comm == MPI_COMM_WORLD:
        return "world"
    if snap.comm == g_default_comm and snap.comm != MPI_COMM_NULL:
        return "default"
    return None


def set_default_comm(int64_t handle):
    """Which communicator is mpinb's clone of COMM_WORLD (a collective call blocked on it can be
    joined: join_agreement)."""
    global g_default_comm
    g_default_comm = <MPI_Comm><intptr_t>handle


def join_agreement(int64_t handle):
    """Free the ranks of the communicator ``handle`` that wait in checked mode's signature
    exchange for this rank, which left the cell without calling their collective: take part in
    the exchange with a signature that says so. They fail (ABORTED, nothing exchanged) and the
    communicator's call numbers stay in step. Blocks until the exchange is done."""
    cdef Call c
    cdef int64_t mine[SIG_LEN]
    cdef int64_t* every
    cdef int size = 0
    cdef int rc
    memset(&c, 0, sizeof(Call))
    c.comm = <MPI_Comm><intptr_t>handle
    MPI_Comm_size(c.comm, &size)
    memset(mine, 0, sizeof(mine))
    mine[S_MAGIC] = JOIN_MAGIC
    mine[S_SEQ] = next_call_number(&c)
    every = <int64_t*>malloc(SIG_LEN * size * sizeof(int64_t))
    if every == NULL:
        raise MemoryError("mpinb.join_agreement")
    with nogil:
        rc = MPI_Allgather(mine, SIG_LEN, MPI_INT64_T, every, SIG_LEN, MPI_INT64_T, c.comm)
    free(every)
    if rc != MPI_SUCCESS:
        raise RuntimeError(f"mpinb: joining the signature exchange failed (MPI error code {rc})")


def install_wake(int signum):
    """Make mpinb's receives withdrawable by ``signum`` (see ext/withdraw.pxi). Raises OSError
    if the handler cannot be installed."""
    global g_wake_signal
    if mpinb_install_wake(signum) != 0:
        raise OSError(f"mpinb: cannot install a handler for signal {signum}")
    g_wake_signal = signum


def wake_addresses():
    """Where the wake signal's count and its value at the cell's start are kept (two C longs),
    for the MPI watch to read."""
    return <intptr_t>&mpinb_wakes, <intptr_t>&mpinb_wake_base


def begin_cell():
    """A cell starts: only a wake from now on withdraws receives."""
    mpinb_begin_cell()


def freed():
    """Calls of this process freed where they waited so far (receives withdrawn, signature
    exchanges joined by ranks that left the cell)."""
    return g_freed


def withdrawn_comms():
    """The handles of the communicators of the receives withdrawn since the last drop_stale()."""
    return [<int64_t><intptr_t>g_withdrawn_comms[i] for i in range(g_nwithdrawn_comms)]


def drop_stale(handles, double quiet, double limit):
    """Drop every message waiting on the communicators ``handles`` (MPI handles as ints) until
    none came for ``quiet`` seconds (at most ``limit`` seconds in all); return those and the ones
    handlers drained since the last call, one dict each: {"source" (a world rank, None if
    unknown), "tag", "bytes"}, and how many more were dropped than listed. Forgets the
    communicators of withdrawn receives."""
    global g_nwithdrawn_comms, g_ndrained, g_drained_more
    cdef MPI_Comm comm
    cdef int64_t h
    cdef int got
    cdef double start = MPI_Wtime()
    cdef double last = start
    while MPI_Wtime() - last < quiet and MPI_Wtime() - start < limit:
        for h in handles:
            comm = <MPI_Comm><intptr_t>h
            with nogil:
                got = drain_one(comm)
            if got == 1:
                last = MPI_Wtime()
    dropped = [{"source": g_drained[i].source if g_drained[i].source >= 0 else None,
                "tag": g_drained[i].tag, "bytes": g_drained[i].nbytes} for i in range(g_ndrained)]
    more = g_drained_more
    g_ndrained = 0
    g_drained_more = 0
    g_nwithdrawn_comms = 0
    return dropped, more
