/* comm.h -- process groups ("communicators"): the table of entry points a
 * collective backend fills (local threads now; mpi and nccl later), and the
 * group object the front ends (comm.c) hand to it.
 *
 * A group has world ranks, 0..world-1, over every process of the job. This
 * process holds nlocal of them, its local ranks 0..nlocal-1: local rank i is
 * global rank ranks[i], on this process's device devices[i]. A collective is
 * called in every process with that process's own tensors only: ts[i] is
 * local rank i's tensor, on devices[i] (an array of nlocal pointers). Roots,
 * sources and destinations are global ranks; a send's own rank is the local
 * rank whose device holds the tensor.
 *
 * Front ends check everything on the calling thread (counts, devices, shapes,
 * dtypes, contiguity) and call the backend with the local tensors; the
 * backend enqueues each local rank's part on its device's stream.
 *
 * Backends, and how each fits these entry points without another change:
 * - local (local.c): every rank in this process (world == nlocal, ranks[i] =
 *   i); the device workers meet in shared memory. As before the process-group
 *   API, one call carries every rank's tensor.
 * - mpi (mpi.c, with MPI's calls in liblunet_mpi.so, dlopen'd): as built, one
 *   rank per process (nlocal 1; the plan below for more is not built). init() takes world and
 *   the first rank from MPI_Comm_size/rank (cfg->world_size 0, or checked
 *   against them), one MPI communicator (a dup) per group, nlocal >= 1
 *   devices per process (ranks[i] = mpi_rank * nlocal + i). Each collective
 *   enqueues a task per local rank as local.c does; the local ranks first
 *   reduce among themselves in shared memory, local rank 0 runs the MPI
 *   collective on the host buffer from its stream's task, then the others
 *   copy its result (the local barrier that ends a collective waits for it).
 *   send/recv: MPI_Isend/Irecv to the peer's global rank from the stream.
 * - nccl (liblunet_cuda.so): init() gets the ncclUniqueId from cfg->rendezvous
 *   (rank 0 makes it and hands it to the others by MPI or a file) and calls
 *   ncclCommInitRank for each local device inside ncclGroupStart/End; a
 *   collective is ncclGroupStart, one ncclAllReduce (Broadcast, ...) per local
 *   tensor on its device's stream, ncclGroupEnd; send/recv are ncclSend/Recv.
 * allreduce_async, wait, barrier and the meeting statistics mean the same
 * for all: the comm streams are the devices'. */
#ifndef LN_COMM_H
#define LN_COMM_H
#include "../core/internal.h"
#include <pthread.h>

enum { LN_COMM_MAX_RANKS = LN_MAX_CPU_DEVICES };   /* local ranks per process */

typedef struct ln_comm_backend {
  const char *name;
  /* fills c->impl; may set c->world and c->ranks from the backend's own
   * launcher (mpi) where cfg leaves them out */
  int (*init)(ln_comm *c, const ln_comm_config *cfg);
  void (*destroy)(ln_comm *c);      /* when the last reference goes */
  /* ts, out, in: nlocal tensors, local rank order; root: a global rank */
  int (*allreduce)(ln_comm *c, ln_tensor *const *ts, int op, int wire);
  /* on the devices' comm streams (NULL: allreduce stands in) */
  int (*allreduce_async)(ln_comm *c, ln_tensor *const *ts, int op, int wire);
  int (*broadcast)(ln_comm *c, ln_tensor *const *ts, int root);
  int (*reduce_scatter)(ln_comm *c, ln_tensor *const *out, ln_tensor *const *in, int op, int wire);
  int (*allgather)(ln_comm *c, ln_tensor *const *out, ln_tensor *const *in);
  /* local: the sending/receiving local rank; dst_rank, src_rank: global */
  int (*send)(ln_comm *c, const ln_tensor *t, int local, int dst_rank);
  int (*recv)(ln_comm *c, ln_tensor *t, int local, int src_rank);
  int (*barrier)(ln_comm *c);
  /* ln_comm_wait's part beyond the streams (NULL: none): the mpi backend's
   * async collectives of an inline device run on its own thread */
  int (*wait)(ln_comm *c);
} ln_comm_backend;

struct ln_comm {
  const ln_comm_backend *be;
  int world;                          /* ranks in the group, all processes */
  int nlocal;                         /* ranks this process holds */
  int ranks[LN_COMM_MAX_RANKS];       /* global rank of each local rank */
  int devices[LN_COMM_MAX_RANKS];     /* its device */
  atomic_int refcount;     /* the Lua handle + each queued collective */
  /* how the ranks met (ln_comm_meet_stats): a rank early at a barrier slept,
   * or woke as its late peers neared the collective and met them awake */
  atomic_llong met_slept, met_awake;
  /* where the next collective is called from (ln_comm_set_site; the mpi
   * backend names it when ranks disagree); the calling thread's */
  char site[200];
  void *impl;
};

void ln_comm_retain(ln_comm *c);
void ln_comm_release(ln_comm *c);

extern const ln_comm_backend ln_comm_local_backend;
extern const ln_comm_backend ln_comm_mpi_backend;

/* The nccl backend lives in liblunet_cuda.so (c/cuda/nccl.c): when that
 * library starts, it hands these to core (ln_core_api.register_nccl; read
 * with ln_cuda_nccl_hooks), whether or not a GPU is there. NCCL itself is dlopen'd on first
 * use; unique_id and version fail with its reason when it is missing. */
typedef struct ln_nccl_hooks {
  const ln_comm_backend *backend;
  int (*unique_id)(char *hex, size_t n);   /* ncclGetUniqueId, in hex */
  int (*version)(void);                    /* ncclGetVersion, or -1 */
} ln_nccl_hooks;

#endif
