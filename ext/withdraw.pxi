# Withdrawing a receive: a rank blocked in one of mpinb's receives (recv, the receive half of
# sendrecv) can be freed without killing its engine, after a proven deadlock or at the stop
# button, so that the engine keeps its variables.
#
# Once install_wake(signum) has run, a receive is matched by polling MPI_Improbe instead of
# blocking in MPI_Mprobe, and between polls it reads a counter that the signal's handler
# increments (the notebook sends the signal through ipyparallel: mpinb.engine.withdraw). When
# the counter moves while the receive waits, no message was matched, so none was consumed: the
# call fails with an ABORTED error saying so, and a message that comes later stays queued until
# drop_stale() drops it (the engine does at the end of such a cell).
#
# Sends and collectives are never withdrawn: MPI cannot take back a rendezvous send (on MPICH 5
# MPI_Cancel leaves a 4 MiB send to a rank that never receives pending; measured) nor a
# collective once entered, so a rank blocked in one is freed by restarting the engines.

cdef extern from *:
    """
    #include <sched.h>
    #include <signal.h>
    #include <string.h>
    static long mpinb_wakes = 0;
    static void mpinb_on_wake(int sig) {
        (void)sig;
        __atomic_add_fetch(&mpinb_wakes, 1, __ATOMIC_RELAXED);
    }
    static long mpinb_wakes_seen(void) { return __atomic_load_n(&mpinb_wakes, __ATOMIC_RELAXED); }
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
    long mpinb_wakes_seen() noexcept nogil
    int mpinb_install_wake(int sig) noexcept nogil
    int sched_yield() noexcept nogil

cdef enum:
    KEPT_COMMS = 16           # communicators of withdrawn receives remembered for drop_stale

cdef int g_wake_signal = 0    # install_wake()'s signal; 0: receives block in MPI_Mprobe
cdef int64_t g_withdrawn = 0  # receives withdrawn so far in this process
cdef MPI_Comm g_withdrawn_comms[KEPT_COMMS]
cdef int g_nwithdrawn_comms = 0


cdef void note_withdrawn(Call* c, int source, int tag) noexcept nogil:
    """Fail the call with the words of a withdrawn receive and remember its communicator."""
    global g_withdrawn, g_nwithdrawn_comms
    cdef char what[300]
    cdef char whom[40]
    cdef int i
    if source == MPI_ANY_SOURCE:
        snprintf(whom, sizeof(whom), b"any rank")
    else:
        snprintf(whom, sizeof(whom), b"rank %d", source)
    if tag == MPI_ANY_TAG:
        snprintf(what, sizeof(what), b"receive from %s (any tag) withdrawn before a message came "
                 b"(mpinb freed this rank: a proven deadlock or the stop button); nothing was received",
                 whom)
    else:
        snprintf(what, sizeof(what), b"receive from %s (tag %d) withdrawn before a message came "
                 b"(mpinb freed this rank: a proven deadlock or the stop button); nothing was received",
                 whom, tag)
    fail(c, XLA_FFI_Error_Code_ABORTED, what)
    g_withdrawn += 1
    for i in range(g_nwithdrawn_comms):
        if g_withdrawn_comms[i] == c.comm:
            return
    if g_nwithdrawn_comms < KEPT_COMMS:
        g_withdrawn_comms[g_nwithdrawn_comms] = c.comm
        g_nwithdrawn_comms += 1


cdef int probe_or_withdraw(Call* c, int source, int tag, MPI_Message* msg,
                           MPI_Status* status) noexcept nogil:
    """MPI_Mprobe that the wake signal withdraws. Returns an MPI return code; when withdrawn,
    MPI_SUCCESS with c.err set and nothing matched."""
    if g_wake_signal == 0:
        return MPI_Mprobe(source, tag, c.comm, msg, status)
    cdef long seen = mpinb_wakes_seen()
    cdef int flag = 0
    cdef int rc
    while True:
        rc = MPI_Improbe(source, tag, c.comm, &flag, msg, status)
        if rc != MPI_SUCCESS or flag:
            return rc
        if mpinb_wakes_seen() != seen:
            note_withdrawn(c, source, tag)
            return MPI_SUCCESS
        sched_yield()  # as MPICH's own blocking wait does: ranks may share a core


def install_wake(int signum):
    """Make mpinb's receives withdrawable by ``signum`` (see ext/withdraw.pxi). Raises OSError
    if the handler cannot be installed."""
    global g_wake_signal
    if mpinb_install_wake(signum) != 0:
        raise OSError(f"mpinb: cannot install a handler for signal {signum}")
    g_wake_signal = signum


def wake_signal():
    """The signal that withdraws mpinb's receives, or None before install_wake()."""
    return g_wake_signal or None


def wake_counter_address():
    """Where the wake signal's count is kept (a C long), for the MPI watch to read."""
    return <intptr_t>&mpinb_wakes


def withdrawals():
    """{"count": receives withdrawn so far, "comms": the handles of their communicators}."""
    return {"count": g_withdrawn, "comms": [<int64_t><intptr_t>g_withdrawn_comms[i] for i in range(g_nwithdrawn_comms)]}


def drop_stale(handles, double quiet):
    """Receive and drop every message waiting on the communicators ``handles`` (MPI handles as
    ints), until none came for ``quiet`` seconds: what a cell whose receives were withdrawn left
    behind, which a later receive would otherwise take for its own. Returns one dict per message
    dropped: {"source" (a world rank, None if unknown), "tag", "bytes"}."""
    cdef MPI_Comm comm
    cdef MPI_Message msg
    cdef MPI_Status status
    cdef int flag = 0, nbytes = 0, size = 0, rc
    cdef void* scratch
    cdef double last
    dropped = []
    cdef int64_t h
    last = MPI_Wtime()
    while MPI_Wtime() - last < quiet:
        for h in handles:
            comm = <MPI_Comm><intptr_t>h
            with nogil:
                rc = MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &flag, &msg, &status)
            if rc != MPI_SUCCESS or not flag:
                continue
            MPI_Get_count(&status, MPI_BYTE, &nbytes)
            scratch = malloc(nbytes if nbytes > 0 else 1)
            if scratch == NULL:
                raise MemoryError("mpinb.drop_stale")
            with nogil:
                MPI_Mrecv(scratch, nbytes, MPI_BYTE, &msg, MPI_STATUS_IGNORE)
            free(scratch)
            MPI_Comm_size(comm, &size)
            dropped.append({"source": world_rank(status.MPI_SOURCE, comm_members(comm, size), size,
                                                 comm == MPI_COMM_WORLD),
                            "tag": status.MPI_TAG, "bytes": nbytes})
            last = MPI_Wtime()
    return dropped
