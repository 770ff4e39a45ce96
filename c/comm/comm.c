/* comm.c -- communicator objects and the front ends of the collectives:
 * argument checks on the calling thread, then the backend's entry point. */
#include "comm.h"
#include "../core/cuda_api.h"   /* ln_cuda_load, device types */
#include <stdio.h>
#include <stdlib.h>

static const char *op_names[] = {"sum", "avg", "max", "min"};

/* the nccl hooks, or NULL with an error naming fn and why they are missing */
static const ln_nccl_hooks *nccl_of(const char *fn) {
  const ln_nccl_hooks *h = ln_cuda_nccl_hooks();
  if (!h) ln_error("%s: backend 'nccl' needs the CUDA backend, which is not available (%s)", fn, ln_cuda_reason());
  return h;
}

static const ln_comm_backend *backend_of(const char *name) {
  if (!name || !*name || !strcmp(name, "local")) return &ln_comm_local_backend;
  if (!strcmp(name, "mpi")) return &ln_comm_mpi_backend;   /* loads liblunet_mpi.so on init */
  if (!strcmp(name, "nccl")) {   /* in liblunet_cuda.so; loads NCCL on init */
    const ln_nccl_hooks *h = nccl_of("comm_new");
    return h ? h->backend : NULL;
  }
  return ln_error_null("comm_new: unknown backend '%s' (available: local, mpi, nccl)", name);
}

int ln_nccl_version(void) {
  const ln_nccl_hooks *h = nccl_of("nccl_version");
  return h ? h->version() : -1;
}

int ln_nccl_unique_id(char *hex, size_t n) {
  const ln_nccl_hooks *h = nccl_of("nccl_unique_id");
  return h ? h->unique_id(hex, n) : -1;
}

ln_comm *ln_comm_create(const ln_comm_config *cfg) {
  if (!cfg) return ln_error_null("comm_new: configuration is NULL");
  const ln_comm_backend *be = backend_of(cfg->backend);
  if (!be) return NULL;
  const ln_nccl_hooks *hn = ln_cuda_nccl_hooks();
  const ln_comm_backend *h_nccl = hn ? hn->backend : NULL;
  int n = cfg->nlocal;
  if (n < 1 || n > LN_COMM_MAX_RANKS)
    return ln_error_null("comm_new: need 1..%d devices, got %d", LN_COMM_MAX_RANKS, n);
  if (!cfg->devices) return ln_error_null("comm_new: device list is NULL");
  if (cfg->world_size < 0) return ln_error_null("comm_new: world size %d is negative", cfg->world_size);
  for (int i = 0; i < n; i++) {
    int d = cfg->devices[i];
    if (!ln_device_valid(d)) {
      if (d >= LN_CUDA_BASE)
        return ln_error_null("comm_new: device %d is cuda:%d, not available (%s)", i + 1, d - LN_CUDA_BASE,
                             ln_cuda_reason());
      return ln_error_null("comm_new: device %d is cpu:%d, which does not exist (%d CPU devices)",
                           i + 1, d, ln_cpu_device_count());
    }
    bool gpu = ln_device_type(d) == LN_TYPE_CUDA;
    if (gpu && be != h_nccl)   /* (local and mpi read host memory) */
      return ln_error_null("comm_new: device %d is cuda:%d; backend '%s' takes CPU tensors only, GPU tensors "
                           "need backend 'nccl'", i + 1, ln_device_index(d), be->name);
    if (!gpu && be == h_nccl)
    {
      char dev[32];
      return ln_error_null("comm_new: device %d is %s; backend 'nccl' takes cuda devices only (CPU "
                           "tensors: 'local' or 'mpi')", i + 1, ln_device_str(dev, sizeof dev, d));
    }
    for (int j = 0; j < i; j++)
      if (cfg->devices[j] == d)
        return ln_error_null("comm_new: %s:%d is listed twice (devices %d and %d); a device can "
                             "hold only one rank", gpu ? "cuda" : "cpu", ln_device_index(d), j + 1, i + 1);
  }
  int world = cfg->world_size ? cfg->world_size : n;
  if (cfg->ranks) {
    for (int i = 0; i < n; i++) {
      if (cfg->ranks[i] < 0 || cfg->ranks[i] >= world)
        return ln_error_null("comm_new: rank %d of device %d is out of range 0..%d", cfg->ranks[i], i + 1, world - 1);
      for (int j = 0; j < i; j++)
        if (cfg->ranks[j] == cfg->ranks[i])
          return ln_error_null("comm_new: rank %d is given twice (devices %d and %d)", cfg->ranks[i], j + 1, i + 1);
    }
  } else if (n > world) {
    return ln_error_null("comm_new: %d devices for a world of %d ranks", n, world);
  }
  ln_comm *c = calloc(1, sizeof *c);
  if (!c) return ln_error_null("comm_new: out of host memory");
  c->be = be;
  c->world = world;
  c->nlocal = n;
  for (int i = 0; i < n; i++) {
    c->devices[i] = cfg->devices[i];
    c->ranks[i] = cfg->ranks ? cfg->ranks[i] : i;
  }
  atomic_store(&c->refcount, 1);
  if (be->init(c, cfg) != 0) { free(c); return NULL; }
  return c;
}

