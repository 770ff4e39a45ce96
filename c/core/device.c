/* device.c -- devices by type: the registry of backends, dispatch of
 * launches, streams, events and synchronisation to a device's backend (or to
 * the generic host streams, stream.c, when the backend runs its work on host
 * threads), and the caching allocator over each backend's raw memory.
 *
 * A device id is type * LN_CUDA_BASE + index (backend.h). The registry and
 * the allocator's pools are the process-wide state of lunet, as a GPU
 * driver's device list is: devices are a property of the process. */
#include "stream.h"
#include "backend.h"
#include "cuda_api.h"
#include "lunet_internal.h"   /* the fault-injection hooks */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

const ln_backend *ln_backends[LN_NTYPES];
const ln_backend ln_no_backend = {.name = "none", .type = -1};
static const char *const known_types[LN_NTYPES] = {"cpu", "cuda"};   /* names before registration */

static const char *kernel_names[LN_NKERNELS] = {
#define LN_SLOT_NAME(n) #n,
  LN_KERNEL_SLOTS(LN_SLOT_NAME)
#undef LN_SLOT_NAME
};
const char *ln_kernel_name(int k) { return k >= 0 && k < LN_NKERNELS ? kernel_names[k] : "?"; }

int ln_backend_register(const ln_backend *b) {
  if (!b || !b->name || b->type < 0 || b->type >= LN_NTYPES)
    return ln_error("backend_register: need a name and a type in 0..%d", LN_NTYPES - 1);
  if (!b->rt.device_count || !b->rt.alloc || !b->rt.free)
    return ln_error("backend_register: %s: the runtime needs device_count, alloc and free", b->name);
  if (!b->rt.stream && !(b->rt.launch && b->rt.event_record && b->rt.event_wait && b->rt.event_query &&
                         b->rt.event_synchronize && b->rt.synchronize))
    return ln_error("backend_register: %s: the runtime needs host streams or its own launch, events and synchronize",
                    b->name);
  ln_backends[b->type] = b;
  return 0;
}

static const char *type_name(int type) {
  if (type < 0 || type >= LN_NTYPES) return "?";
  return ln_backends[type] ? ln_backends[type]->name : known_types[type] ? known_types[type] : "?";
}

const char *ln_device_str(char *buf, size_t n, int id) {
  snprintf(buf, n, "%s:%d", type_name(ln_device_type(id)), ln_device_index(id));
  return buf;
}

const char *ln_device_type_name(int id) {
  int t = ln_device_type(id);
  return id >= 0 && t < LN_NTYPES && ln_backends[t] ? ln_backends[t]->name : NULL;
}

int ln_device_lookup(const char *type, int index) {
  if (!type) return ln_error("device: type is NULL");
  for (int t = 0; t < LN_NTYPES; t++)
    if (ln_backends[t] && strcmp(ln_backends[t]->name, type) == 0) {
      if (index < 0 || index >= ln_backends[t]->rt.device_count())
        return ln_error("device: no device %s:%d (there %s %d)", type, index,
                        ln_backends[t]->rt.device_count() == 1 ? "is" : "are", ln_backends[t]->rt.device_count());
      return t * LN_CUDA_BASE + index;
    }
  return ln_error("device: unknown device type '%s'", type);
}

/* The backend of a device id that must exist, or NULL with an error naming fn. */
static const ln_backend *backend_for(const char *fn, int id) {
  int t = ln_device_type(id), index = ln_device_index(id);
  if (id >= 0 && t == LN_TYPE_CUDA) ln_cuda_load();
  const ln_backend *b = id >= 0 && t < LN_NTYPES ? ln_backends[t] : NULL;
  if (b && index < b->rt.device_count()) return b;
  if (id >= 0 && t == LN_TYPE_CUDA && !b)
    return ln_error_null("%s: cuda:%d is not available (%s)", fn, index, ln_cuda_reason());
  if (id >= 0 && t < LN_NTYPES && b) {
    int n = b->rt.device_count();
    return ln_error_null("%s: no device %s:%d (there %s %d %s device%s)", fn, b->name, index,
                         n == 1 ? "is" : "are", n, t == LN_TYPE_CPU ? "CPU" : b->name, n == 1 ? "" : "s");
  }
  if (id < 0 || t == LN_TYPE_CPU) {
    const ln_backend *cpu = ln_backends[LN_TYPE_CPU];
    int n = cpu ? cpu->rt.device_count() : 0;
    return ln_error_null("%s: no device cpu:%d (there %s %d CPU device%s)", fn, id, n == 1 ? "is" : "are", n,
                         n == 1 ? "" : "s");
  }
  return ln_error_null("%s: no device with id %d (no backend of type %d)", fn, id, t);
}

