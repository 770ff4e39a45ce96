/* dnnl_ctx.c -- one oneDNN engine and stream per calling thread, shared by
 * the convolutions (conv_dnnl.c) and the bfloat16 matrix products
 * (gemm_bf16.c). Per thread because device worker threads run kernels
 * concurrently and oneDNN streams are not to be shared between threads.
 *
 * Teardown order: every primitive and memory object of the users' states
 * was created on this thread's engine, so the one thread-exit destructor
 * frees the users' states first, then the stream, then the engine (with a
 * pthread key per state, as before, the order between keys is unspecified).
 * The main thread's context is never freed (no key destructor runs at
 * process exit; the library is linked -z nodelete). */
#include "dnnl_ctx.h"
#include "lunet_internal.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

static pthread_key_t ctx_key;
static pthread_once_t ctx_once = PTHREAD_ONCE_INIT;

static void ctx_free(void *p) {
  ln_dnnl_ctx *cx = p;
  if (!cx) return;
  for (int i = 0; i < LN_DNNL_USERS; i++)
    if (cx->user[i] && cx->user_free[i]) cx->user_free[i](cx->user[i]);
  if (cx->stream) dnnl_stream_destroy(cx->stream);
  if (cx->eng) dnnl_engine_destroy(cx->eng);
  free(cx);
}

static void ctx_key_init(void) { pthread_key_create(&ctx_key, ctx_free); }

ln_dnnl_ctx *ln_dnnl_ctx_get(void) {
  pthread_once(&ctx_once, ctx_key_init);
  ln_dnnl_ctx *cx = pthread_getspecific(ctx_key);
  if (cx) return cx;
  cx = calloc(1, sizeof *cx);
  if (!cx) return NULL;
  if (dnnl_engine_create(&cx->eng, dnnl_cpu, 0) != dnnl_success ||
      dnnl_stream_create(&cx->stream, cx->eng, dnnl_stream_default_flags) != dnnl_success) {
    ctx_free(cx);
    return NULL;
  }
  if (pthread_setspecific(ctx_key, cx) != 0) {
    ctx_free(cx);
    return NULL;
  }
  return cx;
}

void *ln_dnnl_state(int which, size_t size, void (*free_fn)(void *)) {
  ln_dnnl_ctx *cx = ln_dnnl_ctx_get();
  if (!cx) return NULL;
  if (!cx->user[which]) {
    cx->user[which] = calloc(1, size);
    cx->user_free[which] = free_fn;
  }
  return cx->user[which];
}

int ln_dnnl_buf_reserve(ln_dnnl_buf *b, size_t need) {
  if (need <= b->cap) return 0;
  free(b->p);
  b->cap = 0;
  b->p = aligned_alloc(64, (need + 63) & ~(size_t)63);
  if (!b->p) return -1;
  b->cap = need;
  return 0;
}

static _Atomic int64_t bf16_bwd_w[2];   /* by threads: one, more */

void ln_dnnl_count_bf16_bwd_w(int nthreads) { atomic_fetch_add(&bf16_bwd_w[nthreads > 1], 1); }

int ln_test_dnnl_stats(ln_dnnl_stats *out) {
  out->bf16_bwd_w_1t = atomic_load(&bf16_bwd_w[0]);
  out->bf16_bwd_w_mt = atomic_load(&bf16_bwd_w[1]);
  return 0;
}
