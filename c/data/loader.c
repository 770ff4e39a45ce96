/* loader.c -- the prefetching batch loader: worker threads assemble the
 * batches of an epoch, in order, into a ring of pre-allocated slots ahead of
 * the training loop.
 *
 * Batch b of the epoch goes to slot b % nslots, nslots = depth + 2. When the
 * consumer has taken c batches, it may still be using batches c-1 and c-2;
 * workers fill batches c .. c+depth-1 (b < consumed + depth), which needs
 * exactly the other depth slots. Nothing is allocated per batch.
 *
 * Work queued on a device stream may still read a batch after the consumer
 * moved on (a virtual CPU device runs its kernels later). When a slot is
 * released (its batch is two behind, or a new epoch starts) the loader
 * records an event on every CPU device, and a slot is refilled only after
 * those events have completed.
 *
 * The files source (ln_loader_new_files, for ImageFolder) has no dataset
 * tensors: a worker decodes and transforms each file of its batch (files.c)
 * with its own buffers, and may replace a slot's tensor when a batch's image
 * size differs. An error there (a missing or corrupt file, sizes that do
 * not match) is kept with the slot and returned by ln_loader_next for that
 * batch; the loader goes on with the next one.
 *
 * ln_loader_close stops the workers and frees the slots but keeps the struct
 * (with `closed` set) until ln_loader_free: a call after close is a named
 * error, not a use after free (the Lua object frees the struct when collected). */
#include "data.h"
#include "../core/checked.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ln_loader {
  ln_tensor *x, *y;            /* aliases: keep the dataset's storages alive */
  ln_gather_plan plan;
  int64_t batch;
  int nslots, nworkers, depth;
  ln_tensor **sx, **sy;        /* slot tensors (batch rows each) */
  float *scratch;              /* nslots x plan.scratch floats: a batch's transform buffers,
                                  so no worker allocates while it runs */
  int64_t *order, cap, n, nbatches;
  int64_t *offs, offs_cap;     /* batch b is order[offs[b] .. offs[b+1]) (a batch_sampler's); NULL: batch rows each */
  uint64_t seed, epoch;
  pthread_mutex_t mu;
  pthread_cond_t work, done;
  int64_t next_assign, consumed;
  int64_t *slot_batch;         /* the batch a slot holds ready, -1 none */
  int busy, stop;
  int closed;                  /* ln_loader_close ran: slots freed, calls are errors */
  int users;                   /* callers inside ln_loader_next / _start */
  int ndev;                    /* CPU devices: events per slot */
  ln_event *ev;                /* nslots x ndev: work that may read the slot */
  pthread_t *threads;
  int nthreads;
  ln_files *files;             /* the files source, or NULL */
  ln_files_buf *fbufs;         /* max(workers, 1): each worker's (0: the caller's) */
  char (*slot_err)[1024];      /* files: the error that made a slot's batch, "" none */
  struct worker_arg { ln_loader *l; int id; } *wargs;
};

static int64_t batch_first(const ln_loader *l, int64_t b) {
  return l->offs ? l->offs[b] : b * l->batch;
}

static int64_t batch_rows(const ln_loader *l, int64_t b) {
  return l->offs ? l->offs[b + 1] - l->offs[b] : LN_MIN(l->batch, l->n - b * l->batch);
}

/* The slot's batch is no longer the consumer's: mark the streams' work so far. */
static void release_slot(ln_loader *l, int s) {
  for (int d = 0; d < l->ndev; d++) ln_event_record(d, &l->ev[s * l->ndev + d]);
}

static void assemble(ln_loader *l, int64_t b, int threaded, int wid) {
  int s = (int)(b % l->nslots);
  for (int d = 0; d < l->ndev; d++) ln_event_synchronize(&l->ev[s * l->ndev + d]);
  const int64_t *idx = l->order + batch_first(l, b);
  if (l->files) {
    l->slot_err[s][0] = 0;
    if (ln_files_batch(l->files, &l->fbufs[wid], idx, batch_rows(l, b), l->batch, &l->sx[s],
                       l->sy ? ln_data_ptr(l->sy[s]) : NULL, l->seed, l->epoch, &l->stop) != 0)
      snprintf(l->slot_err[s], sizeof l->slot_err[s], "%s", ln_last_error());
    return;
  }
  /* (cannot fail: the slot's scratch is given, so nothing is allocated) */
  (void)ln_gather_run(&l->plan, ln_data_ptr(l->sx[s]), l->sy ? ln_data_ptr(l->sy[s]) : NULL, idx, idx,
                      batch_rows(l, b), l->seed, l->epoch, threaded,
                      l->scratch ? l->scratch + (size_t)s * (size_t)l->plan.scratch : NULL);
}

