/* loss.c -- negative log-likelihood loss over (N,C) log-probabilities at
 * int64 class targets: the CPU kernels (front ends: c/nn/loss.c). Targets hold class ids
 * base..base+C-1 (Lua passes base 1); a target equal to ignore_index adds
 * nothing; any other target out of range is an error naming it (raised by
 * the kernel: at once on the default inline device, at the next
 * synchronisation on a queued one). */
#include "nn_kernels.h"
#include <math.h>

/* Finds the first bad target; returns 0 when all are valid. */
static int check_targets(const char *fn, const ln_nll_args *a) {
  for (int64_t i = 0; i < a->N; i++) {
    int64_t t = a->target[i];
    if (t == a->ignore_index) continue;
    if (t < a->base || t >= a->base + a->C)
      return ln_error("%s: target %lld (sample %lld) is out of range: classes are %lld..%lld", fn, (long long)t,
                      (long long)(i + a->base), (long long)a->base, (long long)(a->base + a->C - 1));
  }
  return 0;
}

#define DEF_NLL(T, SFX)                                                                      \
  static void nll_fwd_##SFX(const ln_nll_args *a) {                                         \
    const T *lp = (const T *)a->logp, *w = (const T *)a->weight;                             \
    T *out = (T *)a->out;                                                                    \
    double sum = 0, wsum = 0;                                                                \
    for (int64_t i = 0; i < a->N; i++) {                                                     \
      int64_t t = a->target[i];                                                              \
      double l = 0, wi = 0;                                                                  \
      if (t != a->ignore_index) {                                                            \
        int64_t k = t - a->base;                                                             \
        wi = w ? (double)w[k] : 1.0;                                                         \
        l = -wi * (double)lp[i * a->C + k];                                                  \
      }                                                                                      \
      if (a->reduction == 0) out[i] = (T)l;                                                  \
      sum += l;                                                                              \
      wsum += wi;                                                                            \
    }                                                                                        \
    if (a->reduction == 1) out[0] = (T)(sum / wsum);                                         \
    else if (a->reduction == 2) out[0] = (T)sum;                                             \
  }                                                                                          \
  static void nll_bwd_##SFX(const ln_nll_args *a) {                                         \
    const T *w = (const T *)a->weight, *dout = (const T *)a->dout;                           \
    T *dlp = (T *)a->dlogp;                                                                  \
    memset(dlp, 0, (size_t)(a->N * a->C) * sizeof(T));                                       \
    double scale = 1;                                                                        \
    if (a->reduction == 1) {                                                                 \
      double wsum = 0;                                                                       \
      for (int64_t i = 0; i < a->N; i++) {                                                   \
        int64_t t = a->target[i];                                                            \
        if (t != a->ignore_index) wsum += w ? (double)w[t - a->base] : 1.0;                  \
      }                                                                                      \
      scale = 1 / wsum;                                                                      \
    }                                                                                        \
    for (int64_t i = 0; i < a->N; i++) {                                                     \
      int64_t t = a->target[i];                                                              \
      if (t == a->ignore_index) continue;                                                    \
      int64_t k = t - a->base;                                                               \
      double g = a->reduction == 0 ? (double)dout[i] : (double)dout[0] * scale;              \
      dlp[i * a->C + k] = (T)(-(w ? (double)w[k] : 1.0) * g);                                \
    }                                                                                        \
  }

DEF_NLL(float, f32)
DEF_NLL(double, f64)

int ln_cpu_nll_loss_fwd(void *args) {
  const ln_nll_args *a = args;
  if (check_targets("nll_loss", a) != 0) return -1;
  if (a->dtype == LN_FLOAT64) nll_fwd_f64(a); else nll_fwd_f32(a);
  return 0;
}

int ln_cpu_nll_loss_bwd(void *args) {
  const ln_nll_args *a = args;
  if (check_targets("nll_loss_backward", a) != 0) return -1;
  if (a->dtype == LN_FLOAT64) nll_bwd_f64(a); else nll_bwd_f32(a);
  return 0;
}
