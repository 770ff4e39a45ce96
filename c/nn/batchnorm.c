/* batchnorm.c -- front ends of batch normalisation over dim 1 of (N,C) or
 * (N,C,*), alone or fused with relu (and a residual add): shapes and checks,
 * then one launch of the device's kernel (CPU: c/cpu/batchnorm.c). */
#include "nn.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- front ends -------------------------------------------------------------- */

static int bn_input(const char *fn, const char *name, const ln_tensor *in, ln_batchnorm_args *a) {
  char s[160];
  if (nn_check(fn, name, in, -1, -1, -1, NULL) != 0) return -1;
  if (in->ndim < 2)
    return ln_error("%s: %s must be (N,C) or (N,C,*), got shape %s", fn, name, nn_shape(s, sizeof s, in));
  a->dtype = in->dtype_id;
  a->N = in->shape[0];
  a->C = in->shape[1];
  a->S = 1;
  for (int i = 2; i < in->ndim; i++) a->S *= in->shape[i];
  return 0;
}

static int check_vec(const char *fn, const char *name, const ln_tensor *t, const ln_tensor *in, int64_t C) {
  int64_t shape[1] = {C};
  return t ? nn_check(fn, name, t, in->dtype_id, in->device_id, 1, shape) : 0;
}

static int bn_forward(const char *fn, int relu, ln_tensor *out, ln_tensor *save_mean, ln_tensor *save_invstd,
                      const ln_tensor *in, const ln_tensor *residual, const ln_tensor *weight,
                      const ln_tensor *bias, ln_tensor *running_mean, ln_tensor *running_var, int training,
                      double momentum, double eps) {
  ln_batchnorm_args a = {0};
  a.relu = relu;
  char s[160];
  if (bn_input(fn, "input", in, &a) != 0) return -1;
  if (nn_check(fn, "out", out, in->dtype_id, in->device_id, in->ndim, in->shape) != 0 ||
      (residual && nn_check(fn, "residual", residual, in->dtype_id, in->device_id, in->ndim, in->shape) != 0) ||
      check_vec(fn, "save_mean", save_mean, in, a.C) != 0 ||
      check_vec(fn, "save_invstd", save_invstd, in, a.C) != 0 || check_vec(fn, "weight", weight, in, a.C) != 0 ||
      check_vec(fn, "bias", bias, in, a.C) != 0 || check_vec(fn, "running_mean", running_mean, in, a.C) != 0 ||
      check_vec(fn, "running_var", running_var, in, a.C) != 0)
    return -1;
  if (!(eps > 0) && eps != 0) return ln_error("%s: eps must be >= 0, got %g", fn, eps);
  if (training && a.N * a.S <= 1)
    return ln_error("%s: expected more than 1 value per channel when training, got input of shape %s", fn,
                    nn_shape(s, sizeof s, in));
  if (!training && (!running_mean || !running_var))
    return ln_error("%s: running_mean and running_var are needed in evaluation mode", fn);
  if (training && (!running_mean) != (!running_var))
    return ln_error("%s: give both running_mean and running_var, or neither", fn);
  a.training = training != 0;
  a.momentum = momentum;
  a.eps = eps;
  int dev = in->device_id, rc = -1;
  nn_in xi = {0}, wi = {0}, bi = {0}, ri = {0};
  nn_out o = {0}, om = {0}, oi = {0}, orm = {0}, orv = {0};
  if (nn_input(fn, "input", in, &xi) != 0 || nn_input(fn, "weight", weight, &wi) != 0 ||
      nn_input(fn, "residual", residual, &ri) != 0 ||
      nn_input(fn, "bias", bias, &bi) != 0 || nn_output(fn, "out", out, &o) != 0 ||
      nn_output(fn, "save_mean", save_mean, &om) != 0 || nn_output(fn, "save_invstd", save_invstd, &oi) != 0)
    goto done;
  /* running stats are read and updated: a strided view is used through a
   * contiguous copy that is copied back */
  if (running_mean && !ln_is_contiguous(running_mean)) {
    if (nn_output(fn, "running_mean", running_mean, &orm) != 0 || ln_copy_(orm.t, running_mean) != 0) goto done;
  } else orm.t = orm.user = running_mean;
  if (running_var && !ln_is_contiguous(running_var)) {
    if (nn_output(fn, "running_var", running_var, &orv) != 0 || ln_copy_(orv.t, running_var) != 0) goto done;
  } else orv.t = orv.user = running_var;
  a.out = nn_ptr(o.t); a.in = nn_ptr(xi.t); a.weight = nn_ptr(wi.t); a.bias = nn_ptr(bi.t);
  a.save_mean = nn_ptr(om.t); a.save_invstd = nn_ptr(oi.t);
  a.running_mean = nn_ptr(orm.t); a.running_var = nn_ptr(orv.t); a.res = nn_ptr(ri.t);
  const ln_tensor *keep[9] = {o.t, om.t, oi.t, xi.t, wi.t, bi.t, orm.t, orv.t, ri.t};
  rc = ln_launch(dev, fn, ln_backend_of(dev)->batchnorm_fwd, &a, sizeof a, keep, 9);
done:
  rc = nn_out_finish(&o, rc);
  rc = nn_out_finish(&om, rc);
  rc = nn_out_finish(&oi, rc);
  rc = nn_out_finish(&orm, rc);
  rc = nn_out_finish(&orv, rc);
  nn_in_free(&xi); nn_in_free(&wi); nn_in_free(&bi); nn_in_free(&ri);
  return rc;
}