static void *worker_main(void *arg) {
  struct worker_arg *wa = arg;
  ln_loader *l = wa->l;
  pthread_mutex_lock(&l->mu);
  for (;;) {
    while (!l->stop && !(l->next_assign < l->nbatches && l->next_assign < l->consumed + l->depth))
      pthread_cond_wait(&l->work, &l->mu);
    if (l->stop) break;
    int64_t b = l->next_assign++;
    l->busy++;
    pthread_mutex_unlock(&l->mu);
    assemble(l, b, 0, wa->id);
    pthread_mutex_lock(&l->mu);
    l->busy--;
    l->slot_batch[b % l->nslots] = b;
    pthread_cond_broadcast(&l->done);
  }
  pthread_mutex_unlock(&l->mu);
  return NULL;
}

static int start_workers(ln_loader *l, const char *fn) {
  for (int i = 0; i < l->nworkers; i++) {
    l->wargs[i].l = l;
    l->wargs[i].id = i;
    if (pthread_create(&l->threads[i], NULL, worker_main, &l->wargs[i]) != 0)
      return ln_error("%s: cannot start worker thread %d of %d", fn, i + 1, l->nworkers);
    l->nthreads++;
  }
  return 0;
}

ln_loader *ln_loader_new(const ln_tensor *x, const ln_tensor *y, int64_t batch_size,
                         const ln_transform *tf, int workers, int depth) {
  const char *fn = "DataLoader";
  if (batch_size < 1) return ln_error_null("%s: batch_size must be >= 1, got %lld", fn, (long long)batch_size);
  if (workers < 0 || workers > 256) return ln_error_null("%s: workers must be in 0..256, got %d", fn, workers);
  if (depth < 0 || depth > 1024)   /* (a slot a batch: more would take the memory before a batch is made) */
    return ln_error_null("%s: prefetch depth must be in 0..1024, got %d", fn, depth);
  if (workers > 0 && depth == 0) depth = 2 * workers;
  if (workers > 0 && depth < workers) depth = workers;
  if (workers == 0) depth = 0;
  ln_loader *l = calloc(1, sizeof *l);
  if (!l) return ln_error_null("%s: out of memory", fn);
  int ndim, dt, yndim;
  int64_t shape[LN_MAX_DIMS], yshape[LN_MAX_DIMS];
  if (ln_gather_plan_make(fn, &l->plan, x, y, tf, batch_size, &ndim, shape, &dt, &yndim, yshape) != 0) {
    free(l);
    return NULL;
  }
  if (ln_tensor_sync(x) != 0 || (y && ln_tensor_sync(y) != 0)) { free(l); return NULL; }
  pthread_mutex_init(&l->mu, NULL);
  pthread_cond_init(&l->work, NULL);
  pthread_cond_init(&l->done, NULL);
  l->batch = batch_size;
  l->nworkers = workers;
  l->depth = depth;
  l->nslots = depth + 2;
  l->x = ln_alias(x);
  l->y = y ? ln_alias(y) : NULL;
  l->sx = calloc((size_t)l->nslots, sizeof *l->sx);
  l->sy = y ? calloc((size_t)l->nslots, sizeof *l->sy) : NULL;
  l->slot_batch = malloc(sizeof(int64_t) * (size_t)l->nslots);
  l->ndev = ln_cpu_device_count();
  l->ev = calloc((size_t)(l->nslots * LN_MAX(l->ndev, 1)), sizeof *l->ev);
  l->threads = calloc((size_t)LN_MAX(workers, 1), sizeof *l->threads);
  l->wargs = calloc((size_t)LN_MAX(workers, 1), sizeof *l->wargs);
  if (l->plan.scratch > 0) {
    int64_t n;
    if (ln_mul_ovf(l->plan.scratch, (int64_t)l->nslots * (int64_t)sizeof(float), &n) || n > LN_MAX_BYTES) {
      ln_error("%s: the transforms' buffers for %d slots overflow", fn, l->nslots);
      goto fail;
    }
    l->scratch = malloc((size_t)n);
  }
  if (!l->x || (y && !l->y) || !l->sx || (y && !l->sy) || !l->slot_batch || !l->threads || !l->wargs || !l->ev ||
      (l->plan.scratch > 0 && !l->scratch)) {
    ln_error("%s: out of memory", fn);
    goto fail;
  }
  for (int s = 0; s < l->nslots; s++) {
    l->slot_batch[s] = -1;
    release_slot(l, s);
    if (!(l->sx[s] = ln_empty(ndim, shape, dt, 0))) goto fail;
    if (y && !(l->sy[s] = ln_empty(yndim, yshape, y->dtype_id, 0))) goto fail;
  }
  /* the plan points into the aliases' storages, the same memory as x's */
  l->plan.x = ln_data_ptr(l->x);
  l->plan.y = l->y ? ln_data_ptr(l->y) : NULL;
  if (start_workers(l, fn) != 0) goto fail;
  return l;
fail:
  ln_loader_free(l);
  return NULL;
}

