# cython: language_level=3
"""Private compiled core of mpinb: XLA FFI handlers that call MPI.

Each handler receives its data buffers followed by one ordering buffer (operand and result,
see mpinb/mpi/primitives.py), reads its attributes by name, runs exactly one MPI call and
returns NULL or an XLA FFI error naming op, rank and values. Handlers never take the GIL.

A process-wide mutex guarantees that no two collectives run at the same time even if XLA
schedules independent custom calls on different worker threads. While a collective runs, the
op name, sequence number, size and start time are published in a record that Python can read
from another thread (``inflight()``) to tell which MPI call a blocked rank is waiting in.

This module never imports the Python layer above it; mpinb.mpi.library loads it after
mpi4py.MPI has initialised MPI and loaded libmpi.
"""

from libc.stdint cimport int64_t, intptr_t, uint64_t
from libc.limits cimport INT_MAX
from libc.string cimport memcmp, memcpy, memset, strlen
from libc.stdio cimport snprintf, fprintf, fflush, stderr
from libc.stdlib cimport malloc, free
from cpython.pycapsule cimport PyCapsule_New

from mpi4py.libmpi cimport (
    MPI_Comm, MPI_Op, MPI_Datatype, MPI_Status, MPI_SUCCESS, MPI_IN_PLACE, MPI_STATUS_IGNORE, MPI_Comm_dup, MPI_Comm_free,
    MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_PROC_NULL, MPI_MAX_ERROR_STRING, MPI_MAX_LIBRARY_VERSION_STRING,
    MPI_COMM_WORLD, MPI_C_BOOL, MPI_INT8_T, MPI_INT16_T, MPI_INT32_T, MPI_INT64_T, MPI_UINT8_T,
    MPI_UINT16_T, MPI_UINT32_T, MPI_UINT64_T, MPI_FLOAT, MPI_DOUBLE, MPI_C_FLOAT_COMPLEX,
    MPI_C_DOUBLE_COMPLEX, MPI_Comm_rank, MPI_Comm_size, MPI_Error_string, MPI_Error_class,
    MPI_ERR_TRUNCATE, MPI_Get_count, MPI_UNDEFINED, MPI_Wtime,
    MPI_Get_library_version, MPI_Initialized, MPI_Allreduce, MPI_Alltoall, MPI_Alltoallv,
    MPI_Allgather, MPI_Allgatherv, MPI_Bcast, MPI_Reduce, MPI_Gather, MPI_Scatter, MPI_Scan,
    MPI_Send, MPI_Recv, MPI_Sendrecv, MPI_Barrier, MPI_Reduce_scatter_block, MPI_BYTE,
    MPI_Message, MPI_MESSAGE_NO_PROC, MPI_Mprobe, MPI_Improbe, MPI_Mrecv, MPI_Request, MPI_Isend, MPI_Wait,
    MPI_KEYVAL_INVALID, MPI_Comm_get_attr, MPI_Comm_set_attr, MPI_Comm_create_keyval,
    MPI_COMM_NULL, MPI_COMM_NULL_COPY_FN, MPI_Comm_delete_attr_function, MPI_Group, MPI_Comm_group,
    MPI_Group_free, MPI_Group_translate_ranks, MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN,
    MPI_Query_thread, MPI_THREAD_MULTIPLE, MPI_Test, MPI_Count, MPI_Get_elements_x, MPI_Type_contiguous,
    MPI_Type_commit, MPI_Type_free, MPI_LAND, MPI_LOR, MPI_LXOR, MPI_BAND, MPI_BOR, MPI_BXOR,
)
from xla_ffi cimport *

cdef extern from "mpi_family.h":
    const char* MPINB_MPI_FAMILY
    const char* MPINB_BUILD_MPICC

cdef extern from "<pthread.h>" nogil:
    ctypedef struct pthread_mutex_t:
        pass
    int pthread_mutex_init(pthread_mutex_t*, void*)
    int pthread_mutex_lock(pthread_mutex_t*)
    int pthread_mutex_unlock(pthread_mutex_t*)


include "ops.pxi"  # generated from mpinb/mpi_ops.py: opcodes, op and attribute names
include "call_frame.pxi"
include "checked.pxi"
include "huge_pages.pxi"
include "participants.pxi"


