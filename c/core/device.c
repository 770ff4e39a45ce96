/* device.c -- CPU devices: the per-device caching allocator, the in-order
 * stream (a worker thread for virtual devices, inline for the default single
 * device), events and synchronisation.
 *
 * The device table is the one process-wide piece of state in lunet, as a GPU
 * driver's device list is: devices are a property of the process. */
#define _GNU_SOURCE   /* pthread_setname_np */
#include "internal.h"
#include <errno.h>
#include <omp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#define LN_HAVE_FLUSH_DENORMAL 1
#endif

/* QUEUE_CAP: tasks a stream holds before the host waits. Deep enough for the
 * host to queue a few training steps of a small CNN (~75 tasks a step for
 * LeNet-5; with 64 the host blocked mid-step and the devices then waited for
 * its Lua: 2-device scaling 64-71% against 80-98%). How far ahead the host
 * runs is bounded by the callers that know a step (DataParallel:_pace). */
enum { QUEUE_CAP = 1024, NCLASS = 256 };

typedef struct task {
  ln_task_fn fn;
  const char *op;
  ln_storage *keep[LN_TASK_KEEP];
  int nkeep, flags;
  _Alignas(64) char args[LN_TASK_ARGS];
} task;

/* A thread waiting for a stream's progress (the host, or another stream's
 * worker waiting for an event) sleeps on a condition variable of its own in
 * one of the stream's waiter slots, and the worker wakes exactly the waiters
 * whose task is done. With one condition variable broadcast at the smallest
 * goal, the host pacing DataParallel's LeNet-5 steps woke ~4 times per wait,
 * for the other streams' workers waiting on the same stream for earlier
 * tasks: 3-4 context switches a step, each on the cores the workers need.
 * Waiters beyond NWAITERS share done_cv as before. */
enum { NWAITERS = 8 };
typedef struct {
  pthread_cond_t cv;
  int64_t seq;           /* its goal; INT64_MAX once woken */
  bool used;
} waiter;

typedef struct device {
  int id;                /* cpu:id; comm streams carry their device's id */
  bool is_comm;          /* the second (communication) stream of device id */
  int threads;
  bool has_worker;
  /* allocator */
  pthread_mutex_t alloc_lock;
  ln_storage *free_list[NCLASS];
  int64_t allocated, cached, peak, limit;
  /* stream */
  pthread_t worker;
  pthread_mutex_t lock;
  pthread_cond_t work_cv, done_cv;
  task *ring;
  int64_t submitted, completed;
  int64_t wake_at;       /* the smallest seq any waiter waits for (INT64_MAX: none) */
  int64_t shared_wake_at;  /* the smallest seq a waiter on done_cv waits for */
  waiter waiters[NWAITERS];
  bool stop;
  /* The stream's last failure. has_error: later tasks are skipped. root
   * names the failure it belongs to: a new id where a task failed by itself,
   * the producer's where it failed for another stream's failure (an event
   * wait, an aborted collective), so that one report clears them all. Once
   * reported, tasks queued before the report (up to clear_at) are still
   * skipped, then has_error clears; root, error_seq and error stay for waits
   * still in flight. */
  bool has_error, err_reported;
  char error[1024];
  int64_t error_seq;     /* index of the task that failed */
  int64_t err_root, clear_at;
} device;

static device devices[LN_MAX_CPU_DEVICES];
/* The communication streams: a second in-order stream (one thread) per
 * device, started on first use, sharing the device's memory. */
static device comm_streams[LN_MAX_CPU_DEVICES];
static int ndevices;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t config_lock = PTHREAD_MUTEX_INITIALIZER;
static int requested_devices;               /* from ln_set_cpu_devices before init */
static _Thread_local int tls_threads;       /* set by workers; 0 = inline */
static _Thread_local bool tls_worker;       /* a stream worker (compute or comm) */
static _Thread_local bool tls_failed;       /* LN_TASK_ALWAYS task on a failed stream */
static _Thread_local char tls_failure[1024];
static _Thread_local int64_t tls_failure_root;  /* that failure's root */
static _Thread_local int64_t tls_cause;     /* the running task fails for this root (0: its own) */

/* ---- reported failures -------------------------------------------------------
 * A failure is raised in Lua once: ln_sync (or ln_event_synchronize) raises
 * it and reports its root. Reporting marks every stream holding that root and
 * notes where each stream's queue stood (mark): what was queued before is the
 * failed work and is still skipped, what comes after runs. A wait queued
 * before the report that meets the failure later takes the root as reported
 * too (skipping up to its stream's mark); one queued after it does not fail.
 * Without this, a replica of a failed DataParallel step kept its error, and
 * every later step's event waits copied it into the others as a new one. */
enum { NREPORTS = 64, NSTREAMS = 2 * LN_MAX_CPU_DEVICES };
typedef struct { int64_t root; int64_t mark[NSTREAMS]; } report;
static report reports[NREPORTS];
static int64_t nreports;
static atomic_llong next_root = 1;
static pthread_mutex_t report_lock = PTHREAD_MUTEX_INITIALIZER;   /* before any stream's lock */