ln_loader *ln_loader_new_files(int64_t n, const char *const *paths, const int64_t *labels, int mode,
                               int64_t batch_size, const ln_transform *tf, int workers, int depth) {
  const char *fn = "DataLoader";
  if (batch_size < 1) return ln_error_null("%s: batch_size must be >= 1, got %lld", fn, (long long)batch_size);
  if (workers < 0 || workers > 256) return ln_error_null("%s: workers must be in 0..256, got %d", fn, workers);
  if (depth < 0 || depth > 1024) return ln_error_null("%s: prefetch depth must be in 0..1024, got %d", fn, depth);
  if (workers > 0 && depth == 0) depth = 2 * workers;
  if (workers > 0 && depth < workers) depth = workers;
  if (workers == 0) depth = 0;
  ln_files *f = ln_files_new(fn, n, paths, labels, mode, tf);
  if (!f) return NULL;
  ln_loader *l = calloc(1, sizeof *l);
  if (!l) { ln_files_free(f); return ln_error_null("%s: out of memory", fn); }
  pthread_mutex_init(&l->mu, NULL);
  pthread_cond_init(&l->work, NULL);
  pthread_cond_init(&l->done, NULL);
  l->files = f;
  l->batch = batch_size;
  l->nworkers = workers;
  l->depth = depth;
  l->nslots = depth + 2;
  l->sx = calloc((size_t)l->nslots, sizeof *l->sx);   /* (made by the first batch: its size) */
  l->sy = labels ? calloc((size_t)l->nslots, sizeof *l->sy) : NULL;
  l->slot_batch = malloc(sizeof(int64_t) * (size_t)l->nslots);
  l->slot_err = calloc((size_t)l->nslots, sizeof *l->slot_err);
  l->fbufs = calloc((size_t)LN_MAX(workers, 1), sizeof *l->fbufs);
  l->ndev = ln_cpu_device_count();
  l->ev = calloc((size_t)(l->nslots * LN_MAX(l->ndev, 1)), sizeof *l->ev);
  l->threads = calloc((size_t)LN_MAX(workers, 1), sizeof *l->threads);
  l->wargs = calloc((size_t)LN_MAX(workers, 1), sizeof *l->wargs);
  if (!l->sx || (labels && !l->sy) || !l->slot_batch || !l->slot_err || !l->fbufs || !l->ev || !l->threads ||
      !l->wargs) {
    ln_error("%s: out of memory", fn);
    goto fail;
  }
  for (int s = 0; s < l->nslots; s++) {
    l->slot_batch[s] = -1;
    release_slot(l, s);
    int64_t ys = batch_size;
    if (labels && !(l->sy[s] = ln_empty(1, &ys, LN_INT64, 0))) goto fail;
  }
  if (start_workers(l, fn) != 0) goto fail;
  return l;
fail:
  ln_loader_free(l);
  return NULL;
}

static const char *const closed_msg = "DataLoader: used after close()";

/* Stops and joins the workers, waits for callers inside next/start to leave,
 * frees the slots and the dataset aliases. Idempotent. */
