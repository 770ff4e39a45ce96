/* optim.c -- front ends of the fused optimizer updates (SGD, Adam/AdamW,
 * RMSprop, Adagrad, Adamax, NAdam, RAdam, Adadelta) and of the norm
 * reduction used by clip_grad_norm: argument, shape, dtype and device checks
 * on the calling thread, then the device's
 * kernel through ln_launch (kernels: cpu/optim.c).
 *
 * The kernels want contiguous buffers of one dtype. A grad of another dtype
 * is cast, a strided grad made contiguous; a strided param is updated in a
 * contiguous copy that is copied back (both queued, so in order). State
 * buffers belong to the optimizer, which makes them contiguous. */
#include "../core/backend.h"
#include <math.h>

static bool same_shape(const ln_tensor *a, const ln_tensor *b) {
  if (a->ndim != b->ndim) return false;
  for (int i = 0; i < a->ndim; i++) if (a->shape[i] != b->shape[i]) return false;
  return true;
}

static int check_float(const char *fn, const ln_tensor *t, const char *what) {
  if (t->dtype_id != LN_FLOAT32 && t->dtype_id != LN_FLOAT64)
    return ln_error("%s: %s must be float32 or float64, got %s", fn, what, ln_dtype_name(t->dtype_id));
  return 0;
}

static int check_state(const char *fn, const ln_tensor *param, const ln_tensor *s, const char *what) {
  char b1[160], b2[160];
  if (ln_check_tensor(fn, s, what) != 0) return -1;
  if (!same_shape(param, s))
    return ln_error("%s: %s has shape %s, expected the param's shape %s", fn, what,
                    ln_shape_str(b1, sizeof b1, s->ndim, s->shape),
                    ln_shape_str(b2, sizeof b2, param->ndim, param->shape));
  if (s->dtype_id != param->dtype_id)
    return ln_error("%s: %s is %s, expected the param's dtype %s", fn, what,
                    ln_dtype_name(s->dtype_id), ln_dtype_name(param->dtype_id));
  if (s->device_id != param->device_id)
    return ln_error("%s: %s is on device %d, the param on device %d", fn, what, s->device_id,
                    param->device_id);
  if (!ln_is_contiguous(s)) return ln_error("%s: %s must be contiguous", fn, what);
  return 0;
}

/* Checks param, grad and the nstate state buffers (NULL entries: unused),
 * fills a's buffers and launches. */
static int launch_step(const char *fn, ln_task_fn kernel, ln_optim_args *a, ln_tensor *param,
                       const ln_tensor *grad, ln_tensor *const *state, const char *const *names) {
  char b1[160], b2[160];
  if (ln_check_tensor(fn, param, "param") != 0 || ln_check_tensor(fn, grad, "grad") != 0) return -1;
  if (check_float(fn, param, "param") != 0 || check_float(fn, grad, "grad") != 0) return -1;
  if (!same_shape(param, grad))
    return ln_error("%s: grad has shape %s, expected the param's shape %s", fn,
                    ln_shape_str(b1, sizeof b1, grad->ndim, grad->shape),
                    ln_shape_str(b2, sizeof b2, param->ndim, param->shape));
  if (ln_check_same_device(fn, param, grad) != 0) return -1;
  for (int i = 0; i < 3; i++)
    if (state[i] && check_state(fn, param, state[i], names[i]) != 0) return -1;
  if (ln_check_no_internal_overlap(fn, param) != 0) return -1;
  /* every buffer the kernel writes against every other one it reads */
  const ln_tensor *bufs[5] = {param, grad, state[0], state[1], state[2]};
  const char *bnames[5] = {"param", "grad", names[0], names[1], names[2]};
  for (int i = 0; i < 5; i++)
    for (int j = i + 1; j < 5; j++)
      if (bufs[i] && bufs[j] && ln_overlap(bufs[i], bufs[j]) == LN_OVERLAP_PARTIAL)
        return ln_error("%s: %s and %s overlap in memory (partly); clone() one of them first", fn,
                        bnames[i], bnames[j]);

  ln_tensor *gcast = NULL, *gcont = NULL, *pwork = NULL;
  const ln_tensor *g = grad;
  int rc = -1;
  if (g->dtype_id != param->dtype_id && !(g = gcast = ln_cast(g, param->dtype_id))) goto done;
  if (!(g = gcont = ln_contiguous(g))) goto done;
  ln_tensor *p = param;
  if (!ln_is_contiguous(param) && !(p = pwork = ln_clone(param))) goto done;

  a->dtype = param->dtype_id;
  a->n = ln_numel(param);
  a->param = ln_kview_of(p).data;
  a->grad = ln_kview_of(g).data;
  char **slots[3] = {&a->s0, &a->s1, &a->s2};
  for (int i = 0; i < 3; i++) *slots[i] = state[i] ? ln_kview_of(state[i]).data : NULL;
  if (a->n == 0) { rc = 0; goto done; }
  const ln_tensor *keep[5] = {p, g, state[0], state[1], state[2]};
  rc = ln_launch(param->device_id, fn, kernel, a, sizeof *a, keep, 5);
  if (rc == 0 && pwork) rc = ln_copy_(param, pwork);
done:
  ln_tensor_free(gcast);
  ln_tensor_free(gcont);
  ln_tensor_free(pwork);
  return rc;
}