# ---------------------------------------------------------------------------------------
# Process-wide state: serialisation lock, debug switch, the record of the call in flight.

cdef struct InFlight:
    int active
    int opcode
    int peer
    int64_t nbytes
    double t0
    # whom it waits for (ext/waits.pxi): peers and root as ranks of its communicator
    int source
    int dest
    int sendtag
    int recvtag
    int root
    int comm_size
    const int* members   # the communicator's world ranks, NULL for COMM_WORLD or unknown
    bint world
    bint received        # a sendrecv's receive is done: it waits for its send only
    bint agreeing        # in checked mode's signature exchange, before the op (ext/checked.pxi)
    MPI_Comm comm

cdef pthread_mutex_t g_lock
pthread_mutex_init(&g_lock, NULL)
cdef int g_debug = 0
cdef int64_t g_calls = 0
cdef int64_t g_errors = 0
cdef double g_seconds = 0.0
cdef InFlight g_inflight
memset(&g_inflight, 0, sizeof(InFlight))
cdef int g_world_rank = -1

# The timeline: the last TIMELINE_SIZE finished calls (a ring indexed by call number), what the
# view draws as "who waited for whom". Its own lock, held only to write or copy slots: reading it
# never waits for a collective in progress (g_lock is held for a whole MPI call).
cdef enum:
    TIMELINE_SIZE = 4096

cdef struct Event:
    int64_t call
    int opcode
    int peer
    int64_t nbytes
    double t0
    double t1

cdef Event g_events[TIMELINE_SIZE]
memset(g_events, 0, sizeof(g_events))
cdef pthread_mutex_t g_ring_lock
pthread_mutex_init(&g_ring_lock, NULL)
cdef int64_t g_ring_last = 0   # the highest call number written to the ring


cdef int begin(XLA_FFI_CallFrame* f, Call* c, int opcode, int ndata_args,
               int ndata_rets) noexcept nogil:
    """Common prologue. Returns 1 when the handler must return c.err right away (NULL for the
    metadata query and non-execute stages, an error for a malformed frame)."""
    cdef char what[200]
    cdef int rc
    memset(c, 0, sizeof(Call))
    c.f = f
    c.api = f.api
    c.opcode = opcode
    c.rank = g_world_rank
    if answer_metadata(f):
        return 1
    if f.stage != XLA_FFI_ExecutionStage_EXECUTE:
        return 1
    if f.args.size != ndata_args + 1 or f.rets.size != ndata_rets + 1:
        snprintf(what, 200, b"expected %d operands and %d results (with the ordering buffer), "
                 b"got %lld and %lld", ndata_args + 1, ndata_rets + 1,
                 <long long>f.args.size, <long long>f.rets.size)
        return fail(c, XLA_FFI_Error_Code_INVALID_ARGUMENT, what)
    if decode_attrs(c):
        return 1
    rc = MPI_Comm_rank(c.comm, &c.rank)
    if rc == MPI_SUCCESS:
        rc = MPI_Comm_size(c.comm, &c.size)
    if rc != MPI_SUCCESS:
        c.rank = g_world_rank
        return fail(c, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                    b"invalid communicator handle (was it freed?)")
    return check_participants(c)


cdef const XLA_FFI_Buffer* checked_buffer(Call* c) noexcept nogil:
    """The buffer whose dtype and shape checked mode compares for c's op (its handler rule in
    mpinb/mpi_ops.py CHECKS, generated into ext/ops.pxi); NULL for the op alone."""
    cdef int which = op_check_buffer(c.opcode)
    if which == CHECK_BUFFER_OPERAND and c.f.args.size > 1:  # not the ordering buffer
        return arg(c, 0)
    if which == CHECK_BUFFER_RESULT and c.f.rets.size > 1:
        return ret(c, 0)
    return NULL


