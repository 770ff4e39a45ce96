/* local.c -- the "local" collective backend: the device workers of this
 * process meet in shared memory.
 *
 * A collective call allocates one shared state (a `coll`) and enqueues a task
 * on every rank's stream. When a rank's worker reaches its task it works on
 * its own share and meets the others at barriers (a mutex, a condition
 * variable and a generation count):
 *
 *   allreduce (n ranks, N elements, rank r owns the contiguous chunk
 *   [lo_r, lo_{r+1}), lo_r = N*r/n rounded down to 16 elements so that in
 *   aligned buffers no two ranks write into one cache line):
 *     barrier (every peer's buffer is ready); rank r streams through its
 *     chunk once, in blocks that stay in L1: it reads the block of every
 *     rank's buffer, reduces them in rank order 0..n-1 (so each element is
 *     computed once, the same way, and the ranks end bit-identical) and
 *     writes the result into every rank's buffer; barrier (no rank's stream
 *     goes on, or frees its buffer, while peers still write into it).
 *     Each buffer is read once and written once: with 2 ranks each worker
 *     reads and writes as many bytes as a memcpy of the whole buffer, and
 *     both workers stream at once. (Plain stores: every line written was
 *     just read, so it is in cache and costs no read-for-ownership.)
 *     Small allreduces (up to SMALL_ALLREDUCE_BYTES over all ranks) take one
 *     barrier instead: its last rank to arrive reduces the whole buffer into
 *     every rank's while the others wait in it (one thread wake-up, not two).
 *     A rank early at a barrier spins briefly (SPIN_S) before it sleeps; on
 *     the compute streams it sleeps only until its late peers near their
 *     part, then spins to meet them awake (NEAR_TASKS, below).
 *     With a wire format (float16/bfloat16) the values are rounded as they
 *     would travel: each rank's input is rounded, the reduction is done in
 *     float32 and its result rounded again; shared memory needs no staging
 *     buffer for that.
 *   reduce_scatter: barrier; rank r reduces chunk r of all inputs into its
 *     output (with non-temporal stores beyond the cache size); barrier.
 *   allgather / broadcast: barrier; each rank copies from the others; barrier.
 *
 * The last barrier keeps the buffers unchanged until every peer has read
 * them. A rank whose device holds an earlier error does not take part: its
 * task (launched with LN_TASK_ALWAYS) marks the collective aborted, which
 * wakes the others; they fail with a message naming that rank, as part of
 * that rank's failure (ln_stream_fail_from): it is raised in Lua once.
 *
 * send/recv: the send task copies the tensor into a staging buffer when it
 * runs (it never waits for the receiver); the recv task waits for that copy,
 * then copies out. Sends are matched to receives in order per (src, dst). */
#include "comm.h"
#include "lunet_internal.h"   /* ln_cpu_busy_threads */
#include "../core/simd.h"   /* LN_SIMD */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

enum { K_ALLREDUCE, K_BROADCAST, K_REDUCE_SCATTER, K_ALLGATHER, K_BARRIER };
static const char *kind_names[] = {"allreduce", "broadcast", "reduce_scatter", "allgather", "barrier"};
enum { BLK = 2048, GRAIN = 32768 };

typedef struct coll {
  atomic_int refs;
  ln_comm *cms[LN_COMM_MAX_RANKS];      /* the group of each rank that joined (held: meeting statistics) */
  int kind, op, wire, dtype, n, root;
  int64_t numel;                        /* per-rank elements (in place) or chunk m */
  bool nt;                              /* non-temporal stores (buffers beyond the cache) */
  char *in[LN_COMM_MAX_RANKS], *out[LN_COMM_MAX_RANKS];
  int devices[LN_COMM_MAX_RANKS];
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int arrived, gen;
  atomic_int gen_seen;                  /* gen, readable without mu (barrier spin) */
  atomic_bool aborted_seen;             /* aborted, readable without mu */
  atomic_bool here[LN_COMM_MAX_RANKS];  /* rank r's task has started */
  _Atomic int64_t seq[LN_COMM_MAX_RANKS]; /* its position on a compute stream (-1: none) */
  bool aborted;
  char why[800];
  int64_t cause;                        /* the failure that aborted it (ln_stream_fail_from) */
} coll;

typedef struct { coll *c; int rank; } coll_args;

static void coll_release(coll *c) {
  if (atomic_fetch_sub(&c->refs, 1) != 1) return;
  pthread_mutex_destroy(&c->mu);
  pthread_cond_destroy(&c->cv);
  for (int r = 0; r < c->n; r++) ln_comm_release(c->cms[r]);
  free(c);
}

static void coll_abort(coll *c, const char *why) {
  pthread_mutex_lock(&c->mu);
  if (!c->aborted) {
    c->aborted = true;
    snprintf(c->why, sizeof c->why, "%s", why);
    c->cause = ln_stream_failure_root();
    atomic_store(&c->aborted_seen, true);
  }
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
}