int ln_device_valid(int id) {
  int t = ln_device_type(id);
  if (id >= 0 && t == LN_TYPE_CUDA) ln_cuda_load();
  const ln_backend *b = id >= 0 && t < LN_NTYPES ? ln_backends[t] : NULL;
  return b && ln_device_index(id) < b->rt.device_count();
}

int ln_cuda_device_count(void) {
  ln_cuda_load();
  const ln_backend *b = ln_backends[LN_TYPE_CUDA];
  return b ? b->rt.device_count() : 0;
}

/* what ln_kernel gives for a kernel the backend lacks: ln_launch sees it and
 * returns the error ln_kernel set (it is never run) */
int ln_no_kernel(void *args) { (void)args; return ln_error("internal: a missing kernel was run"); }

ln_task_fn ln_kernel(const char *fn, int device, int k, int dtype) {
  const ln_backend *b = ln_backend_of(device);
  ln_task_fn f = k >= 0 && k < LN_NKERNELS ? b->kernel[k] : NULL;
  if (f && (!b->supports || b->supports(k, dtype))) return f;
  char dev[32];
  ln_device_str(dev, sizeof dev, device);
  if (!f) ln_error("%s: %s has no kernel for %s", fn, dev, ln_kernel_name(k));
  else ln_error("%s: %s has no %s kernel for %s", fn, dev, ln_dtype_name(dtype), ln_kernel_name(k));
  return ln_no_kernel;
}

/* ---- streams of a device ------------------------------------------------------ */

static ln_stream *stream_of(const ln_backend *b, int id, int which, bool start) {
  return b->rt.stream ? b->rt.stream(ln_device_index(id), which, start) : NULL;
}

int ln_launch(int id, const char *op, ln_task_fn fn, const void *args, size_t argsize,
              const ln_tensor *const *keep, int nkeep) {
  return ln_launch_seq(id, op, fn, args, argsize, keep, nkeep, 0, NULL);
}

int ln_launch_flags(int id, const char *op, ln_task_fn fn, const void *args, size_t argsize,
                    const ln_tensor *const *keep, int nkeep, int flags) {
  return ln_launch_seq(id, op, fn, args, argsize, keep, nkeep, flags, NULL);
}

static int launch_on(int id, int which, const char *op, ln_task_fn fn, const void *args, size_t argsize,
                     const ln_tensor *const *keep, int nkeep, int flags, int64_t *seq) {
  if (seq) *seq = -1;
  const ln_backend *b = backend_for(op, id);
  if (!b) return -1;
  if (fn == ln_no_kernel) return -1;   /* refused by ln_kernel, which said why */
  if (!fn) {   /* a slot the backend left empty: never called */
    char dev[32];
    return ln_error("%s: %s has no kernel for %s", op, ln_device_str(dev, sizeof dev, id), op);
  }
  if (b->rt.launch) return b->rt.launch(ln_device_index(id), which, op, fn, args, argsize, keep, nkeep, flags, seq);
  ln_stream *s = stream_of(b, id, which, true);
  if (!s) return -1;
  return ln_stream_launch(s, op, fn, args, argsize, keep, nkeep, flags, seq);
}

int ln_launch_seq(int id, const char *op, ln_task_fn fn, const void *args, size_t argsize,
                  const ln_tensor *const *keep, int nkeep, int flags, int64_t *seq) {
  return launch_on(id, 0, op, fn, args, argsize, keep, nkeep, flags, seq);
}

