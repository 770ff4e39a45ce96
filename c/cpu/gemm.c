/* gemm.c -- matrix products on OpenBLAS. OpenBLAS's own thread pool is set to
 * one thread; lunet splits the product over its kernel threads (one pool, no
 * oversubscription), each part a single-threaded sgemm/dgemm. */
#include "cpu.h"
#include "lunet_internal.h"   /* ln_cblas_sgemm_direct */
#include <cblas.h>
#include <omp.h>

typedef struct {
  const ln_gemm_args *g;
  int64_t rows_per, cols_per;   /* split of C: rows or columns */
  bool split_rows;
} gemm_ctx;

static void gemm_block(const ln_gemm_args *g, int64_t bi, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  int es = g->dtype == LN_FLOAT64 ? 8 : 4;
  const char *A = g->a + bi * g->batch_stride_a * es, *B = g->b + bi * g->batch_stride_b * es;
  char *C = g->c + bi * g->batch_stride_c * es;
  /* row block of op(A): A[r0.., :] (no trans) or A[:, r0..] (trans) */
  const char *Ab = A + (g->trans_a ? r0 : r0 * g->lda) * es;
  const char *Bb = B + (g->trans_b ? c0 * g->ldb : c0) * es;
  char *Cb = C + (r0 * g->ldc + c0) * es;
  int64_t m = r1 - r0, n = c1 - c0;
  if (m <= 0 || n <= 0) return;
  CBLAS_TRANSPOSE ta = g->trans_a ? CblasTrans : CblasNoTrans, tb = g->trans_b ? CblasTrans : CblasNoTrans;
  if (g->dtype == LN_FLOAT64)
    cblas_dgemm(CblasRowMajor, ta, tb, (int)m, (int)n, (int)g->k, g->alpha, (const double *)Ab,
                (int)g->lda, (const double *)Bb, (int)g->ldb, g->beta, (double *)Cb, (int)g->ldc);
  else
    cblas_sgemm(CblasRowMajor, ta, tb, (int)m, (int)n, (int)g->k, (float)g->alpha, (const float *)Ab,
                (int)g->lda, (const float *)Bb, (int)g->ldb, (float)g->beta, (float *)Cb, (int)g->ldc);
}

static void zero_or_scale(const ln_gemm_args *g) {
  /* k == 0: C = beta*C (BLAS may skip the update) */
  int es = g->dtype == LN_FLOAT64 ? 8 : 4;
  for (int64_t bi = 0; bi < g->batch; bi++)
    for (int64_t i = 0; i < g->m; i++)
      for (int64_t j = 0; j < g->n; j++) {
        char *p = g->c + (bi * g->batch_stride_c + i * g->ldc + j) * es;
        double v = g->beta == 0 ? 0 : g->beta * ln_load_as_double(p, g->dtype);
        ln_store_from_double(p, g->dtype, v);
      }
}

int ln_cpu_gemm(void *p) {
  ln_gemm_args *g = p;
  if (g->m == 0 || g->n == 0 || g->batch == 0) return 0;
  if (g->k == 0) { zero_or_scale(g); return 0; }
  int nt = ln_kernel_threads();
  double flops = 2.0 * (double)g->m * (double)g->n * (double)g->k * (double)g->batch;
  /* under 1M multiply-adds one thread, as conv2d's plan (SMALL_MACS): the
   * second thread saves a few us on an idle machine and a barrier costs
   * milliseconds on a loaded one (LeNet-5's 120->84 and 84->10 layers) */
  /* float32 matmul precision "medium": bfloat16 operands on oneDNN */
  if (g->dtype == LN_FLOAT32 && ln_cpu_bf16_math() &&
      ln_cpu_gemm_bf16(g, nt <= 1 || flops < 2.0 * (1 << 20) ? 1 : nt) == 0)
    return 0;
  if (nt <= 1 || flops < 2.0 * (1 << 20)) {
    for (int64_t b = 0; b < g->batch; b++) gemm_block(g, b, 0, g->m, 0, g->n);
    return 0;
  }
  if (g->batch >= nt) {
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t b = 0; b < g->batch; b++) gemm_block(g, b, 0, g->m, 0, g->n);
    return 0;
  }
  /* split the larger of m and n into nt parts, aligned to 16 */
  bool rows = g->m >= g->n;
  int64_t len = rows ? g->m : g->n;
  for (int64_t b = 0; b < g->batch; b++) {
#pragma omp parallel num_threads(nt)
    {
      int t = omp_get_thread_num(), T = omp_get_num_threads();
      int64_t per = ((len + T - 1) / T + 15) / 16 * 16;
      int64_t s = per * t, e = s + per < len ? s + per : len;
      if (s < e) {
        if (rows) gemm_block(g, b, s, e, 0, g->n);
        else gemm_block(g, b, 0, g->m, s, e);
      }
    }
  }
  return 0;
}

void ln_sgemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
              const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
              int64_t ldc) {
  ln_gemm_args g = {trans_a, trans_b, 1, m, n, k, 0, 0, 0, lda, ldb, ldc, alpha, beta,
                    LN_FLOAT32, (char *)a, (char *)b, (char *)c};
  ln_cpu_gemm(&g);
}

void ln_cblas_sgemm_direct(int64_t m, int64_t n, int64_t k, const float *a, const float *b, float *c) {
  openblas_set_num_threads(ln_num_cores());
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)n, (int)k, 1.0f, a, (int)k,
              b, (int)n, 0.0f, c, (int)n);
  openblas_set_num_threads(1);
}

__attribute__((constructor)) static void single_threaded_blas(void) { openblas_set_num_threads(1); }