int ln_batchnorm_forward(ln_tensor *out, ln_tensor *save_mean, ln_tensor *save_invstd, const ln_tensor *in,
                         const ln_tensor *weight, const ln_tensor *bias, ln_tensor *running_mean,
                         ln_tensor *running_var, int training, double momentum, double eps) {
  return bn_forward("batch_norm", 0, out, save_mean, save_invstd, in, NULL, weight, bias, running_mean,
                    running_var, training, momentum, eps);
}

int ln_batchnorm_relu_forward(ln_tensor *out, ln_tensor *save_mean, ln_tensor *save_invstd, const ln_tensor *in,
                              const ln_tensor *weight, const ln_tensor *bias, ln_tensor *running_mean,
                              ln_tensor *running_var, int training, double momentum, double eps) {
  return bn_forward("batch_norm_relu", 1, out, save_mean, save_invstd, in, NULL, weight, bias, running_mean,
                    running_var, training, momentum, eps);
}

int ln_batchnorm_add_relu_forward(ln_tensor *out, ln_tensor *save_mean, ln_tensor *save_invstd,
                                  const ln_tensor *in, const ln_tensor *residual, const ln_tensor *weight,
                                  const ln_tensor *bias, ln_tensor *running_mean, ln_tensor *running_var,
                                  int training, double momentum, double eps) {
  if (!residual) return ln_error("batch_norm_add_relu: residual is required");
  return bn_forward("batch_norm_add_relu", 1, out, save_mean, save_invstd, in, residual, weight, bias,
                    running_mean, running_var, training, momentum, eps);
}

/* out: the relu variant's forward output (NULL: plain batch norm); dres: the
 * add_relu variant's residual gradient (NULL: none) */
