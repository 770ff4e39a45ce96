/* stream.c -- host streams (stream.h): the task queue, its waiters, the
 * storages queued work keeps alive, and error propagation; generic over
 * device types. A backend's thread serves a stream through ln_stream_start. */
#define _GNU_SOURCE   /* pthread_setname_np */
#include "stream.h"
#include "backend.h"
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* QUEUE_CAP: tasks a stream holds before the host waits. Deep enough for the
 * host to queue a few training steps of a small CNN (~75 tasks a step for
 * LeNet-5; with 64 the host blocked mid-step and the devices then waited for
 * its Lua: 2-device scaling 64-71% against 80-98%). How far ahead the host
 * runs is bounded by the callers that know a step (DataParallel:_pace). */
enum { QUEUE_CAP = 1024 };

typedef struct ln_task {
  ln_task_fn fn;
  const char *op;
  ln_storage *keep[LN_TASK_KEEP];
  int nkeep, flags;
  _Alignas(64) char args[LN_TASK_ARGS];
} task;

void ln_host_parallel_for(int64_t n, int64_t grain, ln_range_fn fn, void *ctx) {
  const ln_backend *host = ln_backends[LN_TYPE_CPU];
  if (host && host->rt.parallel_for) host->rt.parallel_for(n, grain, fn, ctx);
  else if (n > 0) fn(ctx, 0, n);
}

static _Thread_local bool tls_worker;       /* a stream worker (compute or comm) */
static _Thread_local bool tls_failed;       /* LN_TASK_ALWAYS task on a failed stream */
static _Thread_local char tls_failure[1024];
static _Thread_local int64_t tls_failure_root;  /* that failure's root */
static _Thread_local int64_t tls_cause;     /* the running task fails for this root (0: its own) */

bool ln_on_stream_worker(void) { return tls_worker; }

/* ---- reported failures -------------------------------------------------------
 * A failure is raised in Lua once: ln_sync (or ln_event_synchronize) raises
 * it and reports its root. Reporting marks every stream holding that root and
 * notes where each stream's queue stood (mark): what was queued before is the
 * failed work and is still skipped, what comes after runs. A wait queued
 * before the report that meets the failure later takes the root as reported
 * too (skipping up to its stream's mark); one queued after it does not fail.
 * Without this, a replica of a failed DataParallel step kept its error, and
 * every later step's event waits copied it into the others as a new one. */
enum { NREPORTS = 64 };
typedef struct { int64_t root; int64_t mark[LN_MAX_STREAMS]; } report;
static report reports[NREPORTS];
static int64_t nreports;
static atomic_llong next_root = 1;
static pthread_mutex_t report_lock = PTHREAD_MUTEX_INITIALIZER;   /* before any stream's lock */
static ln_stream *streams[LN_MAX_STREAMS];   /* every initialised stream, by slot */
static atomic_int nstreams;

void ln_stream_init(ln_stream *s, int device, bool is_comm) {
  memset(s, 0, sizeof *s);
  s->device = device;
  s->is_comm = is_comm;
  pthread_mutex_init(&s->lock, NULL);
  pthread_cond_init(&s->work_cv, NULL);
  pthread_cond_init(&s->done_cv, NULL);
  s->wake_at = s->shared_wake_at = INT64_MAX;
  for (int w = 0; w < LN_STREAM_WAITERS; w++) pthread_cond_init(&s->waiters[w].cv, NULL);
  pthread_mutex_lock(&report_lock);
  int slot = atomic_load(&nstreams);
  if (slot < LN_MAX_STREAMS) {   /* (beyond: its failures are raised, but not cleared by a report) */
    s->slot = slot;
    streams[slot] = s;
    atomic_store(&nstreams, slot + 1);
  } else {
    s->slot = -1;
  }
  pthread_mutex_unlock(&report_lock);
}

