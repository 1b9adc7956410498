# Overlap: a sendrecv that lets XLA run independent work while its messages travel.
#
# With overlap on (set_overlap, MPINB_OVERLAP=1), h_sendrecv validates its frame, hands the
# transfer to this process's one progress thread and returns an XLA FFI future at once; XLA:CPU
# then runs whatever does not depend on the received halo (the interior of a stencil) and runs
# what does once the future is set. The progress thread runs exactly the blocking path
# (sendrecv_run: the collective lock, the in-flight record, the receive that never truncates),
# so a transfer behaves as it does without overlap, and every failure reaches XLA as an error on
# the future. Program order between mpinb's calls is kept by the ordering buffer: the next call
# depends on this one's result, so XLA does not start it before the future is set.
#
# Off by default: on XLA:CPU it gains little (benchmarks/overlap.py measures a halo-exchange step
# both ways; docs/performance.md, Overlap). Never used in checked mode (its agreement reads the call frame,
# which XLA may reuse after the handler returns), nor with huge pages on (their table is kept
# under the collective lock, which the handler does not hold), nor without MPI_THREAD_MULTIPLE
# (the progress thread calls MPI beside the caller).
# After the hand-off nothing reads the call frame: the job holds copies of what it needs, and
# XLA keeps the buffers alive until the future is set.

cdef extern from "mpi.h" nogil:
    int PMPI_Isend(const void*, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request*)

cdef extern from "<pthread.h>" nogil:
    ctypedef struct pthread_cond_t:
        pass
    ctypedef unsigned long pthread_t
    int pthread_cond_init(pthread_cond_t*, void*)
    int pthread_cond_wait(pthread_cond_t*, pthread_mutex_t*)
    int pthread_cond_signal(pthread_cond_t*)
    int pthread_create(pthread_t*, void*, void* (*)(void*) noexcept nogil, void*)
    int pthread_detach(pthread_t)

cdef struct Transfer:
    # one sendrecv's MPI arguments, decoded from the frame by the handler
    void* send
    void* recv
    int ns
    int nr
    MPI_Datatype ts
    MPI_Datatype tr
    int64_t wr
    MPI_Status* status   # the caller's MPI.Status, or own

cdef struct Job:
    Call c               # c.f is NULL: the frame is not read after the hand-off
    Transfer t
    MPI_Status own
    XLA_FFI_Future* future
    Job* next

cdef int g_overlap = 0               # set_overlap(), which starts the progress thread first
cdef int64_t g_overlapped = 0        # calls handed to the progress thread
cdef pthread_mutex_t g_queue_lock
cdef pthread_cond_t g_queue_ready
pthread_mutex_init(&g_queue_lock, NULL)
pthread_cond_init(&g_queue_ready, NULL)
cdef Job* g_queue_head = NULL
cdef Job* g_queue_tail = NULL
cdef int g_worker_started = 0


cdef XLA_FFI_Error* sendrecv_run(Call* c, Transfer* t) noexcept nogil:
    """The transfer itself, blocking: MPI_Sendrecv with the receive that never truncates
    (matched_recv). Returns NULL or the call's error."""
    if enter(c, c.nbytes, <int>c.dest):
        return finish(c, MPI_SUCCESS, NULL)
    cdef MPI_Request sending
    # PMPI_: past the MPI watch, which would take this request, done before the call returns, for
    # one the program keeps (``pending``, ext/mpi_watch.c), and then prove less
    cdef int rc = PMPI_Isend(t.send, t.ns, t.ts, <int>c.dest, <int>c.sendtag, c.comm, &sending)
    cdef int sent
    if rc == MPI_SUCCESS:
        rc = matched_recv(c, t.recv, t.nr, t.tr, t.wr, <int>c.source, <int>c.recvtag, t.status)
        g_inflight.received = 1
        if c.withdrawn:  # the peer's send may be what keeps it from taking ours (ext/withdraw.pxi)
            sent = finish_send_draining(c.comm, &sending)
        else:
            sent = MPI_Wait(&sending, MPI_STATUS_IGNORE)  # always: MPI reads the operand until then
        if c.err == NULL:  # else the receive's own error (withdrawn, too long) is the one told
            rc = rc if rc != MPI_SUCCESS else sent
    finish(c, rc, b"MPI_Sendrecv")
    return check_received(c, t.status, t.tr, t.nr)