int ln_launch_comm(int id, const char *op, ln_task_fn fn, const void *args, size_t argsize,
                   const ln_tensor *const *keep, int nkeep, int flags) {
  return launch_on(id, 1, op, fn, args, argsize, keep, nkeep, flags, NULL);
}

int ln_device_is_inline(int id) {
  const ln_backend *b = ln_backend_of(id);
  ln_stream *s = stream_of(b, id, 0, false);
  return !s || !s->has_worker;
}

int ln_device_has_comm_stream(int id) { return ln_device_valid(id) && !ln_device_is_inline(id); }

void ln_stream_wait_started(int id, int64_t seq) {
  const ln_backend *b = backend_for("stream_wait_started", id);
  ln_stream *s = b ? stream_of(b, id, 0, false) : NULL;
  if (s && s->has_worker && seq >= 0) ln_stream_wait(s, seq);
}

/* ---- generic host-stream runtime ------------------------------------------------ */

int ln_host_sync(int id) {
  const ln_backend *b = backend_for("sync", id);
  if (!b) return -1;
  ln_stream *d = stream_of(b, id, 0, true), *cs = stream_of(b, id, 1, false);
  if (!d) return -1;
  if (d->has_worker) ln_stream_wait(d, ln_stream_submitted(d));
  if (cs && cs->has_worker) ln_stream_wait(cs, ln_stream_submitted(cs));
  ln_stream *both[2] = {d, cs};
  return ln_stream_raise(both, 2);
}

int ln_host_event_record(int id, ln_event *ev) {
  const ln_backend *b = backend_for("event_record", id);
  ln_stream *s = b ? stream_of(b, id, 0, true) : NULL;
  if (!s) return -1;
  ev->device = id;
  ev->stream = 0;
  ev->seq = ln_stream_submitted(s);
  return 0;
}

/* the stream an event of a host-stream backend is a point of (NULL: error set) */
static ln_stream *event_stream(const ln_backend *b, const ln_event *ev) {
  if (ev->stream != 0 && ev->stream != 1) {
    ln_error("event: stream %d is neither 0 (compute) nor 1 (comm)", (int)ev->stream);
    return NULL;
  }
  return stream_of(b, ev->device, ev->stream, true);
}

/* a host stream waits for an event of a backend with streams of its own (a
 * GPU's): the host blocks for an inline device, else the stream's worker does */
typedef struct { ln_event ev; } foreign_wait_args;
static int foreign_wait_task(void *p) { return ln_event_synchronize(&((foreign_wait_args *)p)->ev); }

int ln_host_event_wait(int id, const ln_event *ev) {
  const ln_backend *bd = backend_for("event_wait", id), *bp = backend_for("event_wait", ev->device);
  if (bd && bp && !bp->rt.stream) {
    ln_stream *d = stream_of(bd, id, 0, true);
    if (!d) return -1;
    if (!d->has_worker) return ln_event_synchronize(ev);
    foreign_wait_args a = {*ev};
    return ln_stream_launch(d, "event_wait", foreign_wait_task, &a, sizeof a, NULL, 0, 0, NULL);
  }
  ln_stream *d = bd ? stream_of(bd, id, 0, true) : NULL, *p = bp ? event_stream(bp, ev) : NULL;
  if (!d || !p) return -1;
  if (!p->has_worker || p == d) return 0;   /* already ordered */
  if (!d->has_worker) { ln_stream_wait(p, ev->seq); return 0; }   /* inline consumer: block */
  return ln_stream_wait_for(d, p, ev->seq, "event_wait");
}

int ln_host_event_query(const ln_event *ev) {
  const ln_backend *b = backend_for("event_query", ev->device);
  ln_stream *p = b ? event_stream(b, ev) : NULL;
  return p ? ln_stream_query(p, ev->seq) : -1;
}