static int coll_fail(coll *c) {
  ln_stream_fail_from(c->cause);
  return ln_error("%s: aborted: %s", kind_names[c->kind], c->why);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A rank that arrives before the others spins up to SPIN_S before it sleeps
 * on the condition variable: ranks of a small collective arrive within
 * microseconds of each other, and waking a sleeping thread costs tens of
 * microseconds (more in a VM), most of a small all-reduce's time. */
#define SPIN_S 20e-6

/* Ranks of a collective on the compute streams (DataParallel's last gradient
 * bucket of a step) arrive milliseconds apart: the early one sleeps, and its
 * wake-up (60-120 us here) was all of the time that all-reduce left after
 * backward. So an early rank that knows where its missing peers' tasks sit on
 * their streams sleeps only until each has begun the task NEAR_TASKS before
 * its own (the last layer's backward: the bucket copy and the collective
 * follow it), then spins up to NEAR_SPIN_S before it sleeps again: at most a
 * couple of milliseconds of a core whose device has nothing else to run. */
enum { NEAR_TASKS = 4 };
#define NEAR_SPIN_S 2e-3

/* spin until the barrier's generation moves past g (true) or `seconds` pass */
static bool spin_until_passed(coll *c, int g, double seconds) {
  double until = now_s() + seconds;
  for (int i = 1;; i++) {
    if (atomic_load_explicit(&c->gen_seen, memory_order_acquire) != g) return true;
    if (i % 32 == 0 && (now_s() > until || atomic_load_explicit(&c->aborted_seen, memory_order_relaxed)))
      return false;
#ifdef __SSE2__
    _mm_pause();
#endif
  }
}

/* rank r, early at the barrier: wait until every peer whose task has not
 * started yet has begun its task NEAR_TASKS before the collective's. False
 * (sleep as usual) when no peer was that far behind (the peers are inside the
 * collective, e.g. at its second barrier) or a position is unknown (the comm
 * streams; a task not queued yet). */
static bool wait_peers_near(coll *c, int r) {
  bool waited = false;
  for (int k = 0; k < c->n; k++) {
    if (k == r || atomic_load(&c->here[k])) continue;
    int64_t s = atomic_load(&c->seq[k]);
    if (s < 0) return false;
    ln_stream_wait_started(c->devices[k], s > NEAR_TASKS ? s - NEAR_TASKS : 0);
    waited = true;
  }
  return waited;
}

int ln_cpu_busy_threads(void) {
  int busy = 0, n = ln_cpu_device_count();
  for (int d = 0; d < n; d++)
    if (ln_device_busy(d)) busy += ln_device_threads(d);
  return busy;
}
/* More of the devices' compute threads have work than there are cores
 * (virtual CPU devices sharing them, all busy): an early rank's spinning then
 * takes the core that a late peer needs to get to the barrier, so it sleeps
 * at once. */
static bool cores_oversubscribed(void) { return ln_cpu_busy_threads() > ln_num_cores(); }

/* A barrier whose last rank to arrive first runs last(c, arg) (NULL: none)
 * while the others wait in it; r: the calling rank. */
static int coll_barrier_then(coll *c, int r, void (*last)(coll *, void *), void *arg) {
  pthread_mutex_lock(&c->mu);
  bool passed = false;
  if (!c->aborted) {
    int g = c->gen;
    if (++c->arrived == c->n) {
      if (last) {   /* nobody else moves until gen changes */
        pthread_mutex_unlock(&c->mu);
        last(c, arg);
        pthread_mutex_lock(&c->mu);
      }
      c->arrived = 0;
      c->gen++;
      atomic_store_explicit(&c->gen_seen, c->gen, memory_order_release);
      pthread_cond_broadcast(&c->cv);
    } else {
      pthread_mutex_unlock(&c->mu);
      bool spin = !cores_oversubscribed();
      if (spin && spin_until_passed(c, g, SPIN_S)) return 0;
      if (spin && wait_peers_near(c, r) && spin_until_passed(c, g, NEAR_SPIN_S)) {
        atomic_fetch_add(&c->cms[r]->met_awake, 1);
        return 0;
      }
      pthread_mutex_lock(&c->mu);
      if (g == c->gen && !c->aborted) atomic_fetch_add(&c->cms[r]->met_slept, 1);
      while (g == c->gen && !c->aborted) pthread_cond_wait(&c->cv, &c->mu);
    }
    passed = g != c->gen;
  }
  pthread_mutex_unlock(&c->mu);
  return passed ? 0 : coll_fail(c);
}

static int coll_barrier(coll *c, int r) { return coll_barrier_then(c, r, NULL, NULL); }

/* ---- reduction loops ------------------------------------------------------------ */
/* For i in [b, e): acc = op over k (in rank order) of src[k][i], then every
 * dst[j][i] = acc. Sources and destinations are float32 or float64 and may be
 * the same buffers (in place: a block is read in full before it is written).
 * With a wire format each source is rounded to it first, and with round_out
 * the result too. acc is one L1-resident block, not a staging copy. */

typedef struct {
  int n, op, dtype, wire, ndst;
  bool round_out, nt;
  const char *src[LN_COMM_MAX_RANKS];   /* element 0 of each source */
  char *dst[LN_COMM_MAX_RANKS];
} reduce_ctx;

/* o = x rounded to the wire format and back (o may be x), in one vectorised
 * pass with no 16-bit staging copy (through one, a bf16 all-reduce ran at
 * 0.7x float32's); float16 through the compiler's _Float16 (F16C where the
 * CPU has it) */
LN_SIMD static void wire_round(float *o, const float *x, int64_t n, int wire) {
  if (wire == LN_BFLOAT16) {
    for (int64_t i = 0; i < n; i++) {
      uint32_t v = (uint32_t)ln_float_to_bf16(x[i]) << 16;
      memcpy(o + i, &v, 4);
    }
  } else {
    for (int64_t i = 0; i < n; i++) {
#ifdef __FLT16_MAX__
      o[i] = (float)(_Float16)x[i];
#else
      o[i] = ln_half_to_float(ln_float_to_half(x[i]));
#endif
    }
  }
}

/* bytes from src to dst; nt: the 16-byte-aligned body with non-temporal
 * stores (the caller fences) */
static void put(char *dst, const void *src, size_t bytes, bool nt) {
#ifdef __SSE2__
  if (nt) {
    const char *s = src;
    size_t i = ((size_t)16 - ((uintptr_t)dst & 15)) & 15;
    if (i > bytes) i = bytes;
    memcpy(dst, s, i);
    for (; i + 64 <= bytes; i += 64) {
      __m128i a = _mm_loadu_si128((const __m128i *)(s + i)), b = _mm_loadu_si128((const __m128i *)(s + i + 16));
      __m128i c = _mm_loadu_si128((const __m128i *)(s + i + 32)), d = _mm_loadu_si128((const __m128i *)(s + i + 48));
      _mm_stream_si128((__m128i *)(dst + i), a);
      _mm_stream_si128((__m128i *)(dst + i + 16), b);
      _mm_stream_si128((__m128i *)(dst + i + 32), c);
      _mm_stream_si128((__m128i *)(dst + i + 48), d);
    }
    for (; i + 16 <= bytes; i += 16) _mm_stream_si128((__m128i *)(dst + i), _mm_loadu_si128((const __m128i *)(s + i)));
    memcpy(dst + i, s + i, bytes - i);
    return;
  }
#endif
  memcpy(dst, src, bytes);
}

/* non-temporal stores must be visible before the barrier that publishes them */
static void nt_fence(bool nt) {
#ifdef __SSE2__
  if (nt) _mm_sfence();
#endif
  (void)nt;
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

/* x rounded to the wire format and back, one element (wire_round's numerics) */
static inline float wire_value(float x, int wire) {
  if (wire == LN_BFLOAT16) {
    uint32_t v = (uint32_t)ln_float_to_bf16(x) << 16;
    float f;
    memcpy(&f, &v, 4);
    return f;
  }
#ifdef __FLT16_MAX__
  return (float)(_Float16)x;
#else
  return ln_half_to_float(ln_float_to_half(x));
#endif
}

/* The common case, float32 sum or average with plain stores: RB elements at
 * a time held in registers, every source read once and the result stored to
 * every destination (through the L1 block of reduce_f32, the 256 MB
 * all-reduce took 1.2-1.5x as long: its copies in and out of the block cost
 * more than the memory traffic). The same operations in the same order as
 * reduce_f32, so the same bits. */
enum { RB = 64 };
#define SUM_BLOCK(LOAD)                                                         \
  do {                                                                          \
    for (; s + RB <= e; s += RB) {                                              \
      float v[RB];                                                              \
      const float *x_ = (const float *)c->src[0] + s;                           \
      for (int i = 0; i < RB; i++) v[i] = LOAD(x_[i]);                          \
      for (int k = 1; k < c->n; k++) {                                          \
        x_ = (const float *)c->src[k] + s;                                      \
        for (int i = 0; i < RB; i++) v[i] += LOAD(x_[i]);                       \
      }                                                                         \
      if (avg) for (int i = 0; i < RB; i++) v[i] /= d;                          \
      if (c->round_out) for (int i = 0; i < RB; i++) v[i] = LOAD(v[i]);         \
      for (int j = 0; j < c->ndst; j++) {                                       \
        float *o_ = (float *)c->dst[j] + s;                                     \
        for (int i = 0; i < RB; i++) o_[i] = v[i];                              \
      }                                                                         \
    }                                                                           \
  } while (0)
#define AS_IS(x) (x)
#define BF16(x) wire_value((x), LN_BFLOAT16)
#define FP16(x) wire_value((x), LN_FLOAT16)
LN_SIMD static void reduce_f32_sum(const reduce_ctx *c, int64_t b, int64_t e) {
  const float d = (float)c->n;
  const bool avg = c->op == LN_COMM_AVG;
  int64_t s = b;
  if (c->wire < 0) SUM_BLOCK(AS_IS);
  else if (c->wire == LN_BFLOAT16) SUM_BLOCK(BF16);
  else SUM_BLOCK(FP16);
  for (; s < e; s++) {
    float v = c->wire < 0 ? ((const float *)c->src[0])[s] : wire_value(((const float *)c->src[0])[s], c->wire);
    for (int k = 1; k < c->n; k++) {
      float x = ((const float *)c->src[k])[s];
      v += c->wire < 0 ? x : wire_value(x, c->wire);
    }
    if (avg) v /= d;
    if (c->round_out) v = wire_value(v, c->wire);
    for (int j = 0; j < c->ndst; j++) ((float *)c->dst[j])[s] = v;
  }
}
#undef SUM_BLOCK
#undef AS_IS
#undef BF16
#undef FP16

LN_SIMD static void reduce_f32(void *p, int64_t b, int64_t e) {
  const reduce_ctx *c = p;
  if (!c->nt && (c->op == LN_COMM_SUM || c->op == LN_COMM_AVG)) {
    reduce_f32_sum(c, b, e);
    return;
  }
  float acc[BLK], x[BLK];
  for (int64_t s = b; s < e; s += BLK) {
    int64_t len = LN_MIN((int64_t)BLK, e - s);
    const float *x0 = (const float *)c->src[0] + s;
    if (c->wire >= 0) wire_round(acc, x0, len, c->wire);
    else memcpy(acc, x0, (size_t)len * sizeof(float));
    for (int k = 1; k < c->n; k++) {
      const float *xk = (const float *)c->src[k] + s;
      if (c->wire >= 0) { wire_round(x, xk, len, c->wire); xk = x; }
      REDUCE_BLOCK(float, xk[i]);
    }
    if (c->op == LN_COMM_AVG) {
      float d = (float)c->n;
      for (int64_t i = 0; i < len; i++) acc[i] /= d;
    }
    if (c->round_out) wire_round(acc, acc, len, c->wire);
    for (int j = 0; j < c->ndst; j++) put(c->dst[j] + s * (int64_t)sizeof(float), acc, (size_t)len * sizeof(float), c->nt);
  }
  nt_fence(c->nt);
}

LN_SIMD static void reduce_f64(void *p, int64_t b, int64_t e) {
  const reduce_ctx *c = p;
  double acc[BLK];
  for (int64_t s = b; s < e; s += BLK) {
    int64_t len = LN_MIN((int64_t)BLK, e - s);
    memcpy(acc, (const double *)c->src[0] + s, (size_t)len * sizeof(double));
    for (int k = 1; k < c->n; k++) {
      const double *x = (const double *)c->src[k] + s;
      REDUCE_BLOCK(double, x[i]);
    }
    if (c->op == LN_COMM_AVG)
      for (int64_t i = 0; i < len; i++) acc[i] /= (double)c->n;
    for (int j = 0; j < c->ndst; j++) put(c->dst[j] + s * (int64_t)sizeof(double), acc, (size_t)len * sizeof(double), c->nt);
  }
  nt_fence(c->nt);
}

/* Non-temporal stores pay off once the buffers no longer fit in the cache
 * (below that, the reader, e.g. the optimizer, finds the result cached):
 * half the last-level cache, LUNET_COMM_NT_BYTES overrides it. */
static int64_t nt_threshold(void) {
  static int64_t cached = -1;
  if (cached < 0) {
    const char *env = getenv("LUNET_COMM_NT_BYTES");
    long llc = 0;
#ifdef _SC_LEVEL3_CACHE_SIZE
    llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif
    cached = env ? atoll(env) : (llc > 0 ? llc / 2 : 8 << 20);
  }
  return cached;
}

/* ---- copies and conversions ------------------------------------------------------ */

typedef struct { char *dst; const char *src; } copy_ctx;

static void copy_range(void *p, int64_t b, int64_t e) {   /* bytes */
  const copy_ctx *c = p;
  memcpy(c->dst + b, c->src + b, (size_t)(e - b));
}
static void parallel_memcpy(char *dst, const char *src, int64_t nbytes) {
  copy_ctx c = {dst, src};
  ln_host_parallel_for(nbytes, (int64_t)1 << 20, copy_range, &c);
}

/* ---- the rank's part of each collective -------------------------------------------- */

/* rank r's chunk of N elements: [chunk_lo(r), chunk_lo(r + 1)), on 16-element
 * (cache line) boundaries */
static int64_t chunk_lo(int64_t N, int r, int n) {
  return r >= n ? N : (N * r / n) & ~(int64_t)15;
}

static void reduce_run(coll *c, reduce_ctx *rc, int64_t len) {
  ln_host_parallel_for(len, GRAIN, c->dtype == LN_FLOAT64 ? reduce_f64 : reduce_f32, rc);
}

/* (the buffers are read from c once every rank is at the barrier: a rank of
 * another group of the world may join after this rank's task started) */
static void reduce_all(coll *c, void *p) {
  reduce_ctx *rc = p;
  for (int k = 0; k < c->n; k++) rc->src[k] = rc->dst[k] = c->in[k];
  reduce_run(c, rc, c->numel);
}

/* Up to this many bytes over all ranks, an allreduce is done by the last rank
 * to arrive, alone, inside one barrier: one thread wake-up (tens of
 * microseconds) instead of two, against a few microseconds of reducing (a
 * gradient bucket of a small layer, DataParallel's last of each step). */
enum { SMALL_ALLREDUCE_BYTES = 64 << 10 };

static int run_allreduce(coll *c, int r) {
  int n = c->n, es = ln_dtype_size(c->dtype);
  reduce_ctx rc = {n, c->op, c->dtype, c->wire, n, c->wire >= 0, c->nt, {0}, {0}};
  if (c->numel * es * n <= SMALL_ALLREDUCE_BYTES) return coll_barrier_then(c, r, reduce_all, &rc);
  int64_t lo = chunk_lo(c->numel, r, n), hi = chunk_lo(c->numel, r + 1, n);
  if (coll_barrier(c, r) != 0) return -1;
  for (int k = 0; k < n; k++) rc.src[k] = rc.dst[k] = c->in[k] + lo * es;
  reduce_run(c, &rc, hi - lo);
  return coll_barrier(c, r);
}

static int run_reduce_scatter(coll *c, int r) {
  int n = c->n, es = ln_dtype_size(c->dtype);
  int64_t m = c->numel;
  reduce_ctx rc = {n, c->op, c->dtype, c->wire, 1, false, c->nt, {0}, {c->out[r]}};
  if (coll_barrier(c, r) != 0) return -1;
  for (int k = 0; k < n; k++) rc.src[k] = c->in[k] + m * r * es;
  reduce_run(c, &rc, m);
  return coll_barrier(c, r);
}

static int run_allgather(coll *c, int r) {
  int64_t bytes = c->numel * ln_dtype_size(c->dtype);
  if (coll_barrier(c, r) != 0) return -1;
  for (int s = 0; s < c->n; s++) parallel_memcpy(c->out[r] + s * bytes, c->in[s], bytes);
  return coll_barrier(c, r);
}

static int run_broadcast(coll *c, int r) {
  if (coll_barrier(c, r) != 0) return -1;
  if (r != c->root) parallel_memcpy(c->in[r], c->in[c->root], c->numel * ln_dtype_size(c->dtype));
  return coll_barrier(c, r);
}

static int coll_task(void *p) {
  coll_args *a = p;
  coll *c = a->c;
  int r = a->rank, rc = 0;
  atomic_store(&c->here[r], true);
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
      default: rc = coll_barrier(c, r); break;
    }
  }
  coll_release(c);
  return rc;
}

