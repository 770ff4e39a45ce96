/* nccl.c -- the "nccl" collective backend (comm.h's table) for GPU tensors.
 *
 * NCCL is loaded with dlopen on first use (LUNET_NCCL_LIB, else
 * libnccl.so.2), never linked: the CUDA backend works without it, and when it
 * is missing the error names dlopen's reason. The backend hands this table to
 * core when it starts (ln_core_api.register_nccl), before it knows whether a GPU
 * is there; comm_new refuses cuda devices that do not exist on its own.
 *
 * One NCCL communicator per local rank: a group held whole by this process
 * (no rendezvous) comes from ncclCommInitAll (ranks 0..n-1 in device order;
 * any other order from a local unique id); one spread over processes from
 * ncclCommInitRank per local device, inside ncclGroupStart/End, with the
 * ncclUniqueId that rank 0 made (ln_nccl_unique_id) handed to every process
 * as cfg->rendezvous, in hex. Each collective is one group of one NCCL call
 * per local rank, on that device's compute stream (stream order is the
 * ordering: the host does not wait). The async all-reduce runs on the
 * device's copy stream, which first waits for an event recorded on the
 * compute stream; wait() makes each compute stream wait for an event on its
 * copy stream; the tensors' storages are held until the copy stream passes.
 *
 * send/recv: a send to a rank of another process is ncclSend at once (its
 * receiver posts ncclRecv). A send to a rank of this process copies the tensor
 * into a staging buffer on the sender's stream (the value at the send, as the
 * local backend takes it) and waits there for the recv, which issues the pair
 * as one group (NCCL needs both sides of a pair in one group when one thread
 * issues both; to self included).
 *
 * Reductions: float32/float64 (sum, avg = ncclAvg, max, min). float16 /
 * bfloat16 wire formats: rounded on the device (nccl_wire.cu), reduced by
 * NCCL in the wire type, widened back (see call_args). NCCL errors come back as lunet errors naming the
 * call and NCCL's message (ncclGetErrorString, ncclGetLastError); after one,
 * the communicator refuses further work and is torn down with ncclCommAbort. */
#include "cuda.h"
#include "../comm/comm.h"
#include <nccl.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- loading --------------------------------------------------------------------- */

static struct {
  pthread_once_t once;
  char why[600];
  int version;
  __typeof__(ncclGetVersion) *get_version;
  __typeof__(ncclGetUniqueId) *get_unique_id;
  __typeof__(ncclCommInitRank) *init_rank;
  __typeof__(ncclCommInitAll) *init_all;
  __typeof__(ncclCommDestroy) *destroy;
  __typeof__(ncclCommAbort) *abort;
  __typeof__(ncclCommGetAsyncError) *async_error;
  __typeof__(ncclGetErrorString) *error_string;
  __typeof__(ncclGetLastError) *last_error;
  __typeof__(ncclGroupStart) *group_start;
  __typeof__(ncclGroupEnd) *group_end;
  __typeof__(ncclAllReduce) *allreduce;
  __typeof__(ncclBroadcast) *broadcast;
  __typeof__(ncclReduceScatter) *reduce_scatter;
  __typeof__(ncclAllGather) *allgather;
  __typeof__(ncclSend) *send;
  __typeof__(ncclRecv) *recv;
} nc = {PTHREAD_ONCE_INIT};

