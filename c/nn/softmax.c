/* softmax.c -- softmax and log-softmax along one dim: front ends and CPU
 * kernels. The tensor is seen as (outer, D, inner) with D the softmax dim.
 * inner == 1: one contiguous row per work item. inner > 1: a block of up to
 * BLK inner columns per work item, its max and sum kept in small arrays so
 * the loops run along contiguous memory. */
#include "nn.h"
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

/* ---- front ends -------------------------------------------------------------- */

static int sm_geometry(const char *fn, const ln_tensor *t, int dim, ln_softmax_args *a) {
  if (nn_check(fn, "input", t, -1, -1, -1, NULL) != 0) return -1;
  int nd = t->ndim;
  if (nd == 0) {
    if (dim != 0 && dim != -1) return ln_error("%s: dim %d out of range for a 0-d tensor", fn, dim + 1);
    dim = 0;
  } else {
    if (dim < 0) dim += nd;
    if (ln_check_dim(fn, t, dim) != 0) return -1;
  }
  a->dtype = t->dtype_id;
  a->outer = a->inner = 1;
  a->D = nd ? t->shape[dim] : 1;
  for (int i = 0; i < dim; i++) a->outer *= t->shape[i];
  for (int i = dim + 1; i < nd; i++) a->inner *= t->shape[i];
  return 0;
}

int ln_softmax_forward(ln_tensor *out, const ln_tensor *in, int dim, int log) {
  const char *fn = log ? "log_softmax" : "softmax";
  ln_softmax_args a = {0};
  if (sm_geometry(fn, in, dim, &a) != 0) return -1;
  if (nn_check(fn, "out", out, in->dtype_id, in->device_id, in->ndim, in->shape) != 0) return -1;
  a.log = log != 0;
  int dev = in->device_id, rc = -1;
  nn_in xi = {0};
  nn_out o = {0};
  if (nn_input(fn, "input", in, &xi) != 0 || nn_output(fn, "out", out, &o) != 0) goto done;
  a.in = nn_ptr(xi.t);
  a.out = nn_ptr(o.t);
  const ln_tensor *keep[2] = {o.t, xi.t};
  rc = ln_launch(dev, fn, ln_backend_of(dev)->softmax_fwd, &a, sizeof a, keep, 2);
done:
  rc = nn_out_finish(&o, rc);
  nn_in_free(&xi);
  return rc;
}

int ln_softmax_backward(ln_tensor *din, const ln_tensor *dout, const ln_tensor *out, int dim, int log) {
  const char *fn = log ? "log_softmax_backward" : "softmax_backward";
  ln_softmax_args a = {0};
  if (sm_geometry(fn, out, dim, &a) != 0) return -1;
  if (nn_check(fn, "grad_output", dout, out->dtype_id, out->device_id, out->ndim, out->shape) != 0 ||
      nn_check(fn, "grad_input", din, out->dtype_id, out->device_id, out->ndim, out->shape) != 0)
    return -1;
  a.log = log != 0;
  int dev = out->device_id, rc = -1;
  nn_in yi = {0}, gi = {0};
  nn_out o = {0};
  if (nn_input(fn, "out", out, &yi) != 0 || nn_input(fn, "grad_output", dout, &gi) != 0 ||
      nn_output(fn, "grad_input", din, &o) != 0)
    goto done;
  a.out = nn_ptr(yi.t);
  a.dout = nn_ptr(gi.t);
  a.din = nn_ptr(o.t);
  const ln_tensor *keep[3] = {o.t, yi.t, gi.t};
  rc = ln_launch(dev, fn, ln_backend_of(dev)->softmax_bwd, &a, sizeof a, keep, 3);
done:
  rc = nn_out_finish(&o, rc);
  nn_in_free(&yi);
  nn_in_free(&gi);
  return rc;
}
