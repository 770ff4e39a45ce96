/* dnnl_ctx.h -- the calling thread's oneDNN engine and stream, and the
 * per-thread states built on them (conv_dnnl.c's primitive cache,
 * gemm_bf16.c's), with one teardown at thread exit (dnnl_ctx.c). */
#ifndef LN_DNNL_CTX_H
#define LN_DNNL_CTX_H
#include <dnnl.h>
#include <stddef.h>

/* the users of the context: each keeps one state per thread */
enum { LN_DNNL_CONV, LN_DNNL_GEMM, LN_DNNL_USERS };

typedef struct {
  dnnl_engine_t eng;
  dnnl_stream_t stream;
  void *user[LN_DNNL_USERS];
  void (*user_free[LN_DNNL_USERS])(void *);
} ln_dnnl_ctx;

/* The calling thread's context (created on first use), or NULL when oneDNN
 * could not make an engine or stream. */
ln_dnnl_ctx *ln_dnnl_ctx_get(void);

/* The calling thread's state of user `which`: size bytes, zeroed when made;
 * free_fn(state) runs at thread exit, before the stream and engine that the
 * state's primitives and memories were created on are destroyed. NULL when
 * out of memory or without a context. */
void *ln_dnnl_state(int which, size_t size, void (*free_fn)(void *));

/* a thread's scratch buffer, 64-byte aligned, grown on demand */
typedef struct {
  void *p;
  size_t cap;   /* bytes */
} ln_dnnl_buf;

/* b->p grown (contents dropped) to hold need bytes: 0, or -1 when out of
 * memory (then empty) */
int ln_dnnl_buf_reserve(ln_dnnl_buf *b, size_t need);

/* counts a bfloat16 weight-gradient pass run with nthreads OpenMP threads
 * (ln_test_dnnl_stats, lunet_internal.h) */
void ln_dnnl_count_bf16_bwd_w(int nthreads);
#endif