void ln_loader_close(ln_loader *l) {
  if (!l) return;
  pthread_mutex_lock(&l->mu);
  if (l->closed) { pthread_mutex_unlock(&l->mu); return; }
  l->closed = 1;
  __atomic_store_n(&l->stop, 1, __ATOMIC_RELAXED);   /* (a files worker reads it mid-batch) */
  pthread_cond_broadcast(&l->work);
  pthread_cond_broadcast(&l->done);   /* a consumer waiting for a batch sees `closed` */
  pthread_mutex_unlock(&l->mu);
  for (int i = 0; i < l->nthreads; i++) pthread_join(l->threads[i], NULL);
  l->nthreads = 0;
  pthread_mutex_lock(&l->mu);
  while (l->users > 0) pthread_cond_wait(&l->done, &l->mu);
  pthread_mutex_unlock(&l->mu);
  /* (work still queued on a device that reads a slot holds its storage) */
  for (int s = 0; s < l->nslots; s++) {
    if (l->sx && l->sx[s]) { ln_tensor_free(l->sx[s]); l->sx[s] = NULL; }
    if (l->sy && l->sy[s]) { ln_tensor_free(l->sy[s]); l->sy[s] = NULL; }
  }
  if (l->x) { ln_tensor_free(l->x); l->x = NULL; }
  if (l->y) { ln_tensor_free(l->y); l->y = NULL; }
  l->plan.x = l->plan.y = NULL;
  ln_files_free(l->files);
  l->files = NULL;
  for (int i = 0; l->fbufs && i < LN_MAX(l->nworkers, 1); i++) {
    free(l->fbufs[i].chw); free(l->fbufs[i].scratch);
    l->fbufs[i].chw = NULL; l->fbufs[i].scratch = NULL;
  }
}

void ln_loader_free(ln_loader *l) {
  if (!l) return;
  ln_loader_close(l);
  free(l->sx); free(l->sy); free(l->scratch); free(l->slot_batch); free(l->threads); free(l->order); free(l->offs);
  free(l->ev); free(l->slot_err); free(l->fbufs); free(l->wargs);
  pthread_mutex_destroy(&l->mu);
  pthread_cond_destroy(&l->work);
  pthread_cond_destroy(&l->done);
  free(l);
}

int ln_loader_nslots(const ln_loader *l) {
  if (!l) return ln_error("loader_nslots: loader is NULL");
  if (l->closed) return ln_error("%s", closed_msg);
  return l->nslots;
}

ln_tensor *ln_loader_slot(const ln_loader *l, int s, int which) {
  if (!l) return ln_error_null("loader_slot: loader is NULL");
  if (l->closed) return ln_error_null("%s", closed_msg);
  if (s < 0 || s >= l->nslots) return ln_error_null("loader_slot: slot %d out of range 0..%d", s, l->nslots - 1);
  if (which == 0) {
    if (!l->sx[s]) return ln_error_null("loader_slot: slot %d holds no batch yet", s);
    return ln_alias(l->sx[s]);
  }
  if (which == 1) return l->sy ? ln_alias(l->sy[s]) : NULL;
  return ln_error_null("loader_slot: which must be 0 (inputs) or 1 (targets), got %d", which);
}

static int64_t loader_start(ln_loader *l, const int64_t *order, int64_t n, const int64_t *offs, int64_t nb,
                            int64_t first_batch, int drop_last, uint64_t seed, uint64_t epoch);

static int64_t start_checked(ln_loader *l, const int64_t *order, int64_t n, const int64_t *offs, int64_t nb,
                             int64_t first_batch, int drop_last, uint64_t seed, uint64_t epoch) {
  const char *fn = "loader_start";
  if (!l) return ln_error("%s: loader is NULL", fn);
  if (n < 0 || (n > 0 && !order)) return ln_error("%s: no sample order given", fn);
  pthread_mutex_lock(&l->mu);   /* closed is written under the lock */
  int closed = l->closed;
  if (!closed) l->users++;
  pthread_mutex_unlock(&l->mu);
  if (closed) return ln_error("%s", closed_msg);
  int64_t rc = loader_start(l, order, n, offs, nb, first_batch, drop_last, seed, epoch);
  pthread_mutex_lock(&l->mu);
  l->users--;
  pthread_cond_broadcast(&l->done);
  pthread_mutex_unlock(&l->mu);
  return rc;
}

int64_t ln_loader_start(ln_loader *l, const int64_t *order, int64_t n, int64_t first_batch, int drop_last,
                        uint64_t seed, uint64_t epoch) {
  return start_checked(l, order, n, NULL, -1, first_batch, drop_last, seed, epoch);
}

int64_t ln_loader_start_batches(ln_loader *l, const int64_t *order, const int64_t *offsets, int64_t nb,
                                int64_t first_batch, uint64_t seed, uint64_t epoch) {
  const char *fn = "loader_start";
  if (!l) return ln_error("%s: loader is NULL", fn);
  if (nb < 0 || !offsets) return ln_error("%s: no batch offsets given", fn);
  if (offsets[0] != 0) return ln_error("%s: the first batch must start at 0, got %lld", fn, (long long)offsets[0]);
  for (int64_t b = 0; b < nb; b++) {
    int64_t rows = offsets[b + 1] - offsets[b];
    if (rows < 1 || rows > l->batch)
      return ln_error("%s: batch %lld has %lld samples, must be 1..%lld", fn, (long long)b + 1, (long long)rows,
                      (long long)l->batch);
  }
  return start_checked(l, order, offsets[nb], offsets, nb, first_batch, 0, seed, epoch);
}

