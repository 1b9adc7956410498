/* mpinb's MPI watch: what the engine's main thread waits in when the program calls MPI itself
 * (mpi4py's comm.recv, comm.Send, comm.bcast, comm.Barrier, ...), for the notebook's wait-for
 * graph (mpinb/analysis/deadlock.py). mpinb's own collectives say it themselves (ext/waits.pxi).
 *
 * It is a library of the MPI profiling interface: each blocking call below is defined here and
 * passes straight on to its PMPI_ twin, after noting on entry the op, its peers and tags (as
 * world ranks), the root, the communicator's members and the bytes, and before clearing that on
 * return. The engine loads it with RTLD_GLOBAL before mpi4py loads its MPI module
 * (mpinb/engine/mpi4py_waits.py), so that module's calls bind here. C, not Cython like the
 * collective library: each definition must match its prototype in the MPI's own mpi.h exactly,
 * and the MPI-4 large-count twins (MPI_Send_c, ..., which mpi4py prefers where they exist) are
 * compiled only where the MPI has them.
 *
 * Only the thread that called mpinb_watch_start (the engine's main thread, where cells run) is
 * watched. The engine's status thread reads the record with mpinb_watch_read, without a lock: a
 * sequence number that is odd while the main thread writes tells it to read again (a seqlock).
 * It never calls MPI and never follows a pointer into MPI's or a communicator's memory: the
 * members are copied into the watch's own buffer on entry.
 *
 * A nonblocking call (MPI_Isend, MPI_Irecv, MPI_Ibcast, MPI_Start, ...), in any thread, marks the
 * process for good as one that may have requests in flight (``pending``): such a rank may be
 * doing what another waits for, whatever its main thread is blocked in, so the notebook never
 * counts it as what keeps another rank stuck.
 */

#include <mpi.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#pragma GCC visibility push(default)

/* What a rank in a call names: any rank, or none (no such peer, PROC_NULL, not translatable). */
enum { PEER_NONE = -1, PEER_ANY = -2, TAG_ANY = -1 };

/* The record read by mpinb_watch_read (its layout is mirrored in mpinb/engine/mpi4py_waits.py). */
typedef struct {
  int64_t call;        /* calls watched so far; this one's number */
  int64_t bytes;       /* this rank's payload */
  double t0;           /* MPI_Wtime on entry */
  int active;          /* a call is in flight */
  int source, dest;    /* world ranks, PEER_ANY or PEER_NONE */
  int sendtag, recvtag;/* TAG_ANY for MPI_ANY_TAG */
  int root;            /* world rank or PEER_NONE */
  int comm_size;       /* members of the communicator (0: unknown) */
  int pending;         /* a nonblocking call was made in this process (see above) */
  const char *op;      /* as mpinb's own ops are named: "recv", "bcast", ... */
  const char *function;/* the MPI function: "MPI_Recv" */
} mpinb_watch_record;

enum { MEMBER_CAP = 4096 };          /* a bigger communicator reads as unknown */

static mpinb_watch_record g_rec;
static int g_member_buf[MEMBER_CAP]; /* world ranks of the call's communicator (not COMM_WORLD) */
static int g_world_members;          /* the call's communicator is COMM_WORLD: members 0..size-1 */
static int64_t g_seq;                /* odd while g_rec is written */
static int g_on, g_pending;
static pthread_t g_main;
static int g_keyval = MPI_KEYVAL_INVALID;

static int free_members(MPI_Comm comm, int keyval, void *value, void *extra) {
  (void)comm; (void)keyval; (void)extra;
  free(value);
  return MPI_SUCCESS;
}

/* World ranks of comm's members, kept with the communicator; NULL for COMM_WORLD or unknown
 * (an intercommunicator: its peers are ranks of the other group). */
