/* batchnorm.c -- batch normalisation over dim 1 of (N,C) or (N,C,*):
 * the CPU kernels (front ends: c/nn/batchnorm.c). The kernels run one channel per work item over
 * its N planes of S contiguous elements: two passes for the statistics
 * (mean, then the centred sum of squares, accumulated in double per plane),
 * one fused scale-and-shift pass for the output. The _relu variants apply a
 * ReLU in that pass and mask the incoming gradient by its zeros in the
 * backward: BatchNorm -> ReLU in training without the ReLU's two passes over
 * memory (its forward, and its backward before this backward's). The
 * _add_relu variants add a residual before the ReLU (a ResNet block's
 * relu(bn2(conv2(.)) + shortcut)) and give its gradient, the masked one,
 * from the backward's first pass: no add pass, no ReLU passes. */
#include "nn_kernels.h"
#include <math.h>
#include <omp.h>

static int bn_threads(int64_t n, int64_t C) {
  int nt = ln_kernel_threads();
  if (n < 32768) nt = 1;
  if (nt > C) nt = (int)LN_MAX(C, 1);
  return nt;
}

/* each channel's work is a function compiled for AVX-512, AVX2 and baseline
 * x86-64 (picked at load time), called from the OpenMP loop over channels */
#if defined(__x86_64__) && !defined(__clang__) && !defined(LN_NO_CLONES)
#define BN_SIMD __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define BN_SIMD
#endif