static const char *stream_name(char *buf, size_t n, const ln_stream *d) {
  char dev[32];
  snprintf(buf, n, "%s%s", ln_device_str(dev, sizeof dev, d->device), d->is_comm ? " comm stream" : "");
  return buf;
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
static void record_failure(ln_stream *d, const char *op, int64_t cause) {
  int64_t seq = d->completed, clear_at = 0;
  bool reported = false;
  if (cause) {
    const report *r = find_report(cause);
    if (r && d->slot >= 0) {
      clear_at = r->mark[d->slot];
      if (seq >= clear_at) return;
      reported = true;
    }
  }
  char dev[48];
  snprintf(d->error, sizeof d->error, "%s (in %s, %s)", ln_last_error(), op, stream_name(dev, sizeof dev, d));
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
  int n = atomic_load(&nstreams);
  for (int i = 0; i < n; i++) {
    ln_stream *s = streams[i];
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

bool ln_stream_failed(void) { return tls_failed; }
const char *ln_stream_failure(void) { return tls_failed ? tls_failure : ""; }
int64_t ln_stream_failure_root(void) { return tls_failed ? tls_failure_root : 0; }
void ln_stream_fail_from(int64_t root) { tls_cause = root; }

/* ---- stream worker -------------------------------------------------------- */

/* with d->lock held: block until task seq-1 of d is done */
/* with d->lock held: a waiter on done_cv for seq */
static void want_shared(ln_stream *d, int64_t seq) {
  if (seq < d->shared_wake_at) d->shared_wake_at = seq;
  if (seq < d->wake_at) d->wake_at = seq;
}

/* with d->lock held: block until task seq-1 of d is done */
static void wait_locked(ln_stream *d, int64_t seq) {
  if (d->completed >= seq) return;
  ln_waiter *w = NULL;
  for (int i = 0; i < LN_STREAM_WAITERS && !w; i++)
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
static void wake_waiters(ln_stream *d) {
  pthread_cond_t *wake[LN_STREAM_WAITERS];
  int nwake = 0;
  int64_t next = INT64_MAX;
  for (int i = 0; i < LN_STREAM_WAITERS; i++) {
    ln_waiter *w = &d->waiters[i];
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

typedef struct {
  ln_stream *d;
  char name[16];
  void (*before_task)(void *);
  void *ctx;
} worker_args;

static void *worker_main(void *arg) {
  worker_args wa = *(worker_args *)arg;
  free(arg);
  ln_stream *d = wa.d;
  pthread_setname_np(pthread_self(), wa.name);   /* what top -H, perf and gdb show */
  tls_worker = true;
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
    if (wa.before_task) wa.before_task(wa.ctx);
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

int ln_stream_start(ln_stream *d, const char *name, void (*before_task)(void *), void *ctx) {
  char dev[48];
  if (d->has_worker) return 0;
  if (!d->ring && !(d->ring = aligned_alloc(64, sizeof(task) * QUEUE_CAP)))
    return ln_error("out of memory for the stream of %s", stream_name(dev, sizeof dev, d));
  worker_args *wa = malloc(sizeof *wa);
  if (!wa) return ln_error("out of memory for the stream of %s", stream_name(dev, sizeof dev, d));
  wa->d = d;
  snprintf(wa->name, sizeof wa->name, "%s", name);
  wa->before_task = before_task;
  wa->ctx = ctx;
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
  int rc = pthread_create(&d->worker, NULL, worker_main, wa);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc != 0) {
    free(wa);
    return ln_error("cannot start the worker of %s", stream_name(dev, sizeof dev, d));
  }
  d->has_worker = true;
  return 0;
}

void ln_stream_stop(ln_stream *d) {
  if (!d->has_worker) return;
  pthread_mutex_lock(&d->lock);
  d->stop = true;
  pthread_cond_broadcast(&d->work_cv);
  pthread_mutex_unlock(&d->lock);
  pthread_join(d->worker, NULL);
  d->has_worker = false;
}

/* ---- launch, wait, events ---------------------------------------------------- */

static int enqueue(ln_stream *d, const char *op, ln_task_fn fn, const void *args, size_t argsize,
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

int ln_stream_launch(ln_stream *d, const char *op, ln_task_fn fn, const void *args, size_t argsize,
                     const ln_tensor *const *keep, int nkeep, int flags, int64_t *seq) {
  if (seq) *seq = -1;
  if (argsize > LN_TASK_ARGS || nkeep > LN_TASK_KEEP)
    return ln_error("%s: internal: task too large (%zu bytes, %d tensors)", op, argsize, nkeep);
  if (!d->has_worker) {
    /* inline: run now; an error surfaces at once */
    if (d->has_error) { ln_stream *one[1] = {d}; return ln_stream_raise(one, 1); }
    char buf[LN_TASK_ARGS] __attribute__((aligned(64)));
    memcpy(buf, args, argsize);
    return fn(buf);
  }
  return enqueue(d, op, fn, args, argsize, keep, nkeep, flags, seq);
}

int64_t ln_stream_submitted(ln_stream *d) {
  pthread_mutex_lock(&d->lock);
  int64_t seq = d->submitted;
  pthread_mutex_unlock(&d->lock);
  return seq;
}

void ln_stream_wait(ln_stream *d, int64_t seq) {
  pthread_mutex_lock(&d->lock);
  wait_locked(d, seq);
  pthread_mutex_unlock(&d->lock);
}

int ln_stream_query(ln_stream *d, int64_t seq) {
  pthread_mutex_lock(&d->lock);
  int done = d->completed >= seq;
  pthread_mutex_unlock(&d->lock);
  return done;
}

int ln_stream_drain(ln_stream *d, const struct timespec *until) {
  if (!d->has_worker) return 0;
  pthread_mutex_lock(&d->lock);
  int64_t seq = d->submitted;
  int waited = d->completed < seq;
  if (!until) wait_locked(d, seq);
  while (until && d->completed < seq) {
    want_shared(d, seq);
    if (pthread_cond_timedwait(&d->done_cv, &d->lock, until) == ETIMEDOUT && d->completed < seq) {
      int64_t left = seq - d->completed;
      pthread_mutex_unlock(&d->lock);
      char dev[48];
      return ln_error("drain: %s still has %lld tasks queued", stream_name(dev, sizeof dev, d), (long long)left);
    }
  }
  pthread_mutex_unlock(&d->lock);
  return waited;
}

int ln_stream_raise(ln_stream *const *ss, int n) {
  /* the first stream's error first; an error raised before (its failure
   * reported) is not raised again */
  int64_t roots[4] = {0};
  int rc = 0;
  if (n > 4) n = 4;
  for (int k = 0; k < n; k++) {
    if (!ss[k]) continue;
    pthread_mutex_lock(&ss[k]->lock);
    if (ss[k]->has_error && !ss[k]->err_reported) {
      if (rc == 0) rc = ln_error("%s", ss[k]->error);
      roots[k] = ss[k]->err_root;
    }
    pthread_mutex_unlock(&ss[k]->lock);
  }
  for (int k = 0; k < n; k++) {
    bool seen = false;
    for (int j = 0; j < k; j++) seen |= roots[j] == roots[k];
    if (roots[k] && !seen) report_failure(roots[k]);
  }
  return rc;
}

/* Did the producer fail before seq (so the work waited for failed or was
 * skipped)? Then the consumer must not go on silently with stale data: it
 * fails too, naming the producer, as part of the producer's failure (*root;
 * *reported: raised in Lua already). A failure reported before this wait's
 * event was recorded is none of its business. */
static int check_producer(const char *fn, ln_stream *p, int64_t seq, int64_t *root, bool *reported) {
  int rc = 0;
  pthread_mutex_lock(&p->lock);
  if (p->err_root && p->error_seq < seq && !(p->err_reported && seq > p->clear_at)) {
    char dev[48];
    rc = ln_error("%s: %s, whose work this waits for, failed: %s", fn, stream_name(dev, sizeof dev, p), p->error);
    *root = p->err_root;
    *reported = p->err_reported;
  }
  pthread_mutex_unlock(&p->lock);
  return rc;
}

typedef struct { ln_stream *producer; int64_t seq; const char *fn; } wait_args;
static int wait_task(void *p) {
  wait_args *a = p;
  ln_stream_wait(a->producer, a->seq);
  int64_t root = 0;
  bool reported;
  int rc = check_producer(a->fn, a->producer, a->seq, &root, &reported);
  if (rc) ln_stream_fail_from(root);
  return rc;
}

int ln_stream_wait_for(ln_stream *consumer, ln_stream *producer, int64_t seq, const char *op) {
  wait_args a = {producer, seq, "event_wait"};
  return enqueue(consumer, op, wait_task, &a, sizeof a, NULL, 0, 0, NULL);
}

int ln_stream_host_wait(ln_stream *p, int64_t seq, const char *fn) {
  ln_stream_wait(p, seq);
  int64_t root = 0;
  bool reported = false;
  if (check_producer(fn, p, seq, &root, &reported) == 0 || reported) return 0;
  report_failure(root);   /* raised now, once */
  return -1;
}