int ln_num_cores(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}

static int64_t parse_bytes(const char *s) {
  char *end; double v = strtod(s, &end);
  switch (*end) {
    case 'k': case 'K': v *= 1024.0; break;
    case 'm': case 'M': v *= 1024.0 * 1024; break;
    case 'g': case 'G': v *= 1024.0 * 1024 * 1024; break;
  }
  return v > 0 ? (int64_t)v : 0;
}

/* ---- flush denormals --------------------------------------------------------
 * Arithmetic on denormal floats (below 1.2e-38 in float32) takes microcode
 * assists, many times slower per operation: momentum buffers decaying toward
 * zero can spend most of a step there. ln_set_flush_denormal sets the FTZ and
 * DAZ bits of MXCSR (as torch.set_flush_denormal does) in every thread that
 * runs kernels: the caller and its OpenMP pool at once, each stream worker
 * and its pool before its next task (fp_mode is read per task). Threads that
 * a pool or the host starts later inherit the bits from their creator. */
static atomic_int fp_mode;              /* 0: IEEE denormals, 1: flushed */
static _Thread_local int tls_fp_mode;   /* this thread's bits */
static _Thread_local int tls_team;      /* the most OpenMP threads this thread asked for */

static void fp_apply_thread(int on) {
#ifdef LN_HAVE_FLUSH_DENORMAL
  unsigned csr = _mm_getcsr();
  _mm_setcsr(on ? (csr | 0x8040u) : (csr & ~0x8040u));   /* FTZ bit 15, DAZ bit 6 */
#endif
  tls_fp_mode = on;
}

/* this thread and the n threads of its OpenMP pool */
static void fp_apply_pool(int on, int n) {
  fp_apply_thread(on);
  if (n > 1) {
#pragma omp parallel num_threads(n)
    fp_apply_thread(on);
  }
}

/* ---- failures ------------------------------------------------------------------ */

static int stream_index(const device *d) { return d->is_comm ? LN_MAX_CPU_DEVICES + d->id : d->id; }
static device *stream_at(int i) {
  return i < LN_MAX_CPU_DEVICES ? &devices[i] : &comm_streams[i - LN_MAX_CPU_DEVICES];
}

/* with report_lock held: root's report, or NULL (not reported, or too long ago) */
static const report *find_report(int64_t root) {
  for (int64_t k = nreports - 1; k >= 0 && k >= nreports - NREPORTS; k--)
    if (reports[k % NREPORTS].root == root) return &reports[k % NREPORTS];
  return NULL;
}

/* with report_lock and d->lock held: d's task `op` (position d->completed)
 * failed with ln_last_error(), for failure `cause` of another stream (0: by
 * itself). A task queued after cause was reported does not fail: its caller
 * was told, and the work it waited for is no concern of the new work. */
static void record_failure(device *d, const char *op, int64_t cause) {
  int64_t seq = d->completed, clear_at = 0;
  bool reported = false;
  if (cause) {
    const report *r = find_report(cause);
    if (r) {
      clear_at = r->mark[stream_index(d)];
      if (seq >= clear_at) return;
      reported = true;
    }
  }
  snprintf(d->error, sizeof d->error, "%s (in %s, cpu:%d%s)", ln_last_error(), op, d->id,
           d->is_comm ? " comm stream" : "");
  d->has_error = true;
  d->err_reported = reported;
  d->clear_at = clear_at;
  d->error_seq = seq;
  d->err_root = cause ? cause : atomic_fetch_add(&next_root, 1);
}

/* failure root has been raised in Lua: every stream holding it skips what was
 * queued until now, then works again */
static void report_failure(int64_t root) {
  pthread_mutex_lock(&report_lock);
  report *r = &reports[nreports % NREPORTS];
  r->root = root;
  for (int i = 0; i < NSTREAMS; i++) {
    device *s = stream_at(i);
    pthread_mutex_lock(&s->lock);
    r->mark[i] = s->submitted;
    if (s->has_error && s->err_root == root && !s->err_reported) {
      s->err_reported = true;
      s->clear_at = s->submitted;
      if (s->completed >= s->clear_at) s->has_error = false;
    }
    pthread_mutex_unlock(&s->lock);
  }
  nreports++;
  pthread_mutex_unlock(&report_lock);
}

/* ---- stream worker -------------------------------------------------------- */

/* with d->lock held: block until task seq-1 of d is done */
/* with d->lock held: a waiter on done_cv for seq */
static void want_shared(device *d, int64_t seq) {
  if (seq < d->shared_wake_at) d->shared_wake_at = seq;
  if (seq < d->wake_at) d->wake_at = seq;
}

