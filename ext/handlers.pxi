# One XLA FFI handler per MPI operation. Shapes were checked at trace time by mpinb.mpi;
# the checks repeated here only keep a malformed frame from reaching MPI.
#
# Pattern of every handler: begin (frame, attributes, communicator) -> validate -> enter
# (lock, in-flight record, checked-mode agreement by the op's rule in mpinb/mpi_ops.py CHECKS)
# -> one MPI call -> finish (unlock, log, error).

cdef XLA_FFI_Error* h_allreduce(XLA_FFI_CallFrame* f) noexcept nogil:
    cdef Call c
    cdef MPI_Datatype t
    cdef int64_t w
    cdef int n
    if begin(f, &c, OP_ALLREDUCE, 1, 1):
        return c.err
    cdef XLA_FFI_Buffer* x = arg(&c, 0)
    cdef XLA_FFI_Buffer* y = ret(&c, 0)
    if mpi_type(&c, x, True, &t, &w) or int_count(&c, nelems(x), &n):
        return c.err
    if enter(&c, n * w, -1):
        return finish(&c, MPI_SUCCESS, NULL)
    return finish(&c, MPI_Allreduce(send_ptr(x, y), y.data, n, t, c.op, c.comm), b"MPI_Allreduce")


cdef XLA_FFI_Error* h_scan(XLA_FFI_CallFrame* f) noexcept nogil:
    cdef Call c
    cdef MPI_Datatype t
    cdef int64_t w
    cdef int n
    if begin(f, &c, OP_SCAN, 1, 1):
        return c.err
    cdef XLA_FFI_Buffer* x = arg(&c, 0)
    cdef XLA_FFI_Buffer* y = ret(&c, 0)
    if mpi_type(&c, x, True, &t, &w) or int_count(&c, nelems(x), &n):
        return c.err
    if enter(&c, n * w, -1):
        return finish(&c, MPI_SUCCESS, NULL)
    return finish(&c, MPI_Scan(send_ptr(x, y), y.data, n, t, c.op, c.comm), b"MPI_Scan")


cdef XLA_FFI_Error* h_alltoall(XLA_FFI_CallFrame* f) noexcept nogil:
    cdef Call c
    cdef MPI_Datatype t
    cdef int64_t w
    cdef int n
    if begin(f, &c, OP_ALLTOALL, 1, 1):
        return c.err
    cdef XLA_FFI_Buffer* x = arg(&c, 0)
    cdef XLA_FFI_Buffer* y = ret(&c, 0)
    if check_leading(&c, x, c.size, b"input"):
        return c.err
    if mpi_type(&c, x, False, &t, &w) or int_count(&c, row_elems(x), &n):
        return c.err
    if enter(&c, nelems(x) * w, -1):
        return finish(&c, MPI_SUCCESS, NULL)
    if x.data == y.data:  # XLA aliased the result onto the operand (ext/in_place.pxi)
        return finish(&c, alltoall_in_place(&c, <char*>y.data, n, t, w), b"MPI_Sendrecv")
    return finish(&c, MPI_Alltoall(x.data, n, t, y.data, n, t, c.comm), b"MPI_Alltoall")


cdef XLA_FFI_Error* h_allgather(XLA_FFI_CallFrame* f) noexcept nogil:
    cdef Call c
    cdef MPI_Datatype t
    cdef int64_t w
    cdef int n
    if begin(f, &c, OP_ALLGATHER, 1, 1):
        return c.err
    cdef XLA_FFI_Buffer* x = arg(&c, 0)
    cdef XLA_FFI_Buffer* y = ret(&c, 0)
    if check_leading(&c, y, c.size, b"result"):
        return c.err
    if mpi_type(&c, x, False, &t, &w) or int_count(&c, nelems(x), &n):
        return c.err
    if enter(&c, n * w, -1):
        return finish(&c, MPI_SUCCESS, NULL)
    return finish(&c, MPI_Allgather(x.data, n, t, y.data, n, t, c.comm), b"MPI_Allgather")


cdef XLA_FFI_Error* h_reduce_scatter(XLA_FFI_CallFrame* f) noexcept nogil:
    cdef Call c
    cdef MPI_Datatype t
    cdef int64_t w
    cdef int n
    if begin(f, &c, OP_REDUCE_SCATTER, 1, 1):
        return c.err
    cdef XLA_FFI_Buffer* x = arg(&c, 0)
    cdef XLA_FFI_Buffer* y = ret(&c, 0)
    if check_leading(&c, x, c.size, b"input"):
        return c.err
    if mpi_type(&c, x, True, &t, &w) or int_count(&c, nelems(y), &n):
        return c.err
    if enter(&c, nelems(x) * w, -1):
        return finish(&c, MPI_SUCCESS, NULL)
    return finish(&c, MPI_Reduce_scatter_block(x.data, y.data, n, t, c.op, c.comm),
                  b"MPI_Reduce_scatter_block")


