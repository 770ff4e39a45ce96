/* runtime.c -- the CPU backend's runtime: the host as cpu:0 (work runs inline,
 * all cores) or as N virtual devices, each a host stream (c/core/stream.h)
 * served by a worker thread with its share of the cores and an OpenMP pool,
 * plus a second (comm) stream started on first use; host memory; denormals
 * flushed per thread. Core reaches it only through ln_cpu_backend.rt. */
#define _GNU_SOURCE   /* sched_getaffinity, CPU_COUNT */
#include "cpu.h"
#include "../core/stream.h"
#include <omp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#define LN_HAVE_FLUSH_DENORMAL 1
#endif

typedef struct {
  ln_stream compute, comm;
  int threads;           /* its share of the cores; the comm stream has one */
} cpu_device;

static cpu_device devices[LN_MAX_CPU_DEVICES];
static const int comm_threads = 1;   /* the collectives are memory-bound */
static int ndevices;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t config_lock = PTHREAD_MUTEX_INITIALIZER;
static int requested_devices;               /* from ln_set_cpu_devices before init */
static _Thread_local int tls_threads;       /* set by workers; 0 = inline */
static _Thread_local int tls_omp;           /* the OpenMP thread count this worker set */

/* the cores this process may run on: its affinity mask (taskset, a cgroup
 * cpuset, mpirun's --bind-to core, srun) when it has one, else every online
 * core. (Counting the online cores put 2 threads on a rank bound to one
 * core, where every parallel region's barrier became a context switch.) */
int ln_num_cores(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}

/* OMP_NUM_THREADS (its first number), when set, is each CPU device's thread
 * count, as torch.get_num_threads takes it; 0 when unset or not a count */
static int env_threads(void) {
  const char *e = getenv("OMP_NUM_THREADS");
  if (!e) return 0;
  char *end;
  long v = strtol(e, &end, 10);
  if (end == e || (*end && *end != ',') || v < 1 || v > 1024) return 0;
  return (int)v;
}

/* LUNET_CPU_MEMORY: bytes, or a number followed by K, M or G (powers of
 * 1024; KiB, MB and the like read alike); 0 or unset: no limit. -1 with the
 * error set when it is not a size: "2X" was 2 bytes, "abc" no limit, "1e30"
 * an overflow. */
static int64_t env_memory_limit(void) {
  const char *s = getenv("LUNET_CPU_MEMORY");
  if (!s || !*s) return 0;
  char *end;
  double v = strtod(s, &end), scale = 1;
  switch (*end) {
    case 'k': case 'K': scale = 1024.0; end++; break;
    case 'm': case 'M': scale = 1024.0 * 1024; end++; break;
    case 'g': case 'G': scale = 1024.0 * 1024 * 1024; end++; break;
  }
  if (scale > 1 && *end == 'i') end++;
  if (*end == 'b' || *end == 'B') end++;
  v *= scale;
  if (end == s || *end != '\0' || !(v >= 0) || v > 4e18) {
    ln_error("LUNET_CPU_MEMORY: '%s' is not a size (bytes, or a number followed by K, M or G)", s);
    return -1;
  }
  return (int64_t)v;
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

/* before each task of a worker: ctx points at its thread count */
static void before_task(void *ctx) {
  tls_threads = *(const int *)ctx;
  if (tls_threads != tls_omp) { omp_set_num_threads(tls_threads); tls_omp = tls_threads; }
  if (tls_threads > tls_team) tls_team = tls_threads;
  int mode = atomic_load_explicit(&fp_mode, memory_order_relaxed);
  if (mode != tls_fp_mode) fp_apply_pool(mode, tls_team);
}

static int start_worker(int i) {
  char name[32];   /* what top -H, perf and gdb show for the thread (15 characters kept) */
  snprintf(name, sizeof name, "lunet cpu%d", i);
  if (ln_stream_start(&devices[i].compute, name, before_task, &devices[i].threads) == 0) return 0;
  char msg[512];   /* (ln_error must not read the buffer it writes) */
  snprintf(msg, sizeof msg, "%s", ln_last_error());
  return ln_error("set_cpu_devices: %s", msg);
}

static void share_cores(int n) {
  int cores = ln_num_cores(), omp = env_threads();
  for (int i = 0; i < n; i++) {
    int share = cores / n + (i < cores % n ? 1 : 0);
    devices[i].threads = omp ? omp : share > 0 ? share : 1;
  }
}

static int configure(int n, int64_t limit) {
  for (int i = ndevices; i < n; i++) ln_pool_set_limit(i, limit);
  share_cores(n);
  ndevices = n;
  if (n > 1)
    for (int i = 0; i < n; i++)
      if (start_worker(i) != 0) return -1;
  return 0;
}

static void runtime_init_once(void) {
  for (int i = 0; i < LN_MAX_CPU_DEVICES; i++) {
    ln_stream_init(&devices[i].compute, i, false);
    ln_stream_init(&devices[i].comm, i, true);
  }
  int n = requested_devices;
  const char *env = getenv("LUNET_CPU_DEVICES");
  if (!n && env) n = atoi(env);
  if (n < 1) n = 1;
  if (n > LN_MAX_CPU_DEVICES) n = LN_MAX_CPU_DEVICES;
  /* (no caller to return an error to: said on stderr, and no limit) */
  int64_t limit = env_memory_limit();
  if (limit < 0) { fprintf(stderr, "lunet: %s; no memory limit set\n", ln_last_error()); limit = 0; }
  if (configure(n, limit) != 0) { fprintf(stderr, "lunet: %s\n", ln_last_error()); configure(1, limit); }
}

static void runtime_init(void) { pthread_once(&init_once, runtime_init_once); }

int ln_set_cpu_devices(int n) {
  if (n < 1 || n > LN_MAX_CPU_DEVICES)
    return ln_error("set_cpu_devices: count must be in 1..%d, got %d", LN_MAX_CPU_DEVICES, n);
  /* (checked before any device stops) */
  int64_t limit = env_memory_limit();
  if (limit < 0) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", ln_last_error());
    return ln_error("set_cpu_devices: %s", msg);
  }
  pthread_mutex_lock(&config_lock);
  requested_devices = n;
  runtime_init();
  int rc = 0;
  if (n != ndevices) {
    if (ln_sync_all() != 0) rc = -1;
    for (int i = n; i < ndevices && rc == 0; i++)
      if (ln_memory_allocated(i) > 0)
        rc = ln_error("set_cpu_devices: cpu:%d still holds %lld bytes of live tensors",
                      i, (long long)ln_memory_allocated(i));
    if (rc == 0) {
      int old = ndevices;
      for (int i = 0; i < old; i++) ln_stream_stop(&devices[i].comm);   /* restarted on use */
      for (int i = (n == 1 ? 0 : n); i < old; i++) ln_stream_stop(&devices[i].compute);
      for (int i = n; i < old; i++) ln_empty_cache(i);
      rc = configure(n, limit);
    }
  }
  pthread_mutex_unlock(&config_lock);
  return rc;
}

