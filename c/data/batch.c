/* batch.c -- batch assembly: gather dataset rows into a batch, turning uint8
 * images into float32 on the way (crop with zero padding, horizontal flip,
 * scale, per-channel normalisation), and seeded permutations. Every random
 * choice is Philox keyed by (seed, epoch, sample key), so a batch is the same
 * whichever thread assembles it. */
#include "data.h"
#include "../core/checked.h"
#include <math.h>
#include <stdlib.h>

int ln_data_permutation(int64_t *out, int64_t n, uint64_t seed, uint64_t epoch) {
  if (n < 0) return ln_error("permutation: n must be >= 0, got %lld", (long long)n);
  if (n > 0 && !out) return ln_error("permutation: output is NULL");
  for (int64_t i = 0; i < n; i++) out[i] = i;
  for (int64_t i = n - 1; i > 0; i--) {   /* Fisher-Yates, draw i picks j in [0, i] */
    uint32_t r[4];
    ln_data_philox(seed, epoch, (uint64_t)i, LN_RNG_SHUFFLE, r);
    uint64_t x = (uint64_t)r[0] << 32 | r[1];
    int64_t j = (int64_t)(x % (uint64_t)(i + 1));
    int64_t t = out[i]; out[i] = out[j]; out[j] = t;
  }
  return 0;
}

/* A uniform double in [0, 1) from the draw for counter i. */
static double draw_unit(uint64_t seed, uint64_t epoch, uint64_t i) {
  uint32_t r[4];
  ln_data_philox(seed, epoch, i, LN_RNG_SAMPLE, r);
  return (double)(((uint64_t)r[0] << 21) ^ (r[1] >> 11)) * 0x1p-53;
}

typedef struct { double key; int64_t i; } sample_key;
static int key_desc(const void *a, const void *b) {
  const sample_key *x = a, *y = b;
  if (x->key != y->key) return x->key < y->key ? 1 : -1;
  return x->i < y->i ? -1 : x->i > y->i;   /* (ties: a total order, the same on every machine) */
}

int ln_data_sample(int64_t *out, int64_t n, int64_t m, const double *weights, int replacement,
                   uint64_t seed, uint64_t epoch) {
  const char *fn = "sample";
  if (n < 0) return ln_error("%s: n must be >= 0, got %lld", fn, (long long)n);
  if (n == 0) return 0;
  if (!out) return ln_error("%s: output is NULL", fn);
  if (m < 1) return ln_error("%s: cannot draw %lld samples from 0 items", fn, (long long)n);
  if (m >= ((int64_t)1 << 40) || n >= ((int64_t)1 << 40))
    return ln_error("%s: at most 2^40 items and draws, got %lld from %lld", fn, (long long)n, (long long)m);
  if (!weights) {
    if (replacement) {
      for (int64_t i = 0; i < n; i++) {
        uint32_t r[4];
        ln_data_philox(seed, epoch, (uint64_t)i, LN_RNG_SAMPLE, r);
        out[i] = (int64_t)((((uint64_t)r[0] << 32) | r[1]) % (uint64_t)m);
      }
      return 0;
    }
    /* as torch's RandomSampler: whole permutations of 0..m-1 one after the
     * other, the last one cut; permutation p keyed by counters p * 2^40 + i */
    for (int64_t start = 0, p = 0; start < n; start += m, p++) {
      int64_t *o = out + start, k = LN_MIN(m, n - start);
      int64_t *perm = k == m ? o : malloc(sizeof(int64_t) * (size_t)m);
      if (!perm) return ln_error("%s: out of memory", fn);
      for (int64_t i = 0; i < m; i++) perm[i] = i;
      for (int64_t i = m - 1; i > 0; i--) {
        uint32_t r[4];
        ln_data_philox(seed, epoch, ((uint64_t)p << 40) | (uint64_t)i, LN_RNG_SAMPLE, r);
        int64_t j = (int64_t)(((((uint64_t)r[0] << 32) | r[1])) % (uint64_t)(i + 1));
        int64_t t = perm[i]; perm[i] = perm[j]; perm[j] = t;
      }
      if (perm != o) { memcpy(o, perm, sizeof(int64_t) * (size_t)k); free(perm); }
    }
    return 0;
  }
  double total = 0;
  int64_t positive = 0;
  for (int64_t i = 0; i < m; i++) {
    double w = weights[i];
    if (!(w >= 0) || isinf(w)) return ln_error("%s: weight %lld is %g, weights must be finite and >= 0", fn, (long long)i + 1, w);
    total += w;
    positive += w > 0;
  }
  if (!(total > 0) || isinf(total)) return ln_error("%s: the weights must have a finite, positive sum", fn);
  if (!replacement && n > positive)
    return ln_error("%s: cannot draw %lld samples without replacement from %lld non-zero weights", fn,
                    (long long)n, (long long)positive);
  if (replacement) {   /* inverse CDF: the first cumulative weight past u * total */
    double *cum = malloc(sizeof(double) * (size_t)m);
    if (!cum) return ln_error("%s: out of memory", fn);
    double c = 0;
    for (int64_t i = 0; i < m; i++) cum[i] = c += weights[i];
    for (int64_t k = 0; k < n; k++) {
      double u = draw_unit(seed, epoch, (uint64_t)k) * c;
      int64_t lo = 0, hi = m - 1;
      while (lo < hi) { int64_t mid = lo + (hi - lo) / 2; if (cum[mid] > u) hi = mid; else lo = mid + 1; }
      while (weights[lo] == 0 && lo > 0) lo--;   /* (u past the float sum: the last positive one) */
      out[k] = lo;
    }
    free(cum);
    return 0;
  }
  /* without replacement: Efraimidis-Spirakis keys log(u) / w, the n largest in
   * order, the same law as drawing one at a time and removing it */
  sample_key *keys = malloc(sizeof *keys * (size_t)positive);
  if (!keys) return ln_error("%s: out of memory", fn);
  int64_t q = 0;
  for (int64_t i = 0; i < m; i++) {
    if (weights[i] == 0) continue;
    double u = draw_unit(seed, epoch, (uint64_t)i);
    keys[q].key = log(u > 0 ? u : 0x1p-60) / weights[i];
    keys[q++].i = i;
  }
  qsort(keys, (size_t)positive, sizeof *keys, key_desc);
  for (int64_t k = 0; k < n; k++) out[k] = keys[k].i;
  free(keys);
  return 0;
}

static int check_host(const char *fn, const ln_tensor *t, const char *what) {
  if (ln_check_tensor(fn, t, what) != 0) return -1;
  if (t->device_id >= LN_CUDA_BASE)
    return ln_error("%s: %s must be on a CPU device, got cuda:%d", fn, what, t->device_id - LN_CUDA_BASE);
  if (!ln_is_contiguous(t)) return ln_error("%s: %s must be contiguous", fn, what);
  return 0;
}

/* torchvision's Resize(int): the shorter side becomes `size`, the longer
 * int(size * long / short) (truncated). */
static void resize_shape(int64_t H, int64_t W, const ln_transform_op *o, int64_t *oh, int64_t *ow) {
  if (o->w > 0) { *oh = o->h; *ow = o->w; return; }
  int64_t s = LN_MIN(H, W), l = LN_MAX(H, W), nl = (int64_t)((double)o->h * (double)l / (double)s);
  if (W <= H) { *ow = o->h; *oh = nl; }
  else { *oh = o->h; *ow = nl; }
}

static int box_fits(const ln_transform_op *o, int64_t h, int64_t w) {
  return o->i >= 0 && o->j >= 0 && o->bh >= 1 && o->bw >= 1 && o->i + (int64_t)o->bh <= h &&
         o->j + (int64_t)o->bw <= w;
}

static double u01(uint32_t r) { return (double)r * 0x1.0p-32; }

/* torchvision's _get_inverse_affine_matrix (output pixel -> input pixel,
 * both relative to the centre) of an AFFINE op on an h x w image; r: the
 * op's draws (blocks 0 and 1), NULL for the fixed parameters. */
static void affine_params(const ln_transform_op *o, const uint32_t *r, int64_t h, int64_t w, double m[6]) {
  const double *a = o->a, deg = 0.017453292519943295;   /* (math.radians) */
  double angle = a[0], tx = a[2], ty = a[3], scale = a[4], shx = a[6], shy = a[8];
  if (r) {
    double mx = a[2] * (double)w, my = a[3] * (double)h;
    angle = a[0] + u01(r[0]) * (a[1] - a[0]);
    tx = rint(-mx + u01(r[1]) * 2 * mx);   /* int(round(uniform(-max_dx, max_dx))) */
    ty = rint(-my + u01(r[2]) * 2 * my);
    scale = a[4] + u01(r[3]) * (a[5] - a[4]);
    shx = a[6] + u01(r[4]) * (a[7] - a[6]);
    shy = a[8] + u01(r[5]) * (a[9] - a[8]);
  }
  double cx = 0, cy = 0;
  if (o->flags & LN_TF_CENTER) { cx = a[10] - (double)w * 0.5; cy = a[11] - (double)h * 0.5; }
  double rot = angle * deg, sx = shx * deg, sy = shy * deg;
  double A = cos(rot - sy) / cos(sy), B = -cos(rot - sy) * tan(sx) / cos(sy) - sin(rot);
  double Cc = sin(rot - sy) / cos(sy), D = -sin(rot - sy) * tan(sx) / cos(sy) + cos(rot);
  m[0] = D / scale; m[1] = -B / scale; m[2] = 0.0 / scale;
  m[3] = -Cc / scale; m[4] = A / scale; m[5] = 0.0 / scale;
  m[2] += m[0] * (-cx - tx) + m[1] * (-cy - ty);
  m[5] += m[3] * (-cx - tx) + m[4] * (-cy - ty);
  m[2] += cx; m[5] += cy;
}

/* torchvision's _compute_affine_output_size (float32, as its tensors): the
 * box of the turned corners, its edges cut to 1e-4 before ceil/floor. */
static void expand_size(const double m[6], int64_t h, int64_t w, int64_t *oh, int64_t *ow) {
  float t[6], hw = (float)w * 0.5f, hh = (float)h * 0.5f, tol = (float)1e-4;
  for (int q = 0; q < 6; q++) t[q] = (float)m[q];
  float px[4] = {-hw, -hw, hw, hw}, py[4] = {-hh, hh, hh, -hh}, lo[2] = {0, 0}, hi[2] = {0, 0};
  for (int k = 0; k < 4; k++)
    for (int d = 0; d < 2; d++) {
      float v = px[k] * t[3 * d] + py[k] * t[3 * d + 1] + t[3 * d + 2];
      if (k == 0 || v < lo[d]) lo[d] = v;
      if (k == 0 || v > hi[d]) hi[d] = v;
    }
  lo[0] += hw; hi[0] += hw; lo[1] += hh; hi[1] += hh;
  float sw = ceilf(truncf(hi[0] / tol) * tol) - floorf(truncf(lo[0] / tol) * tol);
  float sh = ceilf(truncf(hi[1] / tol) * tol) - floorf(truncf(lo[1] / tol) * tol);
  *ow = (int64_t)sw; *oh = (int64_t)sh;
}