static const int *members_of(MPI_Comm comm, int size) {
  int *members = NULL, *local, found = 0, inter = 1, i, rc;
  MPI_Group group, world;
  if (comm == MPI_COMM_WORLD) return NULL;
  if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter) return NULL;
  if (g_keyval == MPI_KEYVAL_INVALID &&
      PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, free_members, &g_keyval, NULL) != MPI_SUCCESS) {
    g_keyval = MPI_KEYVAL_INVALID;
    return NULL;
  }
  if (PMPI_Comm_get_attr(comm, g_keyval, &members, &found) != MPI_SUCCESS) return NULL;
  if (found) return members;
  members = malloc(2 * (size_t)size * sizeof(int));
  if (members == NULL) return NULL;
  local = members + size;
  for (i = 0; i < size; i++) local[i] = i;
  rc = PMPI_Comm_group(comm, &group);
  if (rc == MPI_SUCCESS) {
    rc = PMPI_Comm_group(MPI_COMM_WORLD, &world);
    if (rc == MPI_SUCCESS) {
      rc = PMPI_Group_translate_ranks(group, size, local, world, members);
      PMPI_Group_free(&world);
    }
    PMPI_Group_free(&group);
  }
  if (rc != MPI_SUCCESS || PMPI_Comm_set_attr(comm, g_keyval, members) != MPI_SUCCESS) {
    free(members);
    return NULL;
  }
  return members;
}

static int world_rank(int r, const int *members, int size, int is_world) {
  if (r == MPI_ANY_SOURCE) return PEER_ANY;
  if (r == MPI_PROC_NULL || r < 0 || r >= size) return PEER_NONE;
  if (is_world) return r;
  if (members == NULL) return PEER_NONE;
  return members[r] == MPI_UNDEFINED ? PEER_NONE : members[r];
}

static inline int watching(void) {
  return __atomic_load_n(&g_on, __ATOMIC_ACQUIRE) && pthread_equal(pthread_self(), g_main);
}

/* Seqlock, writer's side: odd while the record changes; readers retry until it is even and
 * unchanged around their copy. */
static inline void write_begin(void) {
  __atomic_store_n(&g_seq, g_seq + 1, __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_RELEASE);
}

static inline void write_end(void) {
  __atomic_store_n(&g_seq, g_seq + 1, __ATOMIC_RELEASE);
}

static void enter(const char *op, const char *function, int source, int dest, int sendtag, int recvtag,
                  int root, MPI_Comm comm, int64_t count, MPI_Datatype type) {
  int size = 0, inter = 0, is_world = comm == MPI_COMM_WORLD;
  MPI_Count type_size = 0;
  const int *members = NULL;
  if (comm == MPI_COMM_NULL || PMPI_Comm_size(comm, &size) != MPI_SUCCESS) size = 0;
  if (!is_world && size > 0 && (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter)) inter = 1;
  if (!is_world && !inter && size > 0 && size <= MEMBER_CAP) members = members_of(comm, size);
  /* a count of 0 where the type may be insignificant (MPI_IN_PLACE), or an intercommunicator
   * (a root's other arguments are not significant): the type is not asked */
  if (count <= 0 || inter || type == MPI_DATATYPE_NULL || PMPI_Type_size_x(type, &type_size) != MPI_SUCCESS ||
      type_size == MPI_UNDEFINED)
    type_size = 0;
  write_begin();
  g_rec.call += 1;
  g_rec.op = op;
  g_rec.function = function;
  g_rec.source = world_rank(source, members, size, is_world);
  g_rec.dest = world_rank(dest, members, size, is_world);
  g_rec.sendtag = sendtag == MPI_ANY_TAG ? TAG_ANY : sendtag;
  g_rec.recvtag = recvtag == MPI_ANY_TAG ? TAG_ANY : recvtag;
  g_rec.root = world_rank(root, members, size, is_world);
  g_rec.comm_size = (is_world || members != NULL) ? size : 0;
  g_world_members = is_world;
  if (members != NULL) memcpy(g_member_buf, members, (size_t)size * sizeof(int));
  g_rec.bytes = count * (int64_t)type_size;
  g_rec.t0 = PMPI_Wtime();
  g_rec.pending = __atomic_load_n(&g_pending, __ATOMIC_RELAXED);
  g_rec.active = 1;
  write_end();
}

static int leave(int rc) {
  write_begin();
  g_rec.active = 0;
  g_rec.comm_size = 0;
  write_end();
  return rc;
}

/* A nonblocking call: this process may have requests in flight from now on. */
static inline void mark_pending(void) {
  __atomic_store_n(&g_pending, 1, __ATOMIC_RELAXED);
}

