/* loss.c -- front ends of the negative log-likelihood loss over (N,C)
 * log-probabilities at int64 class targets: shapes and checks, then one launch
 * of the device's kernel (CPU: c/cpu/loss.c). */
#include "nn.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

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
