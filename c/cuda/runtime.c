/* runtime.c -- the CUDA backend's runtime: devices cuda:0..N-1, each with a
 * compute stream (kernels) and a copy stream (the comm slot: transfers that
 * overlap compute), a ring of events, raw memory for core's caching
 * allocator (c/core/device.c: size classes, stats, empty_cache, an OOM that
 * drops the cache and retries once), pinned host memory and the copies.
 *
 * Launch runs the kernel's host function at once on the calling thread with
 * the device's stream current: it queues GPU work and returns. A block freed
 * after a launch can go to the next allocation at once, because every later
 * use of it is queued on the same compute stream behind the work that used
 * it (stream order, as PyTorch's allocator); work queued on the copy stream
 * keeps its tensors' storages until the stream has passed it. */
#include "cuda.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

const ln_core_api *lnc;

enum { RING = 4096 };   /* events per device: one is reused only after RING records */
typedef struct {
  pthread_mutex_t lock;
  bool ready;
  cudaStream_t compute, copy;
  cudaEvent_t ring[RING];
  int64_t next;
} cuda_device;

static cuda_device devs[LN_MAX_TYPE_DEVICES];
static int ndev;
static _Thread_local cudaStream_t tls_stream;
static _Thread_local int tls_device = -1;

cudaStream_t lnc_current_stream(void) { return tls_stream; }
int lnc_current_device(void) { return tls_device; }

int lnc_fail(const char *what, int e) {
  return lnc->error("%s: %s (CUDA error %d)", what, cudaGetErrorString((cudaError_t)e), e);
}

static int set_device(int index) {
  if (tls_device == index) return 0;
  cudaError_t e = cudaSetDevice(index);
  if (e != cudaSuccess) return lnc_fail("cudaSetDevice", e);
  tls_device = index;
  return 0;
}

/* device index, its streams created on first use */
static cuda_device *device(int index) {
  cuda_device *d = &devs[index];
  if (__atomic_load_n(&d->ready, __ATOMIC_ACQUIRE)) return set_device(index) ? NULL : d;
  pthread_mutex_lock(&d->lock);
  cudaError_t e = cudaSuccess;
  if (!d->ready && set_device(index) == 0) {
    e = cudaStreamCreateWithFlags(&d->compute, cudaStreamNonBlocking);
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&d->copy, cudaStreamNonBlocking);
    if (e == cudaSuccess) __atomic_store_n(&d->ready, true, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&d->lock);
  if (e != cudaSuccess) { lnc_fail("cuda streams", e); return NULL; }
  return d->ready && set_device(index) == 0 ? d : NULL;
}

static int device_count(void) { return ndev; }

static void *dev_alloc(int index, size_t nbytes) {
  void *p = NULL;
  if (!device(index)) return NULL;
  if (cudaMalloc(&p, nbytes) != cudaSuccess) { cudaGetLastError(); return NULL; }   /* core drops its cache, retries */
  return p;
}

static void dev_free(int index, void *p, size_t nbytes) {
  (void)nbytes;
  if (set_device(index) == 0) cudaFree(p);   /* (waits for the work queued before it) */
}

static void *host_alloc(size_t nbytes) {
  void *p = NULL;
  if (cudaHostAlloc(&p, nbytes, cudaHostAllocPortable) != cudaSuccess) { cudaGetLastError(); return NULL; }
  return p;
}
static void host_free(void *p) { cudaFreeHost(p); }

/* synchronous: the host buffer is the caller's */
static int copy_to_host(int index, void *dst, const void *src, size_t nbytes) {
  cuda_device *d = device(index);
  if (!d) return -1;
  cudaError_t e = cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToHost, d->compute);
  if (e == cudaSuccess) e = cudaStreamSynchronize(d->compute);
  return e == cudaSuccess ? 0 : lnc_fail("copy to host", e);
}