int ln_host_event_synchronize(const ln_event *ev) {
  const ln_backend *b = backend_for("event_synchronize", ev->device);
  ln_stream *p = b ? event_stream(b, ev) : NULL;
  if (!p) return -1;
  if (!p->has_worker) return 0;
  return ln_stream_host_wait(p, ev->seq, "event_synchronize");
}

/* ---- synchronisation and events, by backend ------------------------------------- */

bool ln_device_busy(int id) {
  const ln_backend *b = ln_device_valid(id) ? ln_backend_of(id) : NULL;
  ln_stream *s = b ? stream_of(b, id, 0, false) : NULL;
  return s && s->has_worker && !ln_stream_query(s, ln_stream_submitted(s));
}

int ln_sync(int id) {
  const ln_backend *b = backend_for("sync", id);
  if (!b) return -1;
  return b->rt.synchronize ? b->rt.synchronize(ln_device_index(id)) : ln_host_sync(id);
}

int ln_sync_all(void) {
  int rc = 0;
  char first[1024] = "";
  for (int t = 0; t < LN_NTYPES; t++) {
    const ln_backend *b = ln_backends[t];
    int n = b ? b->rt.device_count() : 0;
    for (int i = 0; i < n; i++)
      if (ln_sync(t * LN_CUDA_BASE + i) != 0 && rc == 0) {
        rc = -1;
        snprintf(first, sizeof first, "%s", ln_last_error());
      }
  }
  return rc ? ln_error("%s", first) : 0;
}

int ln_event_record(int id, ln_event *ev) {
  const ln_backend *b = backend_for("event_record", id);
  if (!b) return -1;
  return b->rt.event_record ? b->rt.event_record(ln_device_index(id), ev) : ln_host_event_record(id, ev);
}

int ln_event_wait(int id, const ln_event *ev) {
  const ln_backend *b = backend_for("event_wait", id);
  if (!b) return -1;
  return b->rt.event_wait ? b->rt.event_wait(ln_device_index(id), ev) : ln_host_event_wait(id, ev);
}

int ln_event_query(const ln_event *ev) {
  const ln_backend *b = backend_for("event_query", ev->device);
  if (!b) return -1;
  return b->rt.event_query ? b->rt.event_query(ev) : ln_host_event_query(ev);
}

int ln_event_synchronize(const ln_event *ev) {
  const ln_backend *b = backend_for("event_synchronize", ev->device);
  if (!b) return -1;
  return b->rt.event_synchronize ? b->rt.event_synchronize(ev) : ln_host_event_synchronize(ev);
}

/* Device id's streams run what is queued so far; until (NULL: no limit)
 * bounds the wait. -1 when it passed first (error set), else whether there
 * was anything to wait for. */
static int drain_device(const ln_backend *b, int id, const struct timespec *until) {
  int waited = 0;
  for (int k = 0; k < 2; k++) {
    ln_stream *s = stream_of(b, id, k, false);
    int rc = s ? ln_stream_drain(s, until) : 0;
    if (rc < 0) return -1;
    waited |= rc;
  }
  return waited;
}

/* Every stream runs what is queued, or timeout_s passes (then -1). For the
 * end of a process: a worker still inside oneDNN while exit() tears down
 * its globals crashed scripts that ended without a synchronize. Errors stay
 * where they are (nobody is left to report them to). (Streams never started
 * have nothing queued: this starts nothing.) */
int ln_drain(double timeout_s) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);   /* (pthread_cond_timedwait's clock) */
  double whole = timeout_s > 0 ? timeout_s : 0;
  until.tv_sec += (time_t)whole;
  until.tv_nsec += (long)((whole - (double)(time_t)whole) * 1e9);
  if (until.tv_nsec >= 1000000000L) { until.tv_sec++; until.tv_nsec -= 1000000000L; }
  for (int t = 0; t < LN_NTYPES; t++)
    for (int i = 0; ln_backends[t] && i < LN_MAX_TYPE_DEVICES; i++)
      if (drain_device(ln_backends[t], t * LN_CUDA_BASE + i, &until) < 0) {
        char msg[512];   /* (ln_error must not read the buffer it writes) */
        snprintf(msg, sizeof msg, "%s", ln_last_error());
        return ln_error("%s after %g s", msg, timeout_s);
      }
  return 0;
}

