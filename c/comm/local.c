/* local.c -- the "local" collective backend: the device workers of this
 * process meet in shared memory.
 *
 * A collective call allocates one shared state (a `coll`) and enqueues a task
 * on every rank's stream. When a rank's worker reaches its task it works on
 * its own share and meets the others at barriers (a mutex, a condition
 * variable and a generation count):
 *
 *   allreduce (n ranks, N elements, rank r owns slice r = [N*r/n, N*(r+1)/n)):
 *     [wire: each rank rounds its buffer into its 16-bit staging buffer]
 *     barrier; rank r reduces slice r over all ranks into its own buffer
 *     (in rank order 0..n-1, so every element is computed once, the same way
 *     on every rank) [wire: and rounds the result into its staging buffer];
 *     barrier; rank r copies every other slice s from rank s; barrier.
 *   reduce_scatter: barrier; rank r reduces chunk r of all inputs; barrier.
 *   allgather / broadcast: barrier; each rank copies from the others; barrier.
 *
 * The last barrier keeps the buffers unchanged until every peer has read
 * them. A rank whose device holds an earlier error does not take part: its
 * task (launched with LN_TASK_ALWAYS) marks the collective aborted, which
 * wakes the others; they fail with a message naming that rank, and each
 * device reports it at its next synchronisation.
 *
 * send/recv: the send task copies the tensor into a staging buffer when it
 * runs (it never waits for the receiver); the recv task waits for that copy,
 * then copies out. Sends are matched to receives in order per (src, dst). */
#include "comm.h"
#include "../cpu/iter.h"   /* LN_SIMD */
#include <stdio.h>
#include <stdlib.h>

enum { K_ALLREDUCE, K_BROADCAST, K_REDUCE_SCATTER, K_ALLGATHER, K_BARRIER };
static const char *kind_names[] = {"allreduce", "broadcast", "reduce_scatter", "allgather", "barrier"};
enum { BLK = 2048, GRAIN = 32768 };

typedef struct coll {
  atomic_int refs;
  int kind, op, wire, dtype, n, root;
  int64_t numel;                        /* per-rank elements (in place) or chunk m */
  char *in[LN_COMM_MAX_RANKS], *out[LN_COMM_MAX_RANKS];
  uint16_t *wbuf[LN_COMM_MAX_RANKS];    /* staging in the wire format */
  ln_storage *wstore[LN_COMM_MAX_RANKS];
  int devices[LN_COMM_MAX_RANKS];
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int arrived, gen;
  bool aborted;
  char why[800];
} coll;

typedef struct { coll *c; int rank; } coll_args;

static void coll_release(coll *c) {
  if (atomic_fetch_sub(&c->refs, 1) != 1) return;
  for (int i = 0; i < c->n; i++) ln_storage_release(c->wstore[i]);
  pthread_mutex_destroy(&c->mu);
  pthread_cond_destroy(&c->cv);
  free(c);
}

static void coll_abort(coll *c, const char *why) {
  pthread_mutex_lock(&c->mu);
  if (!c->aborted) {
    c->aborted = true;
    snprintf(c->why, sizeof c->why, "%s", why);
  }
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
}

static int coll_fail(coll *c) {
  return ln_error("%s: aborted: %s", kind_names[c->kind], c->why);
}

static int coll_barrier(coll *c) {
  pthread_mutex_lock(&c->mu);
  bool passed = false;
  if (!c->aborted) {
    int g = c->gen;
    if (++c->arrived == c->n) {
      c->arrived = 0;
      c->gen++;
      pthread_cond_broadcast(&c->cv);
    } else {
      while (g == c->gen && !c->aborted) pthread_cond_wait(&c->cv, &c->mu);
    }
    passed = g != c->gen;
  }
  pthread_mutex_unlock(&c->mu);
  return passed ? 0 : coll_fail(c);
}

/* ---- reduction loops ------------------------------------------------------------ */
/* dst[i] = op over k of src[k][i] for i in [b, e); sources are float32,
 * float64 or 16-bit wire values; dst is float32/float64, and when wdst is set
 * the result is also rounded to the wire format (dst gets the rounded value). */

typedef struct {
  int n, op, dtype, wire;
  const char *src[LN_COMM_MAX_RANKS];   /* element 0 of each source */
  char *dst;
  uint16_t *wdst;
} reduce_ctx;

