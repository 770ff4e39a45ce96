/* stream.h -- host streams: an in-order queue of tasks that a host thread
 * runs (or that run inline on the caller when no thread serves it), with the
 * generic parts every such stream shares: the storages its queued tasks keep
 * alive, the ordering of waiters, and error propagation (a failed task makes
 * the stream skip later work until the failure is raised in Lua, once).
 *
 * The CPU backend's devices are host streams served by worker threads
 * (c/cpu/runtime.c); a backend that runs its work elsewhere (a GPU) keeps its
 * own streams and fills ln_runtime's launch/event entries instead. */
#ifndef LN_STREAM_H
#define LN_STREAM_H
#include "internal.h"
#include <pthread.h>

enum { LN_STREAM_WAITERS = 8, LN_MAX_STREAMS = 160 };

typedef struct ln_waiter {
  pthread_cond_t cv;
  int64_t seq;           /* its goal; INT64_MAX once woken */
  bool used;
} ln_waiter;

struct ln_task;
typedef struct ln_stream {
  int device;            /* the device id whose work it runs */
  bool is_comm;          /* the device's second (communication) stream */
  int slot;              /* in core's table of streams (failure reports) */
  bool has_worker;       /* a thread serves it; else work runs inline */
  pthread_t worker;
  pthread_mutex_t lock;
  pthread_cond_t work_cv, done_cv;
  struct ln_task *ring;
  int64_t submitted, completed;
  int64_t wake_at;       /* the smallest seq any waiter waits for (INT64_MAX: none) */
  int64_t shared_wake_at;  /* the smallest seq a waiter on done_cv waits for */
  ln_waiter waiters[LN_STREAM_WAITERS];
  bool stop;
  /* The stream's last failure. has_error: later tasks are skipped. err_root
   * names the failure it belongs to: a new id where a task failed by itself,
   * the producer's where it failed for another stream's failure (an event
   * wait, an aborted collective), so that one report clears them all. Once
   * reported, tasks queued before the report (up to clear_at) are still
   * skipped, then has_error clears; err_root, error_seq and error stay for
   * waits still in flight. */
  bool has_error, err_reported;
  char error[1024];
  int64_t error_seq;     /* index of the task that failed */
  int64_t err_root, clear_at;
} ln_stream;

/* Once, before use: device id and role; registers it for failure reports. */
void ln_stream_init(ln_stream *s, int device, bool is_comm);
/* A thread that serves s: before_task(ctx) runs before each task (what the
 * backend sets per task: thread counts, FP modes). Signals other than faults
 * are blocked in it (they belong to the thread running Lua). 0 ok. */
int ln_stream_start(ln_stream *s, const char *name, void (*before_task)(void *), void *ctx);
void ln_stream_stop(ln_stream *s);   /* runs what is queued, joins the thread */

/* Queue fn(args) (argsize bytes copied; keep's storages held until it ran),
 * or run it now when no thread serves s. *seq: its position (-1 inline). */
int ln_stream_launch(ln_stream *s, const char *op, ln_task_fn fn, const void *args, size_t argsize,
                     const ln_tensor *const *keep, int nkeep, int flags, int64_t *seq);
int64_t ln_stream_submitted(ln_stream *s);
void ln_stream_wait(ln_stream *s, int64_t seq);   /* until task seq-1 is done */
int ln_stream_query(ln_stream *s, int64_t seq);   /* 1 when task seq-1 is done */
/* Wait for everything queued on s (until: NULL, no limit): -1 (error set)
 * when until passed first, else whether there was anything to wait for. */
int ln_stream_drain(ln_stream *s, const struct timespec *until);
/* consumer's later work waits until producer has done task seq-1 (a queued
 * wait; a failure of the producer's before it fails the consumer as well) */
int ln_stream_wait_for(ln_stream *consumer, ln_stream *producer, int64_t seq, const char *op);
/* the host waits until producer has done task seq-1; -1 raises a failure
 * of the work waited for that was not raised before */
int ln_stream_host_wait(ln_stream *producer, int64_t seq, const char *fn);
/* After waiting for them: raise the first unraised failure of n streams
 * (NULL entries skipped) and report it and theirs. 0 when none. */
int ln_stream_raise(ln_stream *const *streams, int n);
bool ln_on_stream_worker(void);   /* the calling thread serves a stream */

#endif
