/* softmax.c -- softmax and log-softmax along one dim: the CPU
 * kernels (front ends: c/nn/softmax.c). The tensor is seen as (outer, D, inner) with D the softmax dim.
 * inner == 1: one contiguous row per work item. inner > 1: a block of up to
 * BLK inner columns per work item, its max and sum kept in small arrays so
 * the loops run along contiguous memory. */
#include "nn_kernels.h"
#include <math.h>
#include <omp.h>

enum { BLK = 64 };

static int sm_threads(int64_t n, int64_t items) {
  int nt = ln_kernel_threads();
  if (n < 16384) nt = 1;
  if (nt > items) nt = (int)LN_MAX(items, 1);
  return nt;
}

/* y = exp(x - m), returns the sum (libm's exp: these loops stay scalar) */
static float exp_sum_f32(float *y, const float *x, int64_t D, float m) {
  float s = 0;
  for (int64_t d = 0; d < D; d++) { float e = expf(x[d] - m); y[d] = e; s += e; }
  return s;
}
static double exp_sum_f64(double *y, const double *x, int64_t D, double m) {
  double s = 0;
  for (int64_t d = 0; d < D; d++) { double e = exp(x[d] - m); y[d] = e; s += e; }
  return s;
}
/* dx = dy - exp(y) * s */
static void logsm_bwd_f32(float *dx, const float *dy, const float *y, int64_t D, float s) {
  for (int64_t d = 0; d < D; d++) dx[d] = dy[d] - expf(y[d]) * s;
}
static void logsm_bwd_f64(double *dx, const double *dy, const double *y, int64_t D, double s) {
  for (int64_t d = 0; d < D; d++) dx[d] = dy[d] - exp(y[d]) * s;
}