int ln_cpu_device_count(void) { runtime_init(); return ndevices; }

static int check_cpu(const char *fn, int id) {
  if (id >= 0 && id < ln_cpu_device_count()) return 0;
  if (ln_device_valid(id)) {
    char dev[32];
    return ln_error("%s: %s is not a CPU device", fn, ln_device_str(dev, sizeof dev, id));
  }
  int n = ndevices;
  return ln_error("%s: no device cpu:%d (there %s %d CPU device%s)", fn, id, n == 1 ? "is" : "are", n,
                  n == 1 ? "" : "s");
}

int ln_device_threads(int id) { return check_cpu("device_threads", id) ? -1 : devices[id].threads; }

int ln_set_device_threads(int id, int nthreads) {
  if (check_cpu("set_device_threads", id)) return -1;
  if (nthreads < 1) return ln_error("set_device_threads: need at least 1 thread, got %d", nthreads);
  if (nthreads > 1024)   /* (a pool that size is a mistake, not a setting) */
    return ln_error("set_device_threads: at most 1024 threads, got %d", nthreads);
  if (ln_sync(id) != 0) return -1;
  devices[id].threads = nthreads;   /* the worker reads it per task */
  return 0;
}

int ln_set_flush_denormal(int on) {
#ifdef LN_HAVE_FLUSH_DENORMAL
  on = on != 0;
  runtime_init();
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

/* ---- the runtime entries ------------------------------------------------------ */

void *ln_cpu_alloc(int index, size_t nbytes) { (void)index; return aligned_alloc(LN_ALIGN, nbytes); }
void ln_cpu_free(int index, void *p, size_t nbytes) { (void)index; (void)nbytes; free(p); }

/* The compute stream (which 0) exists for every device (inline for the one
 * device); the comm stream (1) only where the compute stream has a worker,
 * started on first use. */
ln_stream *ln_cpu_stream(int index, int which, bool start) {
  if (index < 0 || index >= LN_MAX_CPU_DEVICES) return NULL;   /* (core asked device_count first) */
  cpu_device *d = &devices[index];
  if (which == 0) return &d->compute;
  if (d->comm.has_worker || !start) return d->comm.has_worker ? &d->comm : NULL;
  if (!d->compute.has_worker)
    return ln_error_null("comm stream: cpu:%d runs inline and has no comm stream", index);
  char name[32];
  snprintf(name, sizeof name, "lunet comm%d", index);
  pthread_mutex_lock(&config_lock);
  int rc = ln_stream_start(&d->comm, name, before_task, (void *)&comm_threads);
  pthread_mutex_unlock(&config_lock);
  return rc == 0 ? &d->comm : NULL;
}
