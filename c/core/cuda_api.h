/* cuda_api.h -- what core lends the CUDA backend, which lives in its own
 * library (build/liblunet_cuda.so, c/cuda/) and is loaded with dlopen on first
 * use (cuda_load.c). liblunet.so exports only the public API, so the backend
 * reaches core's internals through this table, never by symbol. */
#ifndef LN_CUDA_API_H
#define LN_CUDA_API_H
#include "backend.h"

enum { LN_CORE_API_VERSION = 2 };
struct ln_nccl_hooks;

typedef struct ln_core_api {
  int version;   /* LN_CORE_API_VERSION: a backend built for another refuses to load */
  int (*error)(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
  const char *(*last_error)(void);
  int (*event_synchronize)(const ln_event *ev);   /* the host waits for any device's event */
  void (*storage_retain)(ln_storage *s);
  void (*storage_release)(ln_storage *s);
  void (*store_from_double)(char *p, int dtype, double v);
  void (*pool_set_limit)(int device, int64_t bytes);
  /* the backend's nccl collectives (c/comm/comm.h), handed over at init
   * whether or not a GPU is there */
  void (*register_nccl)(const struct ln_nccl_hooks *h);
} ln_core_api;

/* The one symbol liblunet_cuda.so exports: its backend, or NULL with the
 * reason in why ("CUDA driver: ... (error 35)", "no CUDA device"). */
typedef const ln_backend *(*ln_cuda_init_fn)(const ln_core_api *core, char *why, size_t n);
#define LN_CUDA_INIT_SYMBOL "ln_cuda_backend_init"

/* Loads the CUDA backend once (a no-op after the first call). */
void ln_cuda_load(void);
/* The nccl collectives the CUDA backend registered (c/comm/comm.h's
 * ln_nccl_hooks), loading it first; NULL where it did not load. */
const struct ln_nccl_hooks *ln_cuda_nccl_hooks(void);

#endif