cdef XLA_FFI_Error* h_bcast(XLA_FFI_CallFrame* f) noexcept nogil:
    # The result aliases the operand (see the lowering), so root broadcasts in place.
    cdef Call c
    cdef MPI_Datatype t
    cdef int64_t w
    cdef int n
    if begin(f, &c, OP_BCAST, 1, 1):
        return c.err
    cdef XLA_FFI_Buffer* x = arg(&c, 0)
    cdef XLA_FFI_Buffer* y = ret(&c, 0)
    if check_rank_arg(&c, b"root", c.root, False):
        return c.err
    if mpi_type(&c, x, False, &t, &w) or int_count(&c, nelems(x), &n):
        return c.err
    if c.rank == c.root and x.data != y.data:
        memcpy(y.data, x.data, n * w)
    if enter(&c, n * w, <int>c.root):
        return finish(&c, MPI_SUCCESS, NULL)
    return finish(&c, MPI_Bcast(y.data, n, t, <int>c.root, c.comm), b"MPI_Bcast")


cdef XLA_FFI_Error* h_reduce(XLA_FFI_CallFrame* f) noexcept nogil:
    # Non-root ranks return their input unchanged (the result aliases the operand).
    cdef Call c
    cdef MPI_Datatype t
    cdef int64_t w
    cdef int n
    cdef int rc
    if begin(f, &c, OP_REDUCE, 1, 1):
        return c.err
    cdef XLA_FFI_Buffer* x = arg(&c, 0)
    cdef XLA_FFI_Buffer* y = ret(&c, 0)
    if check_rank_arg(&c, b"root", c.root, False):
        return c.err
    if mpi_type(&c, x, True, &t, &w) or int_count(&c, nelems(x), &n):
        return c.err
    if enter(&c, n * w, <int>c.root):
        return finish(&c, MPI_SUCCESS, NULL)
    if c.rank == c.root:
        rc = MPI_Reduce(send_ptr(x, y), y.data, n, t, c.op, <int>c.root, c.comm)
    else:
        rc = MPI_Reduce(x.data, NULL, n, t, c.op, <int>c.root, c.comm)
        if rc == MPI_SUCCESS and x.data != y.data:
            memcpy(y.data, x.data, n * w)
    return finish(&c, rc, b"MPI_Reduce")


cdef XLA_FFI_Error* h_gather(XLA_FFI_CallFrame* f) noexcept nogil:
    # Root's result is (size, *x.shape); other ranks return their input unchanged.
    cdef Call c
    cdef MPI_Datatype t
    cdef int64_t w
    cdef int n
    cdef int rc
    if begin(f, &c, OP_GATHER, 1, 1):
        return c.err
    cdef XLA_FFI_Buffer* x = arg(&c, 0)
    cdef XLA_FFI_Buffer* y = ret(&c, 0)
    if check_rank_arg(&c, b"root", c.root, False):
        return c.err
    if c.rank == c.root and check_leading(&c, y, c.size, b"result"):
        return c.err
    if mpi_type(&c, x, False, &t, &w) or int_count(&c, nelems(x), &n):
        return c.err
    if enter(&c, n * w, <int>c.root):
        return finish(&c, MPI_SUCCESS, NULL)
    if c.rank == c.root:
        rc = MPI_Gather(x.data, n, t, y.data, n, t, <int>c.root, c.comm)
    else:
        rc = MPI_Gather(x.data, n, t, NULL, 0, t, <int>c.root, c.comm)
        if rc == MPI_SUCCESS and x.data != y.data:
            memcpy(y.data, x.data, n * w)
    return finish(&c, rc, b"MPI_Gather")