ln_comm *ln_comm_new(int n, const int *devices, const char *backend) {
  ln_comm_config cfg = {backend, 0, n, NULL, devices, NULL};
  return ln_comm_create(&cfg);
}

void ln_comm_retain(ln_comm *c) { atomic_fetch_add(&c->refcount, 1); }
void ln_comm_release(ln_comm *c) {
  if (!c || atomic_fetch_sub(&c->refcount, 1) != 1) return;
  c->be->destroy(c);
  free(c);
}
void ln_comm_free(ln_comm *c) { ln_comm_release(c); }

int ln_comm_size(const ln_comm *c) { return c ? c->world : ln_error("comm_size: communicator is NULL"); }
int ln_comm_local_size(const ln_comm *c) {
  return c ? c->nlocal : ln_error("comm_local_size: communicator is NULL");
}
int ln_comm_rank(const ln_comm *c, int local) {
  if (!c) return ln_error("comm_rank: communicator is NULL");
  if (local < 0 || local >= c->nlocal)
    return ln_error("comm_rank: local rank %d out of range 0..%d", local, c->nlocal - 1);
  return c->ranks[local];
}
int ln_comm_device(const ln_comm *c, int local) {
  if (!c) return ln_error("comm_device: communicator is NULL");
  if (local < 0 || local >= c->nlocal)
    return ln_error("comm_device: rank %d out of range 0..%d", local, c->nlocal - 1);
  return c->devices[local];
}
const char *ln_comm_backend_name(const ln_comm *c) { return c ? c->be->name : ""; }

int ln_comm_set_site(ln_comm *c, const char *site) {
  if (!c) return ln_error("comm_set_site: communicator is NULL");
  snprintf(c->site, sizeof c->site, "%s", site ? site : "");
  return 0;
}

int ln_comm_meet_stats(ln_comm *c, int64_t out[2]) {
  if (!c || !out) return ln_error("comm_meet_stats: communicator or output is NULL");
  out[0] = atomic_load(&c->met_slept);
  out[1] = atomic_load(&c->met_awake);
  return 0;
}

/* ---- checks ------------------------------------------------------------------ */

static int check_list(const char *fn, const ln_comm *c, ln_tensor *const *ts, const char *what) {
  if (!c) return ln_error("%s: communicator is NULL", fn);
  if (!ts) return ln_error("%s: %s list is NULL", fn, what);
  for (int i = 0; i < c->nlocal; i++) {
    char name[64];
    snprintf(name, sizeof name, "%s %d", what, i + 1);
    if (ln_check_tensor(fn, ts[i], name) != 0) return -1;
    if (ts[i]->device_id != c->devices[i]) {
      char d1[32], d2[32];
      return ln_error("%s: %s is on %s, but rank %d of the communicator is %s", fn, name,
                      ln_device_str(d1, sizeof d1, ts[i]->device_id), c->ranks[i],
                      ln_device_str(d2, sizeof d2, c->devices[i]));
    }
    if (!ln_is_contiguous(ts[i])) return ln_error("%s: %s must be contiguous; call contiguous() first", fn, name);
    if (ts[i]->dtype_id != ts[0]->dtype_id)
      return ln_error("%s: %s is %s but %s 1 is %s; all ranks need one dtype", fn, name,
                      ln_dtype_name(ts[i]->dtype_id), what, ln_dtype_name(ts[0]->dtype_id));
  }
  return 0;
}