/* ElasticTransform's blur kernel: int(8 sigma + 1), made odd (capped: the
 * plan refuses kernels past the image anyway) */
static int64_t elastic_ksize(double sigma) {
  double k = floor(8 * sigma + 1);
  int64_t kk = k > 1e9 ? 1000000001 : (int64_t)k;
  return kk % 2 == 0 ? kk + 1 : kk;
}

static int plan_seq(const char *fn, ln_gather_plan *p, int k, int end, int64_t *ph, int64_t *pw, int64_t *pC,
                    int64_t *most, int64_t *extra);
/* the index past op k and, for a GROUP, its w ops */
static int node_end(const ln_transform *tf, int k) {
  return k + 1 + (tf->ops[k].kind == LN_OP_GROUP ? LN_MAX(tf->ops[k].w, 0) : 0);
}

/* A GROUP at k: its items planned from the same input size (h, w, C). */
static int plan_group(const char *fn, ln_gather_plan *p, int k, int64_t *ph, int64_t *pw, int64_t *pC, int64_t *most,
                      int64_t *extra) {
  static const char *const gn[] = {"random apply", "random choice", "random order", "sequence"};
  const ln_transform *tf = &p->tf;
  const ln_transform_op *o = &tf->ops[k];
  if (o->mode < 0 || o->mode > 3) return ln_error("%s: group: unknown mode %d", fn, o->mode);
  const char *nm = gn[o->mode];
  int end = k + 1 + o->w, items[LN_TF_MAX_OPS + 1], n = 0;
  if (o->w < 1 || end > tf->nops) return ln_error("%s: %s: %d ops do not fit the transform", fn, nm, o->w);
  for (int q = k + 1; q < end; q = node_end(tf, q)) {
    if (node_end(tf, q) > end) return ln_error("%s: %s: a nested group runs past its end", fn, nm);
    items[n++] = q;
  }
  items[n] = end;
  if (n != o->i) return ln_error("%s: %s has %d items, says %d", fn, nm, n, o->i);
  if (o->mode == 0 && !(o->p >= 0 && o->p <= 1)) return ln_error("%s: %s probability must be in [0, 1], got %g", fn, nm, o->p);
  if (o->mode == 1) {
    double sum = 0;
    for (int t = 0; t < n; t++) {
      if (!(o->a[t] >= 0 && isfinite(o->a[t]))) return ln_error("%s: %s weight %d is %g", fn, nm, t + 1, o->a[t]);
      sum += o->a[t];
    }
    if (!(sum > 0)) return ln_error("%s: %s weights must have a positive sum", fn, nm);
  }
  int64_t h0 = *ph, w0 = *pw, C0 = *pC, h = h0, w = w0, C = C0;
  if (o->mode == 0 || o->mode == 3) {
    if (plan_seq(fn, p, k + 1, end, &h, &w, &C, most, extra) != 0) return -1;
  } else {
    for (int t = 0; t < n; t++) {
      int64_t th = h0, tw = w0, tc = C0;
      if (plan_seq(fn, p, items[t], items[t + 1], &th, &tw, &tc, most, extra) != 0) return -1;
      if (o->mode == 2 && n > 1 && (th != h0 || tw != w0 || tc != C0))
        return ln_error("%s: %s: its transforms change the size (item %d: %lldx%lldx%lld to %lldx%lldx%lld; a batch "
                        "needs one size)", fn, nm, t + 1, (long long)C0, (long long)h0, (long long)w0, (long long)tc,
                        (long long)th, (long long)tw);
      if (t == 0) { h = th; w = tw; C = tc; }
      else if (th != h || tw != w || tc != C)
        return ln_error("%s: %s: item %d gives %lldx%lldx%lld, item 1 %lldx%lldx%lld (a batch needs one size)", fn, nm,
                        t + 1, (long long)tc, (long long)th, (long long)tw, (long long)C, (long long)h, (long long)w);
    }
  }
  if ((o->mode == 2 && n > 1) || (o->mode == 0 && o->p < 1)) {
    if (h != h0 || w != w0 || C != C0)
      return ln_error("%s: %s: its transforms change the size %lldx%lldx%lld to %lldx%lldx%lld (a batch needs one size)",
                      fn, nm, (long long)C0, (long long)h0, (long long)w0, (long long)C, (long long)h, (long long)w);
  }
  *ph = h; *pw = w; *pC = C;
  return 0;
}

/* Checks op k against the image geometry (h, w, C: its input, updated to
 * its output), fills op_h/op_w/op_c/out_h/out_w. */