static int bad(const char *fn, const char *what, double v, const char *expected) {
  return ln_error("%s: invalid %s %g, expected %s", fn, what, v, expected);
}

int ln_sgd_step_(ln_tensor *param, const ln_tensor *grad, ln_tensor *momentum_buf,
                 const ln_sgd_params *p) {
  const char *fn = "sgd_step_";
  if (!p) return ln_error("%s: params are NULL", fn);
  if (!(p->lr >= 0)) return bad(fn, "learning rate", p->lr, ">= 0");
  if (!(p->momentum >= 0)) return bad(fn, "momentum", p->momentum, ">= 0");
  if (!(p->weight_decay >= 0)) return bad(fn, "weight_decay", p->weight_decay, ">= 0");
  if (p->nesterov && (p->momentum <= 0 || p->dampening != 0))
    return ln_error("%s: nesterov momentum requires a momentum and zero dampening", fn);
  if (p->momentum != 0 && !momentum_buf)
    return ln_error("%s: momentum %g needs a momentum buffer", fn, p->momentum);
  ln_optim_args a = {0};
  a.hp.sgd = *p;
  ln_tensor *state[3] = {p->momentum != 0 ? momentum_buf : NULL, NULL, NULL};
  const char *names[3] = {"momentum_buffer", "", ""};
  return launch_step(fn, ln_backend_of(param ? param->device_id : 0)->sgd_step, &a, param, grad,
                     state, names);
}