static int bn_backward(const char *fn, ln_tensor *din, ln_tensor *dweight, ln_tensor *dbias, ln_tensor *dres,
                       const ln_tensor *dout, const ln_tensor *out, const ln_tensor *in, const ln_tensor *weight,
                       const ln_tensor *save_mean, const ln_tensor *save_invstd, int training) {
  ln_batchnorm_args a = {0};
  if (bn_input(fn, "input", in, &a) != 0) return -1;
  if (out && nn_check(fn, "out", out, in->dtype_id, in->device_id, in->ndim, in->shape) != 0) return -1;
  a.relu = out != NULL;
  if (nn_check(fn, "grad_output", dout, in->dtype_id, in->device_id, in->ndim, in->shape) != 0 ||
      (din && nn_check(fn, "grad_input", din, in->dtype_id, in->device_id, in->ndim, in->shape) != 0) ||
      (dres && nn_check(fn, "grad_residual", dres, in->dtype_id, in->device_id, in->ndim, in->shape) != 0) ||
      check_vec(fn, "grad_weight", dweight, in, a.C) != 0 || check_vec(fn, "grad_bias", dbias, in, a.C) != 0 ||
      check_vec(fn, "weight", weight, in, a.C) != 0)
    return -1;
  if (!save_mean || !save_invstd)
    return ln_error("%s: save_mean and save_invstd (from the forward) are required", fn);
  if (check_vec(fn, "save_mean", save_mean, in, a.C) != 0 || check_vec(fn, "save_invstd", save_invstd, in, a.C) != 0)
    return -1;
  if (!din && !dweight && !dbias && !dres) return 0;
  a.training = training != 0;
  int dev = in->device_id, rc = -1;
  nn_in xi = {0}, wi = {0}, gi = {0}, mi = {0}, si = {0}, yi = {0};
  nn_out o = {0}, ow = {0}, ob = {0}, orr = {0};
  if (nn_input(fn, "input", in, &xi) != 0 || nn_input(fn, "weight", weight, &wi) != 0 ||
      nn_input(fn, "out", out, &yi) != 0 ||
      nn_input(fn, "grad_output", dout, &gi) != 0 || nn_input(fn, "save_mean", save_mean, &mi) != 0 ||
      nn_input(fn, "save_invstd", save_invstd, &si) != 0 || nn_output(fn, "grad_input", din, &o) != 0 ||
      nn_output(fn, "grad_weight", dweight, &ow) != 0 || nn_output(fn, "grad_bias", dbias, &ob) != 0 ||
      nn_output(fn, "grad_residual", dres, &orr) != 0)
    goto done;
  a.in = nn_ptr(xi.t); a.weight = nn_ptr(wi.t); a.dout = nn_ptr(gi.t);
  a.save_mean = nn_ptr(mi.t); a.save_invstd = nn_ptr(si.t);
  a.din = nn_ptr(o.t); a.dweight = nn_ptr(ow.t); a.dbias = nn_ptr(ob.t); a.out = nn_ptr(yi.t);
  a.dres = nn_ptr(orr.t);
  const ln_tensor *keep[10] = {o.t, ow.t, ob.t, xi.t, wi.t, gi.t, mi.t, si.t, yi.t, orr.t};
  rc = ln_launch(dev, fn, ln_backend_of(dev)->batchnorm_bwd, &a, sizeof a, keep, 10);
done:
  rc = nn_out_finish(&o, rc);
  rc = nn_out_finish(&ow, rc);
  rc = nn_out_finish(&ob, rc);
  rc = nn_out_finish(&orr, rc);
  nn_in_free(&xi); nn_in_free(&wi); nn_in_free(&gi); nn_in_free(&mi); nn_in_free(&si); nn_in_free(&yi);
  return rc;
}

int ln_batchnorm_backward(ln_tensor *din, ln_tensor *dweight, ln_tensor *dbias, const ln_tensor *dout,
                          const ln_tensor *in, const ln_tensor *weight, const ln_tensor *save_mean,
                          const ln_tensor *save_invstd, int training) {
  return bn_backward("batch_norm_backward", din, dweight, dbias, NULL, dout, NULL, in, weight, save_mean,
                     save_invstd, training);
}

int ln_batchnorm_relu_backward(ln_tensor *din, ln_tensor *dweight, ln_tensor *dbias, const ln_tensor *dout,
                               const ln_tensor *out, const ln_tensor *in, const ln_tensor *weight,
                               const ln_tensor *save_mean, const ln_tensor *save_invstd, int training) {
  if (!out) return ln_error("batch_norm_relu_backward: out (the forward's output) is required");
  return bn_backward("batch_norm_relu_backward", din, dweight, dbias, NULL, dout, out, in, weight, save_mean,
                     save_invstd, training);
}

int ln_batchnorm_add_relu_backward(ln_tensor *din, ln_tensor *dweight, ln_tensor *dbias, ln_tensor *dresidual,
                                   const ln_tensor *dout, const ln_tensor *out, const ln_tensor *in,
                                   const ln_tensor *weight, const ln_tensor *save_mean,
                                   const ln_tensor *save_invstd, int training) {
  if (!out) return ln_error("batch_norm_add_relu_backward: out (the forward's output) is required");
  return bn_backward("batch_norm_add_relu_backward", din, dweight, dbias, dresidual, dout, out, in, weight,
                     save_mean, save_invstd, training);
}
