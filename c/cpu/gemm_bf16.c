/* gemm_bf16.c -- float32 matrix products with bfloat16 inputs and float32
 * accumulation (float32 matmul precision "medium", precision.c): the operands
 * are rounded to bfloat16 (nearest even) into the calling thread's scratch,
 * then multiplied by oneDNN's matmul (its avx512_core_bf16 brgemm kernels).
 *
 * Why explicit bfloat16 operands rather than oneDNN's fpmath_mode attribute:
 * libdnnl 2.6 accepts the attribute on float32 primitives but ignores it
 * (same kernel "brg:avx512_core", same results); and OpenBLAS 0.3.21 as
 * packaged here has no cblas_sbgemm. Measured on Zen 4, 1 thread: 1024^3
 * 45 ms float32 (oneDNN) -> 20 ms bfloat16; 256x1024x1024 15 -> 4 ms.
 *
 * Primitives are cached per calling thread (device workers run kernels
 * concurrently; oneDNN streams are not shared: the thread's engine and
 * stream are dnnl_ctx.c's), keyed by the product's geometry, scalars and
 * thread count. */
#include "cpu.h"
#include "dnnl_ctx.h"
#include <omp.h>
#include <stdlib.h>
#include <string.h>

enum { CACHE = 16 };

typedef struct {
  int64_t batch, ba, bb, m, n, k, sc, ldc;
  int ta, tb, nt, pad_;
  double alpha, beta;
} gkey;

typedef struct {
  gkey key;
  uint64_t tick;
  dnnl_primitive_t prim;
  dnnl_memory_t a, b, c;
} gentry;

typedef struct {
  dnnl_engine_t eng;     /* the thread's (dnnl_ctx.c), not owned */
  dnnl_stream_t stream;
  uint64_t tick;
  ln_dnnl_buf buf;       /* both operands in bfloat16 */
  gentry e[CACHE];
} gstate;

static void entry_free(gentry *e) {
  if (e->prim) dnnl_primitive_destroy(e->prim);
  if (e->a) dnnl_memory_destroy(e->a);
  if (e->b) dnnl_memory_destroy(e->b);
  if (e->c) dnnl_memory_destroy(e->c);
  memset(e, 0, sizeof *e);
}

/* at thread exit, before the engine goes (dnnl_ctx.c) */
static void state_free(void *p) {
  gstate *st = p;
  for (int i = 0; i < CACHE; i++) entry_free(&st->e[i]);
  free(st->buf.p);
  free(st);
}

static gstate *state_get(void) {
  gstate *st = ln_dnnl_state(LN_DNNL_GEMM, sizeof *st, state_free);
  if (st && !st->eng) {
    ln_dnnl_ctx *cx = ln_dnnl_ctx_get();
    st->eng = cx->eng;
    st->stream = cx->stream;
  }
  return st;
}

#define CHK(x) do { if ((x) != dnnl_success) goto fail; } while (0)

/* op(A) (ba, m, k) and op(B) (bb, k, n) in the compact bfloat16 copies (a
 * transposed operand keeps its storage order: strides say so); C strided */
static int entry_init(gstate *st, gentry *e, const gkey *k) {
  dnnl_memory_desc_t a, b, c;
  dnnl_dims_t da = {k->ba, k->m, k->k}, db = {k->bb, k->k, k->n}, dc = {k->batch, k->m, k->n};
  dnnl_dims_t sa = {k->m * k->k, k->ta ? 1 : k->k, k->ta ? k->m : 1};
  dnnl_dims_t sb = {k->k * k->n, k->tb ? 1 : k->n, k->tb ? k->k : 1};
  dnnl_dims_t sc = {k->sc, k->ldc, 1};
  dnnl_matmul_desc_t md;
  dnnl_primitive_attr_t attr = NULL;
  dnnl_post_ops_t po = NULL;
  dnnl_primitive_desc_t pd = NULL;
  memset(e, 0, sizeof *e);
  CHK(dnnl_memory_desc_init_by_strides(&a, 3, da, dnnl_bf16, sa));
  CHK(dnnl_memory_desc_init_by_strides(&b, 3, db, dnnl_bf16, sb));
  CHK(dnnl_memory_desc_init_by_strides(&c, 3, dc, dnnl_f32, sc));
  CHK(dnnl_matmul_desc_init(&md, &a, &b, NULL, &c));
  CHK(dnnl_primitive_attr_create(&attr));
  if (k->alpha != 1) {
    float s = (float)k->alpha;
    CHK(dnnl_primitive_attr_set_output_scales(attr, 1, 0, &s));
  }
  if (k->beta != 0) {
    CHK(dnnl_post_ops_create(&po));
    CHK(dnnl_post_ops_append_sum(po, (float)k->beta));
    CHK(dnnl_primitive_attr_set_post_ops(attr, po));
  }
  CHK(dnnl_primitive_desc_create(&pd, &md, attr, st->eng, NULL));
  CHK(dnnl_primitive_create(&e->prim, pd));
  CHK(dnnl_memory_create(&e->a, &a, st->eng, DNNL_MEMORY_NONE));
  CHK(dnnl_memory_create(&e->b, &b, st->eng, DNNL_MEMORY_NONE));
  CHK(dnnl_memory_create(&e->c, &c, st->eng, DNNL_MEMORY_NONE));
  dnnl_primitive_desc_destroy(pd);
  dnnl_primitive_attr_destroy(attr);
  if (po) dnnl_post_ops_destroy(po);
  e->key = *k;
  return 0;
fail:
  if (pd) dnnl_primitive_desc_destroy(pd);
  if (attr) dnnl_primitive_attr_destroy(attr);
  if (po) dnnl_post_ops_destroy(po);
  entry_free(e);
  return -1;
}

