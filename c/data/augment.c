/* augment.c -- the AutoAugment family on float images in [0, 1] (torchvision
 * 0.14's tensor path): posterize, solarize, autocontrast, equalize,
 * sharpness, invert, and the policies' choices of ops and magnitudes
 * (AutoAugment, RandAugment, TrivialAugmentWide), drawn from the op's own
 * Philox stream of (seed, epoch, sample key). batch.c applies them. */
#include "data.h"
#include <math.h>

/* the uint8 pixel torchvision's uint8-only ops see: round(255 v), clamped */
static int u8_of(float v) {
  float s = v * 255.0f;
  return !(s > 0) ? 0 : s >= 255 ? 255 : (int)lrintf(s);
}

void ln_aug_posterize(float *im, int64_t n, int bits) {
  int mask = -(1 << (8 - bits));   /* (torchvision's -int(2 ** (8 - bits))) */
  for (int64_t q = 0; q < n; q++) im[q] = (float)(u8_of(im[q]) & mask) / 255.0f;
}

void ln_aug_solarize(float *im, int64_t n, double threshold, int u8) {
  float t = (float)threshold;
  for (int64_t q = 0; q < n; q++)
    if (u8 ? u8_of(im[q]) >= threshold : im[q] >= t) im[q] = 1.0f - im[q];
}

void ln_aug_invert(float *im, int64_t n) {
  for (int64_t q = 0; q < n; q++) im[q] = 1.0f - im[q];
}

/* per channel: (v - min) * (1 / (max - min)) clamped, float32 as torchvision;
 * a flat channel (scale not finite) stays as it is */
void ln_aug_autocontrast(float *im, int64_t C, int64_t n) {
  for (int64_t c = 0; c < C; c++) {
    float *p = im + c * n, lo = INFINITY, hi = -INFINITY;
    for (int64_t q = 0; q < n; q++) { lo = fminf(lo, p[q]); hi = fmaxf(hi, p[q]); }
    float scale = 1.0f / (hi - lo);
    if (!isfinite(scale)) { lo = 0; scale = 1; }
    for (int64_t q = 0; q < n; q++) {
      float v = (p[q] - lo) * scale;
      p[q] = v < 0 ? 0 : v > 1 ? 1 : v;
    }
  }
}

/* torchvision's _scale_channel on the uint8 pixels of each channel: the
 * histogram's running sum over step = (pixels not in the last used bin) / 255
 * (floor) is the new level; step 0 leaves the channel as it is */
void ln_aug_equalize(float *im, int64_t C, int64_t n) {
  for (int64_t c = 0; c < C; c++) {
    float *p = im + c * n;
    int64_t hist[256] = {0}, lut[256], last = 0;
    for (int64_t q = 0; q < n; q++) hist[u8_of(p[q])]++;
    for (int b = 255; b >= 0; b--) if (hist[b]) { last = hist[b]; break; }
    int64_t step = (n - last) / 255;
    if (step == 0) continue;
    int64_t cum = 0;
    lut[0] = 0;
    for (int b = 0; b < 255; b++) {
      cum += hist[b];
      int64_t v = (cum + step / 2) / step;
      lut[b + 1] = v > 255 ? 255 : v;
    }
    for (int64_t q = 0; q < n; q++) p[q] = (float)lut[u8_of(p[q])] / 255.0f;
  }
}

/* torchvision's adjust_sharpness: the interior smoothed by [1 1 1; 1 5 1;
 * 1 1 1] / 13 (the border kept), blended clamp(f v + (1 - f) s). src ->
 * dst; returns 0 (nothing done) for images of side <= 2. */