/* ------------------------------------------------------------------ withdrawing a receive
 * With mpinb_watch_follow_wakes, a receive on the watched thread (MPI_Recv, MPI_Probe,
 * MPI_Mprobe: mpi4py's Recv, recv, Probe) polls instead of blocking, and gives up once the
 * collective library's wake count differs from its value when the cell started (the
 * notebook's signal after a proven deadlock or at the stop button: ext/withdraw.pxi,
 * mpinb/engine/rank_release.py). Nothing was matched then, so
 * nothing was consumed; the call returns an error code of its own (its string says what
 * happened: mpi4py raises MPI.Exception with it). The communicator's error handler is not
 * called: a fatal one would end the whole job, which is what freeing the rank avoids. */

enum { KEPT_COMMS = 16 };
static const long *g_wakes;          /* the library's wake count, or NULL: receives block */
static const long *g_wake_base;      /* its value when the current cell started */
static int g_withdrawn_code = MPI_ERR_OTHER;
static int64_t g_withdrawn;
static MPI_Comm g_withdrawn_comms[KEPT_COMMS];
static int g_nwithdrawn_comms;

/* Withdraw receives on the watched thread once *counter differs from *base (MPI is initialised). */
int mpinb_watch_follow_wakes(const long *counter, const long *base) {
  int cls;
  if (g_withdrawn_code == MPI_ERR_OTHER && PMPI_Add_error_class(&cls) == MPI_SUCCESS &&
      PMPI_Add_error_code(cls, &g_withdrawn_code) == MPI_SUCCESS)
    PMPI_Add_error_string(g_withdrawn_code, "mpinb: receive withdrawn before a message came (mpinb freed "
                          "this rank: a proven deadlock or the stop button); nothing was received");
  g_wake_base = base;
  g_wakes = counter;
  return g_withdrawn_code;
}

/* Receives withdrawn so far, and up to capacity handles of their communicators (as int64),
 * forgotten if forget is set. */
int64_t mpinb_watch_withdrawn(int64_t *comms, int capacity, int *ncomms, int forget) {
  int i;
  for (i = 0; i < g_nwithdrawn_comms && i < capacity; i++) comms[i] = (int64_t)(intptr_t)g_withdrawn_comms[i];
  *ncomms = i;
  if (forget) g_nwithdrawn_comms = 0;
  return g_withdrawn;
}

static int withdrawn(MPI_Comm comm) {
  int i;
  g_withdrawn++;
  for (i = 0; i < g_nwithdrawn_comms; i++)
    if (g_withdrawn_comms[i] == comm) return g_withdrawn_code;
  if (g_nwithdrawn_comms < KEPT_COMMS) g_withdrawn_comms[g_nwithdrawn_comms++] = comm;
  return g_withdrawn_code;
}

static inline int withdrawable(void) { return g_wakes != NULL; }

/* How long a polling receive spins before it yields between polls (as SPIN_SECONDS in
 * ext/withdraw.pxi). */
static const double SPIN_SECONDS = 2e-6;

/* MPI_Mprobe (msg != NULL) or MPI_Probe that the wake withdraws. */
static int probe_or_withdraw(int source, int tag, MPI_Comm comm, MPI_Message *msg, MPI_Status *status) {
  int flag = 0, rc;
  double spin_until = PMPI_Wtime() + SPIN_SECONDS;
  for (;;) {
    rc = msg ? PMPI_Improbe(source, tag, comm, &flag, msg, status) : PMPI_Iprobe(source, tag, comm, &flag, status);
    if (rc != MPI_SUCCESS || flag) return rc;
    if (__atomic_load_n(g_wakes, __ATOMIC_RELAXED) != __atomic_load_n(g_wake_base, __ATOMIC_RELAXED))
      return withdrawn(comm);
    /* past a short spin, offer the core between polls: ranks may share it (ext/withdraw.pxi) */
    if (PMPI_Wtime() >= spin_until) sched_yield();
  }
}

/* Start watching the calling thread (the engine's main thread); 0 turns the watch off. */
int mpinb_watch_start(int on) {
  g_main = pthread_self();
  __atomic_store_n(&g_on, on, __ATOMIC_RELEASE);
  return on;
}

/* Copy the record, and up to capacity members of its communicator (world ranks), into out and
 * members. Returns 1 if a call was in flight and read whole, 0 if none is, -1 if the main
 * thread kept changing it. Reads only the watch's own memory. */