static void load_nccl(void) {
  const char *path = getenv("LUNET_NCCL_LIB");
  if (!path || !*path) path = "libnccl.so.2";
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);   /* (never closed: comms may outlive any caller) */
  if (!h) { snprintf(nc.why, sizeof nc.why, "NCCL did not load: %.500s", dlerror()); return; }
  struct { void **slot; const char *name; } syms[] = {
    {(void **)&nc.get_version, "ncclGetVersion"}, {(void **)&nc.get_unique_id, "ncclGetUniqueId"},
    {(void **)&nc.init_rank, "ncclCommInitRank"}, {(void **)&nc.init_all, "ncclCommInitAll"},
    {(void **)&nc.destroy, "ncclCommDestroy"}, {(void **)&nc.abort, "ncclCommAbort"},
    {(void **)&nc.async_error, "ncclCommGetAsyncError"}, {(void **)&nc.error_string, "ncclGetErrorString"},
    {(void **)&nc.last_error, "ncclGetLastError"}, {(void **)&nc.group_start, "ncclGroupStart"},
    {(void **)&nc.group_end, "ncclGroupEnd"}, {(void **)&nc.allreduce, "ncclAllReduce"},
    {(void **)&nc.broadcast, "ncclBroadcast"}, {(void **)&nc.reduce_scatter, "ncclReduceScatter"},
    {(void **)&nc.allgather, "ncclAllGather"}, {(void **)&nc.send, "ncclSend"}, {(void **)&nc.recv, "ncclRecv"},
  };
  for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
    *syms[i].slot = dlsym(h, syms[i].name);
    if (!*syms[i].slot) {
      snprintf(nc.why, sizeof nc.why, "NCCL (%.300s) lacks %s, which lunet uses (NCCL 2.19 or newer needed)", path,
               syms[i].name);
      return;
    }
  }
  ncclResult_t r = nc.get_version(&nc.version);
  if (r != ncclSuccess) {
    snprintf(nc.why, sizeof nc.why, "ncclGetVersion: %s", nc.error_string(r));
    nc.version = 0;
  }
}

/* 0 when NCCL is usable, else an error naming fn */
static int need_nccl(const char *fn) {
  pthread_once(&nc.once, load_nccl);
  return nc.version > 0 ? 0 : ln_error("%s: %s", fn, nc.why);
}

static int nccl_version(void) {
  return need_nccl("nccl_version") == 0 ? nc.version : -1;
}

static const char hexdigits[] = "0123456789abcdef";

/* a new ncclUniqueId as 2 * NCCL_UNIQUE_ID_BYTES hex digits and a NUL */
static int nccl_unique_id(char *hex, size_t n) {
  if (!hex || n < 2 * NCCL_UNIQUE_ID_BYTES + 1)
    return ln_error("nccl_unique_id: need a buffer of %d bytes", 2 * NCCL_UNIQUE_ID_BYTES + 1);
  if (need_nccl("nccl_unique_id") != 0) return -1;
  ncclUniqueId id;
  ncclResult_t r = nc.get_unique_id(&id);
  if (r != ncclSuccess)
    return ln_error("nccl_unique_id: ncclGetUniqueId: %s (%s)", nc.error_string(r), nc.last_error(NULL));
  for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; i++) {
    unsigned char b = (unsigned char)id.internal[i];
    hex[2 * i] = hexdigits[b >> 4];
    hex[2 * i + 1] = hexdigits[b & 15];
  }
  hex[2 * NCCL_UNIQUE_ID_BYTES] = '\0';
  return 0;
}

static int parse_unique_id(const char *hex, ncclUniqueId *id) {
  size_t len = strlen(hex);
  if (len != 2 * NCCL_UNIQUE_ID_BYTES)
    return ln_error("comm_new: nccl rendezvous must be the %d hex digits of lunet.comm.nccl_unique_id(), got %zu "
                    "characters", 2 * NCCL_UNIQUE_ID_BYTES, len);
  for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; i++) {
    int v = 0;
    for (int k = 0; k < 2; k++) {
      const char *p = strchr(hexdigits, hex[2 * i + k] | 0x20);
      if (!hex[2 * i + k] || !p)
        return ln_error("comm_new: nccl rendezvous has '%c' at %d, not a hex digit", hex[2 * i + k], 2 * i + k + 1);
      v = v * 16 + (int)(p - hexdigits);
    }
    id->internal[i] = (char)v;
  }
  return 0;
}

/* ---- the communicator -------------------------------------------------------------- */

typedef struct pending {   /* a send to a rank of this process, waiting for its recv */
  struct pending *next;
  int src_local, dst_rank;
  void *buf;
  size_t nbytes;
} pending;

typedef struct {
  ncclComm_t comms[LN_COMM_MAX_RANKS];
  cudaEvent_t fork[LN_COMM_MAX_RANKS], join[LN_COMM_MAX_RANKS];
  float *scratch[LN_COMM_MAX_RANKS];   /* barrier's one-element all-reduce */
  bool broken;
  char why[400];
  pending *sends;
} nccl_impl;

static nccl_impl *impl_of(const ln_comm *c) { return c->impl; }
static int cuda_index(const ln_comm *c, int i) { return ln_device_index(c->devices[i]); }