/* ---- worlds: the groups that meet ----------------------------------------------------
 * Every local group belongs to a world of `size` ranks: a private one (no
 * rendezvous name: the group holds every rank, as before process groups), or
 * one shared by the groups of this process made with the same rendezvous
 * name, each holding some of its ranks (pipeline stages; specs that play
 * several processes in one). A collective is the k-th call of each group:
 * the first group to make its k-th call creates the shared state, the others
 * join it; kind, op, wire, dtype, size and root must agree (a mismatch is an
 * error at the call and aborts the collective for the ranks already in it,
 * instead of a hang), and it runs once every rank has joined. Once a group
 * of a shared world is freed the world takes no more collectives (its
 * pending ones abort). Sends and receives queue per (src, dst) pair of
 * global ranks. One mutex guards every world (taken per call, never by the
 * device workers). */

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
  int64_t cause;            /* the sender's failure (ln_stream_fail_from) */
  struct msg *next;
} msg;

static void msg_release(msg *m) {
  if (atomic_fetch_sub(&m->refs, 1) != 1) return;
  ln_storage_release(m->stage);
  pthread_mutex_destroy(&m->mu);
  pthread_cond_destroy(&m->cv);
  free(m);
}

typedef struct pending { int64_t seq; coll *c; int joined; struct pending *next; } pending;