int mpinb_watch_read(mpinb_watch_record *out, int *members, int capacity) {
  int attempt, i, n, world;
  for (attempt = 0; attempt < 100; attempt++) {
    int64_t before = __atomic_load_n(&g_seq, __ATOMIC_ACQUIRE);
    if (before & 1) continue;
    *out = g_rec;
    world = g_world_members;
    n = out->active ? out->comm_size : 0;
    if (n > capacity) n = capacity;
    if (n > MEMBER_CAP) n = MEMBER_CAP;
    for (i = 0; i < n; i++) members[i] = world ? i : g_member_buf[i];
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (__atomic_load_n(&g_seq, __ATOMIC_RELAXED) == before) return out->active ? 1 : 0;
  }
  return -1;
}

/* ------------------------------------------------------------------ the calls watched */

#define NO MPI_PROC_NULL
/* a count, unless its buffer is MPI_IN_PLACE (the count and type beside it are then not significant) */
#define SIGNIFICANT(buf, count) ((buf) == MPI_IN_PLACE ? 0 : (count))
#define WATCH(op, name, source, dest, sendtag, recvtag, root, comm, count, type, call) \
  do {                                                                                   \
    if (!watching()) return call;                                                        \
    enter(op, name, source, dest, sendtag, recvtag, root, comm, (int64_t)(count), type); \
    return leave(call);                                                                  \
  } while (0)

int MPI_Send(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  WATCH("send", "MPI_Send", NO, dest, tag, tag, NO, comm, count, type,
        PMPI_Send(buf, count, type, dest, tag, comm));
}

int MPI_Ssend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  WATCH("send", "MPI_Ssend", NO, dest, tag, tag, NO, comm, count, type,
        PMPI_Ssend(buf, count, type, dest, tag, comm));
}

/* A receive: matched first (withdrawable), then received from the matched message. */
#define WATCH_RECV(name, source, tag, comm, count, type, mrecv, recv)                       \
  do {                                                                                   \
    MPI_Message matched;                                                                 \
    int rc;                                                                              \
    if (!watching()) return recv;                                                        \
    enter("recv", name, source, NO, tag, tag, NO, comm, (int64_t)(count), type);         \
    if (!withdrawable()) return leave(recv);                                             \
    rc = probe_or_withdraw(source, tag, comm, &matched, status);                         \
    return leave(rc == MPI_SUCCESS ? mrecv : rc);                                        \
  } while (0)

int MPI_Recv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
             MPI_Status *status) {
  WATCH_RECV("MPI_Recv", source, tag, comm, count, type, PMPI_Mrecv(buf, count, type, &matched, status),
             PMPI_Recv(buf, count, type, source, tag, comm, status));
}

int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *status) {
  if (!watching()) return PMPI_Probe(source, tag, comm, status);
  enter("recv", "MPI_Probe", source, NO, tag, tag, NO, comm, 0, MPI_DATATYPE_NULL);
  return leave(withdrawable() ? probe_or_withdraw(source, tag, comm, NULL, status)
                              : PMPI_Probe(source, tag, comm, status));
}

int MPI_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message *message, MPI_Status *status) {
  if (!watching()) return PMPI_Mprobe(source, tag, comm, message, status);
  enter("recv", "MPI_Mprobe", source, NO, tag, tag, NO, comm, 0, MPI_DATATYPE_NULL);
  return leave(withdrawable() ? probe_or_withdraw(source, tag, comm, message, status)
                              : PMPI_Mprobe(source, tag, comm, message, status));
}

int MPI_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                 void *recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
                 MPI_Comm comm, MPI_Status *status) {
  WATCH("sendrecv", "MPI_Sendrecv", source, dest, sendtag, recvtag, NO, comm, sendcount, sendtype,
        PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype,
                      source, recvtag, comm, status));
}

int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype type, int dest, int sendtag, int source,
                         int recvtag, MPI_Comm comm, MPI_Status *status) {
  WATCH("sendrecv", "MPI_Sendrecv_replace", source, dest, sendtag, recvtag, NO, comm, count, type,
        PMPI_Sendrecv_replace(buf, count, type, dest, sendtag, source, recvtag, comm, status));
}

int MPI_Barrier(MPI_Comm comm) {
  WATCH("barrier", "MPI_Barrier", NO, NO, 0, 0, NO, comm, 0, MPI_DATATYPE_NULL, PMPI_Barrier(comm));
}

int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  WATCH("bcast", "MPI_Bcast", NO, NO, 0, 0, root, comm, count, type, PMPI_Bcast(buf, count, type, root, comm));
}