/* with d->lock held: block until task seq-1 of d is done */
static void wait_locked(device *d, int64_t seq) {
  if (d->completed >= seq) return;
  waiter *w = NULL;
  for (int i = 0; i < NWAITERS && !w; i++)
    if (!d->waiters[i].used) w = &d->waiters[i];
  if (!w) {
    while (d->completed < seq) {
      want_shared(d, seq);
      pthread_cond_wait(&d->done_cv, &d->lock);
    }
    return;
  }
  w->used = true;
  while (d->completed < seq) {
    w->seq = seq;
    if (seq < d->wake_at) d->wake_at = seq;
    pthread_cond_wait(&w->cv, &d->lock);
  }
  w->used = false;
}

/* with d->lock held, task completed-1 just done: wake the waiters it was
 * for, and note the next goal. The lock is dropped for the signals: a waiter
 * woken while the worker holds it would only sleep again on the mutex. */
static void wake_waiters(device *d) {
  pthread_cond_t *wake[NWAITERS];
  int nwake = 0;
  int64_t next = INT64_MAX;
  for (int i = 0; i < NWAITERS; i++) {
    waiter *w = &d->waiters[i];
    if (!w->used || w->seq == INT64_MAX) continue;
    if (d->completed >= w->seq) {
      w->seq = INT64_MAX;
      wake[nwake++] = &w->cv;
    } else if (w->seq < next) {
      next = w->seq;
    }
  }
  bool shared = d->completed >= d->shared_wake_at;
  if (shared) d->shared_wake_at = INT64_MAX;
  else if (d->shared_wake_at < next) next = d->shared_wake_at;
  d->wake_at = next;
  pthread_mutex_unlock(&d->lock);
  for (int i = 0; i < nwake; i++) pthread_cond_signal(wake[i]);
  if (shared) pthread_cond_broadcast(&d->done_cv);
  pthread_mutex_lock(&d->lock);
}

static void *worker_main(void *arg) {
  device *d = arg;
  char name[16];   /* what top -H, perf and gdb show for the thread */
  snprintf(name, sizeof name, "lunet %s%d", d->is_comm ? "comm" : "cpu", d->id);
  pthread_setname_np(pthread_self(), name);
  tls_threads = d->threads;
  tls_worker = true;
  omp_set_num_threads(d->threads);
  pthread_mutex_lock(&d->lock);
  for (;;) {
    while (d->completed == d->submitted && !d->stop) pthread_cond_wait(&d->work_cv, &d->lock);
    if (d->completed == d->submitted && d->stop) break;
    task *t = &d->ring[d->completed % QUEUE_CAP];
    bool skip = d->has_error && !(t->flags & LN_TASK_ALWAYS);
    tls_failed = d->has_error;
    if (tls_failed) snprintf(tls_failure, sizeof tls_failure, "%s", d->error);
    tls_failure_root = d->err_root;
    tls_cause = 0;
    pthread_mutex_unlock(&d->lock);
    tls_threads = d->threads;
    if (tls_threads > tls_team) tls_team = tls_threads;
    int mode = atomic_load_explicit(&fp_mode, memory_order_relaxed);
    if (mode != tls_fp_mode) fp_apply_pool(mode, tls_team);
    int rc = skip ? 0 : t->fn(t->args);
    tls_failed = false;
    for (int i = 0; i < t->nkeep; i++) ln_storage_release(t->keep[i]);
    if (rc != 0) {
      pthread_mutex_lock(&report_lock);
      pthread_mutex_lock(&d->lock);
      if (!d->has_error) record_failure(d, t->op, tls_cause);
      pthread_mutex_unlock(&report_lock);
    } else {
      pthread_mutex_lock(&d->lock);
    }
    d->completed++;
    if (d->has_error && d->err_reported && d->completed >= d->clear_at) d->has_error = false;
    /* wake waiters only when the one nearest its goal is there: a broadcast per
     * task would wake a host waiting for queue space (or another stream waiting
     * for an event) once per task, a context switch each on a busy machine */
    if (d->completed >= d->wake_at) wake_waiters(d);
  }
  pthread_mutex_unlock(&d->lock);
  return NULL;
}

static int start_stream(device *d) {
  int i = d->id;
  if (!d->ring && !(d->ring = aligned_alloc(64, sizeof(task) * QUEUE_CAP)))
    return ln_error("set_cpu_devices: out of memory for the stream of cpu:%d", i);
  d->stop = false;
  /* the worker (and the OpenMP pool it starts) is born with the process's
   * asynchronous signals blocked, so that they reach the thread running Lua:
   * luajit's SIGINT handler and its profiler's SIGPROF act on the Lua state,
   * which they must not do from another thread. Faults stay deliverable. */
  sigset_t all, old;
  sigfillset(&all);
  int faults[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT, SIGSYS};
  for (size_t k = 0; k < sizeof faults / sizeof faults[0]; k++) sigdelset(&all, faults[k]);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = pthread_create(&d->worker, NULL, worker_main, d);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc != 0) return ln_error("set_cpu_devices: cannot start the worker of cpu:%d", i);
  d->has_worker = true;
  return 0;
}
static int start_worker(int i) { return start_stream(&devices[i]); }