/* wire <-> float32 over a run of elements (vectorised; float16 through the
 * compiler's _Float16, which uses F16C where the CPU has it) */
LN_SIMD static void wire_load(float *o, const uint16_t *w, int64_t n, int wire) {
  if (wire == LN_BFLOAT16) {
    for (int64_t i = 0; i < n; i++) { uint32_t u = (uint32_t)w[i] << 16; memcpy(o + i, &u, 4); }
  } else {
#ifdef __FLT16_MAX__
    const _Float16 *h = (const _Float16 *)w;
    for (int64_t i = 0; i < n; i++) o[i] = (float)h[i];
#else
    for (int64_t i = 0; i < n; i++) o[i] = ln_half_to_float(w[i]);
#endif
  }
}

LN_SIMD static void wire_store(uint16_t *w, const float *x, int64_t n, int wire) {
  if (wire == LN_BFLOAT16) {
    for (int64_t i = 0; i < n; i++) w[i] = ln_float_to_bf16(x[i]);
  } else {
#ifdef __FLT16_MAX__
    _Float16 *h = (_Float16 *)w;
    for (int64_t i = 0; i < n; i++) h[i] = (_Float16)x[i];
#else
    for (int64_t i = 0; i < n; i++) w[i] = ln_float_to_half(x[i]);
#endif
  }
}

#define REDUCE_BLOCK(T, SRC_EXPR)                                                   \
  do {                                                                              \
    switch (c->op) {                                                                \
      case LN_COMM_MAX:                                                             \
        _Pragma("GCC ivdep") for (int64_t i = 0; i < len; i++) {                    \
          T b_ = (T)(SRC_EXPR); acc[i] = (b_ > acc[i] || b_ != b_) ? b_ : acc[i]; } \
        break;                                                                      \
      case LN_COMM_MIN:                                                             \
        _Pragma("GCC ivdep") for (int64_t i = 0; i < len; i++) {                    \
          T b_ = (T)(SRC_EXPR); acc[i] = (b_ < acc[i] || b_ != b_) ? b_ : acc[i]; } \
        break;                                                                      \
      default:                                                                      \
        _Pragma("GCC ivdep") for (int64_t i = 0; i < len; i++) acc[i] += (T)(SRC_EXPR); \
    }                                                                               \
  } while (0)

static void reduce_f32(void *p, int64_t b, int64_t e) {
  const reduce_ctx *c = p;
  float acc[BLK];
  float *dst = (float *)c->dst;
  for (int64_t s = b; s < e; s += BLK) {
    int64_t len = LN_MIN((int64_t)BLK, e - s);
    if (c->wire >= 0) {
      float x[BLK];
      wire_load(acc, (const uint16_t *)c->src[0] + s, len, c->wire);
      for (int k = 1; k < c->n; k++) {
        wire_load(x, (const uint16_t *)c->src[k] + s, len, c->wire);
        REDUCE_BLOCK(float, x[i]);
      }
    } else {
      memcpy(acc, (const float *)c->src[0] + s, (size_t)len * sizeof(float));
      for (int k = 1; k < c->n; k++) {
        const float *x = (const float *)c->src[k] + s;
        REDUCE_BLOCK(float, x[i]);
      }
    }
    if (c->op == LN_COMM_AVG) {
      float d = (float)c->n;
      for (int64_t i = 0; i < len; i++) acc[i] /= d;
    }
    if (c->wdst) {
      wire_store(c->wdst + s, acc, len, c->wire);
      wire_load(dst + s, c->wdst + s, len, c->wire);
    } else {
      memcpy(dst + s, acc, (size_t)len * sizeof(float));
    }
  }
}

static void reduce_f64(void *p, int64_t b, int64_t e) {
  const reduce_ctx *c = p;
  double acc[BLK];
  double *dst = (double *)c->dst;
  for (int64_t s = b; s < e; s += BLK) {
    int64_t len = LN_MIN((int64_t)BLK, e - s);
    memcpy(acc, (const double *)c->src[0] + s, (size_t)len * sizeof(double));
    for (int k = 1; k < c->n; k++) {
      const double *x = (const double *)c->src[k] + s;
      REDUCE_BLOCK(double, x[i]);
    }
    if (c->op == LN_COMM_AVG)
      for (int64_t i = 0; i < len; i++) acc[i] /= (double)c->n;
    memcpy(dst + s, acc, (size_t)len * sizeof(double));
  }
}

