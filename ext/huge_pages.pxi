# Transparent huge pages for large message buffers.
#
# Measured here (THP in "madvise" mode, the common distribution default): an MPI_Alltoall of
# 16 MiB from 4 KiB pages took 2.9-3.2 ms, from 2 MiB pages 1.6-2.0 ms; NumPy asks for huge
# pages on large arrays, XLA's allocator (glibc malloc) does not. So the first time a large
# buffer's memory reaches a handler, its 2 MiB-aligned interior is marked MADV_HUGEPAGE (later
# faults there get huge pages) and collapsed into huge pages in place (MADV_COLLAPSE, Linux
# 6.1+, keeps the data). The heap keeps that memory (see library.tune_malloc), so the cost is
# paid once per region: about 40 ms per 16 MiB here, then nothing. The 2 MiB pages already
# treated are remembered in a fixed table; a process-wide time budget bounds the total cost if
# memory keeps moving. Called with the collective lock held. Off unless MPINB_HUGE_PAGES=1: in a
# time-step loop new memory keeps arriving and calls pay the collapse (benchmarks/step_loop.py).

cdef extern from "<sys/mman.h>" nogil:
    int madvise(void* addr, size_t length, int advice)
    void* mmap(void* addr, size_t length, int prot, int flags, int fd, long offset)
    int munmap(void* addr, size_t length)
    int PROT_READ, PROT_WRITE, MAP_PRIVATE, MAP_ANONYMOUS
    void* MAP_FAILED

cdef extern from "<errno.h>" nogil:
    int errno
    int EINVAL

ctypedef unsigned long long uptr

cdef enum:
    HUGE_PAGE = 1 << 21
    HUGE_MIN_BYTES = 4 << 20      # smaller buffers are not worth a system call
    HUGE_SLOTS = 16384            # 2 MiB pages remembered (32 GiB of memory), a power of two
    ADVISE_HUGEPAGE = 14          # MADV_HUGEPAGE
    ADVISE_COLLAPSE = 25          # MADV_COLLAPSE (not in every libc's headers yet)

cdef uptr g_huge_seen[HUGE_SLOTS]
memset(g_huge_seen, 0, sizeof(g_huge_seen))
cdef int g_huge_on = 1
cdef int g_collapse_on = 1
cdef double g_huge_budget = 5.0   # seconds of collapsing allowed per process
cdef int64_t g_huge_pages = 0     # 2 MiB pages advised so far
cdef int64_t g_collapsed = 0      # 2 MiB pages collapsed into a huge page
cdef int64_t g_collapse_failed = 0  # 2 MiB pages the kernel would not collapse (busy, unsuitable)


cdef int collapse_supported() noexcept nogil:
    """Whether this kernel knows MADV_COLLAPSE (Linux 6.1+): tried once on a private anonymous
    region of our own. A later failure on some buffer only means that range could not be
    collapsed (memory too fragmented, a range the kernel finds unsuitable), not that collapsing
    never works: judging from one such failure turned it off for the rest of the process."""
    cdef size_t length = 2 * HUGE_PAGE
    cdef char* region = <char*>mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
    cdef char* page
    cdef int ok
    if <void*>region == MAP_FAILED:
        return 1
    page = <char*>((<uptr>region + HUGE_PAGE - 1) & ~(<uptr>HUGE_PAGE - 1))
    page[0] = 1
    ok = not (madvise(page, HUGE_PAGE, ADVISE_COLLAPSE) != 0 and errno == EINVAL)
    munmap(region, length)
    return ok


cdef bint remember_huge(uptr page) noexcept nogil:
    """Record ``page``; False if it was already recorded (or the table is full)."""
    cdef uptr slot = (page >> 21) & (HUGE_SLOTS - 1)
    cdef int probes
    for probes in range(64):
        if g_huge_seen[slot] == page:
            return False
        if g_huge_seen[slot] == 0:
            g_huge_seen[slot] = page
            return True
        slot = (slot + 1) & (HUGE_SLOTS - 1)
    return False


cdef int64_t dtype_bytes(XLA_FFI_DataType t) noexcept nogil:
    if t == XLA_FFI_DataType_PRED or t == XLA_FFI_DataType_S8 or t == XLA_FFI_DataType_U8: return 1
    if t == XLA_FFI_DataType_S16 or t == XLA_FFI_DataType_U16: return 2
    if t == XLA_FFI_DataType_F16 or t == XLA_FFI_DataType_BF16: return 2
    if t == XLA_FFI_DataType_S32 or t == XLA_FFI_DataType_U32 or t == XLA_FFI_DataType_F32: return 4
    if t == XLA_FFI_DataType_S64 or t == XLA_FFI_DataType_U64 or t == XLA_FFI_DataType_F64: return 8
    if t == XLA_FFI_DataType_C64: return 8
    if t == XLA_FFI_DataType_C128: return 16
    return 0


cdef void prefer_huge_pages(const XLA_FFI_Buffer* b) noexcept nogil:
    global g_huge_on, g_collapse_on, g_huge_budget, g_huge_pages, g_collapsed, g_collapse_failed
    cdef int64_t nbytes = nelems(b) * dtype_bytes(b.dtype)
    cdef uptr lo, hi, page
    cdef double t0
    if not g_huge_on or nbytes < HUGE_MIN_BYTES or b.data == NULL:
        return
    lo = (<uptr>b.data + HUGE_PAGE - 1) & ~(<uptr>HUGE_PAGE - 1)
    hi = (<uptr>b.data + <uptr>nbytes) & ~(<uptr>HUGE_PAGE - 1)
    page = lo
    while page < hi:
        if remember_huge(page):
            if madvise(<void*>page, HUGE_PAGE, ADVISE_HUGEPAGE) != 0:
                g_huge_on = 0  # no THP in this kernel: stop trying
                return
            g_huge_pages += 1
            if g_collapse_on and g_huge_budget > 0:
                t0 = MPI_Wtime()
                if madvise(<void*>page, HUGE_PAGE, ADVISE_COLLAPSE) == 0:
                    g_collapsed += 1
                else:
                    g_collapse_failed += 1
                g_huge_budget -= MPI_Wtime() - t0
        page += HUGE_PAGE


cdef void prefer_huge_pages_all(Call* c) noexcept nogil:
    """Every data buffer of the call (the last operand and result are the ordering buffer)."""
    cdef int64_t i
    for i in range(c.f.args.size - 1):
        prefer_huge_pages(<XLA_FFI_Buffer*>c.f.args.args[i])
    for i in range(c.f.rets.size - 1):
        prefer_huge_pages(<XLA_FFI_Buffer*>c.f.rets.rets[i])
