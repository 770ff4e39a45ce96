/* softmax.c -- front ends of softmax and log-softmax along one dim: shapes
 * and checks, then one launch of the device's kernel (CPU: c/cpu/softmax.c). */
#include "nn.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

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