int ln_aug_sharpness(const float *src, float *dst, int64_t C, int64_t h, int64_t w, float f) {
  if (h <= 2 || w <= 2) return 0;
  float k1 = 1.0f / 13.0f, k5 = 5.0f / 13.0f, g = (float)(1.0 - (double)f);
  for (int64_t c = 0; c < C; c++)
    for (int64_t y = 0; y < h; y++) {
      const float *s = src + (c * h + y) * w;
      float *d = dst + (c * h + y) * w;
      for (int64_t x = 0; x < w; x++) {
        float b = s[x];
        if (y > 0 && y < h - 1 && x > 0 && x < w - 1) {
          const float *u = s - w, *l = s + w;
          b = k1 * (u[x - 1] + u[x] + u[x + 1] + s[x - 1]) + k5 * s[x] + k1 * (s[x + 1] + l[x - 1] + l[x] + l[x + 1]);
        }
        float v = f * s[x] + g * b;
        d[x] = v < 0 ? 0 : v > 1 ? 1 : v;
      }
    }
  return 1;
}

/* torchvision's policies: (op, probability, magnitude bin or -1) pairs */
typedef struct { signed char op; float p; signed char bin; } aa_step;
enum { I_ = LN_AUG_IDENTITY, SX = LN_AUG_SHEAR_X, SY = LN_AUG_SHEAR_Y, TX = LN_AUG_TRANSLATE_X,
       TY = LN_AUG_TRANSLATE_Y, RO = LN_AUG_ROTATE, BR = LN_AUG_BRIGHTNESS, CO = LN_AUG_COLOR,
       CT = LN_AUG_CONTRAST, SH = LN_AUG_SHARPNESS, PO = LN_AUG_POSTERIZE, SO = LN_AUG_SOLARIZE,
       AC = LN_AUG_AUTOCONTRAST, EQ = LN_AUG_EQUALIZE, IN = LN_AUG_INVERT };
static const aa_step AA[3][25][2] = {
  {{{PO, .4f, 8}, {RO, .6f, 9}}, {{SO, .6f, 5}, {AC, .6f, -1}}, {{EQ, .8f, -1}, {EQ, .6f, -1}},
   {{PO, .6f, 7}, {PO, .6f, 6}}, {{EQ, .4f, -1}, {SO, .2f, 4}}, {{EQ, .4f, -1}, {RO, .8f, 8}},
   {{SO, .6f, 3}, {EQ, .6f, -1}}, {{PO, .8f, 5}, {EQ, 1.f, -1}}, {{RO, .2f, 3}, {SO, .6f, 8}},
   {{EQ, .6f, -1}, {PO, .4f, 6}}, {{RO, .8f, 8}, {CO, .4f, 0}}, {{RO, .4f, 9}, {EQ, .6f, -1}},
   {{EQ, 0.f, -1}, {EQ, .8f, -1}}, {{IN, .6f, -1}, {EQ, 1.f, -1}}, {{CO, .6f, 4}, {CT, 1.f, 8}},
   {{RO, .8f, 8}, {CO, 1.f, 2}}, {{CO, .8f, 8}, {SO, .8f, 7}}, {{SH, .4f, 7}, {IN, .6f, -1}},
   {{SX, .6f, 5}, {EQ, 1.f, -1}}, {{CO, .4f, 0}, {EQ, .6f, -1}}, {{EQ, .4f, -1}, {SO, .2f, 4}},
   {{SO, .6f, 5}, {AC, .6f, -1}}, {{IN, .6f, -1}, {EQ, 1.f, -1}}, {{CO, .6f, 4}, {CT, 1.f, 8}},
   {{EQ, .8f, -1}, {EQ, .6f, -1}}},
  {{{IN, .1f, -1}, {CT, .2f, 6}}, {{RO, .7f, 2}, {TX, .3f, 9}}, {{SH, .8f, 1}, {SH, .9f, 3}},
   {{SY, .5f, 8}, {TY, .7f, 9}}, {{AC, .5f, -1}, {EQ, .9f, -1}}, {{SY, .2f, 7}, {PO, .3f, 7}},
   {{CO, .4f, 3}, {BR, .6f, 7}}, {{SH, .3f, 9}, {BR, .7f, 9}}, {{EQ, .6f, -1}, {EQ, .5f, -1}},
   {{CT, .6f, 7}, {SH, .6f, 5}}, {{CO, .7f, 7}, {TX, .5f, 8}}, {{EQ, .3f, -1}, {AC, .4f, -1}},
   {{TY, .4f, 3}, {SH, .2f, 6}}, {{BR, .9f, 6}, {CO, .2f, 8}}, {{SO, .5f, 2}, {IN, 0.f, -1}},
   {{EQ, .2f, -1}, {AC, .6f, -1}}, {{EQ, .2f, -1}, {EQ, .6f, -1}}, {{CO, .9f, 9}, {EQ, .6f, -1}},
   {{AC, .8f, -1}, {SO, .2f, 8}}, {{BR, .1f, 3}, {CO, .7f, 0}}, {{SO, .4f, 5}, {AC, .9f, -1}},
   {{TY, .9f, 9}, {TY, .7f, 9}}, {{AC, .9f, -1}, {SO, .8f, 3}}, {{EQ, .8f, -1}, {IN, .1f, -1}},
   {{TY, .7f, 9}, {AC, .9f, -1}}},
  {{{SX, .9f, 4}, {IN, .2f, -1}}, {{SY, .9f, 8}, {IN, .7f, -1}}, {{EQ, .6f, -1}, {SO, .6f, 6}},
   {{IN, .9f, -1}, {EQ, .6f, -1}}, {{EQ, .6f, -1}, {RO, .9f, 3}}, {{SX, .9f, 4}, {AC, .8f, -1}},
   {{SY, .9f, 8}, {IN, .4f, -1}}, {{SY, .9f, 5}, {SO, .2f, 6}}, {{IN, .9f, -1}, {AC, .8f, -1}},
   {{EQ, .6f, -1}, {RO, .9f, 3}}, {{SX, .9f, 4}, {SO, .3f, 3}}, {{SY, .8f, 8}, {IN, .7f, -1}},
   {{EQ, .9f, -1}, {TY, .6f, 6}}, {{IN, .9f, -1}, {EQ, .6f, -1}}, {{CT, .3f, 3}, {RO, .8f, 4}},
   {{IN, .8f, -1}, {TY, 0.f, 2}}, {{SY, .7f, 6}, {SO, .4f, 8}}, {{IN, .6f, -1}, {RO, .8f, 4}},
   {{SY, .3f, 7}, {TX, .9f, 3}}, {{SX, .1f, 6}, {IN, .6f, -1}}, {{SO, .7f, 2}, {TY, .6f, 7}},
   {{SY, .8f, 4}, {IN, .8f, -1}}, {{SX, .7f, 9}, {TY, .8f, 3}}, {{SY, .8f, 5}, {AC, .7f, -1}},
   {{SX, .7f, 2}, {IN, .1f, -1}}}};
