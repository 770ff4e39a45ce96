/* optim.c -- CPU kernels of the fused optimizer updates and of the norm
 * reduction behind clip_grad_norm (front ends: ops/optim.c).
 *
 * Each update reads param, grad and the state buffers once and writes param
 * and state once. The arithmetic mirrors PyTorch 1.13's single-tensor loops
 * op by op, in the param's dtype (scalars such as 1 - beta1 are computed in
 * double on the host, as Python does, then rounded to the dtype).
 * The Makefile builds this file with -fno-math-errno, so the loops with a
 * square root vectorize. */
#include "cpu.h"
#include "iter.h"
#include <math.h>
#include <stdlib.h>


enum { OPT_BLOCK = 16384, OPT_PAR_MIN = LN_PAR_MIN };

typedef void (*opt_range_fn)(const ln_optim_args *a, int64_t begin, int64_t end);

/* Run fn over [0, n) in blocks on the kernel's threads. */
static void opt_parallel(const ln_optim_args *a, opt_range_fn fn) {
  int64_t n = a->n, nblk = (n + OPT_BLOCK - 1) / OPT_BLOCK;
  int nt = ln_kernel_threads();
  if (nt > 1 && n >= OPT_PAR_MIN) {
    #pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t b = 0; b < nblk; b++) fn(a, b * OPT_BLOCK, LN_MIN(n, (b + 1) * OPT_BLOCK));
  } else if (n > 0) {
    fn(a, 0, n);
  }
}

/* Loop bodies take their options as constant arguments and are inlined into
 * a dispatcher per combination, so each loop is branch-free and vectorizes.
 * maximize is a multiply by -1 (exact), AdamW's shrink a multiply by 1 when
 * off (exact); the other options change which operations run. */
#define INLINE static inline __attribute__((always_inline))

/* ---- SGD: momentum, dampening, nesterov, weight decay, maximize ---------------- */

