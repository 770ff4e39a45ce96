/* interp_index.h -- where interpolate's outputs read from (torch 1.13's
 * UpSample.h: nearest_idx, nearest_neighbor_exact_compute_source_index,
 * area_pixel_compute_scale and _source_index, the cubic convolution weights),
 * one dim at a time: output position j of a dim resized in -> out reads taps
 * source positions with weights. Shared by the CPU kernels (c/cpu/interp.c)
 * and the CUDA ones (c/cuda/interp.cu), so both index alike. */
#ifndef LN_INTERP_INDEX_H
#define LN_INTERP_INDEX_H
#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define LN_HD __host__ __device__ static inline
#else
#define LN_HD static inline
#endif

/* (mode values: lunet.h's LN_INTERP_*) */
LN_HD int ln_interp_taps(int mode) { return mode == 3 ? 4 : mode == 2 ? 2 : 1; }

/* source step per output step (align_corners: the corners meet) */
LN_HD double ln_interp_ratio(int64_t in, int64_t out, double scale, int align) {
  if (align) return out > 1 ? (double)(in - 1) / (double)(out - 1) : 0;
  return scale > 0 ? 1.0 / scale : (double)in / (double)out;
}

/* nearest's scale, in float as torch's */
LN_HD float ln_interp_nearest_scale(int64_t in, int64_t out, double scale) {
  return scale > 0 ? (float)(1.0 / scale) : (float)((double)in / (double)out);
}

/* nearest (exact 0) or nearest-exact (1) source of output j */
LN_HD int64_t ln_interp_nearest(int64_t j, int64_t in, int64_t out, float sc, int exact) {
  if (!exact && out == in) return j;
  if (!exact && out == 2 * in) return j >> 1;
  float f = exact ? (float)((j + 0.5) * (double)sc) : (float)((double)j * (double)sc);
  int64_t s = (int64_t)floorf(f);
  return s < in - 1 ? s : in - 1;
}

/* linear: sources i[0], i[1] (the same at the last row), weights w[0], w[1] */
LN_HD void ln_interp_linear(int64_t j, int64_t in, double ratio, int align, int64_t *i, double *w) {
  double src = align ? ratio * (double)j : ratio * (j + 0.5) - 0.5;
  if (src < 0) src = 0;
  int64_t k = (int64_t)floor(src);
  if (k > in - 1) k = in - 1;
  double l = src - (double)k;
  l = l < 0 ? 0 : l > 1 ? 1 : l;
  i[0] = k, i[1] = k < in - 1 ? k + 1 : k;
  w[0] = 1 - l, w[1] = l;
}

/* cubic (A = -0.75): 4 sources clamped to the input, their weights */
LN_HD void ln_interp_cubic(int64_t j, int64_t in, double ratio, int align, int64_t *i, double *w) {
  const double A = -0.75;
  double src = align ? ratio * (double)j : ratio * (j + 0.5) - 0.5;
  double kf = floor(src), t = src - kf;
  double t0 = t + 1, t1 = t, t2 = 1 - t, t3 = 2 - t;
  w[0] = ((A * t0 - 5 * A) * t0 + 8 * A) * t0 - 4 * A;
  w[1] = ((A + 2) * t1 - (A + 3)) * t1 * t1 + 1;
  w[2] = ((A + 2) * t2 - (A + 3)) * t2 * t2 + 1;
  w[3] = ((A * t3 - 5 * A) * t3 + 8 * A) * t3 - 4 * A;
  int64_t k = (int64_t)kf;
  for (int m = 0; m < 4; m++) {
    int64_t s = k + m - 1;
    i[m] = s < 0 ? 0 : s > in - 1 ? in - 1 : s;
  }
}

/* whether a dim (in -> out) is a plain copy: linear modes copy a kept size
 * (torch 1.13 does, whatever the scale), cubic only at a step of 1, nearest
 * always, nearest-exact at a scale of 1 */
LN_HD int ln_interp_kept(int mode, int64_t in, int64_t out, double scale, int align) {
  if (in != out) return 0;
  if (mode == 2) return 1;
  if (mode == 3) return ln_interp_ratio(in, out, scale, align) == 1.0;
  return mode == 0 || !(scale > 0) || (float)(1.0 / scale) == 1.0f;
}

#endif