cdef XLA_FFI_Error* h_scatter(XLA_FFI_CallFrame* f) noexcept nogil:
    # Root's input is (size, *y.shape); other ranks' input only gives the result's shape.
    cdef Call c
    cdef MPI_Datatype t
    cdef int64_t w
    cdef int n
    cdef int rc
    if begin(f, &c, OP_SCATTER, 1, 1):
        return c.err
    cdef XLA_FFI_Buffer* x = arg(&c, 0)
    cdef XLA_FFI_Buffer* y = ret(&c, 0)
    if check_rank_arg(&c, b"root", c.root, False):
        return c.err
    if c.rank == c.root and check_leading(&c, x, c.size, b"input"):
        return c.err
    if mpi_type(&c, y, False, &t, &w) or int_count(&c, nelems(y), &n):
        return c.err
    if enter(&c, n * w, <int>c.root):
        return finish(&c, MPI_SUCCESS, NULL)
    if c.rank == c.root:
        rc = MPI_Scatter(x.data, n, t, y.data, n, t, <int>c.root, c.comm)
    else:
        rc = MPI_Scatter(NULL, 0, t, y.data, n, t, <int>c.root, c.comm)
    return finish(&c, rc, b"MPI_Scatter")


cdef XLA_FFI_Error* h_send(XLA_FFI_CallFrame* f) noexcept nogil:
    cdef Call c
    cdef MPI_Datatype t
    cdef int64_t w
    cdef int n
    if begin(f, &c, OP_SEND, 1, 0):
        return c.err
    cdef XLA_FFI_Buffer* x = arg(&c, 0)
    if check_rank_arg(&c, b"dest", c.dest, False):
        return c.err
    if mpi_type(&c, x, False, &t, &w) or int_count(&c, nelems(x), &n):
        return c.err
    if enter(&c, n * w, <int>c.dest):
        return finish(&c, MPI_SUCCESS, NULL)
    return finish(&c, MPI_Send(x.data, n, t, <int>c.dest, <int>c.tag, c.comm), b"MPI_Send")


cdef XLA_FFI_Error* h_recv(XLA_FFI_CallFrame* f) noexcept nogil:
    cdef Call c
    cdef MPI_Datatype t
    cdef int64_t w
    cdef int n
    if begin(f, &c, OP_RECV, 0, 1):
        return c.err
    cdef XLA_FFI_Buffer* y = ret(&c, 0)
    if check_rank_arg(&c, b"source", c.source, True):
        return c.err
    if mpi_type(&c, y, False, &t, &w) or int_count(&c, nelems(y), &n):
        return c.err
    cdef MPI_Status own
    cdef MPI_Status* status = <MPI_Status*><intptr_t>c.status_addr
    if status == NULL:
        status = &own
    if c.source == MPI_PROC_NULL:
        memset(y.data, 0, n * w)  # nothing arrives: a defined result, not stale memory
    if enter(&c, n * w, <int>c.source):
        return finish(&c, MPI_SUCCESS, NULL)
    finish(&c, matched_recv(&c, y.data, n, t, w, <int>c.source, <int>c.tag, status), b"MPI_Recv")
    return check_received(&c, status, t, n)


cdef XLA_FFI_Error* h_sendrecv(XLA_FFI_CallFrame* f) noexcept nogil:
    cdef Call c
    cdef Transfer t
    cdef int64_t ws
    cdef MPI_Status own
    if begin(f, &c, OP_SENDRECV, 1, 1):
        return c.err
    cdef XLA_FFI_Buffer* x = arg(&c, 0)
    cdef XLA_FFI_Buffer* y = ret(&c, 0)
    if check_rank_arg(&c, b"dest", c.dest, False) or check_rank_arg(&c, b"source", c.source, True):
        return c.err
    if mpi_type(&c, x, False, &t.ts, &ws) or int_count(&c, nelems(x), &t.ns):
        return c.err
    if mpi_type(&c, y, False, &t.tr, &t.wr) or int_count(&c, nelems(y), &t.nr):
        return c.err
    t.send = x.data
    t.recv = y.data
    t.status = <MPI_Status*><intptr_t>c.status_addr
    c.nbytes = t.ns * ws + t.nr * t.wr
    if c.source == MPI_PROC_NULL:
        memset(y.data, 0, t.nr * t.wr)
    if hand_off(&c, &t):  # overlap on: the progress thread runs it (ext/overlap.pxi)
        return NULL
    if t.status == NULL:
        t.status = &own
    return sendrecv_run(&c, &t)


cdef XLA_FFI_Error* h_barrier(XLA_FFI_CallFrame* f) noexcept nogil:
    cdef Call c
    if begin(f, &c, OP_BARRIER, 0, 0):
        return c.err
    if enter(&c, 0, -1):
        return finish(&c, MPI_SUCCESS, NULL)
    return finish(&c, MPI_Barrier(c.comm), b"MPI_Barrier")