/* mode 0: no momentum, 1: first step (buf = d), 2: buf = momentum*buf + (1-dampening)*d */
#define DEF_SGD(NAME, T)                                                             \
  INLINE void NAME##_body(const ln_optim_args *a, int64_t b, int64_t e, const int mode, \
                          const int nesterov, const int decay) {                     \
    const ln_sgd_params *h = &a->hp.sgd;                                             \
    T *restrict p = (T *)a->param, *restrict buf = (T *)a->s0;                       \
    const T *restrict g = (const T *)a->grad;                                        \
    const T lr = (T)h->lr, wd = (T)h->weight_decay, mom = (T)h->momentum;            \
    const T damp1 = (T)(1.0 - h->dampening), sign = h->maximize ? (T)-1 : (T)1;      \
    for (int64_t i = b; i < e; i++) {                                                \
      T d = sign * g[i];                                                             \
      if (decay) d = d + wd * p[i];                                                  \
      if (mode) {                                                                    \
        T m = mode == 1 ? d : buf[i] * mom + damp1 * d;                              \
        buf[i] = m;                                                                  \
        d = nesterov ? d + mom * m : m;                                              \
      }                                                                              \
      p[i] = p[i] - lr * d;                                                          \
    }                                                                                \
  }                                                                                  \
  LN_SIMD static void NAME(const ln_optim_args *a, int64_t b, int64_t e) {           \
    const ln_sgd_params *h = &a->hp.sgd;                                             \
    int mode = a->s0 ? (h->init_buf ? 1 : 2) : 0, nest = h->nesterov && mode;        \
    int decay = h->weight_decay != 0;                                                \
    if (mode == 0) { if (decay) NAME##_body(a, b, e, 0, 0, 1); else NAME##_body(a, b, e, 0, 0, 0); } \
    else if (mode == 1) {                                                            \
      if (nest) { if (decay) NAME##_body(a, b, e, 1, 1, 1); else NAME##_body(a, b, e, 1, 1, 0); } \
      else { if (decay) NAME##_body(a, b, e, 1, 0, 1); else NAME##_body(a, b, e, 1, 0, 0); } \
    } else {                                                                         \
      if (nest) { if (decay) NAME##_body(a, b, e, 2, 1, 1); else NAME##_body(a, b, e, 2, 1, 0); } \
      else { if (decay) NAME##_body(a, b, e, 2, 0, 1); else NAME##_body(a, b, e, 2, 0, 0); } \
    }                                                                                \
  }
DEF_SGD(sgd_f32, float)
DEF_SGD(sgd_f64, double)

int ln_cpu_sgd_step(void *args) {
  ln_optim_args *a = args;
  opt_parallel(a, a->dtype == LN_FLOAT64 ? sgd_f64 : sgd_f32);
  return 0;
}

/* ---- Adam / AdamW: bias correction, amsgrad, coupled or decoupled decay ------- */

#define DEF_ADAM(NAME, T, SQRT)                                                      \
  INLINE void NAME##_body(const ln_optim_args *a, int64_t b, int64_t e, const int ams, \
                          const int coupled) {                                       \
    const ln_adam_params *h = &a->hp.adam;                                           \
    T *restrict p = (T *)a->param, *restrict m = (T *)a->s0, *restrict v = (T *)a->s1; \
    T *restrict vmax = (T *)a->s2;                                                   \
    const T *restrict g = (const T *)a->grad;                                        \
    double bc1 = 1.0 - pow(h->beta1, (double)h->step);                               \
    double bc2 = 1.0 - pow(h->beta2, (double)h->step);                               \
    const T neg_step = (T)(-(h->lr / bc1)), bc2_sqrt = (T)sqrt(bc2);                 \
    const T b1 = (T)h->beta1, b2 = (T)h->beta2, omb1 = (T)(1.0 - h->beta1);          \
    const T omb2 = (T)(1.0 - h->beta2), eps = (T)h->eps, wd = (T)h->weight_decay;    \
    const T shrink = h->decoupled ? (T)(1.0 - h->lr * h->weight_decay) : (T)1;       \
    const T sign = h->maximize ? (T)-1 : (T)1;                                       \
    for (int64_t i = b; i < e; i++) {                                                \
      T gi = sign * g[i];                                                            \
      T pi = p[i];                                                                   \
      if (coupled) gi = gi + wd * pi;                                                \
      pi = pi * shrink;                                                              \
      T mi = m[i] * b1 + omb1 * gi;                                                  \
      T vi = v[i] * b2 + omb2 * gi * gi;                                             \
      m[i] = mi; v[i] = vi;                                                          \
      if (ams) { T x = vmax[i]; vi = x > vi || x != x ? x : vi; vmax[i] = vi; }      \
      T denom = SQRT(vi) / bc2_sqrt + eps;                                           \
      p[i] = pi + neg_step * (mi / denom);                                           \
    }                                                                                \
  }                                                                                  \
  LN_SIMD static void NAME(const ln_optim_args *a, int64_t b, int64_t e) {           \
    const ln_adam_params *h = &a->hp.adam;                                           \
    int coupled = !h->decoupled && h->weight_decay != 0;                             \
    if (a->s2) { if (coupled) NAME##_body(a, b, e, 1, 1); else NAME##_body(a, b, e, 1, 0); } \
    else { if (coupled) NAME##_body(a, b, e, 0, 1); else NAME##_body(a, b, e, 0, 0); } \
  }
DEF_ADAM(adam_f32, float, sqrtf)
DEF_ADAM(adam_f64, double, sqrt)

int ln_cpu_adam_step(void *args) {
  ln_optim_args *a = args;
  opt_parallel(a, a->dtype == LN_FLOAT64 ? adam_f64 : adam_f32);
  return 0;
}

/* ---- RMSprop: alpha, eps, momentum, centered, weight decay -------------------- */

#define DEF_RMSPROP(NAME, T, SQRT)                                                   \
  INLINE void NAME##_body(const ln_optim_args *a, int64_t b, int64_t e, const int centered, \
                          const int momentum, const int decay) {                     \
    const ln_rmsprop_params *h = &a->hp.rmsprop;                                     \
    T *restrict p = (T *)a->param, *restrict sq = (T *)a->s0;                        \
    T *restrict buf = (T *)a->s1, *restrict ga = (T *)a->s2;                         \
    const T *restrict g = (const T *)a->grad;                                        \
    const T lr = (T)h->lr, alpha = (T)h->alpha, oma = (T)(1.0 - h->alpha);           \
    const T eps = (T)h->eps, wd = (T)h->weight_decay, mom = (T)h->momentum;          \
    const T sign = h->maximize ? (T)-1 : (T)1;                                       \
    for (int64_t i = b; i < e; i++) {                                                \
      T gi = sign * g[i];                                                            \
      if (decay) gi = gi + wd * p[i];                                                \
      T s = sq[i] * alpha + oma * gi * gi;                                           \
      sq[i] = s;                                                                     \
      T avg;                                                                         \
      if (centered) {                                                                \
        T c = ga[i] * alpha + oma * gi;                                              \
        ga[i] = c;                                                                   \
        avg = SQRT(s - c * c);                                                       \
      } else {                                                                       \
        avg = SQRT(s);                                                               \
      }                                                                              \
      avg = avg + eps;                                                               \
      if (momentum) {                                                                \
        T bi = buf[i] * mom + gi / avg;                                              \
        buf[i] = bi;                                                                 \
        p[i] = p[i] - lr * bi;                                                       \
      } else {                                                                       \
        p[i] = p[i] - lr * (gi / avg);                                               \
      }                                                                              \
    }                                                                                \
  }                                                                                  \
  LN_SIMD static void NAME(const ln_optim_args *a, int64_t b, int64_t e) {           \
    int c = a->s2 != NULL, m = a->s1 != NULL, d = a->hp.rmsprop.weight_decay != 0;   \
    switch (c * 4 + m * 2 + d) {                                                     \
      case 0: NAME##_body(a, b, e, 0, 0, 0); break;                                  \
      case 1: NAME##_body(a, b, e, 0, 0, 1); break;                                  \
      case 2: NAME##_body(a, b, e, 0, 1, 0); break;                                  \
      case 3: NAME##_body(a, b, e, 0, 1, 1); break;                                  \
      case 4: NAME##_body(a, b, e, 1, 0, 0); break;                                  \
      case 5: NAME##_body(a, b, e, 1, 0, 1); break;                                  \
      case 6: NAME##_body(a, b, e, 1, 1, 0); break;                                  \
      default: NAME##_body(a, b, e, 1, 1, 1); break;                                 \
    }                                                                                \
  }
DEF_RMSPROP(rmsprop_f32, float, sqrtf)
DEF_RMSPROP(rmsprop_f64, double, sqrt)

int ln_cpu_rmsprop_step(void *args) {
  ln_optim_args *a = args;
  opt_parallel(a, a->dtype == LN_FLOAT64 ? rmsprop_f64 : rmsprop_f32);
  return 0;
}

/* ---- Adagrad: lr decay, weight decay, maximize ----------------------------------- */

#define DEF_ADAGRAD(NAME, T, SQRT)                                                   \
  INLINE void NAME##_body(const ln_optim_args *a, int64_t b, int64_t e, const int decay) { \
    const ln_adagrad_params *h = &a->hp.adagrad;                                     \
    T *restrict p = (T *)a->param, *restrict sum = (T *)a->s0;                       \
    const T *restrict g = (const T *)a->grad;                                        \
    const double clr = h->lr / (1 + (double)(h->step - 1) * h->lr_decay);            \
    const T neg_clr = (T)(-clr), eps = (T)h->eps, wd = (T)h->weight_decay;           \
    const T sign = h->maximize ? (T)-1 : (T)1;                                       \
    for (int64_t i = b; i < e; i++) {                                                \
      T gi = sign * g[i];                                                            \
      if (decay) gi = gi + wd * p[i];                                                \
      T s = sum[i] + gi * gi;                                                        \
      sum[i] = s;                                                                    \
      T std = SQRT(s) + eps;                                                         \
      p[i] = p[i] + neg_clr * gi / std;                                              \
    }                                                                                \
  }                                                                                  \
  LN_SIMD static void NAME(const ln_optim_args *a, int64_t b, int64_t e) {           \
    if (a->hp.adagrad.weight_decay != 0) NAME##_body(a, b, e, 1);                    \
    else NAME##_body(a, b, e, 0);                                                    \
  }
DEF_ADAGRAD(adagrad_f32, float, sqrtf)
DEF_ADAGRAD(adagrad_f64, double, sqrt)

int ln_cpu_adagrad_step(void *args) {
  ln_optim_args *a = args;
  opt_parallel(a, a->dtype == LN_FLOAT64 ? adagrad_f64 : adagrad_f32);
  return 0;
}

/* ---- Adamax: infinity norm (NaN propagates through the max, as torch.amax) ---- */

#define DEF_ADAMAX(NAME, T, ABS)                                                     \
  INLINE void NAME##_body(const ln_optim_args *a, int64_t b, int64_t e, const int decay) { \
    const ln_adamax_params *h = &a->hp.adamax;                                       \
    T *restrict p = (T *)a->param, *restrict m = (T *)a->s0, *restrict u = (T *)a->s1; \
    const T *restrict g = (const T *)a->grad;                                        \
    const double bc1 = 1.0 - pow(h->beta1, (double)h->step);                         \
    const T neg_clr = (T)(-(h->lr / bc1)), b1 = (T)h->beta1, b2 = (T)h->beta2;       \
    const T omb1 = (T)(1.0 - h->beta1), eps = (T)h->eps, wd = (T)h->weight_decay;    \
    const T sign = h->maximize ? (T)-1 : (T)1;                                       \
    for (int64_t i = b; i < e; i++) {                                                \
      T gi = sign * g[i];                                                            \
      if (decay) gi = gi + wd * p[i];                                                \
      T mi = m[i] * b1 + omb1 * gi;                                                  \
      T x = u[i] * b2, y = ABS(gi) + eps;                                            \
      T ui = x > y || x != x ? x : y;                                                \
      m[i] = mi; u[i] = ui;                                                          \
      p[i] = p[i] + neg_clr * mi / ui;                                               \
    }                                                                                \
  }                                                                                  \
  LN_SIMD static void NAME(const ln_optim_args *a, int64_t b, int64_t e) {           \
    if (a->hp.adamax.weight_decay != 0) NAME##_body(a, b, e, 1);                     \
    else NAME##_body(a, b, e, 0);                                                    \
  }
DEF_ADAMAX(adamax_f32, float, fabsf)
DEF_ADAMAX(adamax_f64, double, fabs)

int ln_cpu_adamax_step(void *args) {
  ln_optim_args *a = args;
  opt_parallel(a, a->dtype == LN_FLOAT64 ? adamax_f64 : adamax_f32);
  return 0;
}

/* ---- NAdam: momentum schedule mu_t; mu_product as PyTorch keeps it (float32) ---- */

static double nadam_mu(const ln_nadam_params *h, int64_t t) {
  return h->beta1 * (1. - 0.5 * pow(0.96, (double)t * h->momentum_decay));
}

#define DEF_NADAM(NAME, T, SQRT)                                                     \
  INLINE void NAME##_body(const ln_optim_args *a, int64_t b, int64_t e, const int decay) { \
    const ln_nadam_params *h = &a->hp.nadam;                                         \
    T *restrict p = (T *)a->param, *restrict m = (T *)a->s0, *restrict v = (T *)a->s1; \
    const T *restrict g = (const T *)a->grad;                                        \
    const double mu = nadam_mu(h, h->step), mu_next = nadam_mu(h, h->step + 1);      \
    const double mp_next = (float)((float)(h->mu_product * (float)mu) * (float)mu_next); \
    const T c_grad = (T)(-h->lr * (1. - mu) / (1. - h->mu_product));                 \
    const T c_avg = (T)(-h->lr * mu_next / (1. - mp_next));                          \
    const T bc2 = (T)(1.0 - pow(h->beta2, (double)h->step));                         \
    const T b1 = (T)h->beta1, b2 = (T)h->beta2, omb1 = (T)(1.0 - h->beta1);          \
    const T omb2 = (T)(1.0 - h->beta2), eps = (T)h->eps, wd = (T)h->weight_decay;    \
    for (int64_t i = b; i < e; i++) {                                                \
      T gi = g[i];                                                                   \
      T pi = p[i];                                                                   \
      if (decay) gi = gi + wd * pi;                                                  \
      T mi = m[i] * b1 + omb1 * gi;                                                  \
      T vi = v[i] * b2 + omb2 * gi * gi;                                             \
      m[i] = mi; v[i] = vi;                                                          \
      T denom = SQRT(vi / bc2) + eps;                                                \
      pi = pi + c_grad * gi / denom;                                                 \
      p[i] = pi + c_avg * mi / denom;                                                \
    }                                                                                \
  }                                                                                  \
  LN_SIMD static void NAME(const ln_optim_args *a, int64_t b, int64_t e) {           \
    if (a->hp.nadam.weight_decay != 0) NAME##_body(a, b, e, 1);                      \
    else NAME##_body(a, b, e, 0);                                                    \
  }
DEF_NADAM(nadam_f32, float, sqrtf)
DEF_NADAM(nadam_f64, double, sqrt)

int ln_cpu_nadam_step(void *args) {
  ln_optim_args *a = args;
  opt_parallel(a, a->dtype == LN_FLOAT64 ? nadam_f64 : nadam_f32);
  return 0;
}

/* ---- RAdam: plain momentum step until the variance's SMA length passes 5 ------ */

#define DEF_RADAM(NAME, T, SQRT)                                                     \
  INLINE void NAME##_body(const ln_optim_args *a, int64_t b, int64_t e, const int decay, \
                          const int rectified) {                                     \
    const ln_radam_params *h = &a->hp.radam;                                         \
    T *restrict p = (T *)a->param, *restrict m = (T *)a->s0, *restrict v = (T *)a->s1; \
    const T *restrict g = (const T *)a->grad;                                        \
    const double t = (double)h->step;                                                \
    const double bc1 = 1.0 - pow(h->beta1, t), bc2 = 1.0 - pow(h->beta2, t);         \
    const double rho_inf = 2 / (1 - h->beta2) - 1;                                   \
    const double rho_t = rho_inf - 2 * t * pow(h->beta2, t) / bc2;                   \
    const double rect = rectified ? sqrt((rho_t - 4) * (rho_t - 2) * rho_inf /       \
                                         ((rho_inf - 4) * (rho_inf - 2) * rho_t)) : 0; \
    const T bc1t = (T)bc1, lr = (T)h->lr, sbc2 = (T)sqrt(bc2), rectt = (T)rect;      \
    const T b1 = (T)h->beta1, b2 = (T)h->beta2, omb1 = (T)(1.0 - h->beta1);          \
    const T omb2 = (T)(1.0 - h->beta2), eps = (T)h->eps, wd = (T)h->weight_decay;    \
    for (int64_t i = b; i < e; i++) {                                                \
      T gi = g[i];                                                                   \
      T pi = p[i];                                                                   \
      if (decay) gi = gi + wd * pi;                                                  \
      T mi = m[i] * b1 + omb1 * gi;                                                  \
      T vi = v[i] * b2 + omb2 * gi * gi;                                             \
      m[i] = mi; v[i] = vi;                                                          \
      T bcm = mi / bc1t;                                                             \
      if (rectified) {                                                               \
        T adaptive = (T)1 / (SQRT(vi) + eps) * sbc2;                                 \
        p[i] = pi - bcm * lr * adaptive * rectt;                                     \
      } else {                                                                       \
        p[i] = pi - bcm * lr;                                                        \
      }                                                                              \
    }                                                                                \
  }                                                                                  \
  LN_SIMD static void NAME(const ln_optim_args *a, int64_t b, int64_t e) {           \
    const ln_radam_params *h = &a->hp.radam;                                         \
    const double t = (double)h->step, bc2 = 1.0 - pow(h->beta2, t);                  \
    const double rho_t = 2 / (1 - h->beta2) - 1 - 2 * t * pow(h->beta2, t) / bc2;    \
    int d = h->weight_decay != 0, r = rho_t > 5.;                                    \
    switch (d * 2 + r) {                                                             \
      case 0: NAME##_body(a, b, e, 0, 0); break;                                     \
      case 1: NAME##_body(a, b, e, 0, 1); break;                                     \
      case 2: NAME##_body(a, b, e, 1, 0); break;                                     \
      default: NAME##_body(a, b, e, 1, 1); break;                                    \
    }                                                                                \
  }
DEF_RADAM(radam_f32, float, sqrtf)
DEF_RADAM(radam_f64, double, sqrt)

int ln_cpu_radam_step(void *args) {
  ln_optim_args *a = args;
  opt_parallel(a, a->dtype == LN_FLOAT64 ? radam_f64 : radam_f32);
  return 0;
}

/* ---- Adadelta: rho, eps, weight decay, maximize ------------------------------ */

#define DEF_ADADELTA(NAME, T, SQRT)                                                  \
  INLINE void NAME##_body(const ln_optim_args *a, int64_t b, int64_t e, const int decay) { \
    const ln_adadelta_params *h = &a->hp.adadelta;                                   \
    T *restrict p = (T *)a->param, *restrict sq = (T *)a->s0, *restrict acc = (T *)a->s1; \
    const T *restrict g = (const T *)a->grad;                                        \
    const T neg_lr = (T)(-h->lr), rho = (T)h->rho, omr = (T)(1.0 - h->rho);          \
    const T eps = (T)h->eps, wd = (T)h->weight_decay;                                \
    const T sign = h->maximize ? (T)-1 : (T)1;                                       \
    for (int64_t i = b; i < e; i++) {                                                \
      T gi = sign * g[i];                                                            \
      if (decay) gi = gi + wd * p[i];                                                \
      T s = sq[i] * rho + omr * gi * gi;                                             \
      sq[i] = s;                                                                     \
      T std = SQRT(s + eps);                                                         \
      T delta = SQRT(acc[i] + eps) / std * gi;                                       \
      acc[i] = acc[i] * rho + omr * delta * delta;                                   \
      p[i] = p[i] + neg_lr * delta;                                                  \
    }                                                                                \
  }                                                                                  \
  LN_SIMD static void NAME(const ln_optim_args *a, int64_t b, int64_t e) {           \
    if (a->hp.adadelta.weight_decay != 0) NAME##_body(a, b, e, 1);                   \
    else NAME##_body(a, b, e, 0);                                                    \
  }