static int plan_one(const char *fn, ln_gather_plan *p, int k, int64_t *ph, int64_t *pw, int64_t *pC, int64_t *pmost,
                    int64_t *pextra) {
  static const char *const names[] = {"?", "crop", "horizontal flip", "vertical flip", "normalize",
                                      "resize", "resized crop", "color jitter", "erasing", "grayscale",
                                      "affine", "gaussian blur", "pad", "posterize", "solarize",
                                      "autocontrast", "equalize", "sharpness", "invert", "autoaugment",
                                      "group", "perspective", "elastic"};
  const ln_transform *tf = &p->tf;
  int64_t h = *ph, w = *pw, C = *pC, most = *pmost, extra = *pextra;
  {
    const ln_transform_op *o = &tf->ops[k];
    if (o->kind < LN_OP_CROP || o->kind > LN_OP_ELASTIC) return ln_error("%s: op %d: unknown kind %d", fn, k + 1, o->kind);
    const char *nm = names[o->kind];
    p->op_h[k] = h; p->op_w[k] = w; p->op_c[k] = C;
    switch (o->kind) {
    case LN_OP_CROP: {
      if (o->mode != LN_CROP_RANDOM && o->mode != LN_CROP_CENTER) return ln_error("%s: %s: unknown mode %d", fn, nm, o->mode);
      if (o->pad < 0 || (o->mode == LN_CROP_CENTER && o->pad)) return ln_error("%s: %s: bad padding %d", fn, nm, o->pad);
      int64_t ph = h + 2 * (int64_t)o->pad, pw = w + 2 * (int64_t)o->pad;
      if (o->mode == LN_CROP_CENTER) ph = pw = INT32_MAX;   /* (torchvision pads with zeros first) */
      if (o->h < 1 || o->w < 1 || o->h > ph || o->w > pw)
        return ln_error("%s: crop %dx%d does not fit the %sinput %lldx%lld", fn, o->h, o->w, o->pad ? "padded " : "",
                        (long long)ph, (long long)pw);
      h = o->h; w = o->w;
      break;
    }
    case LN_OP_HFLIP: case LN_OP_VFLIP: case LN_OP_ERASE:
      if (!(o->p >= 0 && o->p <= 1)) return ln_error("%s: %s probability must be in [0, 1], got %g", fn, nm, o->p);
      if (o->kind != LN_OP_ERASE) break;
      if (o->nv != 1 && o->nv != C)
        return ln_error("%s: erasing has %d values for %lld channels", fn, o->nv, (long long)C);
      if (o->mode == 1 && !box_fits(o, h, w))
        return ln_error("%s: erasing box %dx%d at (%d, %d) does not fit the %lldx%lld image", fn, o->bh, o->bw,
                        o->i, o->j, (long long)h, (long long)w);
      if (o->mode == 0 && !(o->a[0] >= 0 && o->a[0] <= o->a[1] && o->a[1] <= 1 && o->a[2] > 0 && o->a[2] <= o->a[3]))
        return ln_error("%s: erasing needs 0 <= scale[1] <= scale[2] <= 1 and 0 < ratio[1] <= ratio[2]", fn);
      break;
    case LN_OP_NORMALIZE:
      if (tf->nchannels != 1 && tf->nchannels != C)
        return ln_error("%s: normalize has %d mean/std values for %lld channels", fn, tf->nchannels, (long long)C);
      for (int c = 0; c < tf->nchannels; c++)
        if (!(tf->std[c] != 0)) return ln_error("%s: normalize std[%d] is zero", fn, c + 1);
      break;
    case LN_OP_RESIZE: {
      if (o->h < 1 || o->w < 0) return ln_error("%s: resize to %dx%d", fn, o->h, o->w);
      int64_t oh, ow;
      resize_shape(h, w, o, &oh, &ow);
      if (oh < 1 || ow < 1 || oh > INT32_MAX || ow > INT32_MAX)
        return ln_error("%s: resize of %lldx%lld gives %lldx%lld", fn, (long long)h, (long long)w, (long long)oh,
                        (long long)ow);
      h = oh; w = ow;
      break;
    }
    case LN_OP_RESIZED_CROP:
      if (o->h < 1 || o->w < 1) return ln_error("%s: resized crop to %dx%d", fn, o->h, o->w);
      if (o->mode == 1 && !box_fits(o, h, w))
        return ln_error("%s: crop box %dx%d at (%d, %d) does not fit the %lldx%lld image", fn, o->bh, o->bw, o->i,
                        o->j, (long long)h, (long long)w);
      if (o->mode == 0 && !(o->a[0] > 0 && o->a[0] <= o->a[1] && o->a[2] > 0 && o->a[2] <= o->a[3]))
        return ln_error("%s: resized crop needs 0 < scale[1] <= scale[2] and 0 < ratio[1] <= ratio[2]", fn);
      h = o->h; w = o->w;
      break;
    case LN_OP_JITTER:
      for (int f = 0; f < 3; f++) {
        double lo = o->a[2 * f], hi = o->a[2 * f + 1];
        if (lo < 0) continue;   /* off */
        if (!(lo >= 0 && (o->mode == 1 || lo <= hi) && isfinite(o->mode == 1 ? lo : hi)))
          return ln_error("%s: color jitter factor range %d is [%g, %g]", fn, f + 1, lo, hi);
        if (f > 0 && C != 1 && C != 3)
          return ln_error("%s: color jitter's contrast and saturation need 1 or 3 channels, got %lld", fn, (long long)C);
      }
      if (o->flags & LN_TF_HUE) {
        double lo = o->a[6], hi = o->a[7];
        if (!(lo >= -0.5 && hi <= 0.5 && (o->mode == 1 || lo <= hi)))
          return ln_error("%s: color jitter's hue range is [%g, %g], must be within [-0.5, 0.5]", fn, lo, hi);
        if (C != 1 && C != 3) return ln_error("%s: color jitter's hue needs 1 or 3 channels, got %lld", fn, (long long)C);
      }
      break;
    case LN_OP_GRAY:
      if (!(o->p >= 0 && o->p <= 1)) return ln_error("%s: grayscale probability must be in [0, 1], got %g", fn, o->p);
      if (C != 1 && C != 3) return ln_error("%s: grayscale needs 1 or 3 channels, got %lld", fn, (long long)C);
      if (o->mode != 0 && o->mode != 1) return ln_error("%s: grayscale: unknown mode %d", fn, o->mode);
      if (o->mode == 1 && o->p != 1) return ln_error("%s: grayscale to 1 channel needs p = 1, got %g", fn, o->p);
      if (o->mode == 1) C = 1;
      break;
    case LN_OP_AFFINE: {
      if (o->mode != 0 && o->mode != 1) return ln_error("%s: affine: unknown mode %d", fn, o->mode);
      if (o->interp != 0 && o->interp != 1) return ln_error("%s: affine: unknown interpolation %d", fn, o->interp);
      for (int q = 0; q < 12; q++)
        if (!isfinite(o->a[q])) return ln_error("%s: affine parameter %d is %g", fn, q + 1, o->a[q]);
      if ((o->flags & LN_TF_FILL) && o->nv != 1 && o->nv != C)
        return ln_error("%s: affine fill has %d values for %lld channels", fn, o->nv, (long long)C);
      if (o->mode == 0 && !(o->a[2] >= 0 && o->a[2] <= 1 && o->a[3] >= 0 && o->a[3] <= 1))
        return ln_error("%s: affine translate fractions must be in [0, 1], got (%g, %g)", fn, o->a[2], o->a[3]);
      if (!(o->a[4] > 0 && (o->mode == 1 || o->a[4] <= o->a[5])))
        return ln_error("%s: affine scale must be > 0 (a range: min <= max), got [%g, %g]", fn, o->a[4], o->a[5]);
      if (o->flags & LN_TF_EXPAND) {
        if (o->mode != 1) return ln_error("%s: affine expand needs fixed parameters (mode 1)", fn);
        double m[6];
        affine_params(o, NULL, h, w, m);
        expand_size(m, h, w, &h, &w);
        if (h < 1 || w < 1 || h > INT32_MAX || w > INT32_MAX)
          return ln_error("%s: affine expand gives %lldx%lld", fn, (long long)h, (long long)w);
      }
      break;
    }
    case LN_OP_BLUR:
      if (o->w < 1 || o->h < 1 || o->w % 2 == 0 || o->h % 2 == 0)
        return ln_error("%s: gaussian blur kernel must be odd and positive, got %dx%d", fn, o->w, o->h);
      if (o->w / 2 >= w || o->h / 2 >= h)   /* (reflect padding: less than the size) */
        return ln_error("%s: gaussian blur kernel %dx%d (x by y) is too large for the %lldx%lld image", fn, o->w,
                        o->h, (long long)h, (long long)w);
      if (!(o->a[0] > 0 && o->a[1] > 0 && isfinite(o->a[1]) && (o->mode == 1 || o->a[0] <= o->a[1])))
        return ln_error("%s: gaussian blur sigma must be > 0 (a range: min <= max), got [%g, %g]", fn, o->a[0], o->a[1]);
      extra = LN_MAX(extra, (int64_t)o->w + o->h);
      break;
    case LN_OP_PAD: {
      if (o->mode < 0 || o->mode > 3) return ln_error("%s: pad: unknown mode %d", fn, o->mode);
      if (o->i < 0 || o->j < 0 || o->bw < 0 || o->bh < 0)
        return ln_error("%s: pad: padding must be >= 0, got (%d, %d, %d, %d)", fn, o->i, o->j, o->bw, o->bh);
      int64_t lim_w = o->mode == 2 ? w - 1 : o->mode == 3 ? w : INT32_MAX, lim_h = o->mode == 2 ? h - 1 : o->mode == 3 ? h : INT32_MAX;
      if (o->i > lim_w || o->bw > lim_w || o->j > lim_h || o->bh > lim_h)
        return ln_error("%s: pad: %s padding (%d, %d, %d, %d) must be %s the %lldx%lld image's size", fn,
                        o->mode == 2 ? "reflect" : "symmetric", o->i, o->j, o->bw, o->bh,
                        o->mode == 2 ? "less than" : "at most", (long long)h, (long long)w);
      if (o->mode == 0 && o->nv != 1) return ln_error("%s: pad fill must be one value, got %d", fn, o->nv);
      h += (int64_t)o->j + o->bh; w += (int64_t)o->i + o->bw;
      if (h > INT32_MAX || w > INT32_MAX) return ln_error("%s: pad gives %lldx%lld", fn, (long long)h, (long long)w);
      break;
    }
    case LN_OP_GROUP:
      if (plan_group(fn, p, k, &h, &w, &C, &most, &extra) != 0) return -1;
      break;
    case LN_OP_PERSPECTIVE: case LN_OP_ELASTIC:
      if (o->mode != 0 && (o->kind == LN_OP_ELASTIC || o->mode != 1)) return ln_error("%s: %s: unknown mode %d", fn, nm, o->mode);
      if (o->interp != 0 && o->interp != 1) return ln_error("%s: %s: unknown interpolation %d", fn, nm, o->interp);
      if ((o->flags & LN_TF_FILL) && o->nv != 1 && o->nv != C)
        return ln_error("%s: %s fill has %d values for %lld channels", fn, nm, o->nv, (long long)C);
      for (int q = 0; q < 8; q++)
        if (!isfinite(o->a[q])) return ln_error("%s: %s parameter %d is %g", fn, nm, q + 1, o->a[q]);
      if (o->kind == LN_OP_PERSPECTIVE) {
        if (!(o->p >= 0 && o->p <= 1)) return ln_error("%s: %s probability must be in [0, 1], got %g", fn, nm, o->p);
        if (o->mode == 0 && !(o->a[0] >= 0 && o->a[0] <= 1))
          return ln_error("%s: perspective distortion_scale must be in [0, 1], got %g", fn, o->a[0]);
        break;
      }
      if (!(o->a[0] >= 0 && o->a[1] >= 0 && o->a[2] >= 0 && o->a[3] >= 0 && (o->a[2] > 0) == (o->a[3] > 0)))
        return ln_error("%s: elastic alpha and sigma must be >= 0 (sigma both 0 or both > 0), got alpha (%g, %g), "
                        "sigma (%g, %g)", fn, o->a[0], o->a[1], o->a[2], o->a[3]);
      if (o->a[2] > 0) {
        int64_t kx = elastic_ksize(o->a[2]), ky = elastic_ksize(o->a[3]), kk = LN_MAX(kx, ky);
        if (kk / 2 >= h || kk / 2 >= w)
          return ln_error("%s: elastic sigma (%g, %g) needs a blur kernel of %lld, too large for the %lldx%lld image",
                          fn, o->a[2], o->a[3], (long long)kk, (long long)h, (long long)w);
        int64_t e3;
        if (ln_mul_ovf(h, w, &e3) || ln_mul_ovf(e3, 3, &e3)) return ln_error("%s: image size overflows", fn);
        extra = LN_MAX(extra, e3 + 2 * kk);
      } else {
        int64_t e3;
        if (ln_mul_ovf(h, w, &e3) || ln_mul_ovf(e3, 3, &e3)) return ln_error("%s: image size overflows", fn);
        extra = LN_MAX(extra, e3);
      }
      break;
    case LN_OP_POSTERIZE: case LN_OP_SOLARIZE: case LN_OP_AUTOCONTRAST: case LN_OP_EQUALIZE:
    case LN_OP_SHARPNESS: case LN_OP_INVERT: case LN_OP_AUTOAUG:
      if (C != 1 && C != 3) return ln_error("%s: %s needs 1 or 3 channels, got %lld", fn, nm, (long long)C);
      if (o->kind != LN_OP_AUTOAUG && !(o->p >= 0 && o->p <= 1))
        return ln_error("%s: %s probability must be in [0, 1], got %g", fn, nm, o->p);
      if (o->kind == LN_OP_POSTERIZE && (o->i < 0 || o->i > 8))
        return ln_error("%s: posterize bits must be in [0, 8], got %d", fn, o->i);
      if (o->kind == LN_OP_SOLARIZE && (isnan(o->a[0]) || o->mode < 0 || o->mode > 1))
        return ln_error("%s: solarize threshold %g (mode %d)", fn, o->a[0], o->mode);
      if (o->kind == LN_OP_SHARPNESS && !(o->a[0] >= 0 && isfinite(o->a[0])))
        return ln_error("%s: sharpness factor must be >= 0 and finite, got %g", fn, o->a[0]);
      if (o->kind == LN_OP_AUTOAUG) {
        if (o->interp != 0 && o->interp != 1) return ln_error("%s: %s: unknown interpolation %d", fn, nm, o->interp);
        if ((o->flags & LN_TF_FILL) && o->nv != 1 && o->nv != C)
          return ln_error("%s: %s fill has %d values for %lld channels", fn, nm, o->nv, (long long)C);
        int bad = o->mode < 0 || o->mode > 3 || (o->mode == 0 && (o->i < 0 || o->i > 2)) ||
                  (o->mode == 1 && (o->i < 0 || o->i > LN_AUG_MAX_NUM_OPS || o->j < 0 || o->j >= o->bh)) || ((o->mode == 1 || o->mode == 2) && o->bh < 2) ||
                  (o->mode == 3 && (o->j < 0 || o->j >= LN_AUG_NOPS || !isfinite(o->a[0])));
        if (bad) return ln_error("%s: %s: bad parameters (mode %d, %d, %d, %d bins)", fn, nm, o->mode, o->i, o->j, o->bh);
      }
      break;
    }
    int64_t e;
    if (ln_mul_ovf(h, w, &e)) return ln_error("%s: image size overflows after the %s", fn, nm);
    most = LN_MAX(most, e);
    p->out_h[k] = h; p->out_w[k] = w;
  }
  *ph = h; *pw = w; *pC = C; *pmost = most; *pextra = extra;
  return 0;
}

static int plan_seq(const char *fn, ln_gather_plan *p, int k, int end, int64_t *ph, int64_t *pw, int64_t *pC,
                    int64_t *most, int64_t *extra) {
  while (k < end) {
    if (plan_one(fn, p, k, ph, pw, pC, most, extra) != 0) return -1;
    k = node_end(&p->tf, k);
  }
  return 0;
}

/* Checks tf->ops against the image geometry, fills op_h/op_w, OH/OW and the
 * scratch floats (two buffers of the largest stage). */
