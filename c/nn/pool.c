/* pool.c -- front ends of max, average and adaptive average 2-D pooling
 * (torch semantics: ceil_mode, padding, dilation for max pooling,
 * count_include_pad): shapes and checks, then one launch of the device's
 * kernel (CPU: c/cpu/pool.c). Inputs are (N,C,H,W) or (C,H,W). */
#include "nn.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- front ends -------------------------------------------------------------- */

/* in (N,C,H,W) or (C,H,W): planes, H, W */
static int pool_input(const char *fn, const char *name, const ln_tensor *t, int dtype, int device,
                      ln_pool2d_args *a) {
  char s[160];
  if (nn_check(fn, name, t, dtype, device, -1, NULL) != 0) return -1;
  if (t->ndim != 3 && t->ndim != 4)
    return ln_error("%s: %s must be 3-d (C,H,W) or 4-d (N,C,H,W), got shape %s", fn, name,
                    nn_shape(s, sizeof s, t));
  a->dtype = t->dtype_id;
  a->planes = t->shape[0] * (t->ndim == 4 ? t->shape[1] : 1);
  a->H = t->shape[t->ndim - 2];
  a->W = t->shape[t->ndim - 1];
  return 0;
}

static int64_t pool_out_size(int64_t in, int k, int s, int pad, int d, int ceil_mode) {
  int64_t num = in + 2 * (int64_t)pad - (int64_t)d * (k - 1) - 1;
  if (num < 0) return 0;
  int64_t out = (ceil_mode ? (num + s - 1) / s : num / s) + 1;
  if (ceil_mode && (out - 1) * s >= in + pad) out--;
  return out;
}

/* Checks params against the input size and fills OH, OW. */
static int pool_geometry(const char *fn, const ln_pool2d_params *p, bool avg, ln_pool2d_args *a) {
  if (!p) return ln_error("%s: params is NULL", fn);
  if (p->kh < 1 || p->kw < 1) return ln_error("%s: kernel size must be >= 1, got (%d,%d)", fn, p->kh, p->kw);
  if (p->stride_h < 1 || p->stride_w < 1)
    return ln_error("%s: stride must be >= 1, got (%d,%d)", fn, p->stride_h, p->stride_w);
  if (p->pad_h < 0 || p->pad_w < 0) return ln_error("%s: padding must be >= 0, got (%d,%d)", fn, p->pad_h, p->pad_w);
  if (avg && (p->dil_h != 1 || p->dil_w != 1))
    return ln_error("%s: dilation must be 1 for average pooling, got (%d,%d)", fn, p->dil_h, p->dil_w);
  if (p->dil_h < 1 || p->dil_w < 1) return ln_error("%s: dilation must be >= 1, got (%d,%d)", fn, p->dil_h, p->dil_w);
  if (p->pad_h > p->kh / 2 || p->pad_w > p->kw / 2)
    return ln_error("%s: padding (%d,%d) must be at most half the kernel size (%d,%d)", fn, p->pad_h, p->pad_w,
                    p->kh, p->kw);
  a->p = *p;
  a->OH = pool_out_size(a->H, p->kh, p->stride_h, p->pad_h, p->dil_h, p->ceil_mode);
  a->OW = pool_out_size(a->W, p->kw, p->stride_w, p->pad_w, p->dil_w, p->ceil_mode);
  if (a->OH < 1 || a->OW < 1)
    return ln_error("%s: input %lldx%lld is too small for kernel (%d,%d) with padding (%d,%d) and dilation (%d,%d)",
                    fn, (long long)a->H, (long long)a->W, p->kh, p->kw, p->pad_h, p->pad_w, p->dil_h, p->dil_w);
  return 0;
}

/* Shape of t with its last two dims replaced by (h, w). */
static void plane_shape(const ln_tensor *t, int64_t h, int64_t w, int64_t *shape) {
  for (int i = 0; i < t->ndim; i++) shape[i] = t->shape[i];
  shape[t->ndim - 2] = h;
  shape[t->ndim - 1] = w;
}