/* the probabilities as Python's doubles: the float table's values rounded
 * to one decimal (torch.rand draws float32; compared in double below) */
static double aa_p(float p) { return round((double)p * 10) / 10; }

/* torch.linspace in float32 as torch 1.13's AVX2 CPU kernel computes it:
 * from the start (fused multiply-add) for the first half, from the end for
 * the rest; the first whole multiples of 16 elements in vectors of 8, lane
 * j of a vector its first element + j * step (rounded twice) */
static float linspace_f(float a, float b, int steps, int i) {
  if (steps == 1) return a;
  float step = (b - a) / (float)(steps - 1);
  int half = steps / 2, vec = steps / 16 * 16, blk = i - i % 8;
  if (i >= vec) return i < half ? fmaf(step, (float)i, a) : fmaf(-step, (float)(steps - i - 1), b);
  float base = blk < half ? fmaf(step, (float)blk, a) : fmaf(-step, (float)(steps - blk - 1), b);
  volatile float lane = (float)(i % 8) * step;   /* (volatile: no fused multiply-add here) */
  return i % 8 ? base + lane : base;
}

/* the magnitude of op at bin (of bins) on an h x w image: wide 0 is the
 * space of AutoAugment and RandAugment, 1 TrivialAugmentWide's; the ops
 * without magnitudes (and Identity) have 0 */