/* ---- copies and conversions ------------------------------------------------------ */

typedef struct { char *dst; const char *src; int wire; } copy_ctx;

static void copy_range(void *p, int64_t b, int64_t e) {   /* bytes */
  const copy_ctx *c = p;
  memcpy(c->dst + b, c->src + b, (size_t)(e - b));
}
static void parallel_memcpy(char *dst, const char *src, int64_t nbytes) {
  copy_ctx c = {dst, src, -1};
  ln_parallel_for(nbytes, (int64_t)1 << 20, copy_range, &c);
}

static void to_wire_range(void *p, int64_t b, int64_t e) {
  const copy_ctx *c = p;
  wire_store((uint16_t *)c->dst + b, (const float *)c->src + b, e - b, c->wire);
}
static void from_wire_range(void *p, int64_t b, int64_t e) {
  const copy_ctx *c = p;
  wire_load((float *)c->dst + b, (const uint16_t *)c->src + b, e - b, c->wire);
}

/* ---- the rank's part of each collective -------------------------------------------- */

static void reduce_slice(coll *c, int64_t src_off, int64_t len, char *dst, uint16_t *wdst) {
  reduce_ctx rc = {c->n, c->op, c->dtype, c->wire, {0}, dst, wdst};
  int es = ln_dtype_size(c->dtype);
  for (int k = 0; k < c->n; k++)
    rc.src[k] = c->wire >= 0 ? (const char *)(c->wbuf[k] + src_off) : c->in[k] + src_off * es;
  ln_parallel_for(len, GRAIN, c->dtype == LN_FLOAT64 ? reduce_f64 : reduce_f32, &rc);
}

static void stage_wire(coll *c, int r, int64_t numel) {
  copy_ctx cc = {(char *)c->wbuf[r], c->in[r], c->wire};
  ln_parallel_for(numel, GRAIN, to_wire_range, &cc);
}

static int run_allreduce(coll *c, int r) {
  int n = c->n, es = ln_dtype_size(c->dtype);
  int64_t N = c->numel, lo = N * r / n, hi = N * (r + 1) / n;
  if (c->wire >= 0) stage_wire(c, r, N);
  if (coll_barrier(c) != 0) return -1;
  reduce_slice(c, lo, hi - lo, c->in[r] + lo * es, c->wire >= 0 ? c->wbuf[r] + lo : NULL);
  if (coll_barrier(c) != 0) return -1;
  for (int s = 0; s < n; s++) {
    if (s == r) continue;
    int64_t slo = N * s / n, shi = N * (s + 1) / n;
    if (c->wire >= 0) {
      copy_ctx cc = {c->in[r] + slo * es, (const char *)(c->wbuf[s] + slo), c->wire};
      ln_parallel_for(shi - slo, GRAIN, from_wire_range, &cc);
    } else {
      parallel_memcpy(c->in[r] + slo * es, c->in[s] + slo * es, (shi - slo) * es);
    }
  }
  return coll_barrier(c);
}

static int run_reduce_scatter(coll *c, int r) {
  int64_t m = c->numel;
  if (c->wire >= 0) stage_wire(c, r, m * c->n);
  if (coll_barrier(c) != 0) return -1;
  reduce_slice(c, m * r, m, c->out[r], NULL);
  return coll_barrier(c);
}

static int run_allgather(coll *c, int r) {
  int64_t bytes = c->numel * ln_dtype_size(c->dtype);
  if (coll_barrier(c) != 0) return -1;
  for (int s = 0; s < c->n; s++) parallel_memcpy(c->out[r] + s * bytes, c->in[s], bytes);
  return coll_barrier(c);
}

static int run_broadcast(coll *c, int r) {
  if (coll_barrier(c) != 0) return -1;
  if (r != c->root) parallel_memcpy(c->in[r], c->in[c->root], c->numel * ln_dtype_size(c->dtype));
  return coll_barrier(c);
}