static void stop_stream(device *d) {
  if (!d->has_worker) return;
  pthread_mutex_lock(&d->lock);
  d->stop = true;
  pthread_cond_broadcast(&d->work_cv);
  pthread_mutex_unlock(&d->lock);
  pthread_join(d->worker, NULL);
  d->has_worker = false;
}
static void stop_worker(int i) { stop_stream(&devices[i]); }

static void share_cores(int n) {
  int cores = ln_num_cores();
  for (int i = 0; i < n; i++) {
    int share = cores / n + (i < cores % n ? 1 : 0);
    devices[i].threads = share > 0 ? share : 1;
  }
}

static int configure(int n) {
  int64_t limit = 0;
  const char *mem = getenv("LUNET_CPU_MEMORY");
  if (mem) limit = parse_bytes(mem);
  for (int i = 0; i < n; i++) {
    device *d = &devices[i];
    if (i >= ndevices) d->limit = limit;
  }
  share_cores(n);
  ndevices = n;
  if (n > 1)
    for (int i = 0; i < n; i++)
      if (!devices[i].has_worker && start_worker(i) != 0) return -1;
  return 0;
}

static void runtime_init_once(void) {
  for (int i = 0; i < LN_MAX_CPU_DEVICES; i++) {
    devices[i].id = comm_streams[i].id = i;
    comm_streams[i].is_comm = true;
    comm_streams[i].threads = 1;   /* the collectives are memory-bound */
    pthread_mutex_init(&comm_streams[i].lock, NULL);
    pthread_cond_init(&comm_streams[i].work_cv, NULL);
    pthread_cond_init(&comm_streams[i].done_cv, NULL);
    comm_streams[i].wake_at = comm_streams[i].shared_wake_at = INT64_MAX;
    for (int w = 0; w < NWAITERS; w++) pthread_cond_init(&comm_streams[i].waiters[w].cv, NULL);
    pthread_mutex_init(&devices[i].alloc_lock, NULL);
    pthread_mutex_init(&devices[i].lock, NULL);
    pthread_cond_init(&devices[i].work_cv, NULL);
    pthread_cond_init(&devices[i].done_cv, NULL);
    devices[i].wake_at = devices[i].shared_wake_at = INT64_MAX;
    for (int w = 0; w < NWAITERS; w++) pthread_cond_init(&devices[i].waiters[w].cv, NULL);
  }
  int n = requested_devices;
  const char *env = getenv("LUNET_CPU_DEVICES");
  if (!n && env) n = atoi(env);
  if (n < 1) n = 1;
  if (n > LN_MAX_CPU_DEVICES) n = LN_MAX_CPU_DEVICES;
  if (configure(n) != 0) { fprintf(stderr, "lunet: %s\n", ln_last_error()); configure(1); }
}

void ln_runtime_init(void) { pthread_once(&init_once, runtime_init_once); }

int ln_set_cpu_devices(int n) {
  if (n < 1 || n > LN_MAX_CPU_DEVICES)
    return ln_error("set_cpu_devices: count must be in 1..%d, got %d", LN_MAX_CPU_DEVICES, n);
  pthread_mutex_lock(&config_lock);
  requested_devices = n;
  ln_runtime_init();
  int rc = 0;
  if (n != ndevices) {
    if (ln_sync_all() != 0) rc = -1;
    for (int i = n; i < ndevices && rc == 0; i++)
      if (devices[i].allocated > 0)
        rc = ln_error("set_cpu_devices: cpu:%d still holds %lld bytes of live tensors",
                      i, (long long)devices[i].allocated);
    if (rc == 0) {
      int old = ndevices;
      for (int i = 0; i < old; i++) stop_stream(&comm_streams[i]);   /* restarted on use */
      for (int i = (n == 1 ? 0 : n); i < old; i++) stop_worker(i);
      for (int i = n; i < old; i++) ln_empty_cache(i);
      rc = configure(n);
    }
  }
  pthread_mutex_unlock(&config_lock);
  return rc;
}

int ln_cpu_device_count(void) { ln_runtime_init(); return ndevices; }

static device *get_device(const char *fn, int id) {
  ln_runtime_init();
  if (id >= 0 && id < ndevices) return &devices[id];
  if (id >= LN_CUDA_BASE)
    return ln_error_null("%s: cuda:%d is not available (no CUDA backend loaded)", fn,
                         id - LN_CUDA_BASE);
  return ln_error_null("%s: no device cpu:%d (there %s %d CPU device%s)", fn, id,
                       ndevices == 1 ? "is" : "are", ndevices, ndevices == 1 ? "" : "s");
}

int ln_device_valid(int id) { ln_runtime_init(); return id >= 0 && id < ndevices; }
int ln_device_is_inline(int id) { return !devices[id].has_worker; }

int ln_device_threads(int id) {
  device *d = get_device("device_threads", id);
  return d ? d->threads : -1;
}