static double magnitude(int op, int bin, int bins, int wide, int64_t h, int64_t w) {
  float big = wide ? 0.99f : 0.9f;
  switch (op) {
  case LN_AUG_SHEAR_X: case LN_AUG_SHEAR_Y: return linspace_f(0, wide ? 0.99f : 0.3f, bins, bin);
  case LN_AUG_TRANSLATE_X: return linspace_f(0, wide ? 32.0f : (float)(150.0 / 331.0 * (double)w), bins, bin);
  case LN_AUG_TRANSLATE_Y: return linspace_f(0, wide ? 32.0f : (float)(150.0 / 331.0 * (double)h), bins, bin);
  case LN_AUG_ROTATE: return linspace_f(0, wide ? 135.0f : 30.0f, bins, bin);
  case LN_AUG_BRIGHTNESS: case LN_AUG_COLOR: case LN_AUG_CONTRAST: case LN_AUG_SHARPNESS:
    return linspace_f(0, big, bins, bin);
  case LN_AUG_POSTERIZE:   /* 8 - round(arange(bins) / ((bins - 1) / 4 or 6)) */
    return 8 - (int)nearbyintf((float)bin / (float)((double)(bins - 1) / (wide ? 6.0 : 4.0)));
  case LN_AUG_SOLARIZE: return linspace_f(255.0f, 0, bins, bin);
  default: return 0;
  }
}
static int signed_op(int op) { return op >= LN_AUG_SHEAR_X && op <= LN_AUG_SHARPNESS; }

/* splitmix64 from the op's Philox words: any number of draws per sample */
static uint64_t sm64(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static double sm_unit(uint64_t *s) { return (double)(sm64(s) >> 11) * 0x1p-53; }
static int sm_below(uint64_t *s, int n) { return (int)(sm_unit(s) * n); }

int ln_autoaug_choices(const ln_transform_op *o, int k, int64_t h, int64_t w, uint64_t seed, uint64_t epoch,
                       uint64_t key, int32_t *ops, double *mags, int cap) {
  if (!o || o->kind != LN_OP_AUTOAUG || o->mode < 0 || o->mode > 3 || k < 0 || k >= LN_TF_MAX_OPS)
    return ln_error("autoaug_choices: not an AUTOAUG op (or op index %d out of range)", k);
  uint32_t r[4];
  ln_data_philox(seed, epoch, key, 0x80u | (uint32_t)k << 3, r);
  uint64_t s = ((uint64_t)r[0] << 32 | r[1]) ^ ((uint64_t)r[2] << 32 | r[3]) * 0xD1B54A32D192ED03ull;
  int n = 0;
#define PUT(op_, m_) do { if (n < cap) { ops[n] = (op_); mags[n] = (m_); } n++; } while (0)
  switch (o->mode) {
  case 0: {   /* policy_id, probs, signs as torchvision's get_params */
    if (o->i < 0 || o->i > 2) return ln_error("autoaug_choices: unknown policy %d", o->i);
    int id = sm_below(&s, 25);
    double pr[2] = {(double)(float)sm_unit(&s), (double)(float)sm_unit(&s)};
    int sg[2] = {sm_below(&s, 2), sm_below(&s, 2)};
    for (int t = 0; t < 2; t++) {
      const aa_step *a = &AA[o->i][id][t];
      if (!(pr[t] <= aa_p(a->p))) continue;
      double m = a->bin >= 0 ? magnitude(a->op, a->bin, 10, 0, h, w) : 0;
      if (signed_op(a->op) && sg[t] == 0) m = -m;
      PUT(a->op, m);
    }
    break;
  }
  case 1:   /* RandAugment: num_ops uniform picks of the 14 at one magnitude */
    for (int t = 0; t < o->i; t++) {
      int op = sm_below(&s, LN_AUG_INVERT);
      double m = magnitude(op, o->j, o->bh, 0, h, w);
      if (signed_op(op) && sm_below(&s, 2)) m = -m;
      PUT(op, m);
    }
    break;
  case 2: {   /* TrivialAugmentWide: one op, a uniform bin */
    int op = sm_below(&s, LN_AUG_INVERT), bin = sm_below(&s, o->bh);
    double m = magnitude(op, bin, o->bh, 1, h, w);
    if (signed_op(op) && sm_below(&s, 2)) m = -m;
    PUT(op, m);
    break;
  }
  default: PUT(o->j, o->a[0]);
  }
#undef PUT
  return n;
}
