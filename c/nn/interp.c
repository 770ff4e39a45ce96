/* interp.c -- front ends of interpolation (torch 1.13's F.interpolate modes
 * nearest, nearest-exact, linear/bilinear/trilinear and bicubic): shapes and
 * checks, then one launch of the device's kernel (CPU: c/cpu/interp.c, CUDA:
 * c/cuda/interp.cu). Inputs are (N,C,*S) with 1 to 3 spatial dims. */
#include "nn.h"
#include <math.h>
#include <stdio.h>

/* big (N,C,*S) and small (N,C,*OS) agree on N, C and their rank; a's sizes */
static int interp_args(const char *fn, const ln_tensor *src, const char *sname, const ln_tensor *dst,
                       const char *dname, int mode, int align, const double *scales, ln_interp_args *a) {
  char s1[160], s2[160];
  if (nn_check(fn, sname, src, -1, -1, -1, NULL) != 0) return -1;
  if (src->ndim < 3 || src->ndim > 5)
    return ln_error("%s: %s must be 3-d, 4-d or 5-d (N,C,...), got shape %s", fn, sname, nn_shape(s1, sizeof s1, src));
  int64_t lead[5] = {src->shape[0], src->shape[1], -1, -1, -1};
  if (nn_check(fn, dname, dst, src->dtype_id, src->device_id, src->ndim, lead) != 0) return -1;
  if (mode < LN_INTERP_NEAREST || mode > LN_INTERP_CUBIC) return ln_error("%s: unknown mode %d", fn, mode);
  if (mode == LN_INTERP_CUBIC && src->ndim != 4)
    return ln_error("%s: cubic interpolation needs 4-d input (N,C,H,W), got shape %s", fn, nn_shape(s1, sizeof s1, src));
  a->dtype = src->dtype_id;
  a->mode = mode;
  a->align_corners = (mode == LN_INTERP_LINEAR || mode == LN_INTERP_CUBIC) && align;
  a->sd = src->ndim - 2;
  a->planes = src->shape[0] * src->shape[1];
  for (int d = 0; d < a->sd; d++) {
    a->isz[d] = src->shape[d + 2];   /* (the forward's names: the backward swaps the tensors) */
    a->osz[d] = dst->shape[d + 2];
    a->scale[d] = scales ? scales[d] : 0;
    if (a->isz[d] < 1 || a->osz[d] < 1)
      return ln_error("%s: spatial sizes must be >= 1: %s %s, %s %s", fn, sname, nn_shape(s1, sizeof s1, src), dname,
                      nn_shape(s2, sizeof s2, dst));
    if (!(a->scale[d] >= 0 && a->scale[d] < INFINITY))
      return ln_error("%s: scale_factor %g of spatial dim %d is not a finite number >= 0", fn, a->scale[d], d + 1);
  }
  return 0;
}

int ln_interpolate_forward(ln_tensor *out, const ln_tensor *in, int mode, int align_corners, const double *scales) {
  const char *fn = "interpolate";
  ln_interp_args a = {0};
  if (interp_args(fn, in, "input", out, "out", mode, align_corners, scales, &a) != 0) return -1;
  nn_in xi = {0};
  nn_out o = {0};
  int rc = -1;
  if (nn_input(fn, "input", in, &xi) != 0 || nn_output(fn, "out", out, &o) != 0) goto done;
  a.in = nn_ptr(xi.t);
  a.out = nn_ptr(o.t);
  const ln_tensor *keep[2] = {o.t, xi.t};
  rc = ln_launch(in->device_id, fn, ln_backend_of(in->device_id)->interp_fwd, &a, sizeof a, keep, 2);
done:
  rc = nn_out_finish(&o, rc);
  nn_in_free(&xi);
  return rc;
}

int ln_interpolate_backward(ln_tensor *din, const ln_tensor *dout, int mode, int align_corners,
                            const double *scales) {
  const char *fn = "interpolate_backward";
  ln_interp_args a = {0};
  if (interp_args(fn, din, "grad_input", dout, "grad_output", mode, align_corners, scales, &a) != 0) return -1;
  nn_in gi = {0};
  nn_out o = {0};
  int rc = -1;
  /* the host kernels read a strided or expanded dout (sum's gradient) as it
   * is, a plane at a time; the CUDA kernel reads it dense */
  if (ln_device_type(din->device_id) != LN_TYPE_CUDA && !ln_is_contiguous(dout)) {
    a.gstrided = 1, a.C = dout->shape[1];
    for (int d = 0; d < dout->ndim; d++) a.gst[d] = dout->stride[d];
    gi.t = dout;
  } else if (nn_input(fn, "grad_output", dout, &gi) != 0) goto done;
  if (nn_output(fn, "grad_input", din, &o) != 0) goto done;
  a.dout = nn_ptr(gi.t);
  a.din = nn_ptr(o.t);
  const ln_tensor *keep[2] = {o.t, gi.t};
  rc = ln_launch(din->device_id, fn, ln_backend_of(din->device_id)->interp_bwd, &a, sizeof a, keep, 2);
done:
  rc = nn_out_finish(&o, rc);
  nn_in_free(&gi);
  return rc;
}