cdef int enter(Call* c, int64_t nbytes, int peer) noexcept nogil:
    """Take the collective lock, publish what this rank is about to wait in and, in checked
    mode, make sure every rank is about to call the same collective: what they must agree on
    (which buffer, its whole shape or its trailing dimensions, the root) is the op's row of
    the table (op_check, op_check_buffer, op_attributes). Returns 1 (with c.err set, lock held:
    the caller returns finish()) when the ranks disagree."""
    global g_calls
    cdef int check = op_check(c.opcode)
    cdef int rc
    pthread_mutex_lock(&g_lock)
    c.locked = True
    if c.f != NULL:  # a handed-off call has no frame (ext/overlap.pxi: only with huge pages off)
        prefer_huge_pages_all(c)
    c.nbytes = nbytes
    g_calls += 1
    g_inflight.opcode = c.opcode
    g_inflight.peer = peer
    g_inflight.nbytes = nbytes
    c.t0 = MPI_Wtime()
    g_inflight.t0 = c.t0
    record_waits(c)
    g_inflight.active = 1
    if c.f != NULL:
        note_ran(c, checked_buffer(c), check == CHECK_TRAILING,
                 c.root if op_attributes(c.opcode) & ATTR_ROOT else -1)  # ext/ran.pxi
    if g_checked and check != CHECK_NOTHING and c.f != NULL:
        g_inflight.agreeing = 1
        rc = check_agreement(c, checked_buffer(c), check == CHECK_TRAILING,
                             c.root if op_attributes(c.opcode) & ATTR_ROOT else -1)
        g_inflight.agreeing = 0
        return rc
    return 0


cdef XLA_FFI_Error* finish(Call* c, int rc, const char* mpi_fn) noexcept nogil:
    """Common epilogue: release the lock, log, and turn an MPI return code into an error."""
    global g_errors, g_seconds, g_ring_last
    cdef double dt = 0.0
    cdef char estr[MPI_MAX_ERROR_STRING + 1]
    cdef int elen = 0
    cdef char what[MPI_MAX_ERROR_STRING + 300]
    cdef int eclass = 0
    cdef Event* ev
    if c.locked:
        dt = MPI_Wtime() - c.t0
        g_seconds += dt
        pthread_mutex_lock(&g_ring_lock)
        ev = &g_events[(g_calls - 1) % TIMELINE_SIZE]
        ev.call = g_calls
        ev.opcode = c.opcode
        ev.peer = g_inflight.peer
        ev.nbytes = c.nbytes
        ev.t0 = c.t0
        ev.t1 = c.t0 + dt
        g_ring_last = g_calls
        pthread_mutex_unlock(&g_ring_lock)
        g_inflight.active = 0
        pthread_mutex_unlock(&g_lock)
        c.locked = False
        if g_debug:
            fprintf(stderr, b"r%d | %s, %lld bytes, %.6f s\n", c.rank, op_name(c.opcode),
                    <long long>c.nbytes, dt)
            fflush(stderr)
    if rc != MPI_SUCCESS:
        if MPI_Error_string(rc, estr, &elen) != MPI_SUCCESS:
            elen = 0
        estr[elen] = 0
        if MPI_Error_class(rc, &eclass) == MPI_SUCCESS and eclass == MPI_ERR_TRUNCATE:
            # The usual cause under jax.vmap: the sender sends a batch, the receiver's template
            # is not batched (JAX batches a primitive only when an operand is).
            snprintf(what, sizeof(what), b"%s failed: %s (MPI error code %d): the message is larger "
                     b"than the receive buffer; under jax.vmap, a receive whose template is not "
                     b"batched receives one element, not the batch", mpi_fn, estr, rc)
        else:
            snprintf(what, sizeof(what), b"%s failed: %s (MPI error code %d)", mpi_fn, estr, rc)
        fail(c, XLA_FFI_Error_Code_INTERNAL, what)
    if c.err != NULL:
        g_errors += 1
    return c.err


cdef XLA_FFI_Error* check_received(Call* c, MPI_Status* status, MPI_Datatype t, int expected) noexcept nogil:
    """A message shorter than the receive buffer would leave part of the result undefined: an
    error naming both sizes (the usual cause: a vmapped receive, a sender not vmapped)."""
    global g_errors
    cdef int got = 0
    cdef char what[200]
    if c.err != NULL or c.source == MPI_PROC_NULL:
        return c.err
    if MPI_Get_count(status, t, &got) != MPI_SUCCESS or got == MPI_UNDEFINED or got == expected:
        return c.err
    snprintf(what, sizeof(what), b"received %d elements from rank %d, but the receive buffer holds %d; "
             b"the sender's array must have the receiver's shape", got, status.MPI_SOURCE, expected)
    fail(c, XLA_FFI_Error_Code_INVALID_ARGUMENT, what)
    g_errors += 1
    return c.err