typedef struct lworld {
  char name[128];                        /* "" for a private world */
  int size, ngroups;
  bool left;                             /* a group was freed: no more collectives */
  ln_comm *holder[LN_COMM_MAX_RANKS];    /* the group of each rank (NULL: none yet, or left) */
  int devices[LN_COMM_MAX_RANKS];
  pending *pend;                         /* collectives some ranks have not joined yet */
  msg **head, **tail;                    /* size*size queues, [src*size + dst] */
  struct lworld *next;
} lworld;

typedef struct { lworld *w; int64_t ncoll; } local_impl;   /* a group: its world, collectives called */

static pthread_mutex_t worlds_mu = PTHREAD_MUTEX_INITIALIZER;
static lworld *worlds;                   /* the named ones */

static const char *world_name(const lworld *w) { return w->name[0] ? w->name : "(private)"; }

/* ---- enqueueing ------------------------------------------------------------------- */

static coll *coll_new(int n, int kind, int op, int wire, int dtype, int64_t numel, int root) {
  coll *c = calloc(1, sizeof *c);
  if (!c) return ln_error_null("%s: out of host memory", kind_names[kind]);
  c->kind = kind; c->op = op; c->wire = wire; c->dtype = dtype; c->n = n; c->numel = numel; c->root = root;
  /* Non-temporal stores only where the destination was not just read: the
   * output of reduce_scatter. An in-place allreduce has every line it writes
   * in cache already (it read it a moment before), so plain stores cost no
   * read-for-ownership, and measured, streaming over those lines was slower
   * (bench/comm.lua, 256 MB: 56-84% of the 2-worker copy roofline with
   * non-temporal stores, 93-103% without). */
  c->nt = kind == K_REDUCE_SCATTER && numel * ln_dtype_size(dtype) * n * n > nt_threshold();
  pthread_mutex_init(&c->mu, NULL);
  pthread_cond_init(&c->cv, NULL);
  for (int i = 0; i < n; i++) atomic_store(&c->seq[i], -1);
  atomic_store(&c->refs, n);   /* one per rank's task (or a rank that never comes) */
  return c;
}