static int plan_ops(const char *fn, ln_gather_plan *p) {
  int64_t h = p->H, w = p->W, C = p->C, most, extra = 0;
  if (ln_mul_ovf(h, w, &most)) return ln_error("%s: image size overflows", fn);
  if (plan_seq(fn, p, 0, p->tf.nops, &h, &w, &C, &most, &extra) != 0) return -1;
  p->OH = h; p->OW = w; p->OC = C;
  int64_t s;   /* (channels never grow: the input's bound every stage) */
  if (ln_mul_ovf(most, p->C, &p->half) || ln_mul_ovf(p->half, 2, &s) || ln_add_ovf(s, extra, &s) ||
      s > LN_MAX_BYTES / (int64_t)sizeof(float))
    return ln_error("%s: the transforms' buffers overflow", fn);
  p->scratch = s;
  return 0;
}

/* The image part of a plan: one (C, H, W) image of p->xdtype through tf
 * (also each file of the loader's files source, planned at its own size). */
int ln_gather_plan_image(const char *fn, ln_gather_plan *p, int64_t C, int64_t H, int64_t W,
                         const ln_transform *tf) {
  p->image = 1;
  p->tf = *tf;
  p->C = C; p->H = H; p->W = W;
  if (tf->crop != LN_CROP_NONE && tf->crop != LN_CROP_RANDOM && tf->crop != LN_CROP_CENTER)
    return ln_error("%s: unknown crop mode %d", fn, tf->crop);
  if (tf->pad < 0) return ln_error("%s: padding must be >= 0, got %d", fn, tf->pad);
  if (tf->nops < 0 || tf->nops > LN_TF_MAX_OPS)
    return ln_error("%s: %d transform ops, at most %d", fn, tf->nops, LN_TF_MAX_OPS);
  if (tf->nops > 0 && (tf->crop != LN_CROP_NONE || tf->pad || tf->flip_p != 0 || tf->normalize))
    return ln_error("%s: transform ops cannot be mixed with the fixed crop/flip/normalize fields", fn);
  if (tf->crop == LN_CROP_NONE) {
    if (tf->pad != 0) return ln_error("%s: padding %d needs a crop", fn, tf->pad);
    p->OH = p->H; p->OW = p->W;
  } else {
    p->OH = tf->out_h; p->OW = tf->out_w;
    int64_t ph = tf->crop == LN_CROP_RANDOM ? p->H + 2 * tf->pad : INT32_MAX;   /* (center: zero-padded first) */
    int64_t pw = tf->crop == LN_CROP_RANDOM ? p->W + 2 * tf->pad : INT32_MAX;
    if (p->OH < 1 || p->OW < 1 || p->OH > ph || p->OW > pw)
      return ln_error("%s: crop %lldx%lld does not fit the %sinput %lldx%lld", fn, (long long)p->OH,
                      (long long)p->OW, tf->pad ? "padded " : "", (long long)ph, (long long)pw);
  }
  if (!(tf->flip_p >= 0 && tf->flip_p <= 1))
    return ln_error("%s: flip probability must be in [0, 1], got %g", fn, tf->flip_p);
  if (tf->nchannels < 0 || tf->nchannels > LN_DATA_MAX_CHANNELS)
    return ln_error("%s: %d channel entries, at most %d", fn, tf->nchannels, LN_DATA_MAX_CHANNELS);
  p->OC = p->C;
  if (tf->normalize) {   /* (the ops' Normalize: in plan_ops, against the channels it sees) */
    if (tf->nchannels != 1 && tf->nchannels != p->C)
      return ln_error("%s: normalize has %d mean/std values for %lld channels", fn, tf->nchannels,
                      (long long)p->C);
    for (int c = 0; c < tf->nchannels; c++)
      if (!(tf->std[c] != 0)) return ln_error("%s: normalize std[%d] is zero", fn, c + 1);
  }
  if (tf->nops == 0 && tf->nchannels > 1 && tf->nchannels != p->C)
    return ln_error("%s: %d fill values for %lld channels", fn, tf->nchannels, (long long)p->C);
  if (tf->nops > 0 && plan_ops(fn, p) != 0) return -1;
  return 0;
}

/* Checks x, y and tf once; fills the plan and the batch's shapes. */
int ln_gather_plan_make(const char *fn, ln_gather_plan *p, const ln_tensor *x, const ln_tensor *y,
                        const ln_transform *tf, int64_t b, int *ndim, int64_t *shape, int *dtype,
                        int *yndim, int64_t *yshape) {
  memset(p, 0, sizeof *p);
  if (check_host(fn, x, "inputs") != 0) return -1;
  if (x->ndim < 1) return ln_error("%s: inputs must have a first (sample) dim, got a 0-d tensor", fn);
  if (b < 0) return ln_error("%s: batch size must be >= 0, got %lld", fn, (long long)b);
  int64_t n = x->shape[0];
  p->x = ln_data_ptr(x);
  p->xdtype = x->dtype_id;
  p->xrow = n ? ln_numel(x) / n * ln_dtype_size(x->dtype_id) : 0;
  if (y) {
    if (check_host(fn, y, "targets") != 0) return -1;
    if (y->ndim < 1 || y->shape[0] != n)
      return ln_error("%s: targets have %lld rows, inputs %lld", fn, y->ndim ? (long long)y->shape[0] : 0LL,
                      (long long)n);
    p->y = ln_data_ptr(y);
    p->yrow = n ? ln_numel(y) / n * ln_dtype_size(y->dtype_id) : 0;
    if (yndim) {
      *yndim = y->ndim;
      yshape[0] = b;
      for (int d = 1; d < y->ndim; d++) yshape[d] = y->shape[d];
    }
  } else if (yndim) {
    *yndim = 0;
  }
  if (!tf) {
    *ndim = x->ndim;
    shape[0] = b;
    for (int d = 1; d < x->ndim; d++) shape[d] = x->shape[d];
    *dtype = x->dtype_id;
    return 0;
  }
  if (x->ndim != 4 || (x->dtype_id != LN_UINT8 && x->dtype_id != LN_FLOAT32))
    return ln_error("%s: image transforms need uint8 or float32 images (N,C,H,W), got a %d-d %s tensor", fn,
                    x->ndim, ln_dtype_name(x->dtype_id));
  if (ln_gather_plan_image(fn, p, x->shape[1], x->shape[2], x->shape[3], tf) != 0) return -1;
  *ndim = 4;
  shape[0] = b; shape[1] = p->OC; shape[2] = p->OH; shape[3] = p->OW;
  *dtype = LN_FLOAT32;
  return 0;
}

/* torchvision's center_crop: round((H - OH) / 2), half to even; a side
 * the crop is larger than is zero-padded first, (OH - H) // 2 before. */
static void center_offsets(int64_t H, int64_t W, int64_t OH, int64_t OW, int64_t *oy, int64_t *ox) {
  *oy = OH > H ? -((OH - H) / 2) : (int64_t)rint((double)(H - OH) / 2.0);
  *ox = OW > W ? -((OW - W) / 2) : (int64_t)rint((double)(W - OW) / 2.0);
}

/* One sample: (C,H,W) -> (C,OH,OW) float32. */
static void image_sample(const ln_gather_plan *p, float *out, int64_t row, uint64_t key, uint64_t seed,
                         uint64_t epoch) {
  const ln_transform *tf = &p->tf;
  int64_t C = p->C, H = p->H, W = p->W, OH = p->OH, OW = p->OW;
  int64_t oy = 0, ox = 0;
  int flip = 0;
  if (tf->crop == LN_CROP_RANDOM || tf->flip_p > 0) {
    uint32_t r[4];
    ln_data_philox(seed, epoch, key, LN_RNG_TRANSFORM, r);
    flip = tf->flip_p > 0 && (double)r[0] * 0x1.0p-32 < tf->flip_p;
    if (tf->crop == LN_CROP_RANDOM) {
      oy = (int64_t)(r[1] % (uint32_t)(H + 2 * tf->pad - OH + 1)) - tf->pad;
      ox = (int64_t)(r[2] % (uint32_t)(W + 2 * tf->pad - OW + 1)) - tf->pad;
    }
  }
  if (tf->crop == LN_CROP_CENTER) center_offsets(H, W, OH, OW, &oy, &ox);
  /* source x of output column j: ox + j, or ox + OW-1-j when flipped */
  int64_t x0 = flip ? ox + OW - 1 : ox, dx = flip ? -1 : 1;
  for (int64_t c = 0; c < C; c++) {
    int ci = tf->nchannels > 1 ? (int)c : 0;
    float scale = tf->scale, shift = 0, fill = tf->nchannels ? tf->fill[ci] : 0;
    if (tf->normalize) {   /* (v*scale - mean) / std as one multiply-add */
      scale = tf->scale / tf->std[ci];
      shift = -tf->mean[ci] / tf->std[ci];
    }
    float *o = out + c * OH * OW;
    for (int64_t i = 0; i < OH; i++) {
      int64_t sy = oy + i;
      float *orow = o + i * OW;
      if (sy < 0 || sy >= H) { for (int64_t j = 0; j < OW; j++) orow[j] = fill; continue; }
      /* columns j with 0 <= x0 + j*dx < W; the others are padding */
      int64_t jlo, jhi;
      if (dx > 0) { jlo = LN_MAX(0, -x0); jhi = LN_MIN(OW, W - x0); }
      else { jlo = LN_MAX(0, x0 - (W - 1)); jhi = LN_MIN(OW, x0 + 1); }
      if (jlo > OW) jlo = OW;
      if (jhi < jlo) jhi = jlo;
      for (int64_t j = 0; j < jlo; j++) orow[j] = fill;
      for (int64_t j = jhi; j < OW; j++) orow[j] = fill;
      int64_t rowbase = (row * C + c) * H * W + sy * W;   /* source row start */
      if (p->xdtype == LN_UINT8) {
        const uint8_t *s = (const uint8_t *)p->x + rowbase;
        if (dx > 0) for (int64_t j = jlo; j < jhi; j++) orow[j] = (float)s[x0 + j] * scale + shift;
        else for (int64_t j = jlo; j < jhi; j++) orow[j] = (float)s[x0 - j] * scale + shift;
      } else {
        const float *s = (const float *)p->x + rowbase;
        if (dx > 0) for (int64_t j = jlo; j < jhi; j++) orow[j] = s[x0 + j] * scale + shift;
        else for (int64_t j = jlo; j < jhi; j++) orow[j] = s[x0 - j] * scale + shift;
      }
    }
  }
}