DEF_ADADELTA(adadelta_f32, float, sqrtf)
DEF_ADADELTA(adadelta_f64, double, sqrt)

int ln_cpu_adadelta_step(void *args) {
  ln_optim_args *a = args;
  opt_parallel(a, a->dtype == LN_FLOAT64 ? adadelta_f64 : adadelta_f32);
  return 0;
}

/* ---- sum |x|^p (or max |x|) in fixed blocks, so the result does not depend on
 * the thread count ----------------------------------------------------------------- */

#define DEF_NORM(NAME, T)                                                            \
  static double NAME(const T *x, int64_t n, double p) {                              \
    double s = 0;                                                                    \
    if (isinf(p)) {                                                                  \
      for (int64_t i = 0; i < n; i++) {                                              \
        double v = fabs((double)x[i]);                                               \
        if (v > s || v != v) s = v;                                                  \
        if (s != s) break;                                                           \
      }                                                                              \
    } else if (p == 2) {                                                             \
      double s4[4] = {0, 0, 0, 0};                                                   \
      int64_t i = 0;                                                                 \
      for (; i + 4 <= n; i += 4)                                                     \
        for (int j = 0; j < 4; j++) s4[j] += (double)x[i + j] * (double)x[i + j];    \
      for (; i < n; i++) s4[0] += (double)x[i] * (double)x[i];                       \
      s = (s4[0] + s4[1]) + (s4[2] + s4[3]);                                         \
    } else if (p == 1) {                                                             \
      for (int64_t i = 0; i < n; i++) s += fabs((double)x[i]);                       \
    } else {                                                                         \
      for (int64_t i = 0; i < n; i++) s += pow(fabs((double)x[i]), p);               \
    }                                                                                \
    return s;                                                                        \
  }