/* the failure of an NCCL call: the communicator refuses further work */
static int nccl_fail(ln_comm *c, const char *fn, const char *call, ncclResult_t r) {
  nccl_impl *m = impl_of(c);
  const char *detail = nc.last_error(m && m->comms[0] ? m->comms[0] : NULL);
  if (m) {
    m->broken = true;
    snprintf(m->why, sizeof m->why, "%s: %s", call, nc.error_string(r));
  }
  return ln_error("%s: %s: %s (NCCL error %d%s%s)", fn, call, nc.error_string(r), (int)r,
                  detail && *detail ? ": " : "", detail ? detail : "");
}

/* refuses work on a communicator an earlier NCCL error (or a peer's) broke */
static int check_usable(ln_comm *c, const char *fn) {
  nccl_impl *m = impl_of(c);
  if (!m->broken)
    for (int i = 0; i < c->nlocal; i++) {
      ncclResult_t a = ncclSuccess;
      ncclResult_t r = nc.async_error(m->comms[i], &a);
      if (r != ncclSuccess) return nccl_fail(c, fn, "ncclCommGetAsyncError", r);
      if (a != ncclSuccess && a != ncclInProgress) return nccl_fail(c, fn, "an earlier NCCL operation", a);
    }
  if (m->broken)
    return ln_error("%s: this nccl communicator failed earlier (%s); make a new one", fn, m->why);
  return 0;
}

static size_t dtype_bytes(int dt) {
  static const size_t sz[LN_NDTYPES] = {4, 8, 4, 8, 1, 1, 2, 2};
  return dt >= 0 && dt < LN_NDTYPES ? sz[dt] : 0;
}
static size_t numel_of(const ln_tensor *t) {
  size_t n = 1;
  for (int d = 0; d < t->ndim; d++) n *= (size_t)t->shape[d];
  return n;
}
static void *data_of(const ln_tensor *t) {
  return (char *)t->storage->data + t->offset * (int64_t)dtype_bytes(t->dtype_id);
}

static int stream_of(int index, int which, cudaStream_t *s) { return lnc_device_stream(index, which, s); }

static void nccl_destroy(ln_comm *c) {
  nccl_impl *m = impl_of(c);
  if (!m) return;
  for (pending *p = m->sends, *next; p; p = next) {
    next = p->next;
    cudaFree(p->buf);   /* (a send never received: waits for the copy into it) */
    free(p);
  }
  for (int i = 0; i < c->nlocal; i++) {
    if (m->comms[i]) (m->broken ? nc.abort : nc.destroy)(m->comms[i]);
    if (m->scratch[i]) cudaFree(m->scratch[i]);
    if (m->fork[i]) cudaEventDestroy(m->fork[i]);
    if (m->join[i]) cudaEventDestroy(m->join[i]);
  }
  lnc_restore_device();
  free(m);
  c->impl = NULL;
}