cdef int matched_recv(Call* c, void* buf, int n, MPI_Datatype t, int64_t w, int source, int tag,
                      MPI_Status* status) noexcept nogil:
    """MPI_Recv that never truncates: the message is matched first (MPI_Mprobe) and received only
    into a buffer it fits. A larger one is received into scratch memory and dropped, and the call
    fails (c.err) naming both sizes: MPI itself cannot be trusted with it (Open MPI 4.1 truncates
    a message to self without an error, and corrupts the heap truncating a large one from
    another rank). Returns an MPI return code; MPI_SUCCESS with c.err set on that failure."""
    cdef MPI_Message msg
    cdef int rc, nbytes = 0
    cdef void* scratch
    cdef char what[300]
    rc = probe_or_withdraw(c, source, tag, &msg, status)  # ext/withdraw.pxi
    if c.err != NULL:  # withdrawn: nothing matched
        return rc
    if rc != MPI_SUCCESS or msg == MPI_MESSAGE_NO_PROC:
        return rc if rc != MPI_SUCCESS else MPI_Mrecv(buf, n, t, &msg, status)
    rc = MPI_Get_count(status, MPI_BYTE, &nbytes)
    if rc != MPI_SUCCESS or nbytes <= n * w:
        return MPI_Mrecv(buf, n, t, &msg, status)
    scratch = malloc(nbytes)
    if scratch == NULL:  # cannot drain it: MPI reports the truncation as it can
        return MPI_Mrecv(buf, n, t, &msg, status)
    rc = MPI_Mrecv(scratch, nbytes, MPI_BYTE, &msg, MPI_STATUS_IGNORE)
    free(scratch)
    if rc != MPI_SUCCESS:
        return rc
    snprintf(what, sizeof(what), b"received %lld elements from rank %d, more than the receive buffer holds "
             b"(%d): the sender's array must have the receiver's shape; under jax.vmap, a receive whose "
             b"template is not batched receives one element, not the batch",
             <long long>(nbytes / w), status.MPI_SOURCE, n)
    fail(c, XLA_FFI_Error_Code_INVALID_ARGUMENT, what)
    return MPI_SUCCESS


cdef inline void* send_ptr(const XLA_FFI_Buffer* x, const XLA_FFI_Buffer* y) noexcept nogil:
    """MPI_IN_PLACE when XLA aliased the result onto the operand."""
    return MPI_IN_PLACE if x.data == y.data else x.data


include "waits.pxi"
include "ran.pxi"
include "withdraw.pxi"
include "in_place.pxi"
include "overlap.pxi"
include "handlers.pxi"


# ---------------------------------------------------------------------------------------
# Python-visible functions (called with the GIL, never from a handler).

include "ops_registry.pxi"  # generated: registrations(), one handler h_<op> per op of the table


def build_info():
    """What this extension was compiled against."""
    return {
        "mpi_family": MPINB_MPI_FAMILY.decode(),
        "mpicc": MPINB_BUILD_MPICC.decode(),
        "sizeof_comm": sizeof(MPI_Comm),
        "ffi_api": (XLA_FFI_API_MAJOR, XLA_FFI_API_MINOR),
        "jaxlib": MPINB_BUILD_JAXLIB.decode(),
    }


def check_rules():
    """{op name: (buffer code, check code)}: what checked mode compares for each opcode, as
    compiled (CHECK_BUFFER_* and CHECK_* of ext/ops.pxi, the order of mpinb/mpi_ops.py's
    CHECK_BUFFERS and CHECK_KINDS)."""
    return {op_name(i).decode(): (op_check_buffer(i), op_check(i)) for i in range(NUM_OPS)}