static int copy_from_host(int index, void *dst, const void *src, size_t nbytes) {
  cuda_device *d = device(index);
  if (!d) return -1;
  cudaError_t e = cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyHostToDevice, d->compute);
  if (e == cudaSuccess) e = cudaStreamSynchronize(d->compute);
  return e == cudaSuccess ? 0 : lnc_fail("copy from host", e);
}

static int copy_peer(int di, void *dst, int si, const void *src, size_t nbytes) {
  cuda_device *s = device(si);
  if (!s || !device(di)) return -1;
  cudaError_t e = cudaMemcpyPeerAsync(dst, di, src, si, nbytes, s->compute);
  if (e == cudaSuccess) e = cudaStreamSynchronize(s->compute);
  return e == cudaSuccess ? 0 : lnc_fail("copy between devices", e);
}

/* ---- launch ------------------------------------------------------------------ */

typedef struct { int n; ln_storage *s[]; } held;
static void CUDART_CB release_held(void *p) {
  held *h = p;
  for (int i = 0; i < h->n; i++) lnc->storage_release(h->s[i]);
  free(h);
}

/* keep the storages of keep until stream s has passed the work queued so far */
int lnc_hold_until_done(cudaStream_t s, const ln_tensor *const *keep, int nkeep) {
  held *h = malloc(sizeof *h + (size_t)nkeep * sizeof(ln_storage *));
  if (!h) return lnc->error("copy stream: out of host memory");
  h->n = 0;
  for (int i = 0; i < nkeep; i++)
    if (keep[i] && keep[i]->storage) { lnc->storage_retain(keep[i]->storage); h->s[h->n++] = keep[i]->storage; }
  cudaError_t e = cudaLaunchHostFunc(s, release_held, h);
  if (e != cudaSuccess) { release_held(h); return lnc_fail("copy stream", e); }
  return 0;
}

static int launch(int index, int which, const char *op, ln_task_fn fn, const void *args, size_t argsize,
                  const ln_tensor *const *keep, int nkeep, int flags, int64_t *seq) {
  (void)flags;
  if (seq) *seq = -1;   /* (no host stream to wait on for a start) */
  cuda_device *d = device(index);
  if (!d) return -1;
  /* kernels may rewrite their argument block (a scalar operand's pointer):
   * give them a copy, as a queued task gets */
  _Alignas(64) char local[2048];
  void *a = argsize <= sizeof local ? local : malloc(argsize);
  if (!a) return lnc->error("%s: out of host memory", op);
  memcpy(a, args, argsize);
  cudaStream_t prev = tls_stream;
  tls_stream = which ? d->copy : d->compute;
  int rc = fn(a);
  cudaError_t e = cudaGetLastError();
  if (rc == 0 && e != cudaSuccess) rc = lnc->error("%s on cuda:%d: %s (CUDA error %d)", op, index, cudaGetErrorString(e), (int)e);
  if (rc == 0 && which && nkeep) rc = lnc_hold_until_done(tls_stream, keep, nkeep);
  tls_stream = prev;
  if (a != local) free(a);
  return rc;
}

/* the collective backend (nccl.c) queues on the streams itself */
int lnc_device_stream(int index, int which, cudaStream_t *s) {
  if (index < 0 || index >= ndev) return lnc->error("cuda:%d does not exist (%d CUDA devices)", index, ndev);
  cuda_device *d = device(index);
  if (!d) return -1;
  *s = which ? d->copy : d->compute;
  return 0;
}

/* after a library that may change the current device (NCCL's group calls) */
void lnc_restore_device(void) {
  if (tls_device >= 0) cudaSetDevice(tls_device);
}

/* ---- events: seq n of device i is ring slot n % RING ---------------------------- */

static int event_record(int index, ln_event *ev) {
  cuda_device *d = device(index);
  if (!d) return -1;
  pthread_mutex_lock(&d->lock);
  int64_t n = d->next;
  cudaEvent_t *slot = &d->ring[n % RING];
  cudaError_t e = *slot ? cudaSuccess : cudaEventCreateWithFlags(slot, cudaEventDisableTiming);
  if (e == cudaSuccess) e = cudaEventRecord(*slot, d->compute);
  if (e == cudaSuccess) d->next++;
  pthread_mutex_unlock(&d->lock);
  if (e != cudaSuccess) return lnc_fail("event_record", e);
  ev->device = LN_TYPE_CUDA * LN_CUDA_BASE + index;
  ev->stream = 0;
  ev->seq = n;
  return 0;
}