int ln_set_device_threads(int id, int nthreads) {
  device *d = get_device("set_device_threads", id);
  if (!d) return -1;
  if (nthreads < 1) return ln_error("set_device_threads: need at least 1 thread, got %d", nthreads);
  if (nthreads > 1024)   /* (a pool that size is a mistake, not a setting) */
    return ln_error("set_device_threads: at most 1024 threads, got %d", nthreads);
  if (ln_sync(id) != 0) return -1;
  d->threads = nthreads;   /* the worker reads it per task */
  return 0;
}

int ln_set_flush_denormal(int on) {
#ifdef LN_HAVE_FLUSH_DENORMAL
  on = on != 0;
  ln_runtime_init();
  atomic_store(&fp_mode, on);
  /* the host runs the single device's kernels inline, on its own pool */
  int n = ln_num_cores();
  for (int i = 0; i < ndevices; i++) n = LN_MAX(n, devices[i].threads);
  fp_apply_pool(on, n);
  return 1;
#else
  (void)on;
  return 0;
#endif
}

int ln_flush_denormal(void) { return atomic_load(&fp_mode); }

int ln_kernel_threads(void) {
  if (tls_threads > 0) return tls_threads;
  return ndevices > 0 ? devices[0].threads : ln_num_cores();
}

/* ---- launch, sync, events -------------------------------------------------- */

bool ln_stream_failed(void) { return tls_failed; }
const char *ln_stream_failure(void) { return tls_failed ? tls_failure : ""; }
int64_t ln_stream_failure_root(void) { return tls_failed ? tls_failure_root : 0; }
void ln_stream_fail_from(int64_t root) { tls_cause = root; }

static int enqueue(device *d, const char *op, ln_task_fn fn, const void *args, size_t argsize,
                   const ln_tensor *const *keep, int nkeep, int flags, int64_t *seq);

int ln_launch(int id, const char *op, ln_task_fn fn, const void *args, size_t argsize,
              const ln_tensor *const *keep, int nkeep) {
  return ln_launch_seq(id, op, fn, args, argsize, keep, nkeep, 0, NULL);
}

int ln_launch_flags(int id, const char *op, ln_task_fn fn, const void *args, size_t argsize,
                    const ln_tensor *const *keep, int nkeep, int flags) {
  return ln_launch_seq(id, op, fn, args, argsize, keep, nkeep, flags, NULL);
}

int ln_launch_seq(int id, const char *op, ln_task_fn fn, const void *args, size_t argsize,
                  const ln_tensor *const *keep, int nkeep, int flags, int64_t *seq) {
  device *d = get_device(op, id);
  if (seq) *seq = -1;
  if (!d) return -1;
  if (argsize > LN_TASK_ARGS || nkeep > LN_TASK_KEEP)
    return ln_error("%s: internal: task too large (%zu bytes, %d tensors)", op, argsize, nkeep);
  if (!d->has_worker) {
    /* inline: run now; an error surfaces at once */
    if (d->has_error) return ln_sync(id);
    char buf[LN_TASK_ARGS] __attribute__((aligned(64)));
    memcpy(buf, args, argsize);
    return fn(buf);
  }
  return enqueue(d, op, fn, args, argsize, keep, nkeep, flags, seq);
}

static int enqueue(device *d, const char *op, ln_task_fn fn, const void *args, size_t argsize,
                   const ln_tensor *const *keep, int nkeep, int flags, int64_t *seq) {
  pthread_mutex_lock(&d->lock);
  /* full: wait until half of it is done, not for one slot (see worker_main) */
  if (d->submitted - d->completed >= QUEUE_CAP) wait_locked(d, d->submitted - QUEUE_CAP / 2);
  task *t = &d->ring[d->submitted % QUEUE_CAP];
  t->fn = fn; t->op = op; t->nkeep = 0; t->flags = flags;
  for (int i = 0; i < nkeep; i++)
    if (keep[i] && keep[i]->storage) {
      ln_storage_retain(keep[i]->storage);
      t->keep[t->nkeep++] = keep[i]->storage;
    }
  memcpy(t->args, args, argsize);
  if (seq) *seq = d->submitted;
  d->submitted++;
  pthread_cond_signal(&d->work_cv);
  pthread_mutex_unlock(&d->lock);
  return 0;
}

static int wait_seq(device *d, int64_t seq) {
  pthread_mutex_lock(&d->lock);
  wait_locked(d, seq);
  pthread_mutex_unlock(&d->lock);
  return 0;
}

void ln_stream_wait_started(int id, int64_t seq) {
  device *d = get_device("stream_wait_started", id);
  if (d && d->has_worker && seq >= 0) wait_seq(d, seq);
}