int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, int root,
               MPI_Comm comm) {
  WATCH("reduce", "MPI_Reduce", NO, NO, 0, 0, root, comm, count, type,
        PMPI_Reduce(sendbuf, recvbuf, count, type, op, root, comm));
}

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op,
                  MPI_Comm comm) {
  WATCH("allreduce", "MPI_Allreduce", NO, NO, 0, 0, NO, comm, count, type,
        PMPI_Allreduce(sendbuf, recvbuf, count, type, op, comm));
}

int MPI_Scan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  WATCH("scan", "MPI_Scan", NO, NO, 0, 0, NO, comm, count, type, PMPI_Scan(sendbuf, recvbuf, count, type, op, comm));
}

int MPI_Exscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  WATCH("exscan", "MPI_Exscan", NO, NO, 0, 0, NO, comm, count, type,
        PMPI_Exscan(sendbuf, recvbuf, count, type, op, comm));
}

int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op,
                             MPI_Comm comm) {
  WATCH("reduce_scatter", "MPI_Reduce_scatter_block", NO, NO, 0, 0, NO, comm, count, type,
        PMPI_Reduce_scatter_block(sendbuf, recvbuf, count, type, op, comm));
}

int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
               MPI_Datatype recvtype, int root, MPI_Comm comm) {
  WATCH("gather", "MPI_Gather", NO, NO, 0, 0, root, comm, SIGNIFICANT(sendbuf, sendcount), sendtype,
        PMPI_Gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm));
}

int MPI_Gatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm) {
  WATCH("gatherv", "MPI_Gatherv", NO, NO, 0, 0, root, comm, SIGNIFICANT(sendbuf, sendcount), sendtype,
        PMPI_Gatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm));
}

int MPI_Scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                MPI_Datatype recvtype, int root, MPI_Comm comm) {
  WATCH("scatter", "MPI_Scatter", NO, NO, 0, 0, root, comm, SIGNIFICANT(recvbuf, recvcount), recvtype,
        PMPI_Scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm));
}

int MPI_Scatterv(const void *sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype,
                 void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
  WATCH("scatterv", "MPI_Scatterv", NO, NO, 0, 0, root, comm, SIGNIFICANT(recvbuf, recvcount), recvtype,
        PMPI_Scatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm));
}

int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm) {
  WATCH("allgather", "MPI_Allgather", NO, NO, 0, 0, NO, comm, SIGNIFICANT(sendbuf, sendcount), sendtype,
        PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm));
}

int MPI_Allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                   const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm) {
  WATCH("allgatherv", "MPI_Allgatherv", NO, NO, 0, 0, NO, comm, SIGNIFICANT(sendbuf, sendcount), sendtype,
        PMPI_Allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm));
}

int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                 MPI_Datatype recvtype, MPI_Comm comm) {
  WATCH("alltoall", "MPI_Alltoall", NO, NO, 0, 0, NO, comm, SIGNIFICANT(sendbuf, sendcount), sendtype,
        PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm));
}

int MPI_Alltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                  void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype,
                  MPI_Comm comm) {
  WATCH("alltoallv", "MPI_Alltoallv", NO, NO, 0, 0, NO, comm, 0, sendtype,
        PMPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm));
}

#if MPI_VERSION >= 4
/* The large-count twins (MPI-4): mpi4py calls these where the MPI has them. */

int MPI_Send_c(const void *buf, MPI_Count count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  WATCH("send", "MPI_Send", NO, dest, tag, tag, NO, comm, count, type,
        PMPI_Send_c(buf, count, type, dest, tag, comm));
}

int MPI_Ssend_c(const void *buf, MPI_Count count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  WATCH("send", "MPI_Ssend", NO, dest, tag, tag, NO, comm, count, type,
        PMPI_Ssend_c(buf, count, type, dest, tag, comm));
}

int MPI_Recv_c(void *buf, MPI_Count count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
               MPI_Status *status) {
  WATCH_RECV("MPI_Recv", source, tag, comm, count, type, PMPI_Mrecv_c(buf, count, type, &matched, status),
             PMPI_Recv_c(buf, count, type, source, tag, comm, status));
}