static int nccl_init(ln_comm *c, const ln_comm_config *cfg) {
  if (need_nccl("comm_new") != 0) return -1;
  int n = c->nlocal;
  for (int i = 0; i < n; i++)
    if (ln_device_type(c->devices[i]) != LN_TYPE_CUDA)
      return ln_error("comm_new: backend 'nccl' takes cuda devices; device %d is cpu:%d (use 'local' or 'mpi' "
                      "for CPU tensors)", i + 1, c->devices[i]);
  bool one_process = c->world == n;
  if (!one_process && !cfg->rendezvous)
    return ln_error("comm_new: backend 'nccl' over %d ranks with %d in this process needs rendezvous: the unique id "
                    "that one rank made with lunet.comm.nccl_unique_id() and handed to the others",
                    c->world, n);
  ncclUniqueId id;
  if (cfg->rendezvous && parse_unique_id(cfg->rendezvous, &id) != 0) return -1;
  nccl_impl *m = calloc(1, sizeof *m);
  if (!m) return ln_error("comm_new: out of host memory");
  c->impl = m;
  bool in_order = true;
  for (int i = 0; i < n; i++) in_order = in_order && c->ranks[i] == i;
  ncclResult_t r = ncclSuccess;
  const char *call = "ncclCommInitRank";
  if (one_process && !cfg->rendezvous && in_order) {
    int devlist[LN_COMM_MAX_RANKS];
    for (int i = 0; i < n; i++) devlist[i] = cuda_index(c, i);
    call = "ncclCommInitAll";
    r = nc.init_all(m->comms, n, devlist);
  } else {
    if (!cfg->rendezvous) r = nc.get_unique_id(&id), call = "ncclGetUniqueId";
    if (r == ncclSuccess) {
      call = "ncclCommInitRank";
      r = nc.group_start();
      for (int i = 0; i < n && r == ncclSuccess; i++) {
        cudaStream_t s;
        if (stream_of(cuda_index(c, i), 0, &s) != 0) { nc.group_end(); nccl_destroy(c); return -1; }
        r = nc.init_rank(&m->comms[i], c->world, id, c->ranks[i]);
      }
      ncclResult_t e = nc.group_end();
      if (r == ncclSuccess) r = e, call = "ncclGroupEnd (ncclCommInitRank)";
    }
  }
  lnc_restore_device();
  if (r != ncclSuccess) {
    ln_error("comm_new: %s: %s (NCCL error %d: %s)", call, nc.error_string(r), (int)r, nc.last_error(NULL));
    char keep[800];
    snprintf(keep, sizeof keep, "%s", lnc->last_error());
    m->broken = true;
    nccl_destroy(c);
    return ln_error("%s", keep);
  }
  for (int i = 0; i < n; i++) {
    cudaStream_t s;
    if (stream_of(cuda_index(c, i), 0, &s) != 0) { nccl_destroy(c); return -1; }
    cudaError_t e = cudaEventCreateWithFlags(&m->fork[i], cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&m->join[i], cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaMalloc((void **)&m->scratch[i], sizeof(float));
    if (e == cudaSuccess) e = cudaMemsetAsync(m->scratch[i], 0, sizeof(float), s);
    if (e != cudaSuccess) { lnc_fail("comm_new: nccl events", e); nccl_destroy(c); return -1; }
  }
  return 0;
}

/* ---- collectives ------------------------------------------------------------------- */

static ncclDataType_t float_type(int dt) { return dt == LN_FLOAT64 ? ncclFloat64 : ncclFloat32; }
static ncclRedOp_t red_op(int op) {
  static const ncclRedOp_t ops[LN_NCOMM_OPS] = {ncclSum, ncclAvg, ncclMax, ncclMin};
  return ops[op];
}

/* what each local rank's call is; with a wire format (float16/bfloat16 for
 * float32 tensors, reductions only) the values travel in it: rounded into
 * h_in on the stream, reduced by NCCL in the wire type (each step rounded, as
 * the mpi backend's ring does), an average summed then divided in float32 and
 * rounded again (as local and mpi do), and widened back from h_out */
enum { K_ALLREDUCE, K_BROADCAST, K_REDUCE_SCATTER, K_ALLGATHER };
typedef struct {
  int kind, op, root, wire;
  ln_tensor *const *out, *const *in;
  uint16_t *h_in[LN_COMM_MAX_RANKS], *h_out[LN_COMM_MAX_RANKS];
} call_args;

static ncclResult_t issue(const ln_comm *c, const call_args *a, int i, cudaStream_t s) {
  ncclComm_t comm = impl_of(c)->comms[i];
  const ln_tensor *in = a->in[i], *out = a->out ? a->out[i] : in;
  bool w = a->wire >= 0;
  ncclDataType_t wt = a->wire == LN_BFLOAT16 ? ncclBfloat16 : ncclFloat16;
  ncclRedOp_t op = w && a->op == LN_COMM_AVG ? ncclSum : red_op(a->op);
  switch (a->kind) {
    case K_ALLREDUCE:
      if (w) return nc.allreduce(a->h_in[i], a->h_in[i], numel_of(in), wt, op, comm, s);
      return nc.allreduce(data_of(in), data_of(out), numel_of(in), float_type(in->dtype_id), op, comm, s);
    case K_REDUCE_SCATTER:
      if (w) return nc.reduce_scatter(a->h_in[i], a->h_out[i], numel_of(out), wt, op, comm, s);
      return nc.reduce_scatter(data_of(in), data_of(out), numel_of(out), float_type(in->dtype_id), op, comm, s);
    case K_BROADCAST:
      return nc.broadcast(data_of(in), data_of(out), numel_of(in) * dtype_bytes(in->dtype_id), ncclInt8, a->root,
                          comm, s);
    default:
      return nc.allgather(data_of(in), data_of(out), numel_of(in) * dtype_bytes(in->dtype_id), ncclInt8, comm, s);
  }
}

/* rank i's values into the wire format (its buffers from the stream's pool) */
static int wire_in(const ln_comm *c, call_args *a, int i, cudaStream_t s) {
  size_t n = numel_of(a->in[i]), m = a->kind == K_REDUCE_SCATTER ? numel_of(a->out[i]) : 0;
  cudaError_t e = cudaMallocAsync((void **)&a->h_in[i], n * sizeof(uint16_t), s);
  if (e == cudaSuccess && m) e = cudaMallocAsync((void **)&a->h_out[i], m * sizeof(uint16_t), s);
  if (e == cudaSuccess)
    e = (cudaError_t)lnc_to_wire((lnc_stream)s, a->h_in[i], data_of(a->in[i]), (int64_t)n, a->wire == LN_BFLOAT16);
  return e == cudaSuccess ? 0 : lnc_fail("wire format", e);
}

/* rank i's result back to float32, its buffers freed on the stream */
static int wire_out(const ln_comm *c, call_args *a, int i, cudaStream_t s, bool ok) {
  cudaError_t e = cudaSuccess;
  if (ok) {
    bool rs = a->kind == K_REDUCE_SCATTER;
    const ln_tensor *out = rs ? a->out[i] : a->in[i];
    e = (cudaError_t)lnc_from_wire((lnc_stream)s, data_of(out), rs ? a->h_out[i] : a->h_in[i],
                                   (int64_t)numel_of(out), a->wire == LN_BFLOAT16,
                                   a->op == LN_COMM_AVG ? (float)c->world : 0.0f);
  }
  if (a->h_in[i]) cudaFreeAsync(a->h_in[i], s);
  if (a->h_out[i]) cudaFreeAsync(a->h_out[i], s);
  a->h_in[i] = a->h_out[i] = NULL;
  return e == cudaSuccess ? 0 : lnc_fail("wire format", e);
}

/* one group: each local rank's call on its compute stream (which = 0), or on
 * its copy stream after the compute stream's work so far (which = 1) */
static int run(ln_comm *c, const char *fn, call_args *a, int which) {
  if (check_usable(c, fn) != 0) return -1;
  if (numel_of(a->in[0]) == 0) return 0;   /* (every rank has the same count: all skip) */
  nccl_impl *m = impl_of(c);
  cudaStream_t s[LN_COMM_MAX_RANKS];
  int rc = 0;
  for (int i = 0; i < c->nlocal; i++) {
    if (stream_of(cuda_index(c, i), which, &s[i]) != 0) { rc = -1; break; }
    if (which) {
      cudaStream_t comp;
      if (stream_of(cuda_index(c, i), 0, &comp) != 0) { rc = -1; break; }
      cudaError_t e = cudaEventRecord(m->fork[i], comp);
      if (e == cudaSuccess) e = cudaStreamWaitEvent(s[i], m->fork[i], 0);
      if (e != cudaSuccess) { rc = lnc_fail(fn, e); break; }
    }
    if (a->wire >= 0 && wire_in(c, a, i, s[i]) != 0) { rc = -1; break; }
  }
  ncclResult_t r = ncclSuccess;
  const char *call = "ncclGroupStart";
  if (rc == 0) {
    r = nc.group_start();
    if (r == ncclSuccess) call = "ncclGroupEnd";
    for (int i = 0; i < c->nlocal && r == ncclSuccess; i++) {
      r = issue(c, a, i, s[i]);
      if (r != ncclSuccess) call = a->kind == K_ALLREDUCE ? "ncclAllReduce" : a->kind == K_BROADCAST ? "ncclBroadcast"
                                 : a->kind == K_REDUCE_SCATTER ? "ncclReduceScatter" : "ncclAllGather";
    }
    if (strcmp(call, "ncclGroupStart") != 0) {
      ncclResult_t e = nc.group_end();
      if (r == ncclSuccess) r = e;
    }
  }
  if (a->wire >= 0)   /* (buffers made before a failure are freed too) */
    for (int i = 0; i < c->nlocal; i++)
      if ((a->h_in[i] || a->h_out[i]) && wire_out(c, a, i, s[i], rc == 0 && r == ncclSuccess) != 0 && rc == 0) rc = -1;
  lnc_restore_device();
  if (rc != 0) return -1;
  if (r != ncclSuccess) return nccl_fail(c, fn, call, r);
  if (which)   /* the copy stream may still read them after the caller frees them */
    for (int i = 0; i < c->nlocal; i++) {
      const ln_tensor *keep[2] = {a->in[i], a->out ? a->out[i] : NULL};
      if (lnc_hold_until_done(s[i], keep, 2) != 0) return -1;
    }
  return 0;
}

static int nccl_allreduce(ln_comm *c, ln_tensor *const *ts, int op, int wire) {
  call_args a = {K_ALLREDUCE, op, 0, wire, NULL, ts, {0}, {0}};
  return run(c, "allreduce", &a, 0);
}

static int nccl_allreduce_async(ln_comm *c, ln_tensor *const *ts, int op, int wire) {
  call_args a = {K_ALLREDUCE, op, 0, wire, NULL, ts, {0}, {0}};
  return run(c, "allreduce", &a, 1);
}

static int nccl_wait(ln_comm *c) {
  nccl_impl *m = impl_of(c);
  for (int i = 0; i < c->nlocal; i++) {
    cudaStream_t comp, copy;
    if (stream_of(cuda_index(c, i), 0, &comp) != 0 || stream_of(cuda_index(c, i), 1, &copy) != 0) return -1;
    cudaError_t e = cudaEventRecord(m->join[i], copy);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(comp, m->join[i], 0);
    if (e != cudaSuccess) return lnc_fail("comm_wait", e);
  }
  return check_usable(c, "comm_wait");
}

static int nccl_broadcast(ln_comm *c, ln_tensor *const *ts, int root) {
  call_args a = {K_BROADCAST, 0, root, -1, NULL, ts, {0}, {0}};
  return run(c, "broadcast", &a, 0);
}

static int nccl_reduce_scatter(ln_comm *c, ln_tensor *const *out, ln_tensor *const *in, int op, int wire) {
  call_args a = {K_REDUCE_SCATTER, op, 0, wire, out, in, {0}, {0}};
  return run(c, "reduce_scatter", &a, 0);
}

static int nccl_allgather(ln_comm *c, ln_tensor *const *out, ln_tensor *const *in) {
  call_args a = {K_ALLGATHER, 0, 0, -1, out, in, {0}, {0}};
  return run(c, "allgather", &a, 0);
}

static int nccl_barrier(ln_comm *c) {
  if (check_usable(c, "barrier") != 0) return -1;
  nccl_impl *m = impl_of(c);
  ncclResult_t r = nc.group_start();
  for (int i = 0; i < c->nlocal && r == ncclSuccess; i++) {
    cudaStream_t s;
    if (stream_of(cuda_index(c, i), 0, &s) != 0) { nc.group_end(); return -1; }
    r = nc.allreduce(m->scratch[i], m->scratch[i], 1, ncclFloat32, ncclSum, m->comms[i], s);
  }
  ncclResult_t e = nc.group_end();
  lnc_restore_device();
  if (r == ncclSuccess) r = e;
  return r == ncclSuccess ? 0 : nccl_fail(c, "barrier", "ncclAllReduce", r);
}

/* local rank of global rank g in this process, or -1 */
static int local_rank_of(const ln_comm *c, int g) {
  for (int i = 0; i < c->nlocal; i++)
    if (c->ranks[i] == g) return i;
  return -1;
}

/* one ncclSend (send) or ncclRecv with a rank of another process, on s */
static int p2p_remote(ln_comm *c, bool send, void *ptr, size_t nbytes, int peer, int local, cudaStream_t s) {
  ncclComm_t comm = impl_of(c)->comms[local];
  ncclResult_t r = nc.group_start();
  if (r == ncclSuccess) {
    r = send ? nc.send(ptr, nbytes, ncclInt8, peer, comm, s) : nc.recv(ptr, nbytes, ncclInt8, peer, comm, s);
    ncclResult_t e = nc.group_end();
    if (r == ncclSuccess) r = e;
  }
  lnc_restore_device();
  return r == ncclSuccess ? 0 : nccl_fail(c, send ? "send" : "recv", send ? "ncclSend" : "ncclRecv", r);
}

static int nccl_send(ln_comm *c, const ln_tensor *t, int local, int dst_rank) {
  if (check_usable(c, "send") != 0) return -1;
  nccl_impl *m = impl_of(c);
  size_t nbytes = numel_of(t) * dtype_bytes(t->dtype_id);
  cudaStream_t s;
  if (nbytes == 0) return 0;   /* (its receiver skips it too) */
  if (stream_of(cuda_index(c, local), 0, &s) != 0) return -1;
  if (local_rank_of(c, dst_rank) < 0)   /* another process posts the recv */
    return p2p_remote(c, true, data_of(t), nbytes, dst_rank, local, s);
  pending *p = calloc(1, sizeof *p);
  if (!p) return ln_error("send: out of host memory");
  p->src_local = local;
  p->dst_rank = dst_rank;
  p->nbytes = nbytes;
  cudaError_t e = cudaMallocAsync(&p->buf, nbytes ? nbytes : 1, s);
  if (e == cudaSuccess) e = cudaMemcpyAsync(p->buf, data_of(t), nbytes, cudaMemcpyDeviceToDevice, s);
  if (e != cudaSuccess) {
    if (p->buf) cudaFreeAsync(p->buf, s);
    free(p);
    return lnc_fail("send: staging buffer", e);
  }
  pending **tail = &m->sends;   /* oldest first: sends match receives in order */
  while (*tail) tail = &(*tail)->next;
  *tail = p;
  return 0;
}

static int nccl_recv(ln_comm *c, ln_tensor *t, int local, int src_rank) {
  if (check_usable(c, "recv") != 0) return -1;
  nccl_impl *m = impl_of(c);
  size_t nbytes = numel_of(t) * dtype_bytes(t->dtype_id);
  cudaStream_t s;
  if (nbytes == 0) return 0;   /* (its sender skipped it) */
  if (stream_of(cuda_index(c, local), 0, &s) != 0) return -1;
  int src_local = local_rank_of(c, src_rank);
  if (src_local < 0) return p2p_remote(c, false, data_of(t), nbytes, src_rank, local, s);
  pending **pp = &m->sends;
  while (*pp && !((*pp)->src_local == src_local && (*pp)->dst_rank == c->ranks[local])) pp = &(*pp)->next;
  pending *p = *pp;
  if (!p)
    return ln_error("recv: rank %d has posted no send to rank %d (in one process, call send before recv)",
                    src_rank + 1, c->ranks[local] + 1);
  if (p->nbytes != nbytes)
    return ln_error("recv: the tensor holds %zu bytes but rank %d sent %zu", nbytes, src_rank + 1, p->nbytes);
  *pp = p->next;
  cudaStream_t ss;
  if (stream_of(cuda_index(c, src_local), 0, &ss) != 0) { free(p); return -1; }
  ncclResult_t r = nc.group_start();
  if (r == ncclSuccess) r = nc.send(p->buf, nbytes, ncclInt8, c->ranks[local], m->comms[src_local], ss);
  if (r == ncclSuccess) r = nc.recv(data_of(t), nbytes, ncclInt8, src_rank, m->comms[local], s);
  ncclResult_t e = nc.group_end();
  if (r == ncclSuccess) r = e;
  cudaError_t fe = stream_of(cuda_index(c, src_local), 0, &ss) == 0 ? cudaFreeAsync(p->buf, ss) : cudaSuccess;
  lnc_restore_device();
  free(p);
  if (r != ncclSuccess) return nccl_fail(c, "recv", "ncclSend/ncclRecv", r);
  return fe == cudaSuccess ? 0 : lnc_fail("recv: staging buffer", fe);
}

static const ln_comm_backend nccl_backend = {
  .name = "nccl",
  .init = nccl_init,
  .destroy = nccl_destroy,
  .allreduce = nccl_allreduce,
  .allreduce_async = nccl_allreduce_async,
  .broadcast = nccl_broadcast,
  .reduce_scatter = nccl_reduce_scatter,
  .allgather = nccl_allgather,
  .send = nccl_send,
  .recv = nccl_recv,
  .barrier = nccl_barrier,
  .wait = nccl_wait,
};

static const ln_nccl_hooks hooks = {&nccl_backend, nccl_unique_id, nccl_version};
const ln_nccl_hooks *lnc_nccl_hooks(void) { return &hooks; }