int ln_sync(int id) {
  device *d = get_device("sync", id);
  if (!d) return -1;
  device *cs = &comm_streams[id];
  if (d->has_worker) wait_seq(d, d->submitted);
  if (cs->has_worker) wait_seq(cs, cs->submitted);
  /* the compute stream's error first, else the comm stream's; an error raised
   * before (its failure reported) is not raised again */
  device *streams[2] = {d, cs};
  int64_t roots[2] = {0, 0};
  int rc = 0;
  for (int k = 0; k < 2; k++) {
    pthread_mutex_lock(&streams[k]->lock);
    if (streams[k]->has_error && !streams[k]->err_reported) {
      if (rc == 0) rc = ln_error("%s", streams[k]->error);
      roots[k] = streams[k]->err_root;
    }
    pthread_mutex_unlock(&streams[k]->lock);
  }
  if (roots[0]) report_failure(roots[0]);
  if (roots[1] && roots[1] != roots[0]) report_failure(roots[1]);
  return rc;
}

int ln_sync_all(void) {
  ln_runtime_init();
  int rc = 0;
  char first[1024] = "";
  for (int i = 0; i < ndevices; i++)
    if (ln_sync(i) != 0 && rc == 0) { rc = -1; snprintf(first, sizeof first, "%s", ln_last_error()); }
  return rc ? ln_error("%s", first) : 0;
}

/* Device id's compute and comm streams run what is queued so far; until
 * (NULL: no limit) bounds the wait. Returns -1 when it passed first (error
 * set), else whether there was anything to wait for. */
static int drain_device(int id, const struct timespec *until) {
  device *streams[2] = {&devices[id], &comm_streams[id]};
  int waited = 0;
  for (int k = 0; k < 2; k++) {
    device *d = streams[k];
    if (!d->has_worker) continue;
    pthread_mutex_lock(&d->lock);
    int64_t seq = d->submitted;
    if (d->completed < seq) waited = 1;
    if (!until) wait_locked(d, seq);
    while (until && d->completed < seq) {
      want_shared(d, seq);
      if (pthread_cond_timedwait(&d->done_cv, &d->lock, until) == ETIMEDOUT && d->completed < seq) {
        int64_t left = seq - d->completed;
        pthread_mutex_unlock(&d->lock);
        return ln_error("drain: cpu:%d%s still has %lld tasks queued", d->id, d->is_comm ? " comm stream" : "",
                        (long long)left);
      }
    }
    pthread_mutex_unlock(&d->lock);
  }
  return waited;
}

/* Every stream runs what is queued, or timeout_s passes (then -1). For the
 * end of a process: a worker still inside oneDNN while exit() tears down
 * its globals crashed scripts that ended without a synchronize. Errors stay
 * where they are (nobody is left to report them to). (No ln_runtime_init:
 * before it no stream has a worker, and starting them at exit is waste.) */
int ln_drain(double timeout_s) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);   /* (pthread_cond_timedwait's clock) */
  double whole = timeout_s > 0 ? timeout_s : 0;
  until.tv_sec += (time_t)whole;
  until.tv_nsec += (long)((whole - (double)(time_t)whole) * 1e9);
  if (until.tv_nsec >= 1000000000L) { until.tv_sec++; until.tv_nsec -= 1000000000L; }
  for (int i = 0; i < LN_MAX_CPU_DEVICES; i++)
    if (drain_device(i, &until) < 0) {
      char msg[512];   /* (ln_error must not read the buffer it writes) */
      snprintf(msg, sizeof msg, "%s", ln_last_error());
      return ln_error("%s after %g s", msg, timeout_s);
    }
  return 0;
}

int ln_event_record(int id, ln_event *ev) {
  device *d = get_device("event_record", id);
  if (!d) return -1;
  ev->device = id;
  pthread_mutex_lock(&d->lock);
  ev->seq = d->submitted;
  pthread_mutex_unlock(&d->lock);
  return 0;
}

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

/* Did the producer fail before seq (so the work waited for failed or was
 * skipped)? Then the consumer must not go on silently with stale data: it
 * fails too, naming the producer, as part of the producer's failure (*root;
 * *reported: raised in Lua already). A failure reported before this wait's
 * event was recorded is none of its business. */
static int check_producer(const char *fn, device *p, int64_t seq, int64_t *root, bool *reported) {
  int rc = 0;
  pthread_mutex_lock(&p->lock);
  if (p->err_root && p->error_seq < seq && !(p->err_reported && seq > p->clear_at)) {
    rc = ln_error("%s: cpu:%d%s, whose work this waits for, failed: %s", fn, p->id,
                  p->is_comm ? " comm stream" : "", p->error);
    *root = p->err_root;
    *reported = p->err_reported;
  }
  pthread_mutex_unlock(&p->lock);
  return rc;
}

typedef struct { device *producer; int64_t seq; } wait_args;
static int wait_task(void *p) {
  wait_args *a = p;
  wait_seq(a->producer, a->seq);
  int64_t root = 0;
  bool reported;
  int rc = check_producer("event_wait", a->producer, a->seq, &root, &reported);
  if (rc) ln_stream_fail_from(root);
  return rc;
}