int ln_adam_step_(ln_tensor *param, const ln_tensor *grad, ln_tensor *exp_avg,
                  ln_tensor *exp_avg_sq, ln_tensor *max_exp_avg_sq, const ln_adam_params *p) {
  const char *fn = p && p->decoupled ? "adamw_step_" : "adam_step_";
  if (!p) return ln_error("%s: params are NULL", fn);
  if (!(p->lr >= 0)) return bad(fn, "learning rate", p->lr, ">= 0");
  if (!(p->eps >= 0)) return bad(fn, "epsilon", p->eps, ">= 0");
  if (!(p->beta1 >= 0 && p->beta1 < 1)) return bad(fn, "beta1", p->beta1, "in [0, 1)");
  if (!(p->beta2 >= 0 && p->beta2 < 1)) return bad(fn, "beta2", p->beta2, "in [0, 1)");
  if (!(p->weight_decay >= 0)) return bad(fn, "weight_decay", p->weight_decay, ">= 0");
  if (p->step < 1) return ln_error("%s: step %lld, expected >= 1", fn, (long long)p->step);
  if (!exp_avg || !exp_avg_sq) return ln_error("%s: exp_avg and exp_avg_sq are required", fn);
  if (p->amsgrad && !max_exp_avg_sq) return ln_error("%s: amsgrad needs max_exp_avg_sq", fn);
  ln_optim_args a = {0};
  a.hp.adam = *p;
  ln_tensor *state[3] = {exp_avg, exp_avg_sq, p->amsgrad ? max_exp_avg_sq : NULL};
  const char *names[3] = {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
  return launch_step(fn, ln_backend_of(param ? param->device_id : 0)->adam_step, &a, param, grad,
                     state, names);
}

int ln_rmsprop_step_(ln_tensor *param, const ln_tensor *grad, ln_tensor *square_avg,
                     ln_tensor *momentum_buf, ln_tensor *grad_avg, const ln_rmsprop_params *p) {
  const char *fn = "rmsprop_step_";
  if (!p) return ln_error("%s: params are NULL", fn);
  if (!(p->lr >= 0)) return bad(fn, "learning rate", p->lr, ">= 0");
  if (!(p->eps >= 0)) return bad(fn, "epsilon", p->eps, ">= 0");
  if (!(p->alpha >= 0)) return bad(fn, "alpha", p->alpha, ">= 0");
  if (!(p->momentum >= 0)) return bad(fn, "momentum", p->momentum, ">= 0");
  if (!(p->weight_decay >= 0)) return bad(fn, "weight_decay", p->weight_decay, ">= 0");
  if (!square_avg) return ln_error("%s: square_avg is required", fn);
  if (p->momentum > 0 && !momentum_buf) return ln_error("%s: momentum needs momentum_buffer", fn);
  if (p->centered && !grad_avg) return ln_error("%s: centered needs grad_avg", fn);
  ln_optim_args a = {0};
  a.hp.rmsprop = *p;
  ln_tensor *state[3] = {square_avg, p->momentum > 0 ? momentum_buf : NULL,
                         p->centered ? grad_avg : NULL};
  const char *names[3] = {"square_avg", "momentum_buffer", "grad_avg"};
  return launch_step(fn, ln_backend_of(param ? param->device_id : 0)->rmsprop_step, &a, param,
                     grad, state, names);
}

/* the checks every Adam-like step shares */
static int check_adam_like(const char *fn, double lr, double beta1, double beta2, double eps,
                           double weight_decay, int64_t step) {
  if (!(lr >= 0)) return bad(fn, "learning rate", lr, ">= 0");
  if (!(eps >= 0)) return bad(fn, "epsilon", eps, ">= 0");
  if (!(beta1 >= 0 && beta1 < 1)) return bad(fn, "beta1", beta1, "in [0, 1)");
  if (!(beta2 >= 0 && beta2 < 1)) return bad(fn, "beta2", beta2, "in [0, 1)");
  if (!(weight_decay >= 0)) return bad(fn, "weight_decay", weight_decay, ">= 0");
  if (step < 1) return ln_error("%s: step %lld, expected >= 1", fn, (long long)step);
  return 0;
}

int ln_adagrad_step_(ln_tensor *param, const ln_tensor *grad, ln_tensor *sum,
                     const ln_adagrad_params *p) {
  const char *fn = "adagrad_step_";
  if (!p) return ln_error("%s: params are NULL", fn);
  if (!(p->lr >= 0)) return bad(fn, "learning rate", p->lr, ">= 0");
  if (!(p->lr_decay >= 0)) return bad(fn, "lr_decay", p->lr_decay, ">= 0");
  if (!(p->eps >= 0)) return bad(fn, "epsilon", p->eps, ">= 0");
  if (!(p->weight_decay >= 0)) return bad(fn, "weight_decay", p->weight_decay, ">= 0");
  if (p->step < 1) return ln_error("%s: step %lld, expected >= 1", fn, (long long)p->step);
  if (!sum) return ln_error("%s: sum is required", fn);
  ln_optim_args a = {0};
  a.hp.adagrad = *p;
  ln_tensor *state[3] = {sum, NULL, NULL};
  const char *names[3] = {"sum", "", ""};
  return launch_step(fn, ln_backend_of(param ? param->device_id : 0)->adagrad_step, &a, param,
                     grad, state, names);
}

int ln_adamax_step_(ln_tensor *param, const ln_tensor *grad, ln_tensor *exp_avg,
                    ln_tensor *exp_inf, const ln_adamax_params *p) {
  const char *fn = "adamax_step_";
  if (!p) return ln_error("%s: params are NULL", fn);
  if (check_adam_like(fn, p->lr, p->beta1, p->beta2, p->eps, p->weight_decay, p->step) != 0) return -1;
  if (!exp_avg || !exp_inf) return ln_error("%s: exp_avg and exp_inf are required", fn);
  ln_optim_args a = {0};
  a.hp.adamax = *p;
  ln_tensor *state[3] = {exp_avg, exp_inf, NULL};
  const char *names[3] = {"exp_avg", "exp_inf", ""};
  return launch_step(fn, ln_backend_of(param ? param->device_id : 0)->adamax_step, &a, param,
                     grad, state, names);
}

int ln_nadam_step_(ln_tensor *param, const ln_tensor *grad, ln_tensor *exp_avg,
                   ln_tensor *exp_avg_sq, const ln_nadam_params *p) {
  const char *fn = "nadam_step_";
  if (!p) return ln_error("%s: params are NULL", fn);
  if (check_adam_like(fn, p->lr, p->beta1, p->beta2, p->eps, p->weight_decay, p->step) != 0) return -1;
  if (!(p->momentum_decay >= 0)) return bad(fn, "momentum_decay", p->momentum_decay, ">= 0");
  /* a product of factors in [0, beta1) */
  if (!(p->mu_product >= 0 && p->mu_product < 1)) return bad(fn, "mu_product", p->mu_product, "in [0, 1)");
  if (!exp_avg || !exp_avg_sq) return ln_error("%s: exp_avg and exp_avg_sq are required", fn);
  ln_optim_args a = {0};
  a.hp.nadam = *p;
  ln_tensor *state[3] = {exp_avg, exp_avg_sq, NULL};
  const char *names[3] = {"exp_avg", "exp_avg_sq", ""};
  return launch_step(fn, ln_backend_of(param ? param->device_id : 0)->nadam_step, &a, param,
                     grad, state, names);
}

int ln_radam_step_(ln_tensor *param, const ln_tensor *grad, ln_tensor *exp_avg,
                   ln_tensor *exp_avg_sq, const ln_radam_params *p) {
  const char *fn = "radam_step_";
  if (!p) return ln_error("%s: params are NULL", fn);
  if (check_adam_like(fn, p->lr, p->beta1, p->beta2, p->eps, p->weight_decay, p->step) != 0) return -1;
  if (!exp_avg || !exp_avg_sq) return ln_error("%s: exp_avg and exp_avg_sq are required", fn);
  ln_optim_args a = {0};
  a.hp.radam = *p;
  ln_tensor *state[3] = {exp_avg, exp_avg_sq, NULL};
  const char *names[3] = {"exp_avg", "exp_avg_sq", ""};
  return launch_step(fn, ln_backend_of(param ? param->device_id : 0)->radam_step, &a, param,
                     grad, state, names);
}

int ln_adadelta_step_(ln_tensor *param, const ln_tensor *grad, ln_tensor *square_avg,
                      ln_tensor *acc_delta, const ln_adadelta_params *p) {
  const char *fn = "adadelta_step_";
  if (!p) return ln_error("%s: params are NULL", fn);
  if (!(p->lr >= 0)) return bad(fn, "learning rate", p->lr, ">= 0");
  if (!(p->rho >= 0 && p->rho <= 1)) return bad(fn, "rho", p->rho, "in [0, 1]");
  if (!(p->eps >= 0)) return bad(fn, "epsilon", p->eps, ">= 0");
  if (!(p->weight_decay >= 0)) return bad(fn, "weight_decay", p->weight_decay, ">= 0");
  if (!square_avg || !acc_delta) return ln_error("%s: square_avg and acc_delta are required", fn);
  ln_optim_args a = {0};
  a.hp.adadelta = *p;
  ln_tensor *state[3] = {square_avg, acc_delta, NULL};
  const char *names[3] = {"square_avg", "acc_delta", ""};
  return launch_step(fn, ln_backend_of(param ? param->device_id : 0)->adadelta_step, &a, param,
                     grad, state, names);
}

ln_tensor *ln_norm_pow_sum(const ln_tensor *t, double p) {
  const char *fn = "clip_grad_norm";
  if (ln_check_tensor(fn, t, "gradient") != 0) return NULL;
  if (!(p > 0)) return ln_error_null("%s: invalid norm_type %g, expected > 0 (or inf)", fn, p);
  ln_tensor *cast = NULL, *cont = NULL, *out = NULL;
  const ln_tensor *x = t;
  if (t->dtype_id != LN_FLOAT32 && t->dtype_id != LN_FLOAT64) {
    if (!ln_is_float(t->dtype_id))
      return ln_error_null("%s: gradient must be a float tensor, got %s", fn, ln_dtype_name(t->dtype_id));
    if (!(x = cast = ln_cast(t, LN_FLOAT32))) return NULL;
  }
  if (!(x = cont = ln_contiguous(x))) goto done;
  int64_t shape0[1] = {1};
  if (!(out = ln_tensor_new_like_shape(0, shape0, LN_FLOAT64, t->device_id))) goto done;
  ln_norm_args a = {p, ln_numel(x), ln_kview_of(x), ln_kview_of(out)};
  const ln_tensor *keep[2] = {x, out};
  if (ln_launch(t->device_id, fn, ln_backend_of(t->device_id)->norm_pow_sum, &a, sizeof a, keep, 2) != 0) {
    ln_tensor_free(out);
    out = NULL;
  }
done:
  ln_tensor_free(cast);
  ln_tensor_free(cont);
  return out;
}