static int coll_task(void *p) {
  coll_args *a = p;
  coll *c = a->c;
  int r = a->rank, rc = 0;
  if (ln_stream_failed()) {
    char why[800];
    snprintf(why, sizeof why, "rank %d (cpu:%d) failed earlier: %s", r, c->devices[r], ln_stream_failure());
    coll_abort(c, why);
  } else {
    switch (c->kind) {
      case K_ALLREDUCE: rc = run_allreduce(c, r); break;
      case K_REDUCE_SCATTER: rc = run_reduce_scatter(c, r); break;
      case K_ALLGATHER: rc = run_allgather(c, r); break;
      case K_BROADCAST: rc = run_broadcast(c, r); break;
      default: rc = coll_barrier(c); break;
    }
  }
  coll_release(c);
  return rc;
}

/* ---- enqueueing ------------------------------------------------------------------- */

static coll *coll_new(ln_comm *cm, int kind, int op, int wire, int dtype, int64_t numel) {
  coll *c = calloc(1, sizeof *c);
  if (!c) return ln_error_null("%s: out of host memory", kind_names[kind]);
  c->kind = kind; c->op = op; c->wire = wire; c->dtype = dtype; c->n = cm->n; c->numel = numel;
  for (int i = 0; i < cm->n; i++) c->devices[i] = cm->devices[i];
  pthread_mutex_init(&c->mu, NULL);
  pthread_cond_init(&c->cv, NULL);
  atomic_store(&c->refs, cm->n);
  return c;
}

/* staging buffers of `numel` wire elements on every rank's device */
static int coll_alloc_wire(coll *c, int64_t numel) {
  for (int i = 0; i < c->n; i++) {
    c->wstore[i] = ln_storage_new(c->devices[i], (size_t)LN_MAX(numel, 1) * 2);
    if (!c->wstore[i]) return ln_error("%s: %s", kind_names[c->kind], ln_last_error());
    c->wbuf[i] = c->wstore[i]->data;
  }
  return 0;
}

/* Enqueue rank r's task on each device (on its comm stream, after the
 * compute stream's work so far, when `comm`); keep[r] holds its tensors. */
static int coll_launch_on(coll *c, ln_tensor *const *a, ln_tensor *const *b, bool comm) {
  /* once the last task is queued the workers may finish and free c: read
   * nothing from it after that */
  int n = c->n, kind = c->kind;
  for (int r = 0; r < n; r++) {
    coll_args args = {c, r};
    const ln_tensor *keep[2] = {a ? a[r] : NULL, b ? b[r] : NULL};
    int dev = c->devices[r];
    int rc = comm ? ln_comm_stream_wait_compute(dev) : 0;
    if (rc == 0)
      rc = comm ? ln_launch_comm(dev, kind_names[kind], coll_task, &args, sizeof args, keep, 2, LN_TASK_ALWAYS)
                : ln_launch_flags(dev, kind_names[kind], coll_task, &args, sizeof args, keep, 2, LN_TASK_ALWAYS);
    if (rc != 0) {
      /* ranks before r are queued (and hold references, so c lives): abort
       * them, then drop the references of the ranks not queued */
      char why[800];
      snprintf(why, sizeof why, "could not enqueue rank %d (cpu:%d): %s", r, dev, ln_last_error());
      coll_abort(c, why);
      for (int k = r; k < n; k++) coll_release(c);
      return ln_error("%s: %s", kind_names[kind], why);
    }
  }
  return 0;
}

static int coll_launch(coll *c, ln_tensor *const *a, ln_tensor *const *b) {
  return coll_launch_on(c, a, b, false);
}

static void coll_discard(coll *c) {
  atomic_store(&c->refs, 1);
  coll_release(c);
}

static int local_allreduce(ln_comm *cm, ln_tensor *const *ts, int op, int wire) {
  coll *c = coll_new(cm, K_ALLREDUCE, op, wire, ts[0]->dtype_id, ln_numel(ts[0]));
  if (!c) return -1;
  for (int i = 0; i < cm->n; i++) c->in[i] = ln_data_ptr(ts[i]);
  if (wire >= 0 && coll_alloc_wire(c, c->numel) != 0) { coll_discard(c); return -1; }
  return coll_launch(c, ts, NULL);
}

