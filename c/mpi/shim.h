/* shim.h -- the entry points of liblunet_mpi.so, the only code built with
 * mpicc: a thin layer over Open MPI that liblunet.so's mpi backend
 * (c/comm/mpi.c) dlopens. MPI's handle types stay inside the shim (they are
 * pointers in Open MPI, ints in MPICH): communicators and requests cross as
 * opaque pointers, so liblunet.so never depends on an MPI ABI.
 *
 * Every call returns 0 or an MPI error code (the shim sets MPI_ERRORS_RETURN
 * on every communicator it makes) and writes MPI's text for it into err. A
 * started operation gives a request the caller polls with test() until done
 * (test frees it) or abandons with drop() (a peer is gone). Element types:
 * LN_MPI_F32, F64 (reductions), U16 with a wire format (16-bit values
 * reduced in float32 by the shim's own MPI_Op), BYTE (copies). */
#ifndef LN_MPI_SHIM_H
#define LN_MPI_SHIM_H
#include <stdint.h>

enum { LN_MPI_F32, LN_MPI_F64, LN_MPI_BF16, LN_MPI_F16, LN_MPI_BYTE };
enum { LN_MPI_SUM, LN_MPI_MAX, LN_MPI_MIN };   /* avg: sum, then the backend divides */
enum { LN_MPI_SHIM_VERSION = 2, LN_MPI_ERRLEN = 512 };

typedef struct ln_mpi_shim {
  int version;
  /* MPI_Init_thread(MPI_THREAD_MULTIPLE) unless MPI is initialised; the
   * world's rank and size */
  int (*init)(int *rank, int *size, int *thread_level, char *err);
  int (*finalize)(char *err);
  /* a new communicator (MPI_Comm_create_group over the world; called by the
   * members only): members[0..n-1] are world ranks; *out the handle */
  int (*comm_create)(const int *members, int n, void **out, char *err);
  void (*comm_free)(void *comm);
  int (*comm_rank)(void *comm);
  /* non-blocking operations; sbuf NULL: in place */
  int (*iallreduce)(void *comm, void *buf, int64_t count, int type, int op, void **req, char *err);
  int (*ibcast)(void *comm, void *buf, int64_t count, int type, int root, void **req, char *err);
  int (*ireduce_scatter)(void *comm, const void *in, void *out, int64_t count, int type, int op, void **req, char *err);
  int (*iallgather)(void *comm, const void *in, void *out, int64_t count, int type, void **req, char *err);
  int (*isend)(void *comm, const void *buf, int64_t count, int type, int dst, int tag, void **req, char *err);
  /* src -1: any source */
  int (*irecv)(void *comm, void *buf, int64_t count, int type, int src, int tag, void **req, char *err);
  /* *done = 1 once it completed (the request is freed then) */
  int (*test)(void *req, int *done, char *err);
  void (*drop)(void *req);   /* forget a request that will never complete */
  void (*cancel)(void *req); /* cancel a pending receive and free it */
} ln_mpi_shim;

/* the one symbol liblunet_mpi.so exports */
typedef const ln_mpi_shim *(*ln_mpi_shim_fn)(void);
#define LN_MPI_SHIM_SYMBOL "ln_mpi_shim_table"

#endif