/* cm's next collective: the world's shared state, joined by cm's ranks (NULL
 * on an error). The caller fills its ranks' buffers and launches them. */
static coll *coll_join(ln_comm *cm, int kind, int op, int wire, int dtype, int64_t numel, int root) {
  local_impl *li = cm->impl;
  lworld *w = li->w;
  coll *drop = NULL;   /* a mismatched collective: released after the lock */
  pthread_mutex_lock(&worlds_mu);
  if (w->left) {
    pthread_mutex_unlock(&worlds_mu);
    return ln_error_null("%s: a group of world '%s' was freed: its ranks are gone", kind_names[kind], w->name);
  }
  pending *p = NULL, **pp = &w->pend;
  while (*pp && (*pp)->seq != li->ncoll) pp = &(*pp)->next;
  p = *pp;
  coll *c = NULL;
  if (!p) {
    c = coll_new(w->size, kind, op, wire, dtype, numel, root);
    if (c && cm->nlocal < w->size) {
      p = calloc(1, sizeof *p);
      if (!p) { free(c); c = ln_error_null("%s: out of host memory", kind_names[kind]); }
      else { p->seq = li->ncoll; p->c = c; *pp = p; }
    }
    if (!c) { pthread_mutex_unlock(&worlds_mu); return NULL; }
  } else {
    c = p->c;
    if (c->kind != kind || c->op != op || c->wire != wire || c->dtype != dtype || c->numel != numel ||
        c->root != root) {
      char why[400];
      snprintf(why, sizeof why, "collective #%lld of world '%s' is a %s of %lld %s elements (op %d, root %d) "
               "in one group and a %s of %lld %s elements (op %d, root %d) in another: every group must "
               "make the same calls in the same order", (long long)li->ncoll, world_name(w), kind_names[c->kind],
               (long long)c->numel, ln_dtype_name(c->dtype), c->op, c->root, kind_names[kind], (long long)numel,
               ln_dtype_name(dtype), op, root);
      coll_abort(c, why);
      ln_error("%s: %s", kind_names[kind], why);
      drop = c;
      c = NULL;
    }
  }
  li->ncoll++;
  if (c) {
    for (int i = 0; i < cm->nlocal; i++) {
      c->devices[cm->ranks[i]] = cm->devices[i];
      c->cms[cm->ranks[i]] = cm;
      ln_comm_retain(cm);
    }
  }
  if (p) {
    p->joined += cm->nlocal;
    if (p->joined == w->size) { *pp = p->next; free(p); }
  }
  pthread_mutex_unlock(&worlds_mu);
  if (drop) {   /* the ranks of this group never come */
    for (int i = 0; i < cm->nlocal; i++) coll_release(drop);
  }
  return c;
}