DEF_NORM(norm_f32, float)
DEF_NORM(norm_f64, double)

static double norm_block(const ln_norm_args *a, int64_t b, int64_t e) {
  int sz = ln_dtype_size(a->in.dtype);
  const char *x = a->in.data + b * sz;
  return a->in.dtype == LN_FLOAT64 ? norm_f64((const double *)x, e - b, a->p)
                                   : norm_f32((const float *)x, e - b, a->p);
}

int ln_cpu_norm_pow_sum(void *args) {
  ln_norm_args *a = args;
  int64_t n = a->n, nblk = (n + OPT_BLOCK - 1) / OPT_BLOCK;
  double stack[64], *part = nblk <= 64 ? stack : malloc((size_t)nblk * sizeof(double));
  if (!part) return ln_error("clip_grad_norm: out of host memory for %lld partial sums", (long long)nblk);
  int nt = ln_kernel_threads();
  if (nt > 1 && n >= OPT_PAR_MIN) {
    #pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t b = 0; b < nblk; b++) part[b] = norm_block(a, b * OPT_BLOCK, LN_MIN(n, (b + 1) * OPT_BLOCK));
  } else {
    for (int64_t b = 0; b < nblk; b++) part[b] = norm_block(a, b * OPT_BLOCK, LN_MIN(n, (b + 1) * OPT_BLOCK));
  }
  double s = 0;
  for (int64_t b = 0; b < nblk; b++) {
    if (isinf(a->p)) { if (part[b] > s || part[b] != part[b]) s = part[b]; }
    else s += part[b];
  }
  if (part != stack) free(part);
  *(double *)a->out.data = s;
  return 0;
}