static int check_same_shapes(const char *fn, const ln_comm *c, ln_tensor *const *ts, const char *what) {
  for (int i = 1; i < c->nlocal; i++) {
    bool same = ts[i]->ndim == ts[0]->ndim;
    for (int d = 0; same && d < ts[0]->ndim; d++) same = ts[i]->shape[d] == ts[0]->shape[d];
    if (!same) {
      char b1[160], b2[160];
      return ln_error("%s: %s %d has shape %s but %s 1 has %s; all ranks need one shape", fn, what,
                      i + 1, ln_shape_str(b1, sizeof b1, ts[i]->ndim, ts[i]->shape), what,
                      ln_shape_str(b2, sizeof b2, ts[0]->ndim, ts[0]->shape));
    }
  }
  return 0;
}

static int check_reduce(const char *fn, const ln_tensor *t, int op, int wire) {
  if (op < 0 || op >= LN_NCOMM_OPS) return ln_error("%s: invalid op %d (sum, avg, max, min)", fn, op);
  if (t->dtype_id != LN_FLOAT32 && t->dtype_id != LN_FLOAT64)
    return ln_error("%s: %s needs float32 or float64 tensors, got %s", fn, op_names[op],
                    ln_dtype_name(t->dtype_id));
  if (wire < 0 || wire == t->dtype_id) return 0;
  if (wire != LN_FLOAT16 && wire != LN_BFLOAT16)
    return ln_error("%s: wire format must be float16 or bfloat16, got %s", fn,
                    wire < LN_NDTYPES ? ln_dtype_name(wire) : "an invalid dtype");
  if (t->dtype_id != LN_FLOAT32)
    return ln_error("%s: %s compression needs float32 tensors, got %s", fn, ln_dtype_name(wire),
                    ln_dtype_name(t->dtype_id));
  return 0;
}

/* ---- front ends ---------------------------------------------------------------- */

int ln_comm_allreduce(ln_comm *c, ln_tensor *const *ts, int op, int wire) {
  const char *fn = "allreduce";
  if (check_list(fn, c, ts, "tensor") != 0 || check_same_shapes(fn, c, ts, "tensor") != 0 ||
      check_reduce(fn, ts[0], op, wire) != 0)
    return -1;
  if (wire == ts[0]->dtype_id) wire = -1;
  return c->be->allreduce(c, ts, op, wire);
}

int ln_comm_allreduce_async(ln_comm *c, ln_tensor *const *ts, int op, int wire) {
  const char *fn = "allreduce";
  if (check_list(fn, c, ts, "tensor") != 0 || check_same_shapes(fn, c, ts, "tensor") != 0 ||
      check_reduce(fn, ts[0], op, wire) != 0)
    return -1;
  if (wire == ts[0]->dtype_id) wire = -1;
  return c->be->allreduce_async ? c->be->allreduce_async(c, ts, op, wire) : c->be->allreduce(c, ts, op, wire);
}

int ln_comm_wait(ln_comm *c) {
  if (!c) return ln_error("comm_wait: communicator is NULL");
  for (int i = 0; i < c->nlocal; i++)
    if (ln_stream_wait_comm(c->devices[i]) != 0) return -1;
  return c->be->wait ? c->be->wait(c) : 0;
}

int ln_comm_broadcast(ln_comm *c, ln_tensor *const *ts, int root) {
  const char *fn = "broadcast";
  if (check_list(fn, c, ts, "tensor") != 0 || check_same_shapes(fn, c, ts, "tensor") != 0) return -1;
  if (root < 0 || root >= c->world) return ln_error("broadcast: root rank %d out of range 0..%d", root, c->world - 1);
  return c->be->broadcast(c, ts, root);
}