/* Enqueue the task of each of cm's ranks on its device (on its comm stream,
 * after the compute stream's work so far, when `comm`); keep holds a[i], b[i]. */
static int coll_launch_on(coll *c, ln_comm *cm, ln_tensor *const *a, ln_tensor *const *b, bool comm) {
  /* the queued tasks may run and drop their references at once: this call
   * holds one of its own until it has written each rank's position */
  int n = cm->nlocal, kind = c->kind;
  atomic_fetch_add(&c->refs, 1);
  for (int i = 0; i < n; i++) {
    int r = cm->ranks[i];
    coll_args args = {c, r};
    const ln_tensor *keep[2] = {a ? a[i] : NULL, b ? b[i] : NULL};
    int dev = cm->devices[i];
    int64_t seq = -1;
    int rc = comm ? ln_comm_stream_wait_compute(dev) : 0;
    if (rc == 0)
      rc = comm ? ln_launch_comm(dev, kind_names[kind], coll_task, &args, sizeof args, keep, 2, LN_TASK_ALWAYS)
                : ln_launch_seq(dev, kind_names[kind], coll_task, &args, sizeof args, keep, 2, LN_TASK_ALWAYS, &seq);
    if (rc != 0) {
      /* ranks before r are queued (and hold references, so c lives): abort
       * them, then drop the references of the ranks not queued */
      char why[800];
      snprintf(why, sizeof why, "could not enqueue rank %d (cpu:%d): %s", r, dev, ln_last_error());
      coll_abort(c, why);
      for (int k = i; k < n; k++) coll_release(c);
      coll_release(c);
      return ln_error("%s: %s", kind_names[kind], why);
    }
    atomic_store(&c->seq[r], seq);
  }
  coll_release(c);
  return 0;
}

static int coll_launch(coll *c, ln_comm *cm, ln_tensor *const *a, ln_tensor *const *b) {
  return coll_launch_on(c, cm, a, b, false);
}

static int local_allreduce(ln_comm *cm, ln_tensor *const *ts, int op, int wire) {
  coll *c = coll_join(cm, K_ALLREDUCE, op, wire, ts[0]->dtype_id, ln_numel(ts[0]), 0);
  if (!c) return -1;
  for (int i = 0; i < cm->nlocal; i++) c->in[cm->ranks[i]] = ln_data_ptr(ts[i]);
  return coll_launch(c, cm, ts, NULL);
}

/* on the comm streams; the single inline device has none: the plain path */
static int local_allreduce_async(ln_comm *cm, ln_tensor *const *ts, int op, int wire) {
  for (int i = 0; i < cm->nlocal; i++)
    if (!ln_device_has_comm_stream(cm->devices[i])) return local_allreduce(cm, ts, op, wire);
  coll *c = coll_join(cm, K_ALLREDUCE, op, wire, ts[0]->dtype_id, ln_numel(ts[0]), 0);
  if (!c) return -1;
  for (int i = 0; i < cm->nlocal; i++) c->in[cm->ranks[i]] = ln_data_ptr(ts[i]);
  return coll_launch_on(c, cm, ts, NULL, true);
}

static int local_broadcast(ln_comm *cm, ln_tensor *const *ts, int root) {
  coll *c = coll_join(cm, K_BROADCAST, 0, -1, ts[0]->dtype_id, ln_numel(ts[0]), root);
  if (!c) return -1;
  for (int i = 0; i < cm->nlocal; i++) c->in[cm->ranks[i]] = ln_data_ptr(ts[i]);
  return coll_launch(c, cm, ts, NULL);
}

