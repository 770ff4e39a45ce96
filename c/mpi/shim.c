/* shim.c -- liblunet_mpi.so: the MPI calls of the mpi collective backend,
 * behind the table of shim.h (built with mpicc; c/comm/mpi.c loads it). */
#include "shim.h"
#include <limits.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static MPI_Op ops16[2][3];    /* [bf16, f16][sum, max, min] */
static MPI_Op ops32[2][2];    /* [f32, f64][max, min]: NaN propagates, as the local backend's */

static int fail(int rc, char *err, const char *what) {
  char s[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, s, &len) != MPI_SUCCESS) snprintf(s, sizeof s, "MPI error %d", rc);
  if (err) snprintf(err, LN_MPI_ERRLEN, "%s: %s", what, s);
  return rc ? rc : -1;
}

static int too_big(int64_t count, char *err) {
  if (count >= 0 && count <= INT_MAX) return 0;
  snprintf(err, LN_MPI_ERRLEN, "%lld elements: MPI counts stop at %d", (long long)count, INT_MAX);
  return -1;
}

/* ---- 16-bit wire formats: values reduced in float32, rounded once per step ---- */

static inline float bf16_f(uint16_t b) { uint32_t v = (uint32_t)b << 16; float f; memcpy(&f, &v, 4); return f; }
static inline uint16_t f_bf16(float f) {
  uint32_t v;
  memcpy(&v, &f, 4);
  if ((v & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((v >> 16) | 0x40);   /* quiet NaN */
  return (uint16_t)((v + 0x7fffu + ((v >> 16) & 1)) >> 16);                 /* to nearest even */
}
static inline float f16_f(uint16_t h) { _Float16 x; memcpy(&x, &h, 2); return (float)x; }
static inline uint16_t f_f16(float f) { _Float16 x = (_Float16)f; uint16_t h; memcpy(&h, &x, 2); return h; }

#define PICK(a, b) (b > a || b != b ? b : a)
#define PICK_MIN(a, b) (b < a || b != b ? b : a)
#define OP16(NAME, DEC, ENC, EXPR)                                                  \
  static void NAME(void *in, void *inout, int *len, MPI_Datatype *dt) {             \
    const uint16_t *x = in;                                                         \
    uint16_t *y = inout;                                                            \
    for (int i = 0; i < *len; i++) { float a = DEC(y[i]), b = DEC(x[i]); y[i] = ENC(EXPR); } \
  }
OP16(bf16_sum, bf16_f, f_bf16, a + b)
OP16(bf16_max, bf16_f, f_bf16, PICK(a, b))
OP16(bf16_min, bf16_f, f_bf16, PICK_MIN(a, b))
OP16(f16_sum, f16_f, f_f16, a + b)
OP16(f16_max, f16_f, f_f16, PICK(a, b))
OP16(f16_min, f16_f, f_f16, PICK_MIN(a, b))

#define OPF(NAME, T, EXPR)                                                          \
  static void NAME(void *in, void *inout, int *len, MPI_Datatype *dt) {             \
    const T *x = in;                                                                \
    T *y = inout;                                                                   \
    for (int i = 0; i < *len; i++) { T a = y[i], b = x[i]; y[i] = EXPR; }           \
  }
OPF(f32_max, float, PICK(a, b))
OPF(f32_min, float, PICK_MIN(a, b))
OPF(f64_max, double, PICK(a, b))
OPF(f64_min, double, PICK_MIN(a, b))

static MPI_Datatype type_of(int type) {
  switch (type) {
    case LN_MPI_F32: return MPI_FLOAT;
    case LN_MPI_F64: return MPI_DOUBLE;
    case LN_MPI_BF16: case LN_MPI_F16: return MPI_UINT16_T;
    default: return MPI_BYTE;
  }
}

static MPI_Op op_of(int type, int op) {
  if (type == LN_MPI_BF16 || type == LN_MPI_F16) return ops16[type == LN_MPI_F16][op];
  if (op == LN_MPI_SUM) return MPI_SUM;
  return ops32[type == LN_MPI_F64][op == LN_MPI_MIN];
}

static int shim_init(int *rank, int *size, int *level, char *err) {
  int inited = 0, rc;
  MPI_Initialized(&inited);
  if (!inited) {
    if ((rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, level)) != MPI_SUCCESS)
      return fail(rc, err, "MPI_Init_thread");
  } else {
    MPI_Query_thread(level);
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  if (!ops16[0][0]) {
    MPI_User_function *f[2][3] = {{bf16_sum, bf16_max, bf16_min}, {f16_sum, f16_max, f16_min}};
    MPI_User_function *g[2][2] = {{f32_max, f32_min}, {f64_max, f64_min}};
    for (int i = 0; i < 2; i++) {
      for (int j = 0; j < 3; j++)
        if ((rc = MPI_Op_create(f[i][j], 1, &ops16[i][j])) != MPI_SUCCESS) return fail(rc, err, "MPI_Op_create");
      for (int j = 0; j < 2; j++)
        if ((rc = MPI_Op_create(g[i][j], 1, &ops32[i][j])) != MPI_SUCCESS) return fail(rc, err, "MPI_Op_create");
    }
  }
  if ((rc = MPI_Comm_rank(MPI_COMM_WORLD, rank)) != MPI_SUCCESS) return fail(rc, err, "MPI_Comm_rank");
  if ((rc = MPI_Comm_size(MPI_COMM_WORLD, size)) != MPI_SUCCESS) return fail(rc, err, "MPI_Comm_size");
  return 0;
}

static int shim_finalize(char *err) {
  int fin = 0, rc;
  MPI_Finalized(&fin);
  if (fin) return 0;
  if ((rc = MPI_Finalize()) != MPI_SUCCESS) return fail(rc, err, "MPI_Finalize");
  return 0;
}

static int shim_comm_create(const int *members, int n, void **out, char *err) {
  MPI_Group world, g;
  MPI_Comm *c = malloc(sizeof *c);
  if (!c) { snprintf(err, LN_MPI_ERRLEN, "out of host memory"); return -1; }
  int rc = MPI_Comm_group(MPI_COMM_WORLD, &world);
  if (rc != MPI_SUCCESS) { free(c); return fail(rc, err, "MPI_Comm_group"); }
  rc = MPI_Group_incl(world, n, members, &g);
  MPI_Group_free(&world);
  if (rc != MPI_SUCCESS) { free(c); return fail(rc, err, "MPI_Group_incl"); }
  rc = MPI_Comm_create_group(MPI_COMM_WORLD, g, 0, c);
  MPI_Group_free(&g);
  if (rc != MPI_SUCCESS) { free(c); return fail(rc, err, "MPI_Comm_create_group"); }
  MPI_Comm_set_errhandler(*c, MPI_ERRORS_RETURN);
  *out = c;
  return 0;
}

static void shim_comm_free(void *comm) {
  if (!comm) return;
  MPI_Comm *c = comm;
  int fin = 0;
  MPI_Finalized(&fin);
  if (!fin) MPI_Comm_free(c);
  free(c);
}

static int shim_comm_rank(void *comm) {
  int r = -1;
  MPI_Comm_rank(*(MPI_Comm *)comm, &r);
  return r;
}

/* a request box; its MPI_Request is filled by the call */
static MPI_Request *new_req(char *err) {
  MPI_Request *q = malloc(sizeof *q);
  if (!q) snprintf(err, LN_MPI_ERRLEN, "out of host memory");
  return q;
}

#define START(CALL, NAME)                                  \
  do {                                                     \
    MPI_Request *q = new_req(err);                         \
    if (!q) return -1;                                     \
    int rc_ = (CALL);                                      \
    if (rc_ != MPI_SUCCESS) { free(q); return fail(rc_, err, NAME); } \
    *req = q;                                              \
    return 0;                                              \
  } while (0)

static int shim_iallreduce(void *comm, void *buf, int64_t count, int type, int op, void **req, char *err) {
  if (too_big(count, err)) return -1;
  START(MPI_Iallreduce(MPI_IN_PLACE, buf, (int)count, type_of(type), op_of(type, op), *(MPI_Comm *)comm, q),
        "MPI_Iallreduce");
}

static int shim_ibcast(void *comm, void *buf, int64_t count, int type, int root, void **req, char *err) {
  if (too_big(count, err)) return -1;
  START(MPI_Ibcast(buf, (int)count, type_of(type), root, *(MPI_Comm *)comm, q), "MPI_Ibcast");
}

static int shim_ireduce_scatter(void *comm, const void *in, void *out, int64_t count, int type, int op, void **req,
                                char *err) {
  if (too_big(count, err)) return -1;
  START(MPI_Ireduce_scatter_block(in, out, (int)count, type_of(type), op_of(type, op), *(MPI_Comm *)comm, q),
        "MPI_Ireduce_scatter_block");
}

static int shim_iallgather(void *comm, const void *in, void *out, int64_t count, int type, void **req, char *err) {
  if (too_big(count, err)) return -1;
  START(MPI_Iallgather(in, (int)count, type_of(type), out, (int)count, type_of(type), *(MPI_Comm *)comm, q),
        "MPI_Iallgather");
}

static int shim_isend(void *comm, const void *buf, int64_t count, int type, int dst, int tag, void **req, char *err) {
  if (too_big(count, err)) return -1;
  START(MPI_Isend(buf, (int)count, type_of(type), dst, tag, *(MPI_Comm *)comm, q), "MPI_Isend");
}

static int shim_irecv(void *comm, void *buf, int64_t count, int type, int src, int tag, void **req, char *err) {
  if (too_big(count, err)) return -1;
  START(MPI_Irecv(buf, (int)count, type_of(type), src < 0 ? MPI_ANY_SOURCE : src, tag, *(MPI_Comm *)comm, q),
        "MPI_Irecv");
}

static int shim_test(void *req, int *done, char *err) {
  MPI_Request *q = req;
  int rc = MPI_Test(q, done, MPI_STATUS_IGNORE);
  if (rc != MPI_SUCCESS) { *done = 1; free(q); return fail(rc, err, "MPI_Test"); }
  if (*done) free(q);
  return 0;
}

/* the buffers of an abandoned request may still be written by MPI: the
 * caller keeps them (it leaks them) */
static void shim_drop(void *req) { (void)req; }

static void shim_cancel(void *req) {
  MPI_Request *q = req;
  if (MPI_Cancel(q) == MPI_SUCCESS) MPI_Wait(q, MPI_STATUS_IGNORE);
  free(q);
}

static const ln_mpi_shim shim = {
  LN_MPI_SHIM_VERSION, shim_init, shim_finalize, shim_comm_create, shim_comm_free, shim_comm_rank,
  shim_iallreduce, shim_ibcast, shim_ireduce_scatter, shim_iallgather, shim_isend, shim_irecv,
  shim_test, shim_drop, shim_cancel,
};

__attribute__((visibility("default"))) const ln_mpi_shim *ln_mpi_shim_table(void) { return &shim; }