#define DEF_BN(T, SFX)                                                                       \
  BN_SIMD static void bn_fwd_ch_##SFX(const ln_batchnorm_args *a, int64_t c) {              \
    const int64_t N = a->N, C = a->C, S = a->S, M = N * S;                                   \
    const T *w = (const T *)a->weight, *b = (const T *)a->bias;                              \
    T *sm = (T *)a->save_mean, *si = (T *)a->save_invstd;                                    \
    T *rm = (T *)a->running_mean, *rv = (T *)a->running_var;                                 \
    double mean, invstd;                                                                     \
    if (a->training) {                                                                       \
      double s = 0;                                                                          \
      for (int64_t n = 0; n < N; n++) {                                                      \
        const T *x = (const T *)a->in + (n * C + c) * S;                                     \
        double part = 0;                                                                     \
        _Pragma("omp simd reduction(+:part)")                                                \
        for (int64_t j = 0; j < S; j++) part += x[j];                                        \
        s += part;                                                                           \
      }                                                                                      \
      mean = s / (double)M;                                                                  \
      double ss = 0;                                                                         \
      T mu = (T)mean;                                                                        \
      for (int64_t n = 0; n < N; n++) {                                                      \
        const T *x = (const T *)a->in + (n * C + c) * S;                                     \
        double part = 0;                                                                     \
        _Pragma("omp simd reduction(+:part)")                                                \
        for (int64_t j = 0; j < S; j++) { T d = x[j] - mu; part += d * d; }                  \
        ss += part;                                                                          \
      }                                                                                      \
      double var = ss / (double)M;                                                           \
      invstd = 1.0 / sqrt(var + a->eps);                                                     \
      if (rm) rm[c] = (T)((1 - a->momentum) * rm[c] + a->momentum * mean);                   \
      if (rv) rv[c] = (T)((1 - a->momentum) * rv[c] + a->momentum * var * (double)M / (double)(M - 1)); \
    } else {                                                                                 \
      mean = rm[c];                                                                          \
      invstd = 1.0 / sqrt((double)rv[c] + a->eps);                                           \
    }                                                                                        \
    if (sm) sm[c] = (T)mean;                                                                 \
    if (si) si[c] = (T)invstd;                                                               \
    double scale = (w ? (double)w[c] : 1.0) * invstd;                                        \
    T k = (T)scale, sh = (T)((b ? (double)b[c] : 0.0) - mean * scale);                       \
    for (int64_t n = 0; n < N; n++) {                                                        \
      const T *x = (const T *)a->in + (n * C + c) * S;                                       \
      T *y = (T *)a->out + (n * C + c) * S;                                                  \
      if (a->relu && a->res) {                                                               \
        const T *r = (const T *)a->res + (n * C + c) * S;                                    \
        _Pragma("omp simd")                                                                  \
        for (int64_t j = 0; j < S; j++) { T v = x[j] * k + sh + r[j]; y[j] = v < 0 ? (T)0 : v; } \
      } else if (a->relu) {   /* (as the relu kernel: NaN stays NaN) */                      \
        _Pragma("omp simd")                                                                  \
        for (int64_t j = 0; j < S; j++) { T v = x[j] * k + sh; y[j] = v < 0 ? (T)0 : v; }    \
      } else {                                                                               \
        _Pragma("omp simd")                                                                  \
        for (int64_t j = 0; j < S; j++) y[j] = x[j] * k + sh;                                \
      }                                                                                      \
    }                                                                                        \
  }                                                                                          \
  static void bn_fwd_##SFX(const ln_batchnorm_args *a, int nt) {                            \
    _Pragma("omp parallel for num_threads(nt) schedule(static) if (nt > 1)")                 \
    for (int64_t c = 0; c < a->C; c++) bn_fwd_ch_##SFX(a, c);                                \
  }                                                                                          \
  BN_SIMD static void bn_bwd_ch_##SFX(const ln_batchnorm_args *a, int64_t c) {              \
    const int64_t N = a->N, C = a->C, S = a->S, M = N * S;                                   \
    const T *w = (const T *)a->weight, *sm = (const T *)a->save_mean;                        \
    const T *si = (const T *)a->save_invstd;                                                 \
    T mu = sm[c];                                                                            \
    double invstd = si[c], sdy = 0, dot = 0;                                                 \
    for (int64_t n = 0; n < N; n++) {                                                        \
      const T *x = (const T *)a->in + (n * C + c) * S;                                       \
      const T *dy = (const T *)a->dout + (n * C + c) * S;                                    \
      const T *fy = a->relu ? (const T *)a->out + (n * C + c) * S : NULL;                    \
      double p1 = 0, p2 = 0;                                                                 \
      if (a->relu && a->dres) {                                                              \
        T *dr = (T *)a->dres + (n * C + c) * S;                                              \
        _Pragma("omp simd reduction(+:p1,p2)")                                               \
        for (int64_t j = 0; j < S; j++) {                                                    \
          T d = dy[j], g = fy[j] > 0 ? d : (T)0;                                             \
          dr[j] = g; p1 += g; p2 += g * (x[j] - mu);                                         \
        }                                                                                    \
      } else if (a->relu) {                                                                  \
        _Pragma("omp simd reduction(+:p1,p2)")                                               \
        for (int64_t j = 0; j < S; j++) {                                                    \
          T d = dy[j], g = fy[j] > 0 ? d : (T)0;                                             \
          p1 += g; p2 += g * (x[j] - mu);                                                    \
        }                                                                                    \
      } else {                                                                               \
        _Pragma("omp simd reduction(+:p1,p2)")                                               \
        for (int64_t j = 0; j < S; j++) { p1 += dy[j]; p2 += dy[j] * (x[j] - mu); }          \
      }                                                                                      \
      sdy += p1; dot += p2;                                                                  \
    }                                                                                        \
    if (a->dbias) ((T *)a->dbias)[c] = (T)sdy;                                               \
    if (a->dweight) ((T *)a->dweight)[c] = (T)(dot * invstd);                                \
    if (!a->din) return;                                                                     \
    double wc = w ? (double)w[c] : 1.0;                                                      \
    T k = (T)(wc * invstd);                                                                  \
    T km = 0, kx = 0;                                                                        \
    if (a->training) {                                                                       \
      km = (T)(sdy / (double)M);                                                             \
      kx = (T)(invstd * invstd * dot / (double)M);                                           \
    }                                                                                        \
    for (int64_t n = 0; n < N; n++) {                                                        \
      const T *x = (const T *)a->in + (n * C + c) * S;                                       \
      const T *dy = (const T *)a->dout + (n * C + c) * S;                                    \
      T *dx = (T *)a->din + (n * C + c) * S;                                                 \
      const T *fy = a->relu ? (const T *)a->out + (n * C + c) * S : NULL;                    \
      if (a->training && a->relu) {                                                          \
        _Pragma("omp simd")                                                                  \
        for (int64_t j = 0; j < S; j++) {                                                    \
          T d = dy[j], g = fy[j] > 0 ? d : (T)0;                                             \
          dx[j] = k * (g - km - (x[j] - mu) * kx);                                           \
        }                                                                                    \
      } else if (a->relu) {                                                                  \
        _Pragma("omp simd")                                                                  \
        for (int64_t j = 0; j < S; j++) { T d = dy[j]; dx[j] = fy[j] > 0 ? k * d : (T)0; }   \
      } else if (a->training) {                                                              \
        _Pragma("omp simd")                                                                  \
        for (int64_t j = 0; j < S; j++) dx[j] = k * (dy[j] - km - (x[j] - mu) * kx);         \
      } else {                                                                               \
        _Pragma("omp simd")                                                                  \
        for (int64_t j = 0; j < S; j++) dx[j] = k * dy[j];                                   \
      }                                                                                      \
    }                                                                                        \
  }                                                                                          \
  static void bn_bwd_##SFX(const ln_batchnorm_args *a, int nt) {                            \
    _Pragma("omp parallel for num_threads(nt) schedule(static) if (nt > 1)")                 \
    for (int64_t c = 0; c < a->C; c++) bn_bwd_ch_##SFX(a, c);                                \
  }

DEF_BN(float, f32)
DEF_BN(double, f64)

int ln_cpu_batchnorm_fwd(void *args) {
  const ln_batchnorm_args *a = args;
  int nt = bn_threads(a->N * a->C * a->S, a->C);
  if (a->dtype == LN_FLOAT64) bn_fwd_f64(a, nt); else bn_fwd_f32(a, nt);
  return 0;
}

int ln_cpu_batchnorm_bwd(void *args) {
  const ln_batchnorm_args *a = args;
  int nt = bn_threads(a->N * a->C * a->S, a->C);
  if (a->dtype == LN_FLOAT64) bn_bwd_f64(a, nt); else bn_bwd_f32(a, nt);
  return 0;
}