static int local_reduce_scatter(ln_comm *cm, ln_tensor *const *out, ln_tensor *const *in, int op, int wire) {
  coll *c = coll_join(cm, K_REDUCE_SCATTER, op, wire, in[0]->dtype_id, ln_numel(out[0]), 0);
  if (!c) return -1;
  for (int i = 0; i < cm->nlocal; i++) {
    c->in[cm->ranks[i]] = ln_data_ptr(in[i]);
    c->out[cm->ranks[i]] = ln_data_ptr(out[i]);
  }
  return coll_launch(c, cm, out, in);
}

static int local_allgather(ln_comm *cm, ln_tensor *const *out, ln_tensor *const *in) {
  coll *c = coll_join(cm, K_ALLGATHER, 0, -1, in[0]->dtype_id, ln_numel(in[0]), 0);
  if (!c) return -1;
  for (int i = 0; i < cm->nlocal; i++) {
    c->in[cm->ranks[i]] = ln_data_ptr(in[i]);
    c->out[cm->ranks[i]] = ln_data_ptr(out[i]);
  }
  return coll_launch(c, cm, out, in);
}

static int local_barrier(ln_comm *cm) {
  coll *c = coll_join(cm, K_BARRIER, 0, -1, LN_FLOAT32, 0, 0);
  if (!c) return -1;
  return coll_launch(c, cm, NULL, NULL);
}

/* ---- send / recv ------------------------------------------------------------------- */

typedef struct { msg *m; char *data; } msg_args;

static void msg_set(msg *m, int state, const char *why) {
  pthread_mutex_lock(&m->mu);
  m->state = state;
  if (why) snprintf(m->why, sizeof m->why, "%s", why);
  m->cause = ln_stream_failure_root();
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
    if (m->state == 2) {
      ln_stream_fail_from(m->cause);
      rc = ln_error("recv: aborted: sender rank %d (cpu:%d) failed earlier: %s", m->src_rank, m->src_dev, m->why);
    } else if (m->nbytes)
      parallel_memcpy(a->data, m->stage->data, (int64_t)m->nbytes);
  }
  msg_release(m);
  return rc;
}

static int local_send(ln_comm *cm, const ln_tensor *t, int local, int dst) {
  lworld *w = ((local_impl *)cm->impl)->w;
  int rank = cm->ranks[local], dev = cm->devices[local];
  msg *m = calloc(1, sizeof *m);
  if (!m) return ln_error("send: out of host memory");
  m->numel = ln_numel(t);
  m->dtype = t->dtype_id;
  m->nbytes = (size_t)m->numel * ln_dtype_size(t->dtype_id);
  m->src_rank = rank;
  m->src_dev = dev;
  pthread_mutex_init(&m->mu, NULL);
  pthread_cond_init(&m->cv, NULL);
  atomic_store(&m->refs, 2);         /* the queue (then the recv task) and the send task */
  m->stage = ln_storage_new(dev, m->nbytes);
  if (!m->stage) {
    char err[600];
    snprintf(err, sizeof err, "%s", ln_last_error());
    atomic_store(&m->refs, 1); msg_release(m);
    return ln_error("send: %s", err);
  }
  msg_args args = {m, ln_data_ptr(t)};
  const ln_tensor *keep[1] = {t};
  if (ln_launch_flags(dev, "send", send_task, &args, sizeof args, keep, 1, LN_TASK_ALWAYS) != 0) {
    atomic_store(&m->refs, 1); msg_release(m);
    return -1;
  }
  pthread_mutex_lock(&worlds_mu);
  int q = rank * w->size + dst;
  if (w->tail[q]) w->tail[q]->next = m; else w->head[q] = m;
  w->tail[q] = m;
  pthread_mutex_unlock(&worlds_mu);
  return 0;
}

static int local_recv(ln_comm *cm, ln_tensor *t, int local, int src) {
  lworld *w = ((local_impl *)cm->impl)->w;
  int rank = cm->ranks[local], dev = cm->devices[local];
  pthread_mutex_lock(&worlds_mu);
  int q = src * w->size + rank;
  msg *m = w->head[q];
  int rc = 0;
  if (!m) {
    if (w->holder[src])
      rc = ln_error("recv: no send from rank %d (cpu:%d) to rank %d (cpu:%d) is waiting; call send first",
                    src, w->devices[src], rank, dev);
    else
      rc = ln_error("recv: no send from rank %d (no group holds it) to rank %d (cpu:%d) is waiting", src, rank, dev);
  } else if (m->numel != ln_numel(t) || m->dtype != t->dtype_id) {
    rc = ln_error("recv: the send from rank %d has %lld %s elements, the receiving tensor %lld %s",
                  src, (long long)m->numel, ln_dtype_name(m->dtype), (long long)ln_numel(t),
                  ln_dtype_name(t->dtype_id));
  } else {
    msg_args args = {m, ln_data_ptr(t)};
    const ln_tensor *keep[1] = {t};
    msg *next = m->next;   /* the queue's reference passes to the recv task, which may free m */
    if (ln_launch_flags(dev, "recv", recv_task, &args, sizeof args, keep, 1, LN_TASK_ALWAYS) != 0) rc = -1;
    else {
      w->head[q] = next;
      if (!next) w->tail[q] = NULL;
    }
  }
  pthread_mutex_unlock(&worlds_mu);
  return rc;
}

