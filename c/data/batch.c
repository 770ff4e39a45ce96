/* batch.c -- batch assembly: gather dataset rows into a batch, turning uint8
 * images into float32 on the way (crop with zero padding, horizontal flip,
 * scale, per-channel normalisation), and seeded permutations. Every random
 * choice is Philox keyed by (seed, epoch, sample key), so a batch is the same
 * whichever thread assembles it. */
#include "data.h"
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
  p->image = 1;
  p->tf = *tf;
  p->C = x->shape[1]; p->H = x->shape[2]; p->W = x->shape[3];
  if (tf->crop != LN_CROP_NONE && tf->crop != LN_CROP_RANDOM && tf->crop != LN_CROP_CENTER)
    return ln_error("%s: unknown crop mode %d", fn, tf->crop);
  if (tf->pad < 0) return ln_error("%s: padding must be >= 0, got %d", fn, tf->pad);
  if (tf->crop == LN_CROP_NONE) {
    if (tf->pad != 0) return ln_error("%s: padding %d needs a crop", fn, tf->pad);
    p->OH = p->H; p->OW = p->W;
  } else {
    p->OH = tf->out_h; p->OW = tf->out_w;
    int64_t ph = p->H + (tf->crop == LN_CROP_RANDOM ? 2 * tf->pad : 0);
    int64_t pw = p->W + (tf->crop == LN_CROP_RANDOM ? 2 * tf->pad : 0);
    if (p->OH < 1 || p->OW < 1 || p->OH > ph || p->OW > pw)
      return ln_error("%s: crop %lldx%lld does not fit the %sinput %lldx%lld", fn, (long long)p->OH,
                      (long long)p->OW, tf->pad ? "padded " : "", (long long)ph, (long long)pw);
  }
  if (!(tf->flip_p >= 0 && tf->flip_p <= 1))
    return ln_error("%s: flip probability must be in [0, 1], got %g", fn, tf->flip_p);
  if (tf->nchannels < 0 || tf->nchannels > LN_DATA_MAX_CHANNELS)
    return ln_error("%s: %d channel entries, at most %d", fn, tf->nchannels, LN_DATA_MAX_CHANNELS);
  if (tf->normalize) {
    if (tf->nchannels != 1 && tf->nchannels != p->C)
      return ln_error("%s: normalize has %d mean/std values for %lld channels", fn, tf->nchannels,
                      (long long)p->C);
    for (int c = 0; c < tf->nchannels; c++)
      if (!(tf->std[c] != 0)) return ln_error("%s: normalize std[%d] is zero", fn, c + 1);
  }
  if (tf->nchannels > 1 && tf->nchannels != p->C)
    return ln_error("%s: %d fill values for %lld channels", fn, tf->nchannels, (long long)p->C);
  *ndim = 4;
  shape[0] = b; shape[1] = p->C; shape[2] = p->OH; shape[3] = p->OW;
  *dtype = LN_FLOAT32;
  return 0;
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
  if (tf->crop == LN_CROP_CENTER) {   /* torchvision: round((H - OH) / 2), half to even */
    oy = (int64_t)rint((H - OH) / 2.0);
    ox = (int64_t)rint((W - OW) / 2.0);
  }
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

typedef struct {
  const ln_gather_plan *p; char *out, *out_y; const int64_t *idx, *keys; uint64_t seed, epoch;
} gather_ctx;

static void gather_range(void *v, int64_t begin, int64_t end) {
  const gather_ctx *g = v;
  const ln_gather_plan *p = g->p;
  for (int64_t k = begin; k < end; k++) {
    int64_t row = g->idx[k];
    if (p->image) {
      image_sample(p, (float *)g->out + k * p->C * p->OH * p->OW, row,
                   (uint64_t)(g->keys ? g->keys[k] : row), g->seed, g->epoch);
    } else {
      memcpy(g->out + k * p->xrow, p->x + row * p->xrow, (size_t)p->xrow);
    }
    if (p->y && g->out_y) memcpy(g->out_y + k * p->yrow, p->y + row * p->yrow, (size_t)p->yrow);
  }
}

void ln_gather_run(const ln_gather_plan *p, char *out, char *out_y, const int64_t *idx,
                   const int64_t *keys, int64_t b, uint64_t seed, uint64_t epoch, int threaded) {
  gather_ctx g = {p, out, out_y, idx, keys, seed, epoch};
  /* threads only pay off for large batches: at least ~1 MB of output each */
  int64_t per_row = p->image ? p->C * p->OH * p->OW * 4 : p->xrow;
  int64_t grain = LN_MAX(1, ((int64_t)1 << 20) / LN_MAX(per_row, 1));
  if (threaded && b > grain) ln_host_parallel_for(b, grain, gather_range, &g);
  else gather_range(&g, 0, b);
}

int ln_batch_shape(const ln_tensor *x, const ln_transform *tf, int64_t b, int64_t *shape, int *dtype) {
  ln_gather_plan p;
  int ndim, dt;
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
  ln_gather_run(&p, ln_data_ptr(out), out_y ? ln_data_ptr(out_y) : NULL, idx, keys, b, seed, epoch, 1);
  return 0;
}