/* Op k's stream: the 4 words of block `blk` (< 8) of (seed, epoch, key). */
static void op_rng(uint64_t seed, uint64_t epoch, uint64_t key, int k, int blk, uint32_t r[4]) {
  ln_data_philox(seed, epoch, key, 0x80u | (uint32_t)k << 3 | (uint32_t)blk, r);
}
/* torchvision's box search (RandomResizedCrop, RandomErasing): 10 tries of
 * an area share in [a0, a1] and a log-uniform ratio in [a2, a3]; the box is
 * round(sqrt(area * r)) by round(sqrt(area / r)) as (w, h) for a crop
 * (r = w/h) and (h, w) for erasing (r = h/w). Returns whether one fitted
 * (crop: 0 < h <= H, 0 < w <= W; erasing: h < H, w < W), with i, j drawn in it. */
static int box_search(const ln_transform_op *o, int erase, int64_t H, int64_t W, uint64_t seed, uint64_t epoch,
                      uint64_t key, int k, int64_t *bi, int64_t *bj, int64_t *bh, int64_t *bw) {
  double area = (double)H * (double)W, l0 = log(o->a[2]), l1 = log(o->a[3]);
  uint32_t r[4];
  for (int t = 0; t < 10; t++) {
    if (t % 2 == 0) op_rng(seed, epoch, key, k, 1 + t / 2, r);
    double target = area * (o->a[0] + u01(r[(t % 2) * 2]) * (o->a[1] - o->a[0]));
    double ar = exp(l0 + u01(r[(t % 2) * 2 + 1]) * (l1 - l0));
    int64_t x = (int64_t)rint(sqrt(target * ar)), y = (int64_t)rint(sqrt(target / ar));
    int64_t h = erase ? x : y, w = erase ? y : x;
    int ok = erase ? (h < H && w < W) : (h > 0 && h <= H && w > 0 && w <= W);
    if (!ok) continue;
    op_rng(seed, epoch, key, k, 0, r);
    *bi = (int64_t)(r[1] % (uint64_t)(H - h + 1));
    *bj = (int64_t)(r[2] % (uint64_t)(W - w + 1));
    *bh = h; *bw = w;
    return 1;
  }
  return 0;
}

/* Bilinear resize of the box (top, left, bh, bw) of src (C, H, W) to dst
 * (C, oh, ow) as PyTorch's upsample_bilinear2d (align_corners false): source
 * (d + 0.5) * scale - 0.5 clamped at 0, in float. */
static void resize_box(const float *src, int64_t C, int64_t H, int64_t W, int64_t top, int64_t left, int64_t bh,
                       int64_t bw, float *dst, int64_t oh, int64_t ow) {
  (void)H;
  float sy = (float)bh / (float)oh, sx = (float)bw / (float)ow;
  for (int64_t c = 0; c < C; c++) {
    const float *s = src + c * H * W + top * W + left;
    float *d = dst + c * oh * ow;
    for (int64_t y = 0; y < oh; y++) {
      float fy = sy * ((float)y + 0.5f) - 0.5f;
      if (fy < 0) fy = 0;
      int64_t y0 = (int64_t)fy, y1 = y0 + (y0 < bh - 1);
      float ly1 = fy - (float)y0, ly0 = 1 - ly1;
      const float *r0 = s + y0 * W, *r1 = s + y1 * W;
      for (int64_t x = 0; x < ow; x++) {
        float fx = sx * ((float)x + 0.5f) - 0.5f;
        if (fx < 0) fx = 0;
        int64_t x0 = (int64_t)fx, x1 = x0 + (x0 < bw - 1);
        float lx1 = fx - (float)x0, lx0 = 1 - lx1;
        d[y * ow + x] = (r0[x0] * lx0 + r0[x1] * lx1) * ly0 + (r1[x0] * lx0 + r1[x1] * lx1) * ly1;
      }
    }
  }
}

static float clamp01(float v) { return v < 0 ? 0 : v > 1 ? 1 : v; }
static float gray(const float *im, int64_t n, int64_t q) {   /* torchvision's rgb_to_grayscale weights */
  return 0.2989f * im[q] + 0.587f * im[n + q] + 0.114f * im[2 * n + q];
}

/* torchvision's adjust_brightness/contrast/saturation (float images, bound 1):
 * blend(img, other, f) = clamp(f * img + (1 - f) * other, 0, 1) with other
 * zero, the grayscale mean (the mean when 1 channel) or the grayscale pixel;
 * saturation leaves 1 channel as it is. */
static void jitter(float *im, int64_t C, int64_t n, int which, float f) {
  float g = 1 - f;
  if (which == 0) {
    for (int64_t q = 0; q < C * n; q++) im[q] = clamp01(f * im[q]);
  } else if (which == 1) {
    double sum = 0;
    if (C == 3) for (int64_t q = 0; q < n; q++) sum += gray(im, n, q);
    else for (int64_t q = 0; q < n; q++) sum += im[q];
    float m = (float)(sum / (double)n);
    for (int64_t q = 0; q < C * n; q++) im[q] = clamp01(f * im[q] + g * m);
  } else if (C == 3) {
    for (int64_t q = 0; q < n; q++) {
      float m = gray(im, n, q);
      for (int64_t c = 0; c < 3; c++) im[c * n + q] = clamp01(f * im[c * n + q] + g * m);
    }
  }
}

/* torchvision's adjust_hue on 3 channels, float32 as its tensor code:
 * _rgb2hsv, h = (h + f) mod 1 (torch.remainder), _hsv2rgb. */
static void hue(float *im, int64_t n, float f) {
  for (int64_t q = 0; q < n; q++) {
    float r = im[q], g = im[n + q], b = im[2 * n + q];
    float maxc = fmaxf(fmaxf(r, g), b), minc = fminf(fminf(r, g), b);
    int eqc = maxc == minc;
    float cr = maxc - minc, s = cr / (eqc ? 1.0f : maxc), crd = eqc ? 1.0f : cr;
    float rc = (maxc - r) / crd, gc = (maxc - g) / crd, bc = (maxc - b) / crd;
    float hr = maxc == r ? bc - gc : 0.0f;
    float hg = maxc == g && maxc != r ? 2.0f + rc - bc : 0.0f;
    float hb = maxc != g && maxc != r ? 4.0f + gc - rc : 0.0f;
    float h = fmodf((hr + hg + hb) / 6.0f + 1.0f, 1.0f), v = maxc;
    h = fmodf(h + f, 1.0f);
    if (h != 0 && h < 0) h += 1.0f;
    float i = floorf(h * 6.0f), fr = h * 6.0f - i;
    int ii = ((int)i % 6 + 6) % 6;
    float pp = clamp01(v * (1.0f - s)), qq = clamp01(v * (1.0f - s * fr)), tt = clamp01(v * (1.0f - s * (1.0f - fr)));
    float R[6] = {v, qq, pp, pp, tt, v}, G[6] = {tt, v, v, qq, pp, pp}, B[6] = {pp, pp, tt, v, v, qq};
    im[q] = R[ii]; im[n + q] = G[ii]; im[2 * n + q] = B[ii];
  }
}

/* grid_sample (zeros, align_corners false) of src (C, h, w) at the
 * normalised point (gx, gy) into dst[c * plane + at], with the fill mask of
 * torchvision's _apply_grid_transform (o: interp, flags & LN_TF_FILL, v). */
static inline void grid_px(const ln_transform_op *o, const float *src, int64_t C, int64_t h, int64_t w, float *dst,
                           int64_t plane, int64_t at, float gx, float gy) {
  float ix = (gx + 1) * ((float)w / 2) - 0.5f, iy = (gy + 1) * ((float)h / 2) - 0.5f;
  int fill = (o->flags & LN_TF_FILL) != 0;
  if (o->interp == 0) {   /* nearest: round half to even */
    float nx = nearbyintf(ix), ny = nearbyintf(iy);
    int in = nx >= 0 && nx < (float)w && ny >= 0 && ny < (float)h;
    int64_t off = in ? (int64_t)ny * w + (int64_t)nx : 0;
    for (int64_t c = 0; c < C; c++)
      dst[c * plane + at] = in ? src[c * h * w + off] : fill ? o->v[o->nv > 1 ? c : 0] : 0.0f;
    return;
  }
  float x0 = floorf(ix), y0 = floorf(iy), wx = ix - x0, wy = iy - y0, ex = 1 - wx, ey = 1 - wy;
  float tw[4] = {ey * ex, ey * wx, wy * ex, wy * wx}, mask = 0;
  int64_t toff[4];
  for (int k = 0; k < 4; k++) {
    float tx = x0 + (float)(k & 1), ty = y0 + (float)(k >> 1);
    int in = tx >= 0 && tx < (float)w && ty >= 0 && ty < (float)h;
    toff[k] = in ? (int64_t)ty * w + (int64_t)tx : -1;
    if (in) mask += tw[k];
  }
  for (int64_t c = 0; c < C; c++) {
    const float *sp = src + c * h * w;
    float v = 0;
    for (int k = 0; k < 4; k++) v += toff[k] >= 0 ? sp[toff[k]] * tw[k] : 0.0f;
    if (fill) v = v * mask + (1.0f - mask) * o->v[o->nv > 1 ? c : 0];
    dst[c * plane + at] = v;
  }
}

/* torchvision's _gen_affine_grid + grid_px, in float32: output (C, oh, ow)
 * from src (C, h, w) through the inverse matrix m. */
static void affine_sample(const ln_transform_op *o, const double m[6], const float *src, int64_t C, int64_t h,
                          int64_t w, float *dst, int64_t oh, int64_t ow) {
  float hw = 0.5f * (float)w, hh = 0.5f * (float)h;
  float r00 = (float)m[0] / hw, r10 = (float)m[1] / hw, r20 = (float)m[2] / hw;
  float r01 = (float)m[3] / hh, r11 = (float)m[4] / hh, r21 = (float)m[5] / hh;
  for (int64_t y = 0; y < oh; y++) {
    float by = -(float)oh * 0.5f + 0.5f + (float)y;
    for (int64_t x = 0; x < ow; x++) {
      float bx = -(float)ow * 0.5f + 0.5f + (float)x;
      grid_px(o, src, C, h, w, dst, oh * ow, y * ow + x, bx * r00 + by * r10 + r20, bx * r01 + by * r11 + r21);
    }
  }
}