/* ---- the table ----------------------------------------------------------------------- */

static void world_free(lworld *w) {
  for (int q = 0; q < w->size * w->size; q++)
    for (msg *m = w->head[q], *next; m; m = next) { next = m->next; msg_release(m); }
  free(w->head);
  free(w->tail);
  free(w);
}

static lworld *world_new(const char *name, int size) {
  lworld *w = calloc(1, sizeof *w);
  if (w) {
    snprintf(w->name, sizeof w->name, "%s", name);
    w->size = size;
    w->head = calloc((size_t)size * size, sizeof *w->head);
    w->tail = calloc((size_t)size * size, sizeof *w->tail);
  }
  if (!w || !w->head || !w->tail) {
    if (w) { free(w->head); free(w->tail); free(w); }
    return ln_error_null("comm_new: out of host memory");
  }
  return w;
}

/* a private world (every rank here), or a share of the named one */
static int local_init(ln_comm *cm, const ln_comm_config *cfg) {
  const char *name = cfg->rendezvous;
  if (!name || !*name) {
    if (cm->world != cm->nlocal)
      return ln_error("comm_new: the local backend holds every rank in this process: world size %d, but %d "
                      "devices (other processes need the mpi or nccl backend; groups of this process "
                      "sharing ranks, a rendezvous name)", cm->world, cm->nlocal);
    for (int i = 0; i < cm->nlocal; i++)
      if (cm->ranks[i] != i)
        return ln_error("comm_new: the local backend numbers its ranks as its devices: device %d holds rank %d, "
                        "not %d", i + 1, cm->ranks[i], i);
  }
  if (strlen(name ? name : "") >= sizeof ((lworld *)0)->name)
    return ln_error("comm_new: rendezvous name longer than %d bytes", (int)sizeof ((lworld *)0)->name - 1);
  if (cm->world > LN_COMM_MAX_RANKS)
    return ln_error("comm_new: the local backend has at most %d ranks, got a world of %d", LN_COMM_MAX_RANKS, cm->world);
  local_impl *li = calloc(1, sizeof *li);
  if (!li) return ln_error("comm_new: out of host memory");
  pthread_mutex_lock(&worlds_mu);
  lworld *w = NULL;
  int rc = 0;
  if (name && *name) {
    for (w = worlds; w && strcmp(w->name, name); w = w->next) {}
    if (w && w->size != cm->world)
      rc = ln_error("comm_new: world '%s' has %d ranks, this group says %d", name, w->size, cm->world);
    else if (w && w->left)
      rc = ln_error("comm_new: a group of world '%s' was freed; start a new world (another name)", name);
    for (int i = 0; rc == 0 && w && i < cm->nlocal; i++) {
      int r = cm->ranks[i];
      if (w->holder[r]) rc = ln_error("comm_new: rank %d of world '%s' is held by another group", r, name);
      for (int k = 0; rc == 0 && k < w->size; k++)
        if (w->holder[k] && w->devices[k] == cm->devices[i])
          rc = ln_error("comm_new: cpu:%d holds rank %d of world '%s' already", cm->devices[i], k, name);
    }
  }
  if (rc == 0 && !w) {
    w = world_new(name ? name : "", cm->world);
    if (!w) rc = -1;
    else if (w->name[0]) { w->next = worlds; worlds = w; }
  }
  if (rc == 0) {
    for (int i = 0; i < cm->nlocal; i++) {
      w->holder[cm->ranks[i]] = cm;
      w->devices[cm->ranks[i]] = cm->devices[i];
    }
    w->ngroups++;
    li->w = w;
    cm->impl = li;
  }
  pthread_mutex_unlock(&worlds_mu);
  if (rc != 0) free(li);
  return rc;
}

static void local_destroy(ln_comm *cm) {
  local_impl *li = cm->impl;
  lworld *w = li->w;
  coll *drop[64];
  int ndrop = 0;
  pthread_mutex_lock(&worlds_mu);
  for (int i = 0; i < cm->nlocal; i++) w->holder[cm->ranks[i]] = NULL;
  if (--w->ngroups > 0) {
    w->left = true;
    /* collectives this group never joined: its ranks never come */
    for (pending **pp = &w->pend, *p; (p = *pp);) {
      if (p->seq < li->ncoll || ndrop == 64) { pp = &p->next; continue; }
      char why[300];
      snprintf(why, sizeof why, "ranks of world '%s' left (their group was freed) before joining it", w->name);
      coll_abort(p->c, why);
      drop[ndrop++] = p->c;
      p->joined += cm->nlocal;
      if (p->joined == w->size) { *pp = p->next; free(p); } else pp = &p->next;
    }
  } else {
    if (w->name[0]) {
      lworld **ww = &worlds;
      while (*ww != w) ww = &(*ww)->next;
      *ww = w->next;
    }
    for (pending *p = w->pend, *next; p; p = next) { next = p->next; free(p); }
    world_free(w);
  }
  pthread_mutex_unlock(&worlds_mu);
  /* (after the lock: a release may free a collective, and with it drop the
   * last reference to another group, whose destroy takes the lock) */
  for (int k = 0; k < ndrop; k++)
    for (int i = 0; i < cm->nlocal; i++) coll_release(drop[k]);
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