/* ---- test hooks and timestamps: tasks like any other ------------------------------ */

/* A task that stores the monotonic clock where the caller asked (the caller
 * keeps *out alive until the stream has passed it). */
typedef struct { double *out; } stamp_args;
static int stamp_task(void *p) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  *((stamp_args *)p)->out = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
  return 0;
}

int ln_stream_timestamp(int id, double *out) {
  if (!out) return ln_error("stream_timestamp: out is NULL");
  stamp_args a = {out};
  return ln_launch(id, "stream_timestamp", stamp_task, &a, sizeof a, NULL, 0);
}

/* Testing hook: a task that fails with `message`, to exercise the deferred
 * error path of a stream (ln_sync raises it naming the op). */
typedef struct { char msg[512]; } fail_args;
static int fail_task(void *p) { return ln_error("%s", ((fail_args *)p)->msg); }

int ln_stream_inject_error(int id, const char *message) {
  fail_args a;
  snprintf(a.msg, sizeof a.msg, "%s", message ? message : "injected error");
  return ln_launch(id, "inject_error", fail_task, &a, sizeof a, NULL, 0);
}

typedef struct { const int *gate; } gate_args;
static int gate_task(void *p) {
  const int *gate = ((gate_args *)p)->gate;
  struct timespec pause = {0, 200000};   /* 0.2 ms: a test hook, not a hot path */
  while (!__atomic_load_n(gate, __ATOMIC_ACQUIRE)) nanosleep(&pause, NULL);
  return 0;
}

int ln_stream_inject_gate(int id, const int *gate) {
  if (!gate) return ln_error("stream_inject_gate: gate is NULL");
  gate_args a = {gate};
  return ln_launch(id, "inject_gate", gate_task, &a, sizeof a, NULL, 0);
}

typedef struct { int *gate; double seconds; } opener_args;
static int opener_task(void *p) {
  opener_args *a = p;
  struct timespec pause = {(time_t)a->seconds, (long)((a->seconds - (double)(time_t)a->seconds) * 1e9)};
  nanosleep(&pause, NULL);
  __atomic_store_n(a->gate, 1, __ATOMIC_RELEASE);
  return 0;
}

int ln_stream_inject_opener(int id, int *gate, double seconds) {
  if (!gate) return ln_error("stream_inject_opener: gate is NULL");
  if (!(seconds >= 0 && seconds <= 60)) return ln_error("stream_inject_opener: seconds must be in [0, 60], got %g", seconds);
  opener_args a = {gate, seconds};
  return ln_launch(id, "inject_opener", opener_task, &a, sizeof a, NULL, 0);
}

/* ---- the communication stream ---------------------------------------------- */
/* Device id's second stream (CUDA/NCCL style): collectives queued there run
 * while the compute stream goes on. ln_comm_stream_wait_compute orders it
 * after the compute stream's work queued so far; ln_stream_wait_comm orders
 * the compute stream after the comm stream's. A failure on one stream
 * reaches the other through these waits (the waiting task fails, naming the
 * producer), so a collective behind a failed compute stream aborts. */

int ln_comm_stream_wait_compute(int id) {
  const ln_backend *b = backend_for("comm_stream_wait", id);
  ln_stream *cs = b ? stream_of(b, id, 1, true) : NULL;
  if (!cs) return -1;
  ln_stream *d = stream_of(b, id, 0, true);
  return ln_stream_wait_for(cs, d, ln_stream_submitted(d), "comm_stream_wait");
}

static int no_host_streams(const char *fn, int id) {
  char dev[32];
  return ln_error("%s: %s has streams of its own (no host comm stream)", fn, ln_device_str(dev, sizeof dev, id));
}

int ln_comm_event_record(int id, ln_event *ev) {
  const ln_backend *b = backend_for("comm_event_record", id);
  if (!b) return -1;
  if (!b->rt.stream) return no_host_streams("comm_event_record", id);
  ln_stream *cs = stream_of(b, id, 1, true);
  if (!cs) return -1;
  ev->device = id;
  ev->stream = 1;
  ev->seq = ln_stream_submitted(cs);
  return 0;
}