def loaded_library_version():
    """MPI_Get_library_version of the libmpi this extension resolved at load time."""
    cdef char buf[MPI_MAX_LIBRARY_VERSION_STRING + 1]
    cdef int n = 0
    if MPI_Get_library_version(buf, &n) != MPI_SUCCESS:
        return ""
    buf[n] = 0
    return buf[:n].decode(errors="replace")


def initialize():
    """Record the world rank for messages; MPI must already be initialised (by mpi4py)."""
    global g_world_rank, g_collapse_on
    cdef int flag = 0
    MPI_Initialized(&flag)
    if not flag:
        raise RuntimeError("mpinb._ffi: MPI is not initialised; import mpi4py.MPI first")
    MPI_Comm_rank(MPI_COMM_WORLD, &g_world_rank)
    if g_counter_keyval == MPI_KEYVAL_INVALID:
        MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN,
                               <MPI_Comm_delete_attr_function*>_free_counter,
                               &g_counter_keyval, NULL)
    g_collapse_on = collapse_supported()
    if g_members_keyval == MPI_KEYVAL_INVALID:
        MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN,
                               <MPI_Comm_delete_attr_function*>_free_members,
                               &g_members_keyval, NULL)
    if g_shadow_keyval == MPI_KEYVAL_INVALID:
        MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN,
                               <MPI_Comm_delete_attr_function*>_free_shadow,
                               &g_shadow_keyval, NULL)


def set_participants(ranks):
    """World ranks that run the current cell (None: all). A call that would wait for another
    rank then fails at once (ext/participants.pxi)."""
    global g_running, g_world_size, g_restricted
    cdef int size = 0
    MPI_Comm_size(MPI_COMM_WORLD, &size)
    if g_running == NULL:
        g_running = <unsigned char*>malloc(size)
        if g_running == NULL:
            raise MemoryError("mpinb._ffi.set_participants")
    g_world_size = size
    chosen = set(range(size)) if ranks is None else {int(r) for r in ranks}
    for r in range(size):
        g_running[r] = 1 if r in chosen else 0
    g_restricted = len(chosen & set(range(size))) < size


def set_checked(bint enabled):
    """Checked mode: ranks agree on each collective (one extra small allgather) first."""
    global g_checked
    g_checked = 1 if enabled else 0


def set_huge_pages(bint enabled):
    """Ask for transparent huge pages on large message buffers (ext/huge_pages.pxi)."""
    global g_huge_on
    g_huge_on = 1 if enabled else 0


def huge_pages():
    """{"enabled", "collapse" (the kernel collapses: Linux 6.1+), "pages" (2 MiB pages advised),
    "collapsed", "collapse_failed" (of those), "budget_s" (collapse time left)}."""
    return {"enabled": bool(g_huge_on), "collapse": bool(g_collapse_on), "pages": g_huge_pages,
            "collapsed": g_collapsed, "collapse_failed": g_collapse_failed, "budget_s": g_huge_budget}


def set_overlap(bint enabled):
    """Overlap: sendrecv returns to XLA at once and its transfer runs on a progress thread
    (ext/overlap.pxi). Needs MPI_THREAD_MULTIPLE; without it this raises RuntimeError."""
    global g_overlap
    cdef int provided = 0
    if enabled:
        MPI_Query_thread(&provided)
        if provided != MPI_THREAD_MULTIPLE:
            raise RuntimeError("mpinb: overlap needs MPI initialised with MPI_THREAD_MULTIPLE "
                               "(mpi4py's default, mpi4py.rc.thread_level = 'multiple')")
        if start_progress_thread():
            raise RuntimeError("mpinb: overlap: the progress thread could not be started")
    g_overlap = 1 if enabled else 0


def set_future_shift(int slots):
    """How many slots further than this library's header puts them the running jaxlib keeps the
    XLA FFI futures (ext/xla_ffi_c.h; set by the loader before any handler runs)."""
    global mpinb_future_shift
    if slots not in (0, 1):
        raise ValueError(f"mpinb: future slot shift {slots}: expected 0 or 1")
    mpinb_future_shift = slots


def overlap():
    """{"enabled", "calls" (handed to the progress thread so far)}."""
    return {"enabled": bool(g_overlap), "calls": g_overlapped}


def get_checked():
    return bool(g_checked)


