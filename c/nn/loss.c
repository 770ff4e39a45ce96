/* loss.c -- negative log-likelihood loss over (N,C) log-probabilities at
 * int64 class targets: front ends and CPU kernels. Targets hold class ids
 * base..base+C-1 (Lua passes base 1); a target equal to ignore_index adds
 * nothing; any other target out of range is an error naming it (raised by
 * the kernel: at once on the default inline device, at the next
 * synchronisation on a queued one). */
#include "nn.h"
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

/* ---- front ends -------------------------------------------------------------- */

static int nll_check(const char *fn, const ln_tensor *logp, const ln_tensor *target, const ln_tensor *weight,
                     int reduction, int64_t base, ln_nll_args *a) {
  char s1[160], s2[160];
  if (nn_check(fn, "input", logp, -1, -1, -1, NULL) != 0) return -1;
  if (logp->ndim != 2)
    return ln_error("%s: input must be 2-d (N,C) log-probabilities, got shape %s", fn,
                    nn_shape(s1, sizeof s1, logp));
  if (ln_check_tensor(fn, target, "target") != 0) return -1;
  if (target->dtype_id != LN_INT64)
    return ln_error("%s: target must be int64 class ids, got %s; convert it with :long()", fn,
                    ln_dtype_name(target->dtype_id));
  if (target->device_id != logp->device_id)
    return ln_error("%s: target is on another device than the input; move it with to()", fn);
  if (target->ndim != 1 || target->shape[0] != logp->shape[0])
    return ln_error("%s: target has shape %s, expected {%lld} for input %s", fn, nn_shape(s1, sizeof s1, target),
                    (long long)logp->shape[0], nn_shape(s2, sizeof s2, logp));
  int64_t wshape[1] = {logp->shape[1]};
  if (weight && nn_check(fn, "weight", weight, logp->dtype_id, logp->device_id, 1, wshape) != 0) return -1;
  if (reduction < 0 || reduction > 2)
    return ln_error("%s: reduction must be 0 (none), 1 (mean) or 2 (sum), got %d", fn, reduction);
  memset(a, 0, sizeof *a);
  a->dtype = logp->dtype_id;
  a->reduction = reduction;
  a->N = logp->shape[0];
  a->C = logp->shape[1];
  a->base = base;
  return 0;
}

/* the loss's shape: (N) for reduction none, else one element */
static int check_loss_shape(const char *fn, const char *name, const ln_tensor *t, const ln_tensor *logp,
                            int reduction) {
  char s[160];
  if (nn_check(fn, name, t, logp->dtype_id, logp->device_id, -1, NULL) != 0) return -1;
  if (reduction == 0) {
    if (t->ndim != 1 || t->shape[0] != logp->shape[0])
      return ln_error("%s: %s has shape %s, expected {%lld} with reduction none", fn, name,
                      nn_shape(s, sizeof s, t), (long long)logp->shape[0]);
  } else if (t->ndim > 1 || ln_numel(t) != 1) {
    return ln_error("%s: %s has shape %s, expected a 0-d tensor with reduction %s", fn, name,
                    nn_shape(s, sizeof s, t), reduction == 1 ? "mean" : "sum");
  }
  return 0;
}

int ln_nll_loss_forward(ln_tensor *out, const ln_tensor *logp, const ln_tensor *target, const ln_tensor *weight,
                        int reduction, int64_t ignore_index, int64_t base) {
  const char *fn = "nll_loss";
  ln_nll_args a;
  if (nll_check(fn, logp, target, weight, reduction, base, &a) != 0 ||
      check_loss_shape(fn, "out", out, logp, reduction) != 0)
    return -1;
  a.ignore_index = ignore_index;
  int dev = logp->device_id, rc = -1;
  nn_in li = {0}, ti = {0}, wi = {0};
  nn_out o = {0};
  if (nn_input(fn, "input", logp, &li) != 0 || nn_input(fn, "target", target, &ti) != 0 ||
      nn_input(fn, "weight", weight, &wi) != 0 || nn_output(fn, "out", out, &o) != 0)
    goto done;
  a.logp = nn_ptr(li.t); a.target = (const int64_t *)nn_ptr(ti.t); a.weight = nn_ptr(wi.t);
  a.out = nn_ptr(o.t);
  const ln_tensor *keep[4] = {o.t, li.t, ti.t, wi.t};
  rc = ln_launch(dev, fn, ln_backend_of(dev)->nll_loss_fwd, &a, sizeof a, keep, 4);
done:
  rc = nn_out_finish(&o, rc);
  nn_in_free(&li); nn_in_free(&ti); nn_in_free(&wi);
  return rc;
}

int ln_nll_loss_backward(ln_tensor *dlogp, const ln_tensor *dout, const ln_tensor *target, const ln_tensor *weight,
                         int reduction, int64_t ignore_index, int64_t base) {
  const char *fn = "nll_loss_backward";
  ln_nll_args a;
  if (nll_check(fn, dlogp, target, weight, reduction, base, &a) != 0 ||
      check_loss_shape(fn, "grad_output", dout, dlogp, reduction) != 0)
    return -1;
  a.ignore_index = ignore_index;
  int dev = dlogp->device_id, rc = -1;
  nn_in gi = {0}, ti = {0}, wi = {0};
  nn_out o = {0};
  if (nn_input(fn, "grad_output", dout, &gi) != 0 || nn_input(fn, "target", target, &ti) != 0 ||
      nn_input(fn, "weight", weight, &wi) != 0 || nn_output(fn, "grad_input", dlogp, &o) != 0)
    goto done;
  a.dout = nn_ptr(gi.t); a.target = (const int64_t *)nn_ptr(ti.t); a.weight = nn_ptr(wi.t);
  a.dlogp = nn_ptr(o.t);
  const ln_tensor *keep[4] = {o.t, gi.t, ti.t, wi.t};
  rc = ln_launch(dev, fn, ln_backend_of(dev)->nll_loss_bwd, &a, sizeof a, keep, 4);
done:
  rc = nn_out_finish(&o, rc);
  nn_in_free(&gi); nn_in_free(&ti); nn_in_free(&wi);
  return rc;
}