int MPI_Sendrecv_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                   void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int source, int recvtag,
                   MPI_Comm comm, MPI_Status *status) {
  WATCH("sendrecv", "MPI_Sendrecv", source, dest, sendtag, recvtag, NO, comm, sendcount, sendtype,
        PMPI_Sendrecv_c(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype,
                        source, recvtag, comm, status));
}

int MPI_Sendrecv_replace_c(void *buf, MPI_Count count, MPI_Datatype type, int dest, int sendtag, int source,
                           int recvtag, MPI_Comm comm, MPI_Status *status) {
  WATCH("sendrecv", "MPI_Sendrecv_replace", source, dest, sendtag, recvtag, NO, comm, count, type,
        PMPI_Sendrecv_replace_c(buf, count, type, dest, sendtag, source, recvtag, comm, status));
}

int MPI_Bcast_c(void *buf, MPI_Count count, MPI_Datatype type, int root, MPI_Comm comm) {
  WATCH("bcast", "MPI_Bcast", NO, NO, 0, 0, root, comm, count, type, PMPI_Bcast_c(buf, count, type, root, comm));
}

int MPI_Reduce_c(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype type, MPI_Op op, int root,
                 MPI_Comm comm) {
  WATCH("reduce", "MPI_Reduce", NO, NO, 0, 0, root, comm, count, type,
        PMPI_Reduce_c(sendbuf, recvbuf, count, type, op, root, comm));
}

int MPI_Allreduce_c(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype type, MPI_Op op,
                    MPI_Comm comm) {
  WATCH("allreduce", "MPI_Allreduce", NO, NO, 0, 0, NO, comm, count, type,
        PMPI_Allreduce_c(sendbuf, recvbuf, count, type, op, comm));
}

int MPI_Scan_c(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  WATCH("scan", "MPI_Scan", NO, NO, 0, 0, NO, comm, count, type,
        PMPI_Scan_c(sendbuf, recvbuf, count, type, op, comm));
}

int MPI_Exscan_c(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype type, MPI_Op op,
                 MPI_Comm comm) {
  WATCH("exscan", "MPI_Exscan", NO, NO, 0, 0, NO, comm, count, type,
        PMPI_Exscan_c(sendbuf, recvbuf, count, type, op, comm));
}

int MPI_Reduce_scatter_block_c(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype type,
                               MPI_Op op, MPI_Comm comm) {
  WATCH("reduce_scatter", "MPI_Reduce_scatter_block", NO, NO, 0, 0, NO, comm, count, type,
        PMPI_Reduce_scatter_block_c(sendbuf, recvbuf, count, type, op, comm));
}

int MPI_Gather_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf,
                 MPI_Count recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
  WATCH("gather", "MPI_Gather", NO, NO, 0, 0, root, comm, SIGNIFICANT(sendbuf, sendcount), sendtype,
        PMPI_Gather_c(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm));
}

int MPI_Gatherv_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf,
                  const MPI_Count recvcounts[], const MPI_Aint displs[], MPI_Datatype recvtype, int root,
                  MPI_Comm comm) {
  WATCH("gatherv", "MPI_Gatherv", NO, NO, 0, 0, root, comm, SIGNIFICANT(sendbuf, sendcount), sendtype,
        PMPI_Gatherv_c(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm));
}

int MPI_Scatter_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf,
                  MPI_Count recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
  WATCH("scatter", "MPI_Scatter", NO, NO, 0, 0, root, comm, SIGNIFICANT(recvbuf, recvcount), recvtype,
        PMPI_Scatter_c(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm));
}

int MPI_Scatterv_c(const void *sendbuf, const MPI_Count sendcounts[], const MPI_Aint displs[],
                   MPI_Datatype sendtype, void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int root,
                   MPI_Comm comm) {
  WATCH("scatterv", "MPI_Scatterv", NO, NO, 0, 0, root, comm, SIGNIFICANT(recvbuf, recvcount), recvtype,
        PMPI_Scatterv_c(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm));
}

int MPI_Allgather_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf,
                    MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  WATCH("allgather", "MPI_Allgather", NO, NO, 0, 0, NO, comm, SIGNIFICANT(sendbuf, sendcount), sendtype,
        PMPI_Allgather_c(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm));
}