/* on the comm streams; the single inline device has none: the plain path */
static int local_allreduce_async(ln_comm *cm, ln_tensor *const *ts, int op, int wire) {
  for (int i = 0; i < cm->n; i++)
    if (!ln_device_has_comm_stream(cm->devices[i])) return local_allreduce(cm, ts, op, wire);
  coll *c = coll_new(cm, K_ALLREDUCE, op, wire, ts[0]->dtype_id, ln_numel(ts[0]));
  if (!c) return -1;
  for (int i = 0; i < cm->n; i++) c->in[i] = ln_data_ptr(ts[i]);
  if (wire >= 0 && coll_alloc_wire(c, c->numel) != 0) { coll_discard(c); return -1; }
  return coll_launch_on(c, ts, NULL, true);
}

static int local_broadcast(ln_comm *cm, ln_tensor *const *ts, int root) {
  coll *c = coll_new(cm, K_BROADCAST, 0, -1, ts[0]->dtype_id, ln_numel(ts[0]));
  if (!c) return -1;
  c->root = root;
  for (int i = 0; i < cm->n; i++) c->in[i] = ln_data_ptr(ts[i]);
  return coll_launch(c, ts, NULL);
}

static int local_reduce_scatter(ln_comm *cm, ln_tensor *const *out, ln_tensor *const *in, int op, int wire) {
  coll *c = coll_new(cm, K_REDUCE_SCATTER, op, wire, in[0]->dtype_id, ln_numel(out[0]));
  if (!c) return -1;
  for (int i = 0; i < cm->n; i++) { c->in[i] = ln_data_ptr(in[i]); c->out[i] = ln_data_ptr(out[i]); }
  if (wire >= 0 && coll_alloc_wire(c, c->numel * cm->n) != 0) { coll_discard(c); return -1; }
  return coll_launch(c, out, in);
}

static int local_allgather(ln_comm *cm, ln_tensor *const *out, ln_tensor *const *in) {
  coll *c = coll_new(cm, K_ALLGATHER, 0, -1, in[0]->dtype_id, ln_numel(in[0]));
  if (!c) return -1;
  for (int i = 0; i < cm->n; i++) { c->in[i] = ln_data_ptr(in[i]); c->out[i] = ln_data_ptr(out[i]); }
  return coll_launch(c, out, in);
}

static int local_barrier(ln_comm *cm) {
  coll *c = coll_new(cm, K_BARRIER, 0, -1, LN_FLOAT32, 0);
  if (!c) return -1;
  return coll_launch(c, NULL, NULL);
}

/* ---- send / recv ------------------------------------------------------------------- */

typedef struct msg {
  atomic_int refs;
  ln_storage *stage;
  size_t nbytes;
  int64_t numel;
  int dtype, src_rank, src_dev;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int state;                /* 0 pending, 1 ready, 2 aborted */
  char why[800];
  struct msg *next;
} msg;

typedef struct { msg **head, **tail; } local_impl;   /* n*n queues, [src*n + dst] */
typedef struct { msg *m; char *data; } msg_args;

static void msg_release(msg *m) {
  if (atomic_fetch_sub(&m->refs, 1) != 1) return;
  ln_storage_release(m->stage);
  pthread_mutex_destroy(&m->mu);
  pthread_cond_destroy(&m->cv);
  free(m);
}

static void msg_set(msg *m, int state, const char *why) {
  pthread_mutex_lock(&m->mu);
  m->state = state;
  if (why) snprintf(m->why, sizeof m->why, "%s", why);
  pthread_cond_broadcast(&m->cv);
  pthread_mutex_unlock(&m->mu);
}

static int send_task(void *p) {
  msg_args *a = p;
  msg *m = a->m;
  if (ln_stream_failed()) msg_set(m, 2, ln_stream_failure());
  else {
    if (m->nbytes) parallel_memcpy(m->stage->data, a->data, (int64_t)m->nbytes);
    msg_set(m, 1, NULL);
  }
  msg_release(m);
  return 0;
}

static int recv_task(void *p) {
  msg_args *a = p;
  msg *m = a->m;
  int rc = 0;
  if (!ln_stream_failed()) {
    pthread_mutex_lock(&m->mu);
    while (m->state == 0) pthread_cond_wait(&m->cv, &m->mu);
    pthread_mutex_unlock(&m->mu);
    if (m->state == 2)
      rc = ln_error("recv: aborted: sender rank %d (cpu:%d) failed earlier: %s", m->src_rank, m->src_dev, m->why);
    else if (m->nbytes)
      parallel_memcpy(a->data, m->stage->data, (int64_t)m->nbytes);
  }
  msg_release(m);
  return rc;
}

