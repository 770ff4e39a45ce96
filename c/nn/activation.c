/* activation.c -- front end of relu_backward (from the forward's output):
 * checks, then one launch of the device's kernel (CPU: c/cpu/activation.c). */
#include "nn.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

int ln_relu_backward(ln_tensor *din, const ln_tensor *dout, const ln_tensor *out) {
  const char *fn = "relu_backward";
  if (nn_check(fn, "out", out, -1, -1, -1, NULL) != 0 ||
      nn_check(fn, "grad_output", dout, out->dtype_id, out->device_id, out->ndim, out->shape) != 0 ||
      nn_check(fn, "grad_input", din, out->dtype_id, out->device_id, out->ndim, out->shape) != 0)
    return -1;
  ln_relu_bwd_args a = {out->dtype_id, ln_numel(out), NULL, NULL, NULL};
  int dev = out->device_id, rc = -1;
  nn_in yi = {0}, gi = {0};
  nn_out o = {0};
  if (nn_input(fn, "out", out, &yi) != 0 || nn_input(fn, "grad_output", dout, &gi) != 0 ||
      nn_output(fn, "grad_input", din, &o) != 0)
    goto done;
  a.out = nn_ptr(yi.t); a.dout = nn_ptr(gi.t); a.din = nn_ptr(o.t);
  const ln_tensor *keep[3] = {o.t, yi.t, gi.t};
  rc = ln_launch(dev, fn, ln_backend_of(dev)->relu_bwd, &a, sizeof a, keep, 3);
done:
  rc = nn_out_finish(&o, rc);
  nn_in_free(&yi); nn_in_free(&gi);
  return rc;
}