#define DEF_SOFTMAX(T, SFX, EXP, LOG)                                                        \
  static void sm_fwd_##SFX(const ln_softmax_args *a, int nt) {                              \
    const int64_t D = a->D, inner = a->inner, nb = (inner + BLK - 1) / BLK;                  \
    const int64_t items = a->outer * nb;                                                     \
    _Pragma("omp parallel for num_threads(nt) schedule(static) if (nt > 1)")                 \
    for (int64_t it = 0; it < items; it++) {                                                 \
      int64_t o = it / nb, j0 = (it % nb) * BLK, j1 = LN_MIN(inner, j0 + BLK), nj = j1 - j0; \
      const T *x = (const T *)a->in + o * D * inner + j0;                                    \
      T *y = (T *)a->out + o * D * inner + j0;                                               \
      T m[BLK], s[BLK];                                                                      \
      for (int64_t j = 0; j < nj; j++) { m[j] = -INFINITY; s[j] = 0; }                       \
      for (int64_t d = 0; d < D; d++)                                                        \
        for (int64_t j = 0; j < nj; j++) {                                                   \
          T v = x[d * inner + j];                                                            \
          m[j] = (v > m[j] || v != v) ? v : m[j];                                            \
        }                                                                                    \
      for (int64_t d = 0; d < D; d++)                                                        \
        for (int64_t j = 0; j < nj; j++) {                                                   \
          T e = EXP(x[d * inner + j] - m[j]);                                                \
          if (!a->log) y[d * inner + j] = e;                                                 \
          s[j] += e;                                                                         \
        }                                                                                    \
      if (a->log) {                                                                          \
        for (int64_t j = 0; j < nj; j++) s[j] = m[j] + LOG(s[j]);                            \
        for (int64_t d = 0; d < D; d++)                                                      \
          for (int64_t j = 0; j < nj; j++) y[d * inner + j] = x[d * inner + j] - s[j];       \
      } else {                                                                               \
        for (int64_t j = 0; j < nj; j++) s[j] = 1 / s[j];                                    \
        for (int64_t d = 0; d < D; d++)                                                      \
          for (int64_t j = 0; j < nj; j++) y[d * inner + j] *= s[j];                         \
      }                                                                                      \
    }                                                                                        \
  }                                                                                          \
  static void sm_fwd_rows_##SFX(const ln_softmax_args *a, int nt) {                         \
    const int64_t D = a->D;                                                                  \
    _Pragma("omp parallel for num_threads(nt) schedule(static) if (nt > 1)")                 \
    for (int64_t o = 0; o < a->outer; o++) {                                                 \
      const T *x = (const T *)a->in + o * D;                                                 \
      T *y = (T *)a->out + o * D;                                                            \
      T m = -INFINITY, s = 0;                                                                \
      _Pragma("omp simd reduction(max:m)")                                                   \
      for (int64_t d = 0; d < D; d++) m = x[d] > m ? x[d] : m;                               \
      s = exp_sum_##SFX(y, x, D, m);                                                         \
      if (a->log) {                                                                          \
        T lse = m + LOG(s);                                                                  \
        _Pragma("omp simd")                                                                  \
        for (int64_t d = 0; d < D; d++) y[d] = x[d] - lse;                                   \
      } else {                                                                               \
        T r = 1 / s;                                                                         \
        _Pragma("omp simd")                                                                  \
        for (int64_t d = 0; d < D; d++) y[d] *= r;                                           \
      }                                                                                      \
    }                                                                                        \
  }                                                                                          \
  /* softmax: dx = y*(dy - sum(dy*y)); log-softmax: dx = dy - exp(y)*sum(dy) */             \
  static void sm_bwd_##SFX(const ln_softmax_args *a, int nt) {                              \
    const int64_t D = a->D, inner = a->inner, nb = (inner + BLK - 1) / BLK;                  \
    const int64_t items = a->outer * nb;                                                     \
    _Pragma("omp parallel for num_threads(nt) schedule(static) if (nt > 1)")                 \
    for (int64_t it = 0; it < items; it++) {                                                 \
      int64_t o = it / nb, j0 = (it % nb) * BLK, j1 = LN_MIN(inner, j0 + BLK), nj = j1 - j0; \
      const int64_t base = o * D * inner + j0;                                               \
      const T *y = (const T *)a->out + base, *dy = (const T *)a->dout + base;                \
      T *dx = (T *)a->din + base;                                                            \
      T s[BLK];                                                                              \
      for (int64_t j = 0; j < nj; j++) s[j] = 0;                                             \
      if (a->log) {                                                                          \
        for (int64_t d = 0; d < D; d++)                                                      \
          for (int64_t j = 0; j < nj; j++) s[j] += dy[d * inner + j];                        \
        for (int64_t d = 0; d < D; d++)                                                      \
          for (int64_t j = 0; j < nj; j++)                                                   \
            dx[d * inner + j] = dy[d * inner + j] - EXP(y[d * inner + j]) * s[j];            \
      } else {                                                                               \
        for (int64_t d = 0; d < D; d++)                                                      \
          for (int64_t j = 0; j < nj; j++) s[j] += dy[d * inner + j] * y[d * inner + j];     \
        for (int64_t d = 0; d < D; d++)                                                      \
          for (int64_t j = 0; j < nj; j++)                                                   \
            dx[d * inner + j] = y[d * inner + j] * (dy[d * inner + j] - s[j]);               \
      }                                                                                      \
    }                                                                                        \
  }                                                                                          \
  static void sm_bwd_rows_##SFX(const ln_softmax_args *a, int nt) {                         \
    const int64_t D = a->D;                                                                  \
    _Pragma("omp parallel for num_threads(nt) schedule(static) if (nt > 1)")                 \
    for (int64_t o = 0; o < a->outer; o++) {                                                 \
      const T *y = (const T *)a->out + o * D, *dy = (const T *)a->dout + o * D;              \
      T *dx = (T *)a->din + o * D;                                                           \
      T s = 0;                                                                               \
      if (a->log) {                                                                          \
        _Pragma("omp simd reduction(+:s)")                                                   \
        for (int64_t d = 0; d < D; d++) s += dy[d];                                          \
        logsm_bwd_##SFX(dx, dy, y, D, s);                                                    \
      } else {                                                                               \
        _Pragma("omp simd reduction(+:s)")                                                   \
        for (int64_t d = 0; d < D; d++) s += dy[d] * y[d];                                   \
        _Pragma("omp simd")                                                                  \
        for (int64_t d = 0; d < D; d++) dx[d] = y[d] * (dy[d] - s);                          \
      }                                                                                      \
    }                                                                                        \
  }

DEF_SOFTMAX(float, f32, expf, logf)
DEF_SOFTMAX(double, f64, exp, log)

int ln_cpu_softmax_fwd(void *args) {
  const ln_softmax_args *a = args;
  int64_t n = a->outer * a->D * a->inner;
  if (a->inner == 1) {
    int nt = sm_threads(n, a->outer);
    if (a->dtype == LN_FLOAT64) sm_fwd_rows_f64(a, nt); else sm_fwd_rows_f32(a, nt);
  } else {
    int nt = sm_threads(n, a->outer * ((a->inner + BLK - 1) / BLK));
    if (a->dtype == LN_FLOAT64) sm_fwd_f64(a, nt); else sm_fwd_f32(a, nt);
  }
  return 0;
}

int ln_cpu_softmax_bwd(void *args) {
  const ln_softmax_args *a = args;
  int64_t n = a->outer * a->D * a->inner;
  if (a->inner == 1) {
    int nt = sm_threads(n, a->outer);
    if (a->dtype == LN_FLOAT64) sm_bwd_rows_f64(a, nt); else sm_bwd_rows_f32(a, nt);
  } else {
    int nt = sm_threads(n, a->outer * ((a->inner + BLK - 1) / BLK));
    if (a->dtype == LN_FLOAT64) sm_bwd_f64(a, nt); else sm_bwd_f32(a, nt);
  }
  return 0;
}