int ln_event_wait(int id, const ln_event *ev) {
  device *d = get_device("event_wait", id);
  device *p = get_device("event_wait", ev->device);
  if (!d || !p) return -1;
  if (!p->has_worker || id == ev->device) return 0;   /* already ordered */
  if (!d->has_worker) return wait_seq(p, ev->seq);   /* inline consumer: block */
  wait_args a = {p, ev->seq};
  return ln_launch(id, "event_wait", wait_task, &a, sizeof a, NULL, 0);
}

int ln_event_synchronize(const ln_event *ev) {
  device *p = get_device("event_synchronize", ev->device);
  if (!p) return -1;
  if (!p->has_worker) return 0;
  wait_seq(p, ev->seq);
  int64_t root = 0;
  bool reported = false;
  if (check_producer("event_synchronize", p, ev->seq, &root, &reported) == 0 || reported) return 0;
  report_failure(root);   /* raised now, once */
  return -1;
}

int ln_event_query(const ln_event *ev) {
  device *p = get_device("event_query", ev->device);
  if (!p) return -1;
  pthread_mutex_lock(&p->lock);
  int done = p->completed >= ev->seq;
  pthread_mutex_unlock(&p->lock);
  return done;
}

/* ---- the communication stream ---------------------------------------------- */
/* Device id's second stream (CUDA/NCCL style): collectives queued there run
 * while the compute stream goes on. ln_comm_stream_wait_compute orders it
 * after the compute stream's work queued so far; ln_stream_wait_comm orders
 * the compute stream after the comm stream's. A failure on one stream
 * reaches the other through these waits (the waiting task fails, naming the
 * producer), so a collective behind a failed compute stream aborts. */

static device *comm_stream(const char *fn, int id) {
  device *d = get_device(fn, id);
  if (!d) return NULL;
  if (!d->has_worker) return ln_error_null("%s: cpu:%d runs inline and has no comm stream", fn, id);
  device *cs = &comm_streams[id];
  pthread_mutex_lock(&config_lock);
  int rc = cs->has_worker ? 0 : start_stream(cs);
  pthread_mutex_unlock(&config_lock);
  return rc == 0 ? cs : NULL;
}

int ln_device_has_comm_stream(int id) { return ln_device_valid(id) && devices[id].has_worker; }

int ln_launch_comm(int id, const char *op, ln_task_fn fn, const void *args, size_t argsize,
                   const ln_tensor *const *keep, int nkeep, int flags) {
  device *cs = comm_stream(op, id);
  if (!cs) return -1;
  if (argsize > LN_TASK_ARGS || nkeep > LN_TASK_KEEP)
    return ln_error("%s: internal: task too large (%zu bytes, %d tensors)", op, argsize, nkeep);
  return enqueue(cs, op, fn, args, argsize, keep, nkeep, flags, NULL);
}

static int stream_wait(device *consumer, device *producer, const char *op) {
  pthread_mutex_lock(&producer->lock);
  int64_t seq = producer->submitted;
  pthread_mutex_unlock(&producer->lock);
  wait_args a = {producer, seq};
  return enqueue(consumer, op, wait_task, &a, sizeof a, NULL, 0, 0, NULL);
}

int ln_comm_stream_wait_compute(int id) {
  device *cs = comm_stream("comm_stream_wait", id);
  return cs ? stream_wait(cs, &devices[id], "comm_stream_wait") : -1;
}

int ln_stream_wait_comm(int id) {
  device *d = get_device("stream_wait_comm", id);
  if (!d) return -1;
  device *cs = &comm_streams[id];
  if (!d->has_worker || !cs->has_worker) return 0;   /* nothing ever queued there */
  return stream_wait(d, cs, "stream_wait_comm");
}

int ln_comm_stream_timestamp(int id, double *out) {
  if (!out) return ln_error("comm_stream_timestamp: out is NULL");
  stamp_args a = {out};
  return ln_launch_comm(id, "comm_stream_timestamp", stamp_task, &a, sizeof a, NULL, 0, 0);
}

/* ---- caching allocator ----------------------------------------------------- */
/* Size classes: 512 B, then four per power of two (2^k * 1, 1.25, 1.5, 1.75),
 * so at most 25% is wasted and a training loop's repeated shapes reuse blocks. */

static int size_class(size_t n, size_t *cap) {
  if (n <= 512) { *cap = 512; return 0; }
  int k = 63 - __builtin_clzll((unsigned long long)(n - 1));   /* 2^k < n <= 2^(k+1) */
  size_t base = (size_t)1 << k, quarter = base / 4;
  int q = (int)((n - base + quarter - 1) / quarter);          /* 1..4 */
  *cap = base + (size_t)q * quarter;
  return (k - 9) * 4 + q;
}

int64_t ln_memory_allocated(int id) { device *d = get_device("memory_allocated", id); return d ? d->allocated : -1; }
int64_t ln_memory_cached(int id) { device *d = get_device("memory_cached", id); return d ? d->cached : -1; }
int64_t ln_memory_peak(int id) { device *d = get_device("memory_peak", id); return d ? d->peak : -1; }