int ln_comm_event_wait(int id, const ln_event *ev) {
  const ln_backend *bd = backend_for("comm_event_wait", id), *bp = backend_for("comm_event_wait", ev->device);
  if (!bd || !bp) return -1;
  if (!bd->rt.stream) return no_host_streams("comm_event_wait", id);
  if (!bp->rt.stream) return no_host_streams("comm_event_wait", ev->device);
  ln_stream *cs = stream_of(bd, id, 1, true), *p = event_stream(bp, ev);
  if (!cs || !p) return -1;
  if (!p->has_worker || p == cs) return 0;   /* an inline producer's work is done; one stream is in order */
  return ln_stream_wait_for(cs, p, ev->seq, "comm_event_wait");
}

int ln_stream_wait_comm(int id) {
  const ln_backend *b = backend_for("stream_wait_comm", id);
  if (!b) return -1;
  ln_stream *d = stream_of(b, id, 0, true), *cs = stream_of(b, id, 1, false);
  if (!d || !d->has_worker || !cs || !cs->has_worker) return 0;   /* nothing ever queued there */
  return ln_stream_wait_for(d, cs, ln_stream_submitted(cs), "stream_wait_comm");
}

int ln_comm_stream_timestamp(int id, double *out) {
  if (!out) return ln_error("comm_stream_timestamp: out is NULL");
  stamp_args a = {out};
  return ln_launch_comm(id, "comm_stream_timestamp", stamp_task, &a, sizeof a, NULL, 0, 0);
}

/* ---- caching allocator ----------------------------------------------------- */
/* One pool per device over its backend's raw alloc/free. Size classes: 512 B,
 * then four per power of two (2^k * 1, 1.25, 1.5, 1.75), so at most 25% is
 * wasted and a training loop's repeated shapes reuse blocks. */
enum { NCLASS = 256 };
typedef struct {
  pthread_mutex_t lock;
  ln_storage *free_list[NCLASS];
  int64_t allocated, cached, peak, limit;
  int64_t largest;   /* the largest block handed out since the limit or the peak was last set */
  int64_t handed_out;   /* bytes of every block handed out so far (never decreases) */
} pool;
static pool pools[LN_NTYPES][LN_MAX_TYPE_DEVICES];
static pthread_once_t pools_once = PTHREAD_ONCE_INIT;
static void pools_init(void) {
  for (int t = 0; t < LN_NTYPES; t++)
    for (int i = 0; i < LN_MAX_TYPE_DEVICES; i++) pthread_mutex_init(&pools[t][i].lock, NULL);
}
/* the pool of a device id (checked by the caller) */
static pool *pool_of(int id) {
  pthread_once(&pools_once, pools_init);
  return &pools[ln_device_type(id)][ln_device_index(id)];
}

static int size_class(size_t n, size_t *cap) {
  if (n <= 512) { *cap = 512; return 0; }
  int k = 63 - __builtin_clzll((unsigned long long)(n - 1));   /* 2^k < n <= 2^(k+1) */
  size_t base = (size_t)1 << k, quarter = base / 4;
  int q = (int)((n - base + quarter - 1) / quarter);          /* 1..4 */
  *cap = base + (size_t)q * quarter;
  return (k - 9) * 4 + q;
}

static pool *checked_pool(const char *fn, int id) { return backend_for(fn, id) ? pool_of(id) : NULL; }