/* round to nearest even; NaN stays a (quiet) NaN */
static inline uint16_t to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

/* nb matrices of rows x cols (row stride ld, matrix stride bs) -> compact */
static void convert(const float *src, int64_t nb, int64_t bs, int64_t rows, int64_t cols, int64_t ld,
                    uint16_t *dst, int nt) {
  const int64_t R = nb * rows;
  nt = R * cols < (1 << 16) ? 1 : nt;
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
  for (int64_t r = 0; r < R; r++) {
    const float *s = src + (r / rows) * bs + (r % rows) * ld;
    uint16_t *d = dst + r * cols;
    for (int64_t j = 0; j < cols; j++) d[j] = to_bf16(s[j]);
  }
}

int ln_cpu_gemm_bf16(const ln_gemm_args *g, int nt) {
  gstate *st = state_get();
  if (!st) return -1;
  gkey k;
  memset(&k, 0, sizeof k);
  k.batch = g->batch; k.m = g->m; k.n = g->n; k.k = g->k;
  k.ba = g->batch_stride_a == 0 ? 1 : g->batch;
  k.bb = g->batch_stride_b == 0 ? 1 : g->batch;
  k.sc = g->batch > 1 ? g->batch_stride_c : g->m * g->ldc;
  k.ldc = g->ldc; k.ta = g->trans_a; k.tb = g->trans_b; k.nt = nt;
  k.alpha = g->alpha; k.beta = g->beta;
  const size_t na = (size_t)(k.ba * k.m * k.k), nb = (size_t)(k.bb * k.k * k.n);
  if (ln_dnnl_buf_reserve(&st->buf, (na + nb) * 2) != 0) return -1;
  int prev = omp_get_max_threads();
  if (prev != nt) omp_set_num_threads(nt);
  int rc = -1;
  gentry *e = NULL, *victim = &st->e[0];
  for (int i = 0; i < CACHE; i++) {
    gentry *c = &st->e[i];
    if (c->prim && memcmp(&c->key, &k, sizeof k) == 0) { e = c; break; }
    if (!c->prim || (victim->prim && c->tick < victim->tick)) victim = c;
  }
  if (!e) {
    entry_free(victim);
    if (entry_init(st, victim, &k) != 0) goto done;
    e = victim;
  }
  e->tick = ++st->tick;
  uint16_t *ab = st->buf.p, *bb = ab + na;
  convert((const float *)g->a, k.ba, g->batch_stride_a, g->trans_a ? k.k : k.m, g->trans_a ? k.m : k.k, g->lda, ab, nt);
  convert((const float *)g->b, k.bb, g->batch_stride_b, g->trans_b ? k.n : k.k, g->trans_b ? k.k : k.n, g->ldb, bb, nt);
  CHK(dnnl_memory_set_data_handle(e->a, ab));
  CHK(dnnl_memory_set_data_handle(e->b, bb));
  CHK(dnnl_memory_set_data_handle(e->c, g->c));
  dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, e->a}, {DNNL_ARG_WEIGHTS, e->b}, {DNNL_ARG_DST, e->c}};
  CHK(dnnl_primitive_execute(e->prim, st->stream, 3, args));
  CHK(dnnl_stream_wait(st->stream));
  rc = 0;
  goto done;
fail:
  rc = -1;
done:
  if (prev != nt) omp_set_num_threads(prev);
  return rc;
}