int MPI_Allgatherv_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf,
                     const MPI_Count recvcounts[], const MPI_Aint displs[], MPI_Datatype recvtype,
                     MPI_Comm comm) {
  WATCH("allgatherv", "MPI_Allgatherv", NO, NO, 0, 0, NO, comm, SIGNIFICANT(sendbuf, sendcount), sendtype,
        PMPI_Allgatherv_c(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm));
}

int MPI_Alltoall_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf,
                   MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  WATCH("alltoall", "MPI_Alltoall", NO, NO, 0, 0, NO, comm, SIGNIFICANT(sendbuf, sendcount), sendtype,
        PMPI_Alltoall_c(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm));
}

int MPI_Alltoallv_c(const void *sendbuf, const MPI_Count sendcounts[], const MPI_Aint sdispls[],
                    MPI_Datatype sendtype, void *recvbuf, const MPI_Count recvcounts[],
                    const MPI_Aint rdispls[], MPI_Datatype recvtype, MPI_Comm comm) {
  WATCH("alltoallv", "MPI_Alltoallv", NO, NO, 0, 0, NO, comm, 0, sendtype,
        PMPI_Alltoallv_c(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm));
}
#endif

/* ------------------------------------------------------------------ nonblocking calls: marked */

#define MARK(call) \
  do {             \
    mark_pending(); \
    return call;   \
  } while (0)

int MPI_Isend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *req) {
  MARK(PMPI_Isend(buf, count, type, dest, tag, comm, req));
}

int MPI_Issend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *req) {
  MARK(PMPI_Issend(buf, count, type, dest, tag, comm, req));
}

int MPI_Ibsend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *req) {
  MARK(PMPI_Ibsend(buf, count, type, dest, tag, comm, req));
}

int MPI_Irsend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *req) {
  MARK(PMPI_Irsend(buf, count, type, dest, tag, comm, req));
}

int MPI_Irecv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Request *req) {
  MARK(PMPI_Irecv(buf, count, type, source, tag, comm, req));
}

int MPI_Imrecv(void *buf, int count, MPI_Datatype type, MPI_Message *message, MPI_Request *req) {
  MARK(PMPI_Imrecv(buf, count, type, message, req));
}

int MPI_Start(MPI_Request *req) {
  MARK(PMPI_Start(req));
}

int MPI_Startall(int count, MPI_Request reqs[]) {
  MARK(PMPI_Startall(count, reqs));
}

int MPI_Ibarrier(MPI_Comm comm, MPI_Request *req) {
  MARK(PMPI_Ibarrier(comm, req));
}

int MPI_Ibcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm, MPI_Request *req) {
  MARK(PMPI_Ibcast(buf, count, type, root, comm, req));
}

int MPI_Ireduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, int root,
                MPI_Comm comm, MPI_Request *req) {
  MARK(PMPI_Ireduce(sendbuf, recvbuf, count, type, op, root, comm, req));
}

int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                   MPI_Request *req) {
  MARK(PMPI_Iallreduce(sendbuf, recvbuf, count, type, op, comm, req));
}

int MPI_Igather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *req) {
  MARK(PMPI_Igather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, req));
}

int MPI_Iscatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                 MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *req) {
  MARK(PMPI_Iscatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, req));
}

int MPI_Iallgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                   MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *req) {
  MARK(PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, req));
}

int MPI_Ialltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *req) {
  MARK(PMPI_Ialltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, req));
}

int MPI_Iscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
              MPI_Request *req) {
  MARK(PMPI_Iscan(sendbuf, recvbuf, count, type, op, comm, req));
}

int MPI_Igatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                 const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *req) {
  MARK(PMPI_Igatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm, req));
}

int MPI_Iscatterv(const void *sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype,
                  void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *req) {
  MARK(PMPI_Iscatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm, req));
}

int MPI_Iallgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                    const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm,
                    MPI_Request *req) {
  MARK(PMPI_Iallgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, req));
}

int MPI_Ialltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                   void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm,
                   MPI_Request *req) {
  MARK(PMPI_Ialltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm, req));
}

int MPI_Iexscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                MPI_Request *req) {
  MARK(PMPI_Iexscan(sendbuf, recvbuf, count, type, op, comm, req));
}

int MPI_Ireduce_scatter_block(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op,
                              MPI_Comm comm, MPI_Request *req) {
  MARK(PMPI_Ireduce_scatter_block(sendbuf, recvbuf, count, type, op, comm, req));
}