int64_t ln_memory_allocated(int id) { pool *d = checked_pool("memory_allocated", id); return d ? d->allocated : -1; }
int64_t ln_memory_cached(int id) { pool *d = checked_pool("memory_cached", id); return d ? d->cached : -1; }
int64_t ln_memory_peak(int id) { pool *d = checked_pool("memory_peak", id); return d ? d->peak : -1; }
int64_t ln_memory_handed_out(int id) { pool *d = checked_pool("memory_handed_out", id); return d ? d->handed_out : -1; }
int64_t ln_memory_largest_block(int id) {
  pool *d = checked_pool("memory_largest_block", id);
  return d ? d->largest : -1;
}
int ln_memory_reset_peak(int id) {
  pool *d = checked_pool("memory_reset_peak", id);
  if (!d) return -1;
  pthread_mutex_lock(&d->lock);
  d->peak = d->allocated;
  d->largest = 0;
  pthread_mutex_unlock(&d->lock);
  return 0;
}

int64_t ln_memory_limit(int id) { pool *d = checked_pool("memory_limit", id); return d ? d->limit : -1; }

void ln_pool_set_limit(int id, int64_t bytes) { pool_of(id)->limit = bytes; }

int ln_memory_set_limit(int id, int64_t bytes) {
  pool *d = checked_pool("memory_set_limit", id);
  if (!d) return -1;
  if (bytes < 0) return ln_error("memory_set_limit: limit must be >= 0, got %lld", (long long)bytes);
  pthread_mutex_lock(&d->lock);
  d->limit = bytes;
  d->largest = 0;
  pthread_mutex_unlock(&d->lock);
  return 0;
}

/* with d->lock held: cached blocks given back to the backend, the largest
 * first, until `need` bytes were (or the cache is empty: INT64_MAX). Under a
 * limit only what a new block needs goes: a training step's other blocks
 * stay cached for their next turn (dropping the whole cache there made every
 * step near the limit allocate afresh). */
static void release_cached_locked(pool *d, int id, int64_t need) {
  const ln_backend *b = ln_backend_of(id);
  for (int c = NCLASS - 1; c >= 0 && need > 0; c--) {
    while (d->free_list[c] && need > 0) {
      ln_storage *s = d->free_list[c];
      d->free_list[c] = s->next_free;
      d->cached -= (int64_t)s->capacity;
      need -= (int64_t)s->capacity;
      b->rt.free(ln_device_index(id), s->data, s->capacity);
      free(s);
    }
  }
}

static void drop_cache_locked(pool *d, int id) { release_cached_locked(d, id, INT64_MAX); }

int ln_empty_cache(int id) {
  pool *d = checked_pool("empty_cache", id);
  if (!d) return -1;
  pthread_mutex_lock(&d->lock);
  drop_cache_locked(d, id);
  pthread_mutex_unlock(&d->lock);
  return 0;
}

/* Queued tasks keep their tensors until they have run: before an allocation
 * fails, a thread that is not a stream worker (the host, a data loader) lets
 * device id's streams run everything queued so far, which returns what they
 * held. A worker must not wait (its own stream, or a comm stream waiting on
 * it, would never get there). Returns whether it waited. */
static bool drain_for_memory(int id) {
  return !ln_on_stream_worker() && drain_device(ln_backend_of(id), id, NULL) > 0;
}

static int64_t allocated_now(pool *d) {
  pthread_mutex_lock(&d->lock);
  int64_t a = d->allocated;
  pthread_mutex_unlock(&d->lock);
  return a;
}

/* Waits in halves of what is queued (the oldest work first, so the device
 * keeps work while the host waits), looking at the bytes after each half. */
int64_t ln_memory_settle(int id, int64_t target) {
  pool *d = checked_pool("memory_settle", id);
  if (!d) return -1;
  int64_t a = allocated_now(d);
  if (ln_on_stream_worker()) return a;
  const ln_backend *b = ln_backend_of(id);
  for (int k = 0; k < 2 && a > target; k++) {   /* the compute stream, then the comm stream */
    ln_stream *s = stream_of(b, id, k, false);
    if (!s || !s->has_worker) continue;
    for (;;) {
      pthread_mutex_lock(&s->lock);
      int64_t done = s->completed, queued = s->submitted;
      pthread_mutex_unlock(&s->lock);
      if (done >= queued || a <= target) break;
      ln_stream_wait(s, done + (queued - done + 1) / 2);
      a = allocated_now(d);
    }
  }
  return a;
}