/* the event of a cuda device, or NULL */
static cudaEvent_t event_of(const ln_event *ev) {
  int t = ln_device_type(ev->device), i = ln_device_index(ev->device);
  if (t != LN_TYPE_CUDA || i >= ndev || ev->seq < 0) return NULL;
  return devs[i].ring[ev->seq % RING];
}

static int event_wait(int index, const ln_event *ev) {
  if (ln_device_type(ev->device) != LN_TYPE_CUDA) return lnc->event_synchronize(ev);   /* a host stream's */
  cudaEvent_t e = event_of(ev);
  cuda_device *d = device(index);
  if (!d) return -1;
  if (!e) return 0;
  cudaError_t r = cudaStreamWaitEvent(d->compute, e, 0);
  return r == cudaSuccess ? 0 : lnc_fail("event_wait", r);
}

static int event_query(const ln_event *ev) {
  cudaEvent_t e = event_of(ev);
  if (!e) return 1;
  cudaError_t r = cudaEventQuery(e);
  if (r == cudaSuccess) return 1;
  if (r == cudaErrorNotReady) { cudaGetLastError(); return 0; }
  return lnc_fail("event_query", r);
}

static int event_synchronize(const ln_event *ev) {
  cudaEvent_t e = event_of(ev);
  if (!e) return 0;
  cudaError_t r = cudaEventSynchronize(e);
  return r == cudaSuccess ? 0 : lnc_fail("event_synchronize", r);
}

static int synchronize(int index) {
  cuda_device *d = device(index);
  if (!d) return -1;
  cudaError_t e = cudaStreamSynchronize(d->compute);
  if (e == cudaSuccess) e = cudaStreamSynchronize(d->copy);
  if (e == cudaSuccess) return 0;
  return lnc->error("sync: cuda:%d: %s (CUDA error %d)", index, cudaGetErrorString(e), (int)e);
}

/* ---- the backend ------------------------------------------------------------------ */

static ln_backend backend = {
  .name = "cuda",
  .type = LN_TYPE_CUDA,
  .rt = {
    .device_count = device_count, .alloc = dev_alloc, .free = dev_free,
    .host_alloc = host_alloc, .host_free = host_free,
    .copy_to_host = copy_to_host, .copy_from_host = copy_from_host, .copy_peer = copy_peer,
    .launch = launch, .event_record = event_record, .event_wait = event_wait,
    .event_query = event_query, .event_synchronize = event_synchronize, .synchronize = synchronize,
  },
};

__attribute__((visibility("default")))
const ln_backend *ln_cuda_backend_init(const ln_core_api *core, char *why, size_t n) {
  if (!core || core->version != LN_CORE_API_VERSION) {
    snprintf(why, n, "liblunet_cuda.so was built for another liblunet.so (core API %d, expected %d)",
             core ? core->version : -1, LN_CORE_API_VERSION);
    return NULL;
  }
  lnc = core;
  core->register_nccl(lnc_nccl_hooks());   /* (NCCL itself loads on first use) */
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    snprintf(why, n, "CUDA driver: %s (cudaGetDeviceCount: CUDA error %d)", cudaGetErrorString(e), (int)e);
    return NULL;
  }
  if (count <= 0) { snprintf(why, n, "no CUDA device: the driver sees none"); return NULL; }
  ndev = count < LN_MAX_TYPE_DEVICES ? count : LN_MAX_TYPE_DEVICES;
  for (int i = 0; i < ndev; i++) pthread_mutex_init(&devs[i].lock, NULL);
  lnc_fill_kernels(&backend);
  return &backend;
}