static int local_send(ln_comm *cm, const ln_tensor *t, int rank, int dst) {
  local_impl *li = cm->impl;
  msg *m = calloc(1, sizeof *m);
  if (!m) return ln_error("send: out of host memory");
  m->numel = ln_numel(t);
  m->dtype = t->dtype_id;
  m->nbytes = (size_t)m->numel * ln_dtype_size(t->dtype_id);
  m->src_rank = rank;
  m->src_dev = cm->devices[rank];
  pthread_mutex_init(&m->mu, NULL);
  pthread_cond_init(&m->cv, NULL);
  atomic_store(&m->refs, 2);         /* the queue (then the recv task) and the send task */
  m->stage = ln_storage_new(cm->devices[rank], m->nbytes);
  if (!m->stage) {
    char err[600];
    snprintf(err, sizeof err, "%s", ln_last_error());
    atomic_store(&m->refs, 1); msg_release(m);
    return ln_error("send: %s", err);
  }
  msg_args args = {m, ln_data_ptr(t)};
  const ln_tensor *keep[1] = {t};
  if (ln_launch_flags(cm->devices[rank], "send", send_task, &args, sizeof args, keep, 1, LN_TASK_ALWAYS) != 0) {
    atomic_store(&m->refs, 1); msg_release(m);
    return -1;
  }
  int q = rank * cm->n + dst;
  if (li->tail[q]) li->tail[q]->next = m; else li->head[q] = m;
  li->tail[q] = m;
  return 0;
}

static int local_recv(ln_comm *cm, ln_tensor *t, int rank, int src) {
  local_impl *li = cm->impl;
  int q = src * cm->n + rank;
  msg *m = li->head[q];
  if (!m)
    return ln_error("recv: no send from rank %d (cpu:%d) to rank %d (cpu:%d) is waiting; call send first",
                    src, cm->devices[src], rank, cm->devices[rank]);
  if (m->numel != ln_numel(t) || m->dtype != t->dtype_id)
    return ln_error("recv: the send from rank %d has %lld %s elements, the receiving tensor %lld %s",
                    src, (long long)m->numel, ln_dtype_name(m->dtype), (long long)ln_numel(t),
                    ln_dtype_name(t->dtype_id));
  msg_args args = {m, ln_data_ptr(t)};
  const ln_tensor *keep[1] = {t};
  msg *next = m->next;   /* the queue's reference passes to the recv task, which may free m */
  if (ln_launch_flags(cm->devices[rank], "recv", recv_task, &args, sizeof args, keep, 1, LN_TASK_ALWAYS) != 0)
    return -1;
  li->head[q] = next;
  if (!next) li->tail[q] = NULL;
  return 0;
}

/* ---- the table ----------------------------------------------------------------------- */

static int local_init(ln_comm *cm) {
  local_impl *li = calloc(1, sizeof *li);
  if (li) {
    li->head = calloc((size_t)cm->n * cm->n, sizeof *li->head);
    li->tail = calloc((size_t)cm->n * cm->n, sizeof *li->tail);
  }
  if (!li || !li->head || !li->tail) {
    if (li) { free(li->head); free(li->tail); free(li); }
    return ln_error("comm_new: out of host memory");
  }
  cm->impl = li;
  return 0;
}

static void local_destroy(ln_comm *cm) {
  local_impl *li = cm->impl;
  for (int q = 0; q < cm->n * cm->n; q++)
    for (msg *m = li->head[q], *next; m; m = next) { next = m->next; msg_release(m); }
  free(li->head);
  free(li->tail);
  free(li);
}

const ln_comm_backend ln_comm_local_backend = {
  .name = "local",
  .init = local_init,
  .destroy = local_destroy,
  .allreduce = local_allreduce,
  .allreduce_async = local_allreduce_async,
  .broadcast = local_broadcast,
  .reduce_scatter = local_reduce_scatter,
  .allgather = local_allgather,
  .send = local_send,
  .recv = local_recv,
  .barrier = local_barrier,
};