int ln_comm_reduce_scatter(ln_comm *c, ln_tensor *const *out, ln_tensor *const *in, int op, int wire) {
  const char *fn = "reduce_scatter";
  if (check_list(fn, c, in, "input") != 0 || check_same_shapes(fn, c, in, "input") != 0 ||
      check_list(fn, c, out, "output") != 0 || check_same_shapes(fn, c, out, "output") != 0 ||
      check_reduce(fn, in[0], op, wire) != 0)
    return -1;
  if (out[0]->dtype_id != in[0]->dtype_id)
    return ln_error("reduce_scatter: outputs are %s but inputs are %s", ln_dtype_name(out[0]->dtype_id),
                    ln_dtype_name(in[0]->dtype_id));
  int64_t m = ln_numel(out[0]), nin = ln_numel(in[0]);
  if (nin / c->world != m || nin % c->world != 0)
    return ln_error("reduce_scatter: each input needs %d x %lld = %lld elements (ranks x output), got %lld",
                    c->world, (long long)m, (long long)m * c->world, (long long)nin);
  for (int i = 0; i < c->nlocal; i++)
    if (ln_same_storage(out[i], in[i]))
      return ln_error("reduce_scatter: output %d shares storage with input %d", i + 1, i + 1);
  if (wire == in[0]->dtype_id) wire = -1;
  return c->be->reduce_scatter(c, out, in, op, wire);
}

int ln_comm_allgather(ln_comm *c, ln_tensor *const *out, ln_tensor *const *in) {
  const char *fn = "allgather";
  if (check_list(fn, c, in, "input") != 0 || check_same_shapes(fn, c, in, "input") != 0 ||
      check_list(fn, c, out, "output") != 0 || check_same_shapes(fn, c, out, "output") != 0)
    return -1;
  if (out[0]->dtype_id != in[0]->dtype_id)
    return ln_error("allgather: outputs are %s but inputs are %s", ln_dtype_name(out[0]->dtype_id),
                    ln_dtype_name(in[0]->dtype_id));
  int64_t m = ln_numel(in[0]), nout = ln_numel(out[0]);
  if (nout / c->world != m || nout % c->world != 0)
    return ln_error("allgather: each output needs %d x %lld = %lld elements (ranks x input), got %lld",
                    c->world, (long long)m, (long long)m * c->world, (long long)nout);
  for (int i = 0; i < c->nlocal; i++)
    if (ln_same_storage(out[i], in[i]))
      return ln_error("allgather: output %d shares storage with input %d", i + 1, i + 1);
  return c->be->allgather(c, out, in);
}

/* the local rank on t's device */
static int local_of(const char *fn, const ln_comm *c, const ln_tensor *t) {
  for (int i = 0; i < c->nlocal; i++)
    if (c->devices[i] == t->device_id) return i;
  char dev[32];
  return ln_error("%s: the tensor is on %s, which is not in the communicator", fn,
                  ln_device_str(dev, sizeof dev, t->device_id));
}

int ln_comm_send(ln_comm *c, const ln_tensor *t, int dst_rank) {
  if (!c) return ln_error("send: communicator is NULL");
  if (ln_check_tensor("send", t, "tensor") != 0) return -1;
  int r = local_of("send", c, t);
  if (r < 0) return -1;
  if (dst_rank < 0 || dst_rank >= c->world)
    return ln_error("send: destination rank %d out of range 0..%d", dst_rank, c->world - 1);
  if (!ln_is_contiguous(t)) return ln_error("send: tensor must be contiguous; call contiguous() first");
  return c->be->send(c, t, r, dst_rank);
}

int ln_comm_recv(ln_comm *c, ln_tensor *t, int src_rank) {
  if (!c) return ln_error("recv: communicator is NULL");
  if (ln_check_tensor("recv", t, "tensor") != 0) return -1;
  int r = local_of("recv", c, t);
  if (r < 0) return -1;
  if (src_rank < 0 || src_rank >= c->world)
    return ln_error("recv: source rank %d out of range 0..%d", src_rank, c->world - 1);
  if (!ln_is_contiguous(t)) return ln_error("recv: tensor must be contiguous; call contiguous() first");
  return c->be->recv(c, t, r, src_rank);
}

int ln_comm_barrier(ln_comm *c) {
  if (!c) return ln_error("barrier: communicator is NULL");
  return c->be->barrier(c);
}
