/* grid.c -- front ends of grid_sample (PyTorch 1.13's, 4-d and 5-d input):
 * shapes and checks, then one launch of the device's kernel (CPU:
 * c/cpu/grid.c, CUDA: c/cuda/grid.cu; the per-point arithmetic both share is
 * c/core/grid_taps.h). */
#include "nn.h"
#include "../core/checked.h"

/* in (N,C,*sp) and grid (N,*gsp,sd) checked; a filled but for pointers */
static int grid_geometry(const char *fn, const ln_tensor *in, const ln_tensor *grid, int mode, int padding,
                         int align, ln_grid_args *a) {
  char s1[160], s2[160];
  if (nn_check(fn, "input", in, -1, -1, -1, NULL) != 0) return -1;
  if (in->ndim != 4 && in->ndim != 5)
    return ln_error("%s: input must be 4-d (N,C,H,W) or 5-d (N,C,D,H,W), got shape %s", fn, nn_shape(s1, sizeof s1, in));
  if (nn_check(fn, "grid", grid, in->dtype_id, in->device_id, -1, NULL) != 0) return -1;
  int nd = in->ndim, sd = nd - 2;
  if (grid->ndim != nd || grid->shape[0] != in->shape[0] || grid->shape[nd - 1] != sd)
    return ln_error("%s: grid must be (N,%s%d) for input %s, got %s", fn, sd == 2 ? "OH,OW," : "OD,OH,OW,", sd,
                    nn_shape(s1, sizeof s1, in), nn_shape(s2, sizeof s2, grid));
  if (mode < LN_GRID_BILINEAR || mode > LN_GRID_BICUBIC) return ln_error("%s: unknown mode %d", fn, mode);
  if (padding < LN_GRID_ZEROS || padding > LN_GRID_REFLECTION) return ln_error("%s: unknown padding %d", fn, padding);
  if (mode == LN_GRID_BICUBIC && sd != 2) return ln_error("%s: mode bicubic needs 4-d input", fn);
  for (int i = 2; i < nd; i++)
    if (in->shape[i] < 1)
      return ln_error("%s: input must have non-empty spatial dims, got %s", fn, nn_shape(s1, sizeof s1, in));
  *a = (ln_grid_args){.dtype = in->dtype_id, .mode = mode, .padding = padding, .align = align != 0, .sd = sd};
  a->N = in->shape[0];
  a->C = in->shape[1];
  a->size[0] = in->shape[nd - 1];
  a->size[1] = in->shape[nd - 2];
  a->size[2] = sd == 3 ? in->shape[2] : 1;
  if (ln_numel_ovf(sd, grid->shape + 1, &a->P) || ln_numel_ovf(sd, in->shape + 2, &a->PI))
    return ln_error("%s: sizes overflow", fn);
  int64_t n;   /* (out's elements: the kernels index N*C*P) */
  if (ln_mul_ovf(a->N, a->C, &n) || ln_mul_ovf(n, a->P, &n) || n > LN_MAX_BYTES / 8)
    return ln_error("%s: output is too large", fn);
  return 0;
}

/* out's shape: (N, C, grid's spatial dims) */
static void out_shape(const ln_tensor *in, const ln_tensor *grid, int64_t *shape) {
  shape[0] = in->shape[0];
  shape[1] = in->shape[1];
  for (int i = 1; i < grid->ndim - 1; i++) shape[i + 1] = grid->shape[i];
}

int ln_grid_sample_forward(ln_tensor *out, const ln_tensor *in, const ln_tensor *grid, int mode, int padding,
                           int align_corners) {
  const char *fn = "grid_sample";
  ln_grid_args a;
  if (grid_geometry(fn, in, grid, mode, padding, align_corners, &a) != 0) return -1;
  int64_t shape[5];
  out_shape(in, grid, shape);
  if (nn_check(fn, "out", out, in->dtype_id, in->device_id, in->ndim, shape) != 0) return -1;
  int dev = in->device_id, rc = -1;
  nn_in xi = {0}, gi = {0};
  nn_out o = {0};
  if (nn_input(fn, "input", in, &xi) != 0 || nn_input(fn, "grid", grid, &gi) != 0 || nn_output(fn, "out", out, &o) != 0)
    goto done;
  a.in = nn_ptr(xi.t);
  a.grid = nn_ptr(gi.t);
  a.out = nn_ptr(o.t);
  const ln_tensor *keep[3] = {o.t, xi.t, gi.t};
  rc = ln_launch(dev, fn, ln_kernel(fn, dev, LN_K_grid_sample_fwd, a.dtype), &a, sizeof a, keep, 3);
done:
  rc = nn_out_finish(&o, rc);
  nn_in_free(&xi);
  nn_in_free(&gi);
  return rc;
}

int ln_grid_sample_backward(ln_tensor *din, ln_tensor *dgrid, const ln_tensor *dout, const ln_tensor *in,
                            const ln_tensor *grid, int mode, int padding, int align_corners) {
  const char *fn = "grid_sample_backward";
  ln_grid_args a;
  if (grid_geometry(fn, in, grid, mode, padding, align_corners, &a) != 0) return -1;
  int64_t shape[5];
  out_shape(in, grid, shape);
  if (nn_check(fn, "grad_output", dout, in->dtype_id, in->device_id, in->ndim, shape) != 0) return -1;
  if (din && nn_check(fn, "grad_input", din, in->dtype_id, in->device_id, in->ndim, in->shape) != 0) return -1;
  if (dgrid && nn_check(fn, "grad_grid", dgrid, in->dtype_id, in->device_id, grid->ndim, grid->shape) != 0)
    return -1;
  if (!din && !dgrid) return 0;
  int dev = in->device_id, rc = -1;
  nn_in xi = {0}, gi = {0}, di = {0};
  nn_out ox = {0}, og = {0};
  if (nn_input(fn, "input", in, &xi) != 0 || nn_input(fn, "grid", grid, &gi) != 0 ||
      nn_input(fn, "grad_output", dout, &di) != 0 || nn_output(fn, "grad_input", din, &ox) != 0 ||
      nn_output(fn, "grad_grid", dgrid, &og) != 0)
    goto done;
  a.in = nn_ptr(xi.t);
  a.grid = nn_ptr(gi.t);
  a.dout = nn_ptr(di.t);
  a.din = nn_ptr(ox.t);
  a.dgrid = nn_ptr(og.t);
  const ln_tensor *keep[5] = {ox.t, og.t, xi.t, gi.t, di.t};
  rc = ln_launch(dev, fn, ln_kernel(fn, dev, LN_K_grid_sample_bwd, a.dtype), &a, sizeof a, keep, 5);
done:
  rc = nn_out_finish(&ox, rc);
  rc = nn_out_finish(&og, rc);
  nn_in_free(&xi);
  nn_in_free(&gi);
  nn_in_free(&di);
  return rc;
}