static int check_indices(const char *fn, const ln_tensor *idx, int device, int ndim, const int64_t *shape) {
  char s1[160], s2[160];
  if (ln_check_tensor(fn, idx, "indices") != 0) return -1;
  if (idx->dtype_id != LN_INT64)
    return ln_error("%s: indices must be int64, got %s", fn, ln_dtype_name(idx->dtype_id));
  if (idx->device_id != device) return ln_error("%s: indices are on another device than the input", fn);
  bool ok = idx->ndim == ndim;
  for (int i = 0; ok && i < ndim; i++) ok = idx->shape[i] == shape[i];
  if (!ok)
    return ln_error("%s: indices have shape %s, expected %s", fn, nn_shape(s1, sizeof s1, idx),
                    ln_shape_str(s2, sizeof s2, ndim, shape));
  return 0;
}

/* forward: out (and idx) from in */
static int pool_forward(const char *fn, ln_task_fn kernel, ln_tensor *out, ln_tensor *indices,
                        const ln_tensor *in, ln_pool2d_args *a) {
  int dev = in->device_id;
  nn_in xi = {0};
  nn_out o = {0}, io = {0};
  int rc = -1;
  if (nn_input(fn, "input", in, &xi) != 0 || nn_output(fn, "out", out, &o) != 0 ||
      nn_output(fn, "indices", indices, &io) != 0)
    goto done;
  a->in = nn_ptr(xi.t);
  a->out = nn_ptr(o.t);
  a->idx = (int64_t *)nn_ptr(io.t);
  const ln_tensor *keep[3] = {o.t, io.t, xi.t};
  rc = ln_launch(dev, fn, kernel, a, sizeof *a, keep, 3);
done:
  rc = nn_out_finish(&o, rc);
  rc = nn_out_finish(&io, rc);
  nn_in_free(&xi);
  return rc;
}

static int pool_backward(const char *fn, ln_task_fn kernel, ln_tensor *din, const ln_tensor *dout,
                         const ln_tensor *indices, ln_pool2d_args *a) {
  int dev = din->device_id;
  nn_in gi = {0}, ii = {0};
  nn_out o = {0};
  int rc = -1;
  if (nn_input(fn, "grad_output", dout, &gi) != 0 || nn_input(fn, "indices", indices, &ii) != 0 ||
      nn_output(fn, "grad_input", din, &o) != 0)
    goto done;
  a->dout = nn_ptr(gi.t);
  a->din = nn_ptr(o.t);
  a->idx = (int64_t *)nn_ptr(ii.t);
  const ln_tensor *keep[3] = {o.t, gi.t, ii.t};
  rc = ln_launch(dev, fn, kernel, a, sizeof *a, keep, 3);
done:
  rc = nn_out_finish(&o, rc);
  nn_in_free(&gi);
  nn_in_free(&ii);
  return rc;
}

int ln_maxpool2d_forward(ln_tensor *out, ln_tensor *indices, const ln_tensor *in, const ln_pool2d_params *p) {
  const char *fn = "max_pool2d";
  ln_pool2d_args a = {0};
  if (pool_input(fn, "input", in, -1, -1, &a) != 0 || pool_geometry(fn, p, false, &a) != 0) return -1;
  int64_t shape[4];
  plane_shape(in, a.OH, a.OW, shape);
  if (nn_check(fn, "out", out, in->dtype_id, in->device_id, in->ndim, shape) != 0) return -1;
  if (check_indices(fn, indices, in->device_id, in->ndim, shape) != 0) return -1;
  return pool_forward(fn, ln_backend_of(in->device_id)->maxpool2d_fwd, out, indices, in, &a);
}