int ln_perspective_coeffs(const double *sp, const double *ep, double *coeffs) {
  if (!sp || !ep || !coeffs) return ln_error("perspective_coeffs: NULL points");
  double A[8][9];   /* rows of torchvision's a_matrix | b (start points) */
  for (int i = 0; i < 4; i++) {
    double x = ep[2 * i], y = ep[2 * i + 1], u = sp[2 * i], v = sp[2 * i + 1];
    double r0[9] = {x, y, 1, 0, 0, 0, -u * x, -u * y, u}, r1[9] = {0, 0, 0, x, y, 1, -v * x, -v * y, v};
    memcpy(A[2 * i], r0, sizeof r0); memcpy(A[2 * i + 1], r1, sizeof r1);
  }
  for (int c = 0; c < 8; c++) {   /* Gaussian elimination, partial pivoting */
    int piv = c;
    for (int r = c + 1; r < 8; r++) if (fabs(A[r][c]) > fabs(A[piv][c])) piv = r;
    if (!(fabs(A[piv][c]) > 1e-12)) return ln_error("perspective_coeffs: the points are degenerate (three in a line?)");
    if (piv != c) for (int q = 0; q < 9; q++) { double t = A[c][q]; A[c][q] = A[piv][q]; A[piv][q] = t; }
    for (int r = c + 1; r < 8; r++) {
      double f = A[r][c] / A[c][c];
      for (int q = c; q < 9; q++) A[r][q] -= f * A[c][q];
    }
  }
  for (int c = 7; c >= 0; c--) {
    double v = A[c][8];
    for (int q = c + 1; q < 8; q++) v -= A[c][q] * coeffs[q];
    coeffs[c] = v / A[c][c];
  }
  for (int c = 0; c < 8; c++)
    if (!isfinite(coeffs[c])) return ln_error("perspective_coeffs: the points are degenerate");
  return 0;
}

/* RandomPerspective.get_params's end points (x, y each) from r (8 words) */
static void perspective_points(double d, int64_t h, int64_t w, const uint32_t *r, double *ep) {
  int64_t dw = (int64_t)(d * (double)(w / 2)), dh = (int64_t)(d * (double)(h / 2));
  int64_t lo[8] = {0, 0, w - dw - 1, 0, w - dw - 1, h - dh - 1, 0, h - dh - 1};
  int64_t n[8] = {dw + 1, dh + 1, dw + 1, dh + 1, dw + 1, dh + 1, dw + 1, dh + 1};
  for (int q = 0; q < 8; q++) ep[q] = (double)(lo[q] + (int64_t)(r[q] % (uint64_t)n[q]));
}

/* torchvision's _perspective_grid (float32) + grid_px, same size out */
static void perspective_sample(const ln_transform_op *o, const double cf[8], const float *src, int64_t C, int64_t h,
                               int64_t w, float *dst) {
  float hw = (float)(0.5 * (double)w), hh = (float)(0.5 * (double)h);
  float t0 = (float)cf[0] / hw, t1 = (float)cf[1] / hw, t2 = (float)cf[2] / hw;
  float t3 = (float)cf[3] / hh, t4 = (float)cf[4] / hh, t5 = (float)cf[5] / hh;
  float g6 = (float)cf[6], g7 = (float)cf[7];
  for (int64_t y = 0; y < h; y++) {
    float by = (float)y + 0.5f;
    for (int64_t x = 0; x < w; x++) {
      float bx = (float)x + 0.5f, den = bx * g6 + by * g7 + 1.0f;
      grid_px(o, src, C, h, w, dst, h * w, y * w + x, (bx * t0 + by * t1 + t2) / den - 1.0f,
              (bx * t3 + by * t4 + t5) / den - 1.0f);
    }
  }
}

/* torchvision's _get_gaussian_kernel1d in float32: exp(-x^2/(2 sigma^2)) at
 * x = -(k-1)/2 .. (k-1)/2, normalised to sum 1. */
static void gauss1d(float *kern, int k, double sigma) {
  float sum = 0, s = (float)sigma;
  for (int q = 0; q < k; q++) {
    float x = (float)q - (float)(k - 1) * 0.5f, t = x / s;
    kern[q] = expf(-0.5f * (t * t));
    sum += kern[q];
  }
  for (int q = 0; q < k; q++) kern[q] /= sum;
}
static int64_t reflect_at(int64_t i, int64_t n) { return i < 0 ? -i : i >= n ? 2 * (n - 1) - i : i; }

/* separable blur with reflect padding: cur -> tmp along x, back along y */
static void blur(float *cur, float *tmp, int64_t C, int64_t h, int64_t w, const float *kx, int nkx, const float *ky,
                 int nky) {
  int64_t rx = nkx / 2, ry = nky / 2;
  for (int64_t c = 0; c < C; c++)
    for (int64_t y = 0; y < h; y++) {
      const float *s = cur + (c * h + y) * w;
      float *d = tmp + (c * h + y) * w;
      for (int64_t x = 0; x < w; x++) {
        float v = 0;
        if (x >= rx && x + rx < w) for (int q = 0; q < nkx; q++) v += kx[q] * s[x - rx + q];
        else for (int q = 0; q < nkx; q++) v += kx[q] * s[reflect_at(x - rx + q, w)];
        d[x] = v;
      }
    }
  for (int64_t c = 0; c < C; c++) {
    const float *s = tmp + c * h * w;
    float *d = cur + c * h * w;
    for (int64_t y = 0; y < h; y++) {
      for (int64_t x = 0; x < w; x++) d[y * w + x] = 0;
      for (int q = 0; q < nky; q++) {
        const float *sr = s + reflect_at(y - ry + q, h) * w;
        for (int64_t x = 0; x < w; x++) d[y * w + x] += ky[q] * sr[x];
      }
    }
  }
}

/* ElasticTransform.get_params into dxy (2, h, w: dx then dy) for op k of
 * the sample keyed (seed, epoch, key): uniform [-1, 1) noise (splitmix64
 * seeded by the op's Philox words), blurred unless blur_it is 0 (kernel
 * int(8 sigma + 1) made odd, sigmas a[2] along x, a[3] along y) and scaled
 * by a[0] / h, a[1] / w; tmp: h * w floats, kern: 2 * the larger kernel. */