cdef int element_counts(Call* c, const int64_t* rows, int64_t row, int* counts,
                        int* displs, int64_t* total) noexcept nogil:
    """Rows per rank -> MPI element counts and displacements (all must fit in a C int)."""
    cdef int64_t acc = 0
    cdef int i
    for i in range(c.size):
        if int_count(c, rows[i] * row, &counts[i]) or int_count(c, acc, &displs[i]):
            return 1
        acc += rows[i] * row
    total[0] = acc
    return 0


cdef XLA_FFI_Error* h_allgatherv(XLA_FFI_CallFrame* f) noexcept nogil:
    # counts[i] rows come from rank i; the result stacks them in rank order.
    cdef Call c
    cdef MPI_Datatype t
    cdef int64_t w, total
    cdef int n
    cdef char what[200]
    if begin(f, &c, OP_ALLGATHERV, 1, 1):
        return c.err
    cdef XLA_FFI_Buffer* x = arg(&c, 0)
    cdef XLA_FFI_Buffer* y = ret(&c, 0)
    if check_counts(&c, c.counts, c.ncounts, b"counts"):
        return c.err
    if check_leading(&c, x, c.counts[c.rank], b"input"):
        return c.err
    if mpi_type(&c, x, False, &t, &w) or int_count(&c, nelems(x), &n):
        return c.err
    cdef int* buf = <int*>malloc(2 * c.size * sizeof(int))
    if buf == NULL:
        fail(&c, XLA_FFI_Error_Code_INTERNAL, b"out of memory")
        return c.err
    if element_counts(&c, c.counts, row_elems(y), buf, buf + c.size, &total):
        free(buf)
        return c.err
    if total != nelems(y):
        free(buf)
        snprintf(what, 200, b"result has %lld elements, counts add up to %lld",
                 <long long>nelems(y), <long long>total)
        fail(&c, XLA_FFI_Error_Code_INVALID_ARGUMENT, what)
        return c.err
    if enter(&c, total * w, -1):
        free(buf)
        return finish(&c, MPI_SUCCESS, NULL)
    cdef int rc = MPI_Allgatherv(x.data, n, t, y.data, buf, buf + c.size, t, c.comm)
    free(buf)
    return finish(&c, rc, b"MPI_Allgatherv")


cdef XLA_FFI_Error* h_alltoallv(XLA_FFI_CallFrame* f) noexcept nogil:
    # sendcounts[i] rows go to rank i; recvcounts[i] rows arrive from rank i.
    cdef Call c
    cdef MPI_Datatype t
    cdef int64_t w, stotal, rtotal
    cdef char what[200]
    if begin(f, &c, OP_ALLTOALLV, 1, 1):
        return c.err
    cdef XLA_FFI_Buffer* x = arg(&c, 0)
    cdef XLA_FFI_Buffer* y = ret(&c, 0)
    if (check_counts(&c, c.sendcounts, c.nsendcounts, b"sendcounts")
            or check_counts(&c, c.recvcounts, c.nrecvcounts, b"recvcounts")):
        return c.err
    if mpi_type(&c, x, False, &t, &w):
        return c.err
    cdef int* buf = <int*>malloc(4 * c.size * sizeof(int))
    if buf == NULL:
        fail(&c, XLA_FFI_Error_Code_INTERNAL, b"out of memory")
        return c.err
    if (element_counts(&c, c.sendcounts, row_elems(x), buf, buf + c.size, &stotal)
            or element_counts(&c, c.recvcounts, row_elems(y), buf + 2 * c.size,
                              buf + 3 * c.size, &rtotal)):
        free(buf)
        return c.err
    if stotal != nelems(x) or rtotal != nelems(y):
        free(buf)
        snprintf(what, 200, b"input/result have %lld/%lld elements, counts add up to %lld/%lld",
                 <long long>nelems(x), <long long>nelems(y), <long long>stotal,
                 <long long>rtotal)
        fail(&c, XLA_FFI_Error_Code_INVALID_ARGUMENT, what)
        return c.err
    if enter(&c, (stotal + rtotal) * w, -1):
        free(buf)
        return finish(&c, MPI_SUCCESS, NULL)
    cdef int rc = MPI_Alltoallv(x.data, buf, buf + c.size, t, y.data, buf + 2 * c.size,
                                buf + 3 * c.size, t, c.comm)
    free(buf)
    return finish(&c, rc, b"MPI_Alltoallv")