int ln_maxpool2d_backward(ln_tensor *din, const ln_tensor *dout, const ln_tensor *indices,
                          const ln_pool2d_params *p) {
  const char *fn = "max_pool2d_backward";
  ln_pool2d_args a = {0};
  if (pool_input(fn, "grad_input", din, -1, -1, &a) != 0 || pool_geometry(fn, p, false, &a) != 0) return -1;
  int64_t shape[4];
  plane_shape(din, a.OH, a.OW, shape);
  if (nn_check(fn, "grad_output", dout, din->dtype_id, din->device_id, din->ndim, shape) != 0) return -1;
  if (check_indices(fn, indices, din->device_id, din->ndim, shape) != 0) return -1;
  return pool_backward(fn, ln_backend_of(din->device_id)->maxpool2d_bwd, din, dout, indices, &a);
}

int ln_avgpool2d_forward(ln_tensor *out, const ln_tensor *in, const ln_pool2d_params *p) {
  const char *fn = "avg_pool2d";
  ln_pool2d_args a = {0};
  if (pool_input(fn, "input", in, -1, -1, &a) != 0 || pool_geometry(fn, p, true, &a) != 0) return -1;
  int64_t shape[4];
  plane_shape(in, a.OH, a.OW, shape);
  if (nn_check(fn, "out", out, in->dtype_id, in->device_id, in->ndim, shape) != 0) return -1;
  return pool_forward(fn, ln_backend_of(in->device_id)->avgpool2d_fwd, out, NULL, in, &a);
}

int ln_avgpool2d_backward(ln_tensor *din, const ln_tensor *dout, const ln_pool2d_params *p) {
  const char *fn = "avg_pool2d_backward";
  ln_pool2d_args a = {0};
  if (pool_input(fn, "grad_input", din, -1, -1, &a) != 0 || pool_geometry(fn, p, true, &a) != 0) return -1;
  int64_t shape[4];
  plane_shape(din, a.OH, a.OW, shape);
  if (nn_check(fn, "grad_output", dout, din->dtype_id, din->device_id, din->ndim, shape) != 0) return -1;
  return pool_backward(fn, ln_backend_of(din->device_id)->avgpool2d_bwd, din, dout, NULL, &a);
}

/* in and out agree on the leading dims; out's last two are the bins */
static int adaptive_geometry(const char *fn, const ln_tensor *big, const char *bname, const ln_tensor *small,
                             const char *sname, ln_pool2d_args *a) {
  if (pool_input(fn, bname, big, -1, -1, a) != 0) return -1;
  if (nn_check(fn, sname, small, big->dtype_id, big->device_id, -1, NULL) != 0) return -1;
  int64_t shape[4];
  plane_shape(big, -1, -1, shape);
  if (nn_check(fn, sname, small, big->dtype_id, big->device_id, big->ndim, shape) != 0) return -1;
  a->OH = small->shape[small->ndim - 2];
  a->OW = small->shape[small->ndim - 1];
  if (a->OH < 1 || a->OW < 1 || a->H < 1 || a->W < 1) {
    char s1[160], s2[160];
    return ln_error("%s: empty plane: input %s, output %s", fn, nn_shape(s1, sizeof s1, big),
                    nn_shape(s2, sizeof s2, small));
  }
  return 0;
}

int ln_adaptive_avgpool2d_forward(ln_tensor *out, const ln_tensor *in) {
  const char *fn = "adaptive_avg_pool2d";
  ln_pool2d_args a = {0};
  if (adaptive_geometry(fn, in, "input", out, "out", &a) != 0) return -1;
  return pool_forward(fn, ln_backend_of(in->device_id)->adaptive_avgpool2d_fwd, out, NULL, in, &a);
}

int ln_adaptive_avgpool2d_backward(ln_tensor *din, const ln_tensor *dout) {
  const char *fn = "adaptive_avg_pool2d_backward";
  ln_pool2d_args a = {0};
  if (adaptive_geometry(fn, din, "grad_input", dout, "grad_output", &a) != 0) return -1;
  return pool_backward(fn, ln_backend_of(din->device_id)->adaptive_avgpool2d_bwd, din, dout, NULL, &a);
}