static int64_t loader_start(ln_loader *l, const int64_t *order, int64_t n, const int64_t *offs, int64_t nb,
                            int64_t first_batch, int drop_last, uint64_t seed, uint64_t epoch) {
  const char *fn = "loader_start";
  int64_t N = l->files ? ln_files_count(l->files) : l->x->shape[0];
  for (int64_t i = 0; i < n; i++)
    if (order[i] < 0 || order[i] >= N)
      return ln_error("%s: sample %lld of the order is %lld, out of range for %lld samples", fn,
                      (long long)i, (long long)order[i], (long long)N);
  if (!offs) nb = drop_last ? n / l->batch : (n + l->batch - 1) / l->batch;
  if (first_batch < 0 || first_batch > nb)
    return ln_error("%s: cannot resume at batch %lld of an epoch of %lld batches", fn,
                    (long long)first_batch + 1, (long long)nb);
  pthread_mutex_lock(&l->mu);
  while (l->busy > 0) pthread_cond_wait(&l->done, &l->mu);   /* let running assemblies finish */
  if (n > l->cap) {
    int64_t *o = realloc(l->order, sizeof(int64_t) * (size_t)n);
    if (!o) { pthread_mutex_unlock(&l->mu); return ln_error("%s: out of memory", fn); }
    l->order = o;
    l->cap = n;
  }
  if (offs && nb + 1 > l->offs_cap) {
    int64_t *o = realloc(l->offs, sizeof(int64_t) * (size_t)(nb + 1));
    if (!o) { pthread_mutex_unlock(&l->mu); return ln_error("%s: out of memory", fn); }
    l->offs = o;
    l->offs_cap = nb + 1;
  }
  if (n) memcpy(l->order, order, sizeof(int64_t) * (size_t)n);
  if (offs) memcpy(l->offs, offs, sizeof(int64_t) * (size_t)(nb + 1));
  else { free(l->offs); l->offs = NULL; l->offs_cap = 0; }
  l->n = n;
  l->nbatches = nb;
  l->seed = seed;
  l->epoch = epoch;
  l->next_assign = l->consumed = first_batch;
  for (int s = 0; s < l->nslots; s++) {
    l->slot_batch[s] = -1;
    release_slot(l, s);
    if (l->slot_err) l->slot_err[s][0] = 0;
  }
  pthread_cond_broadcast(&l->work);
  pthread_mutex_unlock(&l->mu);
  return nb;
}

int ln_loader_next(ln_loader *l, int64_t *rows) {
  if (!l) return ln_error("loader_next: loader is NULL");
  pthread_mutex_lock(&l->mu);
  if (l->closed) { pthread_mutex_unlock(&l->mu); return ln_error("%s", closed_msg); }
  int64_t b = l->consumed;
  if (b >= l->nbatches) {
    pthread_mutex_unlock(&l->mu);
    return ln_error("loader_next: the epoch has ended (%lld batches)", (long long)l->nbatches);
  }
  l->users++;   /* close waits for us before it frees the slots */
  int s = (int)(b % l->nslots);
  if (b >= 2) release_slot(l, (int)((b - 2) % l->nslots));   /* before a worker may refill it */
  if (l->nworkers == 0) {
    pthread_mutex_unlock(&l->mu);
    assemble(l, b, 0, 0);   /* one thread: a batch is too small for a parallel region to pay */
    pthread_mutex_lock(&l->mu);
  } else {
    while (l->slot_batch[s] != b && !l->closed) pthread_cond_wait(&l->done, &l->mu);
  }
  int closed = l->closed;   /* closed by another thread meanwhile */
  if (!closed) l->consumed = b + 1;
  char err[1024] = "";
  if (!closed && l->slot_err && l->slot_err[s][0]) {   /* (the batch is skipped; the next call makes the next one) */
    memcpy(err, l->slot_err[s], sizeof err);
    l->slot_err[s][0] = 0;
  }
  l->users--;
  pthread_cond_broadcast(&l->work);
  pthread_cond_broadcast(&l->done);
  pthread_mutex_unlock(&l->mu);
  if (closed) return ln_error("%s (while waiting for a batch)", closed_msg);
  if (err[0]) return ln_error("%s", err);
  if (rows) *rows = batch_rows(l, b);
  return s;
}
