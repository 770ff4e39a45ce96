/* vact_body.h -- the body of ln_vact_f32 for one vector width (included by
 * vact_avx512.c, vact_avx2.c, vact_sse.c, which define VNAME, VF (the
 * __m512 / __m256 / __m128 type), VW (its floats) and the SLEEF functions
 * VEXP, VTANH, VERF, VLOG1P, VEXPM1). GCC's vector extensions do the arithmetic;
 * the tail (< VW elements) goes through the same vector code from a padded
 * buffer, so every element is computed alike. */
#include "../include/lunet.h"
#include "vact.h"
#include <string.h>
#include <sleef.h>

typedef VF vf;
typedef int32_t vi __attribute__((vector_size(VW * 4)));   /* a comparison's lanes: -1 or 0 */

static inline vf splat(float v) { vf r; for (int i = 0; i < VW; i++) r[i] = v; return r; }
/* m ? a : b lane by lane (C has no vector ?:); the lane not taken may be inf or NaN */
static inline vf sel(vi m, vf a, vf b) { return (vf)(((vi)a & m) | ((vi)b & ~m)); }
/* the parameters as floats (torch computes elu's negcoef = alpha scale in float) */
typedef struct { float a, b, c; } prm;
static inline prm prm_of(const double *q) {
  prm p = {0, 0, 0};
  if (q) { p.a = (float)q[0]; p.b = (float)q[1]; p.c = (float)q[2]; }
  return p;
}

#define ONE splat(1.0f)
#define HALF splat(0.5f)

static inline vf v_sigmoid(vf x) { return ONE / (ONE + VEXP(-x)); }

static inline vf fwd(int op, vf x, prm p) {
  switch (op) {
    case LN_EXP: return VEXP(x);
    case LN_SIGMOID: return v_sigmoid(x);
    case LN_TANH: return VTANH(x);
    case LN_ERF: return VERF(x);
    case LN_LOG1P: return VLOG1P(x);
    case LN_EXPM1: return VEXPM1(x);
    case LN_SILU: return x / (ONE + VEXP(-x));
    case LN_GELU: return x * HALF * (ONE + VERF(x * splat((float)LN_GELU_KALPHA)));
    case LN_GELU_TANH: {
      vf inner = splat((float)LN_GELU_KBETA) * (x + splat((float)LN_GELU_KKAPPA) * x * x * x);
      return HALF * x * (ONE + VTANH(inner));
    }
    case LN_MISH: return x * VTANH(VLOG1P(VEXP(x)));
    case LN_HARDSWISH: case LN_HARDSIGMOID: {
      vf c = x + splat(3.0f);   /* (NaN stays NaN: both compares false) */
      c = sel(c < splat(0.0f), splat(0.0f), c);
      c = sel(c > splat(6.0f), splat(6.0f), c);
      return op == LN_HARDSWISH ? x * c / splat(6.0f) : c / splat(6.0f);
    }
    case LN_ELU:
      return sel(x <= splat(0.0f), (VEXP(x * splat(p.c)) - ONE) * splat(p.a * p.b), x * splat(p.b));
    case LN_SOFTPLUS: {
      vf xb = x * splat(p.a);
      return sel(xb > splat(p.b), x, VLOG1P(VEXP(xb)) / splat(p.a));
    }
  }
  return x;
}

static inline vf bwd(int op, vf x, vf g, prm p) {
  switch (op) {
    case LN_SILU_BWD: {
      vf s = v_sigmoid(x);
      return g * s * (ONE + x * (ONE - s));
    }
    case LN_GELU_BWD: {
      vf cdf = HALF * (ONE + VERF(x * splat((float)LN_GELU_KALPHA)));
      vf pdf = splat((float)LN_GELU_KPDF) * VEXP(x * x * splat(-0.5f));
      return g * (cdf + x * pdf);
    }
    case LN_GELU_TANH_BWD: {
      vf x2 = x * x;
      vf t = VTANH(splat((float)LN_GELU_KBETA) * (x + splat((float)LN_GELU_KKAPPA) * x2 * x));
      vf left = HALF * x, right = ONE + t;
      vf dleft = HALF * right;
      vf dright = left * ((ONE - t * t) * splat((float)LN_GELU_KBETA) *
                          (ONE + splat((float)(3 * LN_GELU_KKAPPA)) * x2));
      return g * (dleft + dright);
    }
    case LN_MISH_BWD: {
      vf s = v_sigmoid(x), t = VTANH(VLOG1P(VEXP(x)));
      return g * (t + x * s * (ONE - t * t));
    }
    case LN_HARDSWISH_BWD:   /* torch's scalar loop: g (x / 3 + 1/2) at -3 and 3; NaN for NaN */
      return sel(x < splat(-3.0f), splat(0.0f), sel(x > splat(3.0f), g, g * (x / splat(3.0f) + HALF)));
    case LN_HARDSIGMOID_BWD:
      return sel((x > splat(-3.0f)) & (x < splat(3.0f)), g * splat(1.0f / 6.0f), splat(0.0f));
    case LN_ELU_BWD: {
      vf ni = splat(p.c);
      return sel(x > splat(0.0f), g * splat(p.b), g * ni * splat(p.a * p.b) * VEXP(x * ni));   /* (NaN: NaN) */
    }
    case LN_SOFTPLUS_BWD: {
      vf xb = x * splat(p.a), z = VEXP(xb);
      return sel(xb > splat(p.b), g, g * z / (z + ONE));
    }
    case LN_TANH_BWD: return g * (ONE - x * x);
    case LN_SIGMOID_BWD: return g * (ONE - x) * x;
  }
  return g;
}

static inline vf load(const float *p) { vf v; memcpy(&v, p, sizeof v); return v; }
static inline void store(float *p, vf v) { memcpy(p, &v, sizeof v); }

int VNAME(int op, float *y, const float *x, const float *g, int64_t n, const double *q) {
  int64_t i = 0, tail;
  vf px, pg;
  prm p = prm_of(q);
  /* (unary and binary op numbers overlap: g tells which) */
  if (!g && (op == LN_EXP || op == LN_SIGMOID || op == LN_TANH || op == LN_ERF || op == LN_LOG1P ||
             op == LN_EXPM1 || op == LN_SILU || op == LN_GELU || op == LN_GELU_TANH || op == LN_MISH ||
             op == LN_HARDSWISH || op == LN_HARDSIGMOID || op == LN_ELU || op == LN_SOFTPLUS)) {
    for (; i + VW <= n; i += VW) store(y + i, fwd(op, load(x + i), p));
    if ((tail = n - i) > 0) {
      px = splat(0.0f);
      memcpy(&px, x + i, (size_t)tail * sizeof(float));
      px = fwd(op, px, p);
      memcpy(y + i, &px, (size_t)tail * sizeof(float));
    }
    return 1;
  }
  if (g && op >= LN_SILU_BWD && op <= LN_SIGMOID_BWD) {
    for (; i + VW <= n; i += VW) store(y + i, bwd(op, load(x + i), load(g + i), p));
    if ((tail = n - i) > 0) {
      px = splat(0.0f); pg = splat(0.0f);
      memcpy(&px, x + i, (size_t)tail * sizeof(float));
      memcpy(&pg, g + i, (size_t)tail * sizeof(float));
      px = bwd(op, px, pg, p);
      memcpy(y + i, &px, (size_t)tail * sizeof(float));
    }
    return 1;
  }
  return 0;
}