/* with d->lock held: a new block of cap bytes, or NULL (*over_limit says
 * whether the device's limit refused it, else the backend did) */
static ln_storage *alloc_locked(pool *d, int id, size_t cap, bool *over_limit) {
  const ln_backend *b = ln_backend_of(id);
  *over_limit = false;
  if (d->limit && d->allocated + d->cached + (int64_t)cap > d->limit)
    release_cached_locked(d, id, d->allocated + d->cached + (int64_t)cap - d->limit);
  if (d->limit && d->allocated + (int64_t)cap > d->limit) { *over_limit = true; return NULL; }
  ln_storage *s = calloc(1, sizeof *s);
  void *data = s ? b->rt.alloc(ln_device_index(id), cap) : NULL;
  if (s && !data) { drop_cache_locked(d, id); data = b->rt.alloc(ln_device_index(id), cap); }
  if (!s || !data) { free(s); return NULL; }
  s->data = data;
  s->capacity = cap;
  return s;
}

ln_storage *ln_storage_new(int id, size_t nbytes) {
  if (!backend_for("alloc", id)) return NULL;
  pool *d = pool_of(id);
  char dev[32];
  if (nbytes > ((size_t)1 << 46))
    return ln_error_null("out of memory: %zu bytes requested on %s", nbytes, ln_device_str(dev, sizeof dev, id));
  size_t cap;
  int c = size_class(nbytes, &cap);
  pthread_mutex_lock(&d->lock);
  ln_storage *s = NULL;
  if (c < NCLASS && d->free_list[c]) {
    s = d->free_list[c];
    d->free_list[c] = s->next_free;
    d->cached -= (int64_t)cap;
  } else {
    bool over_limit;
    s = alloc_locked(d, id, cap, &over_limit);
    if (!s) {   /* queued work may hold what is missing: let it run, then retry */
      pthread_mutex_unlock(&d->lock);
      bool waited = drain_for_memory(id);
      pthread_mutex_lock(&d->lock);
      if (waited && c < NCLASS && d->free_list[c]) {   /* one they returned */
        s = d->free_list[c];
        d->free_list[c] = s->next_free;
        d->cached -= (int64_t)cap;
      } else if (waited) {
        s = alloc_locked(d, id, cap, &over_limit);
      }
    }
    if (!s) {
      pthread_mutex_unlock(&d->lock);
      ln_device_str(dev, sizeof dev, id);
      if (over_limit)
        return ln_error_null("out of memory on %s: %zu bytes requested, %lld in use, limit %lld",
                             dev, nbytes, (long long)d->allocated, (long long)d->limit);
      return ln_error_null("out of memory on %s: %zu bytes requested", dev, nbytes);
    }
  }
  d->allocated += (int64_t)cap;
  if (d->allocated > d->peak) d->peak = d->allocated;
  if ((int64_t)cap > d->largest) d->largest = (int64_t)cap;
  d->handed_out += (int64_t)cap;
  pthread_mutex_unlock(&d->lock);
  s->nbytes = nbytes;
  s->device = id;
  s->next_free = NULL;
  s->version = 0;
  s->unrecorded = 0;
  atomic_store(&s->refcount, 1);
  return s;
}

void ln_storage_retain(ln_storage *s) { atomic_fetch_add(&s->refcount, 1); }

void ln_storage_release(ln_storage *s) {
  if (!s || atomic_fetch_sub(&s->refcount, 1) != 1) return;
  pool *d = pool_of(s->device);
  size_t cap;
  int c = size_class(s->capacity, &cap);
  pthread_mutex_lock(&d->lock);
  d->allocated -= (int64_t)s->capacity;
  if (c < NCLASS && ln_device_valid(s->device)) {
    s->next_free = d->free_list[c];
    d->free_list[c] = s;
    d->cached += (int64_t)s->capacity;
  } else {   /* its device is gone (fewer CPU devices now): back to the backend */
    ln_backend_of(s->device)->rt.free(ln_device_index(s->device), s->data, s->capacity);
    free(s);
  }
  pthread_mutex_unlock(&d->lock);
}
