/* comm.h -- communicators: the table of entry points a collective backend
 * fills (local threads now; nccl and mpi later), and the communicator
 * object the front ends (comm.c) hand to it.
 *
 * Front ends check everything on the calling thread (counts, devices, shapes,
 * dtypes, contiguity) and call the backend with one tensor per rank; the
 * backend enqueues each rank's part on its device's stream. */
#ifndef LN_COMM_H
#define LN_COMM_H
#include "../core/internal.h"
#include <pthread.h>

enum { LN_COMM_MAX_RANKS = LN_MAX_CPU_DEVICES };

typedef struct ln_comm_backend {
  const char *name;
  int (*init)(ln_comm *c);          /* fills c->impl */
  void (*destroy)(ln_comm *c);      /* when the last reference goes */
  int (*allreduce)(ln_comm *c, ln_tensor *const *ts, int op, int wire);
  /* on the devices' comm streams (NULL: allreduce stands in) */
  int (*allreduce_async)(ln_comm *c, ln_tensor *const *ts, int op, int wire);
  int (*broadcast)(ln_comm *c, ln_tensor *const *ts, int root);
  int (*reduce_scatter)(ln_comm *c, ln_tensor *const *out, ln_tensor *const *in, int op, int wire);
  int (*allgather)(ln_comm *c, ln_tensor *const *out, ln_tensor *const *in);
  int (*send)(ln_comm *c, const ln_tensor *t, int rank, int dst_rank);
  int (*recv)(ln_comm *c, ln_tensor *t, int rank, int src_rank);
  int (*barrier)(ln_comm *c);
} ln_comm_backend;

struct ln_comm {
  const ln_comm_backend *be;
  int n;
  int devices[LN_COMM_MAX_RANKS];
  atomic_int refcount;     /* the Lua handle + each queued collective */
  /* how the ranks met (ln_comm_meet_stats): a rank early at a barrier slept,
   * or woke as its late peers neared the collective and met them awake */
  atomic_llong met_slept, met_awake;
  void *impl;
};

void ln_comm_retain(ln_comm *c);
void ln_comm_release(ln_comm *c);

extern const ln_comm_backend ln_comm_local_backend;

#endif
