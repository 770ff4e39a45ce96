/* cuda_load.c -- the CUDA backend is a library of its own (c/cuda/ built into
 * liblunet_cuda.so beside liblunet.so), never linked into liblunet.so, so
 * that lunet loads and runs on machines without the CUDA libraries. The first
 * question about cuda devices dlopens it; what stopped it (the library
 * missing: dlopen's message; no driver: the CUDA error string; no GPU) is
 * kept for the errors that name a cuda device (ln_cuda_reason). */
#define _GNU_SOURCE   /* dladdr */
#include "cuda_api.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static char reason[640] = "not loaded";
/* what the backend hands over for the nccl collectives (opaque here: c/comm/ reads it) */
static const struct ln_nccl_hooks *_Atomic nccl_hooks;
static void register_nccl(const struct ln_nccl_hooks *h) { atomic_store(&nccl_hooks, h); }

static const ln_core_api core_api = {
  .version = LN_CORE_API_VERSION,
  .error = ln_error,
  .last_error = ln_last_error,
  .event_synchronize = ln_event_synchronize,
  .storage_retain = ln_storage_retain,
  .storage_release = ln_storage_release,
  .store_from_double = ln_store_from_double,
  .pool_set_limit = ln_pool_set_limit,
  .register_nccl = register_nccl,
};

/* LUNET_CUDA_LIB, else liblunet_cuda.so in liblunet.so's own folder */
static void library_path(char *buf, size_t n) {
  const char *env = getenv("LUNET_CUDA_LIB");
  if (env && *env) { snprintf(buf, n, "%s", env); return; }
  Dl_info info;
  const char *self = dladdr((void *)library_path, &info) && info.dli_fname ? info.dli_fname : "";
  const char *slash = strrchr(self, '/');
  int dir = slash ? (int)(slash - self + 1) : 0;
  snprintf(buf, n, "%.*sliblunet_cuda.so", dir, self);
}

static void load(void) {
  const char *off = getenv("LUNET_CUDA");
  if (off && strcmp(off, "0") == 0) { snprintf(reason, sizeof reason, "CUDA disabled by LUNET_CUDA=0"); return; }
  char path[4096];
  library_path(path, sizeof path);
  /* (never dlclosed: CUDA's runtime registers exit handlers) */
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) { snprintf(reason, sizeof reason, "the CUDA backend did not load: %.560s", dlerror()); return; }
  ln_cuda_init_fn init;
  *(void **)&init = dlsym(h, LN_CUDA_INIT_SYMBOL);
  if (!init) { snprintf(reason, sizeof reason, "%.500s has no %s", path, LN_CUDA_INIT_SYMBOL); return; }
  char why[512] = "";
  const ln_backend *b = init(&core_api, why, sizeof why);
  if (!b) { snprintf(reason, sizeof reason, "%s", why[0] ? why : "the CUDA backend refused to start"); return; }
  if (ln_backend_register(b) != 0) { snprintf(reason, sizeof reason, "%s", ln_last_error()); return; }
  reason[0] = '\0';
}

void ln_cuda_load(void) { pthread_once(&load_once, load); }

const struct ln_nccl_hooks *ln_cuda_nccl_hooks(void) {
  ln_cuda_load();
  return atomic_load(&nccl_hooks);
}

const char *ln_cuda_reason(void) {
  ln_cuda_load();
  return reason;
}