int ln_memory_set_limit(int id, int64_t bytes) {
  device *d = get_device("memory_set_limit", id);
  if (!d) return -1;
  if (bytes < 0) return ln_error("memory_set_limit: limit must be >= 0, got %lld", (long long)bytes);
  d->limit = bytes;
  return 0;
}

static void drop_cache_locked(device *d) {
  for (int c = 0; c < NCLASS; c++) {
    ln_storage *s = d->free_list[c];
    while (s) {
      ln_storage *next = s->next_free;
      d->cached -= (int64_t)s->capacity;
      free(s->data);
      free(s);
      s = next;
    }
    d->free_list[c] = NULL;
  }
}

int ln_empty_cache(int id) {
  device *d = get_device("empty_cache", id);
  if (!d) return -1;
  pthread_mutex_lock(&d->alloc_lock);
  drop_cache_locked(d);
  pthread_mutex_unlock(&d->alloc_lock);
  return 0;
}

/* Queued tasks keep their tensors until they have run: before an allocation
 * fails, a thread that is not a stream worker (the host, a data loader) lets
 * device d's streams run everything queued so far, which returns what they
 * held. A worker must not wait (its own stream, or a comm stream waiting on
 * it, would never get there). Returns whether it waited. */
static bool drain_for_memory(device *d) { return !tls_worker && drain_device(d->id, NULL) > 0; }

/* with d->alloc_lock held: a new block of cap bytes, or NULL (*over_limit
 * says whether the device's limit refused it, else the system did) */
static ln_storage *alloc_locked(device *d, size_t cap, bool *over_limit) {
  *over_limit = false;
  if (d->limit && d->allocated + d->cached + (int64_t)cap > d->limit) drop_cache_locked(d);
  if (d->limit && d->allocated + (int64_t)cap > d->limit) { *over_limit = true; return NULL; }
  ln_storage *s = calloc(1, sizeof *s);
  void *data = s ? aligned_alloc(LN_ALIGN, cap) : NULL;
  if (s && !data) { drop_cache_locked(d); data = aligned_alloc(LN_ALIGN, cap); }
  if (!s || !data) { free(s); return NULL; }
  s->data = data;
  s->capacity = cap;
  return s;
}

ln_storage *ln_storage_new(int id, size_t nbytes) {
  device *d = get_device("alloc", id);
  if (!d) return NULL;
  if (nbytes > ((size_t)1 << 46))
    return ln_error_null("out of memory: %zu bytes requested on cpu:%d", nbytes, id);
  size_t cap;
  int c = size_class(nbytes, &cap);
  pthread_mutex_lock(&d->alloc_lock);
  ln_storage *s = NULL;
  if (c < NCLASS && d->free_list[c]) {
    s = d->free_list[c];
    d->free_list[c] = s->next_free;
    d->cached -= (int64_t)cap;
  } else {
    bool over_limit;
    s = alloc_locked(d, cap, &over_limit);
    if (!s) {   /* queued work may hold what is missing: let it run, then retry */
      pthread_mutex_unlock(&d->alloc_lock);
      bool waited = drain_for_memory(d);
      pthread_mutex_lock(&d->alloc_lock);
      if (waited && c < NCLASS && d->free_list[c]) {   /* one they returned */
        s = d->free_list[c];
        d->free_list[c] = s->next_free;
        d->cached -= (int64_t)cap;
      } else if (waited) {
        s = alloc_locked(d, cap, &over_limit);
      }
    }
    if (!s) {
      pthread_mutex_unlock(&d->alloc_lock);
      if (over_limit)
        return ln_error_null("out of memory on cpu:%d: %zu bytes requested, %lld in use, limit %lld",
                             id, nbytes, (long long)d->allocated, (long long)d->limit);
      return ln_error_null("out of memory on cpu:%d: %zu bytes requested", id, nbytes);
    }
  }
  d->allocated += (int64_t)cap;
  if (d->allocated > d->peak) d->peak = d->allocated;
  pthread_mutex_unlock(&d->alloc_lock);
  s->nbytes = nbytes;
  s->device = id;
  s->next_free = NULL;
  atomic_store(&s->refcount, 1);
  return s;
}

void ln_storage_retain(ln_storage *s) { atomic_fetch_add(&s->refcount, 1); }

void ln_storage_release(ln_storage *s) {
  if (!s || atomic_fetch_sub(&s->refcount, 1) != 1) return;
  device *d = &devices[s->device];
  size_t cap;
  int c = size_class(s->capacity, &cap);
  pthread_mutex_lock(&d->alloc_lock);
  d->allocated -= (int64_t)s->capacity;
  if (c < NCLASS && s->device < ndevices) {
    s->next_free = d->free_list[c];
    d->free_list[c] = s;
    d->cached += (int64_t)s->capacity;
  } else {
    free(s->data);
    free(s);
  }
  pthread_mutex_unlock(&d->alloc_lock);
}

int ln_cuda_device_count(void) { return 0; }