#if MPI_VERSION >= 4
int MPI_Isend_c(const void *buf, MPI_Count count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                MPI_Request *req) {
  MARK(PMPI_Isend_c(buf, count, type, dest, tag, comm, req));
}

int MPI_Issend_c(const void *buf, MPI_Count count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                 MPI_Request *req) {
  MARK(PMPI_Issend_c(buf, count, type, dest, tag, comm, req));
}

int MPI_Irecv_c(void *buf, MPI_Count count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                MPI_Request *req) {
  MARK(PMPI_Irecv_c(buf, count, type, source, tag, comm, req));
}

int MPI_Imrecv_c(void *buf, MPI_Count count, MPI_Datatype type, MPI_Message *message, MPI_Request *req) {
  MARK(PMPI_Imrecv_c(buf, count, type, message, req));
}

int MPI_Isendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag, void *recvbuf,
                  int recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm, MPI_Request *req) {
  MARK(PMPI_Isendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag,
                      comm, req));
}

int MPI_Isendrecv_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                    void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int source, int recvtag,
                    MPI_Comm comm, MPI_Request *req) {
  MARK(PMPI_Isendrecv_c(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source,
                        recvtag, comm, req));
}

int MPI_Ibcast_c(void *buf, MPI_Count count, MPI_Datatype type, int root, MPI_Comm comm, MPI_Request *req) {
  MARK(PMPI_Ibcast_c(buf, count, type, root, comm, req));
}

int MPI_Ireduce_c(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype type, MPI_Op op, int root,
                  MPI_Comm comm, MPI_Request *req) {
  MARK(PMPI_Ireduce_c(sendbuf, recvbuf, count, type, op, root, comm, req));
}

int MPI_Iallreduce_c(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype type, MPI_Op op,
                     MPI_Comm comm, MPI_Request *req) {
  MARK(PMPI_Iallreduce_c(sendbuf, recvbuf, count, type, op, comm, req));
}

int MPI_Igather_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf,
                  MPI_Count recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *req) {
  MARK(PMPI_Igather_c(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, req));
}

int MPI_Iscatter_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf,
                   MPI_Count recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *req) {
  MARK(PMPI_Iscatter_c(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, req));
}

int MPI_Iallgather_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf,
                     MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *req) {
  MARK(PMPI_Iallgather_c(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, req));
}

int MPI_Ialltoall_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf,
                    MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *req) {
  MARK(PMPI_Ialltoall_c(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, req));
}

int MPI_Iscan_c(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                MPI_Request *req) {
  MARK(PMPI_Iscan_c(sendbuf, recvbuf, count, type, op, comm, req));
}
int MPI_Igatherv_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf,
                   const MPI_Count recvcounts[], const MPI_Aint displs[], MPI_Datatype recvtype, int root,
                   MPI_Comm comm, MPI_Request *req) {
  MARK(PMPI_Igatherv_c(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm, req));
}

int MPI_Iscatterv_c(const void *sendbuf, const MPI_Count sendcounts[], const MPI_Aint displs[],
                    MPI_Datatype sendtype, void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int root,
                    MPI_Comm comm, MPI_Request *req) {
  MARK(PMPI_Iscatterv_c(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm, req));
}

int MPI_Iallgatherv_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf,
                      const MPI_Count recvcounts[], const MPI_Aint displs[], MPI_Datatype recvtype, MPI_Comm comm,
                      MPI_Request *req) {
  MARK(PMPI_Iallgatherv_c(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, req));
}

int MPI_Ialltoallv_c(const void *sendbuf, const MPI_Count sendcounts[], const MPI_Aint sdispls[],
                     MPI_Datatype sendtype, void *recvbuf, const MPI_Count recvcounts[], const MPI_Aint rdispls[],
                     MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *req) {
  MARK(PMPI_Ialltoallv_c(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm,
                         req));
}

int MPI_Iexscan_c(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype type, MPI_Op op,
                  MPI_Comm comm, MPI_Request *req) {
  MARK(PMPI_Iexscan_c(sendbuf, recvbuf, count, type, op, comm, req));
}

int MPI_Ireduce_scatter_block_c(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype type,
                                MPI_Op op, MPI_Comm comm, MPI_Request *req) {
  MARK(PMPI_Ireduce_scatter_block_c(sendbuf, recvbuf, count, type, op, comm, req));
}
#endif

#pragma GCC visibility pop