static void elastic_field(const ln_transform_op *o, int k, int64_t h, int64_t w, uint64_t seed, uint64_t epoch,
                          uint64_t key, float *dxy, float *tmp, float *kern, int blur_it) {
  uint32_t r[4];
  op_rng(seed, epoch, key, k, 0, r);
  uint64_t st = ((uint64_t)r[0] << 32 | r[1]) ^ ((uint64_t)r[2] << 32 | r[3]) * 0xD1B54A32D192ED03ull;
  int64_t n = h * w;
  for (int64_t q = 0; q < 2 * n; q++) {
    uint64_t z = (st += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    dxy[q] = (float)(z >> 40) * 0x1p-24f * 2.0f - 1.0f;   /* (torch.rand's 24-bit floats) */
  }
  if (!blur_it) return;
  for (int d = 0; d < 2; d++) {
    float *f = dxy + d * n;
    if (o->a[2] > 0) {
      int kk = (int)elastic_ksize(o->a[2 + d]);
      gauss1d(kern, kk, o->a[2]);
      gauss1d(kern + kk, kk, o->a[3]);
      blur(f, tmp, 1, h, w, kern, kk, kern + kk, kk);
    }
    float a = (float)o->a[d], sz = (float)(d == 0 ? h : w);
    for (int64_t q = 0; q < n; q++) f[q] = f[q] * a / sz;
  }
}

/* F.elastic_transform: identity grid (linspace((1 - s) / s, (s - 1) / s, s))
 * plus the displacement, grid_px */
static void elastic_sample(const ln_transform_op *o, const float *dxy, const float *src, int64_t C, int64_t h,
                           int64_t w, float *dst) {
  int64_t n = h * w;
  for (int64_t y = 0; y < h; y++) {
    float iy = (float)(2 * y + 1 - h) / (float)h;
    for (int64_t x = 0; x < w; x++) {
      float ix = (float)(2 * x + 1 - w) / (float)w;
      grid_px(o, src, C, h, w, dst, n, y * w + x, ix + dxy[y * w + x], iy + dxy[n + y * w + x]);
    }
  }
}

int ln_elastic_displacement(const ln_transform_op *o, int k, int64_t h, int64_t w, uint64_t seed, uint64_t epoch,
                            uint64_t key, float *disp, float *noise) {
  const char *fn = "elastic_displacement";
  if (!o || o->kind != LN_OP_ELASTIC || k < 0 || k >= LN_TF_MAX_OPS || !disp)
    return ln_error("%s: not an ELASTIC op (or op index %d out of range)", fn, k);
  int64_t kk = o->a[2] > 0 ? LN_MAX(elastic_ksize(o->a[2]), elastic_ksize(o->a[3])) : 1;
  if (h < 1 || w < 1 || h > INT32_MAX || w > INT32_MAX || (o->a[2] > 0 && (kk / 2 >= h || kk / 2 >= w)))
    return ln_error("%s: a %lldx%lld image (blur kernel %lld)", fn, (long long)h, (long long)w, (long long)kk);
  float *buf = malloc(sizeof(float) * (size_t)(3 * h * w + 2 * kk));
  if (!buf) return ln_error("%s: out of memory", fn);
  int64_t n = h * w;
  if (noise) {
    elastic_field(o, k, h, w, seed, epoch, key, buf, buf + 2 * n, buf + 3 * n, 0);
    memcpy(noise, buf, sizeof(float) * (size_t)(2 * n));
  }
  elastic_field(o, k, h, w, seed, epoch, key, buf, buf + 2 * n, buf + 3 * n, 1);
  for (int64_t q = 0; q < n; q++) { disp[2 * q] = buf[q]; disp[2 * q + 1] = buf[n + q]; }
  free(buf);
  return 0;
}

/* torchvision's pad modes: the source index of padded index i (-1: fill) */
static int64_t pad_at(int64_t i, int64_t n, int mode) {
  if (i >= 0 && i < n) return i;
  switch (mode) {
  case 1: return i < 0 ? 0 : n - 1;
  case 2: return i < 0 ? -i : 2 * (n - 1) - i;
  case 3: return i < 0 ? -i - 1 : 2 * n - 1 - i;
  default: return -1;
  }
}

/* torchvision's _apply_op(op, magnitude) on the float image *cur (C, h, w):
 * geometric ops sample into *nxt and swap the two. Posterize, Solarize and
 * Equalize see the uint8 pixels (as torchvision's policies on uint8 images). */
static void apply_aug(const ln_transform_op *o, int op, double mag, float **cur, float **nxt, int64_t C, int64_t h,
                      int64_t w) {
  int64_t n = h * w;
  if (op >= LN_AUG_SHEAR_X && op <= LN_AUG_ROTATE) {
    ln_transform_op t;
    memset(&t, 0, sizeof t);
    t.kind = LN_OP_AFFINE; t.mode = 1; t.interp = o->interp; t.a[4] = 1;
    t.flags = o->flags & LN_TF_FILL; t.nv = o->nv;
    memcpy(t.v, o->v, sizeof t.v);
    if (op == LN_AUG_SHEAR_X || op == LN_AUG_SHEAR_Y) {   /* sheared about the top-left pixel */
      t.a[op == LN_AUG_SHEAR_X ? 6 : 8] = atan(mag) * 57.29577951308232;   /* (math.degrees) */
      t.flags |= LN_TF_CENTER;
    } else if (op == LN_AUG_ROTATE) {
      t.a[0] = -mag;   /* (rotate's matrix turns by -angle) */
    } else {
      t.a[op == LN_AUG_TRANSLATE_X ? 2 : 3] = trunc(mag);   /* int(magnitude) */
    }
    double m[6];
    affine_params(&t, NULL, h, w, m);
    affine_sample(&t, m, *cur, C, h, w, *nxt, h, w);
    float *s = *cur; *cur = *nxt; *nxt = s;
    return;
  }
  switch (op) {
  case LN_AUG_BRIGHTNESS: jitter(*cur, C, n, 0, (float)(1.0 + mag)); break;
  case LN_AUG_COLOR: jitter(*cur, C, n, 2, (float)(1.0 + mag)); break;
  case LN_AUG_CONTRAST: jitter(*cur, C, n, 1, (float)(1.0 + mag)); break;
  case LN_AUG_SHARPNESS:
    if (ln_aug_sharpness(*cur, *nxt, C, h, w, (float)(1.0 + mag))) { float *s = *cur; *cur = *nxt; *nxt = s; }
    break;
  case LN_AUG_POSTERIZE: ln_aug_posterize(*cur, C * n, (int)mag); break;
  case LN_AUG_SOLARIZE: ln_aug_solarize(*cur, C * n, mag, 1); break;
  case LN_AUG_AUTOCONTRAST: ln_aug_autocontrast(*cur, C, n); break;
  case LN_AUG_EQUALIZE: ln_aug_equalize(*cur, C, n); break;
  case LN_AUG_INVERT: ln_aug_invert(*cur, C * n); break;
  default: break;   /* Identity */
  }
}

/* A sample on its way through tf->ops: the image in cur, scratch in nxt. */
typedef struct {
  const ln_gather_plan *p;
  uint64_t key, seed, epoch;
  float *scratch, *cur, *nxt;
} op_run;
static void run_op(op_run *s, int k);

/* ops k..end-1 in order, GROUPs drawing which of their items run */
static void run_seq(op_run *s, int k, int end) {
  const ln_transform *tf = &s->p->tf;
  while (k < end) {
    const ln_transform_op *o = &tf->ops[k];
    int e = node_end(tf, k);
    if (o->kind != LN_OP_GROUP) { run_op(s, k); k = e; continue; }
    int items[LN_TF_MAX_OPS + 1], n = 0;
    for (int q = k + 1; q < e; q = node_end(tf, q)) items[n++] = q;
    items[n] = e;
    uint32_t r[12];
    for (int b = 0; b < 3; b++) op_rng(s->seed, s->epoch, s->key, k, b, r + 4 * b);
    if (o->mode == 3 || (o->mode == 0 && u01(r[0]) < o->p)) {
      run_seq(s, k + 1, e);
    } else if (o->mode == 1) {   /* random.choices: the first cumulative weight past u * total */
      double total = 0, c = 0;
      for (int t = 0; t < n; t++) total += o->a[t];
      double u = u01(r[0]) * total;
      int pick = n - 1;
      for (int t = 0; t < n; t++) { c += o->a[t]; if (u < c) { pick = t; break; } }
      while (o->a[pick] == 0 && pick > 0) pick--;   /* (rounding past the sum: a positive one) */
      run_seq(s, items[pick], items[pick + 1]);
    } else if (o->mode == 2) {   /* random.shuffle's Fisher-Yates */
      int order[LN_TF_MAX_OPS];
      for (int t = 0; t < n; t++) order[t] = t;
      for (int t = n - 1; t > 0; t--) {
        int j = (int)(r[n - 1 - t] % (uint32_t)(t + 1)), sw = order[t];
        order[t] = order[j]; order[j] = sw;
      }
      for (int t = 0; t < n; t++) run_seq(s, items[order[t]], items[order[t] + 1]);
    }
    k = e;
  }
}

/* One sample through tf->ops: (C,H,W) -> (C,OH,OW) float32, on scratch (two
 * buffers of p->scratch / 2 floats). */
static void image_ops(const ln_gather_plan *p, float *out, int64_t row, uint64_t key, uint64_t seed, uint64_t epoch,
                      float *scratch) {
  const ln_transform *tf = &p->tf;
  int64_t C = p->C, H = p->H, W = p->W, half = p->half;
  float *cur = scratch, *nxt = scratch + half;
  int64_t n = H * W, base = row * C * n;
  if (p->xdtype == LN_UINT8) {
    const uint8_t *s = (const uint8_t *)p->x + base;
    for (int64_t q = 0; q < C * n; q++) cur[q] = (float)s[q] * tf->scale;
  } else {
    const float *s = (const float *)p->x + base;
    for (int64_t q = 0; q < C * n; q++) cur[q] = s[q] * tf->scale;
  }
  op_run st = {p, key, seed, epoch, scratch, cur, nxt};
  run_seq(&st, 0, tf->nops);
  /* (an empty image has no scratch: st.cur is NULL, memcpy's source must not be) */
  if (p->OC * p->OH * p->OW > 0) memcpy(out, st.cur, sizeof(float) * (size_t)(p->OC * p->OH * p->OW));
}

/* Op k (not a GROUP) on s->cur. */
static void run_op(op_run *s, int k) {
  const ln_gather_plan *p = s->p;
  const ln_transform *tf = &p->tf;
  uint64_t key = s->key, seed = s->seed, epoch = s->epoch;
  float *scratch = s->scratch, *cur = s->cur, *nxt = s->nxt;
  int64_t half = p->half, C = p->op_c[k];
  {
    const ln_transform_op *o = &tf->ops[k];
    int64_t h = p->op_h[k], w = p->op_w[k];
    uint32_t r[4] = {0, 0, 0, 0};
    /* the crop and the horizontal flip draw as the fixed path does: adding an
       op to a Compose leaves their choices as they were */
    if (o->kind == LN_OP_CROP || o->kind == LN_OP_HFLIP) ln_data_philox(seed, epoch, key, LN_RNG_TRANSFORM, r);
    else if (o->kind != LN_OP_NORMALIZE && o->kind != LN_OP_RESIZE) op_rng(seed, epoch, key, k, 0, r);
    int swap = 0;
    int64_t oh = h, ow = w;
    switch (o->kind) {
    case LN_OP_CROP: {   /* zero padding, as the fixed path (center: torchvision's half-to-even offset) */
      oh = o->h; ow = o->w;
      int64_t oy, ox;
      if (o->mode == LN_CROP_RANDOM) {
        oy = (int64_t)(r[1] % (uint32_t)(h + 2 * o->pad - oh + 1)) - o->pad;
        ox = (int64_t)(r[2] % (uint32_t)(w + 2 * o->pad - ow + 1)) - o->pad;
      } else {
        center_offsets(h, w, oh, ow, &oy, &ox);
      }
      for (int64_t c = 0; c < C; c++)
        for (int64_t y = 0; y < oh; y++)
          for (int64_t x = 0; x < ow; x++) {
            int64_t sy = oy + y, sx = ox + x;
            nxt[(c * oh + y) * ow + x] = sy < 0 || sy >= h || sx < 0 || sx >= w ? 0 : cur[(c * h + sy) * w + sx];
          }
      swap = 1;
      break;
    }
    case LN_OP_HFLIP:
      if (u01(r[0]) < o->p)
        for (int64_t y = 0; y < C * h; y++)
          for (int64_t a = 0, b = w - 1; a < b; a++, b--) {
            float t = cur[y * w + a]; cur[y * w + a] = cur[y * w + b]; cur[y * w + b] = t;
          }
      break;
    case LN_OP_VFLIP:
      if (u01(r[0]) < o->p)
        for (int64_t c = 0; c < C; c++)
          for (int64_t a = 0, b = h - 1; a < b; a++, b--)
            for (int64_t x = 0; x < w; x++) {
              float *pa = cur + (c * h + a) * w + x, *pb = cur + (c * h + b) * w + x, t = *pa;
              *pa = *pb; *pb = t;
            }
      break;
    case LN_OP_NORMALIZE:
      for (int64_t c = 0; c < C; c++) {
        int ci = tf->nchannels > 1 ? (int)c : 0;
        float sc = 1 / tf->std[ci], sh = -tf->mean[ci] / tf->std[ci];   /* as the fixed path */
        for (int64_t q = c * h * w; q < (c + 1) * h * w; q++) cur[q] = cur[q] * sc + sh;
      }
      break;
    case LN_OP_RESIZE:
      resize_shape(h, w, o, &oh, &ow);
      resize_box(cur, C, h, w, 0, 0, h, w, nxt, oh, ow);
      swap = 1;
      break;
    case LN_OP_RESIZED_CROP: {
      int64_t bi = o->i, bj = o->j, bh = o->bh, bw = o->bw;
      if (o->mode == 0 && !box_search(o, 0, h, w, seed, epoch, key, k, &bi, &bj, &bh, &bw)) {
        double in_ratio = (double)w / (double)h;   /* torchvision's fallback: the central crop */
        if (in_ratio < o->a[2]) { bw = w; bh = (int64_t)rint((double)bw / o->a[2]); }
        else if (in_ratio > o->a[3]) { bh = h; bw = (int64_t)rint((double)bh * o->a[3]); }
        else { bw = w; bh = h; }
        bi = (h - bh) / 2; bj = (w - bw) / 2;
      }
      oh = o->h; ow = o->w;
      resize_box(cur, C, h, w, bi, bj, bh, bw, nxt, oh, ow);
      swap = 1;
      break;
    }
    case LN_OP_JITTER: {
      static const int perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
      int hueon = (o->flags & LN_TF_HUE) != 0, order[4] = {0, 1, 2, 3};
      if (o->mode == 0 && !hueon) memcpy(order, perms[r[3] % 6], sizeof(int) * 3);   /* (as before hue) */
      else if (o->mode == 0) {   /* one of the 24 orders of the four */
        uint32_t u = r[3];
        for (int t = 3; t > 0; t--) { int q = (int)(u % (uint32_t)(t + 1)); u /= (uint32_t)(t + 1);
          int sw = order[t]; order[t] = order[q]; order[q] = sw; }
      }
      for (int t = 0; t < 3 + hueon; t++) {
        int f = order[t];
        if (f == 3) {
          uint32_t r1[4];
          op_rng(seed, epoch, key, k, 1, r1);
          double lo = o->a[6], hi = o->a[7];
          if (C == 3) hue(cur, h * w, (float)(o->mode == 1 ? lo : lo + u01(r1[0]) * (hi - lo)));
          continue;
        }
        double lo = o->a[2 * f], hi = o->a[2 * f + 1];
        if (lo < 0) continue;
        float fac = (float)(o->mode == 1 ? lo : lo + u01(r[f]) * (hi - lo));
        jitter(cur, C, h * w, f, fac);
      }
      break;
    }
    case LN_OP_GRAY:
      if (C == 3 && u01(r[0]) < o->p) {
        int64_t n = h * w;
        for (int64_t q = 0; q < n; q++) {
          float g = gray(cur, n, q);
          cur[q] = g;
          if (o->mode == 0) cur[n + q] = cur[2 * n + q] = g;
        }
      }
      if (o->mode == 1) C = 1;
      break;
    case LN_OP_AFFINE: {
      double m[6];
      uint32_t rr[8];
      memcpy(rr, r, sizeof r);
      if (o->mode == 0) op_rng(seed, epoch, key, k, 1, rr + 4);
      affine_params(o, o->mode == 0 ? rr : NULL, h, w, m);
      oh = p->out_h[k]; ow = p->out_w[k];   /* (expand: the planned size) */
      affine_sample(o, m, cur, C, h, w, nxt, oh, ow);
      swap = 1;
      break;
    }
    case LN_OP_BLUR: {
      float *kx = scratch + 2 * half, *ky = kx + o->w;
      double sx = o->a[0], sy = o->a[1];
      if (o->mode == 0) sx = sy = o->a[0] + u01(r[0]) * (o->a[1] - o->a[0]);
      gauss1d(kx, o->w, sx);
      gauss1d(ky, o->h, sy);
      blur(cur, nxt, C, h, w, kx, o->w, ky, o->h);
      break;
    }
    case LN_OP_PAD: {
      oh = h + o->j + o->bh; ow = w + o->i + o->bw;
      for (int64_t c = 0; c < C; c++)
        for (int64_t y = 0; y < oh; y++) {
          int64_t sy = pad_at(y - o->j, h, o->mode);
          float *d = nxt + (c * oh + y) * ow;
          for (int64_t x = 0; x < ow; x++) {
            int64_t sx = pad_at(x - o->i, w, o->mode);
            d[x] = sy < 0 || sx < 0 ? o->v[0] : cur[(c * h + sy) * w + sx];
          }
        }
      swap = 1;
      break;
    }
    case LN_OP_POSTERIZE: case LN_OP_SOLARIZE: case LN_OP_AUTOCONTRAST: case LN_OP_EQUALIZE:
    case LN_OP_SHARPNESS: case LN_OP_INVERT:
      if (!(u01(r[0]) < o->p)) break;
      if (o->kind == LN_OP_POSTERIZE) ln_aug_posterize(cur, C * h * w, o->i);
      else if (o->kind == LN_OP_SOLARIZE) ln_aug_solarize(cur, C * h * w, o->a[0], o->mode);
      else if (o->kind == LN_OP_AUTOCONTRAST) ln_aug_autocontrast(cur, C, h * w);
      else if (o->kind == LN_OP_EQUALIZE) ln_aug_equalize(cur, C, h * w);
      else if (o->kind == LN_OP_INVERT) ln_aug_invert(cur, C * h * w);
      else swap = ln_aug_sharpness(cur, nxt, C, h, w, (float)o->a[0]);
      break;
    case LN_OP_AUTOAUG: {
      int32_t ops[LN_AUG_MAX_NUM_OPS];
      double mags[LN_AUG_MAX_NUM_OPS];
      int cnt = ln_autoaug_choices(o, k, h, w, seed, epoch, key, ops, mags, LN_AUG_MAX_NUM_OPS);
      for (int t = 0; t < cnt; t++) apply_aug(o, ops[t], mags[t], &cur, &nxt, C, h, w);
      break;
    }
    case LN_OP_PERSPECTIVE: {
      double cf[8];
      if (o->mode == 1) memcpy(cf, o->a, sizeof cf);
      else {
        if (!(u01(r[0]) < o->p)) break;
        uint32_t rr[8];
        double sp[8] = {0, 0, (double)(w - 1), 0, (double)(w - 1), (double)(h - 1), 0, (double)(h - 1)}, ep[8];
        op_rng(seed, epoch, key, k, 1, rr);
        op_rng(seed, epoch, key, k, 2, rr + 4);
        perspective_points(o->a[0], h, w, rr, ep);
        if (ln_perspective_coeffs(sp, ep, cf) != 0) break;   /* (corners within the image: never degenerate) */
      }
      perspective_sample(o, cf, cur, C, h, w, nxt);
      swap = 1;
      break;
    }
    case LN_OP_ELASTIC: {
      float *dxy = scratch + 2 * half, *tmp = dxy + 2 * h * w, *kern = tmp + h * w;
      elastic_field(o, k, h, w, seed, epoch, key, dxy, tmp, kern, 1);
      elastic_sample(o, dxy, cur, C, h, w, nxt);
      swap = 1;
      break;
    }
    case LN_OP_ERASE: {
      int64_t bi = o->i, bj = o->j, bh = o->bh, bw = o->bw;
      if (o->mode == 0 && !(u01(r[0]) < o->p && box_search(o, 1, h, w, seed, epoch, key, k, &bi, &bj, &bh, &bw)))
        break;
      for (int64_t c = 0; c < C; c++) {
        float v = o->v[o->nv > 1 ? c : 0];
        for (int64_t y = bi; y < bi + bh; y++)
          for (int64_t x = bj; x < bj + bw; x++) cur[(c * h + y) * w + x] = v;
      }
      break;
    }
    }
    if (swap) { float *t = cur; cur = nxt; nxt = t; }
  }
  s->cur = cur; s->nxt = nxt;
}

typedef struct {
  const ln_gather_plan *p; char *out, *out_y; const int64_t *idx, *keys; uint64_t seed, epoch;
  float *scratch;   /* given (one thread), or NULL: each range allocates */
  atomic_int failed;
} gather_ctx;

static void gather_range(void *v, int64_t begin, int64_t end) {
  gather_ctx *g = v;
  const ln_gather_plan *p = g->p;
  float *scratch = g->scratch;
  if (p->scratch > 0 && !scratch && begin < end) {
    scratch = malloc(sizeof(float) * (size_t)p->scratch);
    if (!scratch) { atomic_store(&g->failed, 1); return; }
  }
  for (int64_t k = begin; k < end; k++) {
    int64_t row = g->idx[k];
    if (p->image) {
      float *o = (float *)g->out + k * p->OC * p->OH * p->OW;
      uint64_t key = (uint64_t)(g->keys ? g->keys[k] : row);
      if (p->tf.nops > 0) image_ops(p, o, row, key, g->seed, g->epoch, scratch);
      else image_sample(p, o, row, key, g->seed, g->epoch);
    } else {
      if (p->xrow) memcpy(g->out + k * p->xrow, p->x + row * p->xrow, (size_t)p->xrow);   /* (an empty x may have no data) */
    }
    if (p->y && g->out_y && p->yrow) memcpy(g->out_y + k * p->yrow, p->y + row * p->yrow, (size_t)p->yrow);
  }
  if (scratch != g->scratch) free(scratch);
}

int ln_gather_run(const ln_gather_plan *p, char *out, char *out_y, const int64_t *idx,
                  const int64_t *keys, int64_t b, uint64_t seed, uint64_t epoch, int threaded,
                  float *scratch) {
  gather_ctx g = {p, out, out_y, idx, keys, seed, epoch, scratch, 0};
  /* threads only pay off for large batches: at least ~1 MB of output each;
     a given scratch is one thread's */
  int64_t per_row = p->image ? p->OC * p->OH * p->OW * 4 : p->xrow;
  int64_t grain = LN_MAX(1, ((int64_t)1 << 20) / LN_MAX(per_row, 1));
  if (threaded && !scratch && b > grain) ln_host_parallel_for(b, grain, gather_range, &g);
  else gather_range(&g, 0, b);
  if (atomic_load(&g.failed))
    return ln_error("batch_gather: out of memory for the transforms' buffers (%lld floats)", (long long)p->scratch);
  return 0;
}

int ln_batch_shape(const ln_tensor *x, const ln_transform *tf, int64_t b, int64_t *shape, int *dtype) {
  ln_gather_plan p;
  int ndim = 0, dt = 0;
  int64_t s[LN_MAX_DIMS];
  if (ln_gather_plan_make("batch_shape", &p, x, NULL, tf, b, &ndim, s, &dt, NULL, NULL) != 0) return -1;
  if (shape) memcpy(shape, s, sizeof(int64_t) * (size_t)ndim);
  if (dtype) *dtype = dt;
  return ndim;
}

static int check_out(const char *fn, const ln_tensor *out, const char *what, int ndim, const int64_t *shape,
                     int dtype) {
  if (check_host(fn, out, what) != 0) return -1;
  int same = out->ndim == ndim && out->dtype_id == dtype;
  for (int d = 0; same && d < ndim; d++) same = out->shape[d] == shape[d];
  if (!same) {
    char a[128], b[128];
    return ln_error("%s: %s must be %s %s, got %s %s", fn, what, ln_dtype_name(dtype),
                    ln_shape_str(a, sizeof a, ndim, shape), ln_dtype_name(out->dtype_id),
                    ln_shape_str(b, sizeof b, out->ndim, out->shape));
  }
  return 0;
}

int ln_batch_gather(ln_tensor *out, ln_tensor *out_y, const ln_tensor *x, const ln_tensor *y,
                    const int64_t *idx, const int64_t *keys, int64_t b, const ln_transform *tf,
                    uint64_t seed, uint64_t epoch) {
  const char *fn = "batch_gather";
  ln_gather_plan p;
  int ndim, dt, yndim;
  int64_t shape[LN_MAX_DIMS], yshape[LN_MAX_DIMS];
  if (ln_gather_plan_make(fn, &p, x, y, tf, b, &ndim, shape, &dt, &yndim, yshape) != 0) return -1;
  if (check_out(fn, out, "output", ndim, shape, dt) != 0) return -1;
  if (y && out_y && check_out(fn, out_y, "target output", yndim, yshape, y->dtype_id) != 0) return -1;
  if (b > 0 && !idx) return ln_error("%s: indices are NULL", fn);
  for (int64_t k = 0; k < b; k++)
    if (idx[k] < 0 || idx[k] >= x->shape[0])
      return ln_error("%s: index %lld out of range for %lld samples", fn, (long long)idx[k],
                      (long long)x->shape[0]);
  /* the inputs may still be written by a queued kernel; the outputs are ours */
  if (ln_tensor_sync(x) != 0 || (y && ln_tensor_sync(y) != 0) || ln_tensor_sync(out) != 0 ||
      (out_y && ln_tensor_sync(out_y) != 0))
    return -1;
  return ln_gather_run(&p, ln_data_ptr(out), out_y ? ln_data_ptr(out_y) : NULL, idx, keys, b, seed, epoch, 1,
                       NULL);
}