def set_debug(bint enabled):
    """Print one line per collective to stderr: 'r{rank} | op, bytes, seconds'."""
    global g_debug
    g_debug = 1 if enabled else 0


def get_debug():
    return bool(g_debug)


def counters():
    """Collectives started, handler errors returned, and seconds spent inside MPI calls, in
    this process."""
    return {"calls": g_calls, "errors": g_errors, "mpi_seconds": g_seconds}


def wtime():
    """MPI_Wtime() now (the clock of the timeline's times)."""
    return MPI_Wtime()


def timeline(int64_t after=0):
    """The finished calls numbered above ``after`` that the ring still holds, oldest first:
    [{"call", "op", "peer", "bytes", "t0", "t1"}] with MPI_Wtime() times; and how many calls
    after ``after`` are no longer held (the ring keeps the last 4096). Never waits for a call
    in progress: the slots are copied under the ring's own lock, without the GIL."""
    cdef Event* copy = <Event*>malloc(sizeof(Event) * TIMELINE_SIZE)
    cdef int64_t last, first, n
    if copy == NULL:
        raise MemoryError("mpinb.timeline")
    try:
        with nogil:
            pthread_mutex_lock(&g_ring_lock)
            memcpy(copy, g_events, sizeof(Event) * TIMELINE_SIZE)
            last = g_ring_last
            pthread_mutex_unlock(&g_ring_lock)
        first = max(after + 1, last - TIMELINE_SIZE + 1, 1)
        events = []
        for n in range(first, last + 1):
            ev = copy[(n - 1) % TIMELINE_SIZE]
            if ev.call != n:  # started but failed before its MPI call, or overwritten meanwhile
                continue
            events.append({"call": ev.call, "op": op_name(ev.opcode).decode(), "peer": ev.peer,
                           "bytes": ev.nbytes, "t0": ev.t0, "t1": ev.t1})
        return events, int(max(0, first - after - 1))
    finally:
        free(copy)


def inflight():
    """The collective this process is blocked in right now, or None: its op, call number, bytes,
    peer (as the op names it), seconds in it, and whom it waits for as world ranks: ``source``
    and ``dest`` (``"any"`` for ANY_SOURCE, None where the op has none), ``sendtag``,
    ``recvtag`` (None for ANY_TAG), ``root``, ``comm`` (the communicator's world ranks, None
    when unknown), ``received`` (a sendrecv whose receive is done), ``withdrawable`` (the wake
    signal would take the wait back: ext/withdraw.pxi), ``joinable`` ("world" or "default":
    the communicator whose signature exchange the others can join to free it, else None)."""
    cdef int64_t call = g_calls
    cdef InFlight snap = g_inflight
    if not snap.active:
        return None
    cdef int i
    members = None
    if snap.world:
        members = list(range(snap.comm_size))
    elif snap.members != NULL:
        members = [snap.members[i] for i in range(snap.comm_size)]
    record = {
        "op": op_name(snap.opcode).decode(),
        "call": call,
        "bytes": snap.nbytes,
        "peer": snap.peer,
        "seconds": MPI_Wtime() - snap.t0,
        "source": world_rank(snap.source, snap.members, snap.comm_size, snap.world),
        "dest": world_rank(snap.dest, snap.members, snap.comm_size, snap.world),
        "sendtag": None if snap.sendtag == MPI_ANY_TAG else snap.sendtag,
        "recvtag": None if snap.recvtag == MPI_ANY_TAG else snap.recvtag,
        "root": world_rank(snap.root, snap.members, snap.comm_size, snap.world),
        "comm": members,
        "received": bool(snap.received),
        # a wake would take it back (ext/withdraw.pxi): a receive, or a sendrecv's receive half
        "withdrawable": g_wake_signal != 0 and (snap.opcode == OP_RECV or (snap.opcode == OP_SENDRECV
                                                                          and not snap.received)),
        # in checked mode's signature exchange on a communicator every engine holds: the ranks
        # that left the cell can join that exchange to free this one (ext/withdraw.pxi)
        "joinable": joinable_name(snap) if g_wake_signal != 0 else None,
    }
    if g_calls != call or not g_inflight.active:  # it moved on while read: what was read may be stale
        return None
    return record
