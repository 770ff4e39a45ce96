/* rec_backend.c -- test support: "rec", a second device type that the specs
 * register (ln_test_rec_register, c/include/lunet_internal.h) to prove that
 * dispatch, allocation, streams and events go through a backend's runtime
 * and kernel table, and that an op a backend lacks is a named error. Its
 * devices hold host memory and run the CPU kernels on host streams of their
 * own; every runtime entry counts its calls and launches log their op. It
 * lacks conv2d (both directions) and has no float64 binary kernel, and no
 * nn planner: conv2d's front end sizes its scratch with workspace_size. */
#include "cpu.h"
#include "../core/stream.h"
#include <stdio.h>
#include <stdlib.h>
#include "lunet_internal.h"

enum { REC_MAX = 4, REC_LOG = 256 };
static ln_stream streams[REC_MAX];
static int ndevices;
static ln_rec_stats stats;
static char oplog[REC_LOG][32];
static pthread_mutex_t rec_lock = PTHREAD_MUTEX_INITIALIZER;
static ln_backend rec;

#define COUNT(field) do { pthread_mutex_lock(&rec_lock); stats.field++; pthread_mutex_unlock(&rec_lock); } while (0)

static int rec_count(void) { return ndevices; }

static void *rec_alloc(int index, size_t nbytes) {
  pthread_mutex_lock(&rec_lock);
  stats.allocs++;
  stats.alloc_bytes += (int64_t)nbytes;
  pthread_mutex_unlock(&rec_lock);
  return aligned_alloc(LN_ALIGN, nbytes);
}

static void rec_free(int index, void *p, size_t nbytes) {
  pthread_mutex_lock(&rec_lock);
  stats.frees++;
  stats.free_bytes += (int64_t)nbytes;
  pthread_mutex_unlock(&rec_lock);
  free(p);
}

/* its memory is host memory, but the host reads and writes it through these
 * (as it must a GPU's), so that the specs see the copies */
static int rec_copy_to_host(int index, void *dst, const void *src, size_t nbytes) {
  COUNT(copies_to_host);
  memcpy(dst, src, nbytes);
  return 0;
}
static int rec_copy_from_host(int index, void *dst, const void *src, size_t nbytes) {
  COUNT(copies_from_host);
  memcpy(dst, src, nbytes);
  return 0;
}

/* between two rec devices: what ln_copy_ uses for a plain copy (copy.c) */
static int rec_copy_peer(int dst_index, void *dst, int src_index, const void *src, size_t nbytes) {
  COUNT(copies_peer);
  memcpy(dst, src, nbytes);
  return 0;
}

/* scratch for kernel slot k's argument block: a front end asks before it
 * launches (conv2d: nn/conv2d.c, without a planner) */
static size_t rec_workspace_size(int k, const void *args) {
  COUNT(workspace_queries);
  return k == LN_K_conv2d_fwd || k == LN_K_conv2d_bwd ? 4096 : 0;
}

static ln_stream *rec_stream(int index, int which, bool start) {
  if (index < 0 || index >= ndevices) return NULL;
  if (which != 0) return start ? ln_error_null("comm stream: rec:%d has none", index) : NULL;
  return &streams[index];
}

static int rec_launch(int index, int which, const char *op, ln_task_fn fn, const void *args, size_t argsize,
                      const ln_tensor *const *keep, int nkeep, int flags, int64_t *seq) {
  pthread_mutex_lock(&rec_lock);
  snprintf(oplog[stats.launches % REC_LOG], sizeof oplog[0], "%s", op);
  stats.launches++;
  pthread_mutex_unlock(&rec_lock);
  ln_stream *s = rec_stream(index, which, true);
  return s ? ln_stream_launch(s, op, fn, args, argsize, keep, nkeep, flags, seq) : -1;
}

static int rec_event_record(int index, ln_event *ev) {
  COUNT(event_records);
  return ln_host_event_record(LN_TYPE_TEST * LN_CUDA_BASE + index, ev);
}
static int rec_event_wait(int index, const ln_event *ev) {
  COUNT(event_waits);
  return ln_host_event_wait(LN_TYPE_TEST * LN_CUDA_BASE + index, ev);
}
static int rec_event_query(const ln_event *ev) { COUNT(event_queries); return ln_host_event_query(ev); }
static int rec_event_synchronize(const ln_event *ev) { COUNT(event_syncs); return ln_host_event_synchronize(ev); }
static int rec_synchronize(int index) { COUNT(syncs); return ln_host_sync(LN_TYPE_TEST * LN_CUDA_BASE + index); }

static bool rec_supports(int k, int dtype) { return !(k == LN_K_binary && dtype == LN_FLOAT64); }

int ln_test_rec_register(int n, int threaded) {
  if (n < 1 || n > REC_MAX) return ln_error("rec_register: count must be in 1..%d, got %d", REC_MAX, n);
  if (ndevices) return n == ndevices ? 0 : ln_error("rec_register: already registered with %d devices", ndevices);
  rec = ln_cpu_backend;   /* the CPU kernels, less conv2d */
  rec.name = "rec";
  rec.type = LN_TYPE_TEST;
  rec.conv2d_fwd = rec.conv2d_bwd = NULL;
  rec.nn = NULL;
  rec.supports = rec_supports;
  rec.rt = (ln_runtime){
    .device_count = rec_count, .alloc = rec_alloc, .free = rec_free, .stream = rec_stream,
    .copy_to_host = rec_copy_to_host, .copy_from_host = rec_copy_from_host, .copy_peer = rec_copy_peer,
    .workspace_size = rec_workspace_size,
    .launch = rec_launch, .event_record = rec_event_record, .event_wait = rec_event_wait,
    .event_query = rec_event_query, .event_synchronize = rec_event_synchronize, .synchronize = rec_synchronize,
  };
  for (int i = 0; i < n; i++) {
    ln_stream_init(&streams[i], LN_TYPE_TEST * LN_CUDA_BASE + i, false);
    char name[16];
    snprintf(name, sizeof name, "lunet rec%d", i);
    if (threaded && ln_stream_start(&streams[i], name, NULL, NULL) != 0) return -1;
  }
  ndevices = n;
  return ln_backend_register(&rec);
}

int ln_test_rec_stats(ln_rec_stats *out) {
  if (!out) return ln_error("rec_stats: out is NULL");
  pthread_mutex_lock(&rec_lock);
  *out = stats;
  pthread_mutex_unlock(&rec_lock);
  return 0;
}

const char *ln_test_rec_op(int64_t i) {
  static _Thread_local char buf[32];
  pthread_mutex_lock(&rec_lock);
  bool ok = i >= 0 && i < stats.launches && i >= stats.launches - REC_LOG;
  snprintf(buf, sizeof buf, "%s", ok ? oplog[i % REC_LOG] : "");
  pthread_mutex_unlock(&rec_lock);
  return buf;
}