cdef void destroy_error(const XLA_FFI_Api* api, XLA_FFI_Error* err) noexcept nogil:
    cdef XLA_FFI_Error_Destroy_Args a
    if err == NULL:
        return
    a.struct_size = XLA_FFI_Error_Destroy_Args_STRUCT_SIZE
    a.extension_start = NULL
    a.error = err
    api.XLA_FFI_Error_Destroy(&a)


cdef void settle(const XLA_FFI_Api* api, XLA_FFI_Future* future, XLA_FFI_Error* err) noexcept nogil:
    """Complete the future: available, or failed with err (XLA then owns err)."""
    cdef XLA_FFI_Future_SetAvailable_Args ok
    cdef XLA_FFI_Future_SetError_Args bad
    if err == NULL:
        ok.struct_size = XLA_FFI_Future_SetAvailable_Args_STRUCT_SIZE
        ok.extension_start = NULL
        ok.future = future
        destroy_error(api, mpinb_future_set_available(api, &ok))
    else:
        bad.struct_size = XLA_FFI_Future_SetError_Args_STRUCT_SIZE
        bad.extension_start = NULL
        bad.future = future
        bad.error = err
        destroy_error(api, mpinb_future_set_error(api, &bad))


cdef void* progress_thread(void* unused) noexcept nogil:
    """Runs the handed-off transfers one after another, for the life of the process."""
    global g_queue_head, g_queue_tail
    cdef Job* job
    while True:
        pthread_mutex_lock(&g_queue_lock)
        while g_queue_head == NULL:
            pthread_cond_wait(&g_queue_ready, &g_queue_lock)
        job = g_queue_head
        g_queue_head = job.next
        if g_queue_head == NULL:
            g_queue_tail = NULL
        pthread_mutex_unlock(&g_queue_lock)
        # XLA may run dependent work on this thread inside settle(): the job is done first
        settle(job.c.api, job.future, sendrecv_run(&job.c, &job.t))
        free(job)
    return NULL


cdef int start_progress_thread() noexcept nogil:
    """Once per process (set_overlap, with the GIL held). 0 on success."""
    global g_worker_started
    cdef pthread_t thread
    if g_worker_started:
        return 0
    if pthread_create(&thread, NULL, progress_thread, NULL) != 0:
        return 1
    pthread_detach(thread)
    g_worker_started = 1
    return 0


cdef XLA_FFI_Future* new_future(const XLA_FFI_Api* api) noexcept nogil:
    cdef XLA_FFI_Future_Create_Args a
    if not mpinb_has_futures(api):
        return NULL
    a.struct_size = XLA_FFI_Future_Create_Args_STRUCT_SIZE
    a.extension_start = NULL
    a.future = NULL
    cdef XLA_FFI_Error* err = mpinb_future_create(api, &a)
    if err != NULL:
        destroy_error(api, err)
        return NULL
    return a.future


cdef bint hand_off(Call* c, Transfer* t) noexcept nogil:
    """Queue the transfer for the progress thread and give XLA a future for it. False (nothing
    queued) when overlap is off or not possible: the caller runs the transfer itself."""
    global g_overlapped, g_queue_head, g_queue_tail
    if not g_overlap or g_checked or g_huge_on:
        return False
    cdef Job* job = <Job*>malloc(sizeof(Job))
    if job == NULL:
        return False
    job.future = new_future(c.api)
    if job.future == NULL:
        free(job)
        return False
    job.c = c[0]
    job.c.f = NULL
    job.t = t[0]
    if t.status == NULL:
        job.t.status = &job.own
    job.next = NULL
    c.f.future = job.future
    pthread_mutex_lock(&g_queue_lock)
    if g_queue_tail == NULL:
        g_queue_head = job
    else:
        g_queue_tail.next = job
    g_queue_tail = job
    g_overlapped += 1
    pthread_cond_signal(&g_queue_ready)
    pthread_mutex_unlock(&g_queue_lock)
    return True
