/* random.c -- Philox 4x32-10 fills (the stream is c/core/philox.h's). The
 * work is split by counters, and an element's value depends only on its
 * counter, so any number of threads gives the same bits. Blocks of BLK
 * counters are generated lane by lane into arrays (gcc vectorises the
 * 32x32->64 multiplies across lanes), then one loop per (dist, dtype) maps
 * the words to values. Built with -ffp-contract=off (Makefile): the AVX-512,
 * AVX2 and baseline clones must round alike. */
#include "cpu.h"
#include "../core/philox.h"
#include "../core/simd.h"
#include <math.h>

#define BLK 64   /* counters per block: 256 words, in L1 */

typedef struct { const ln_random_args *a; int64_t n; int es; } rnd_ctx;

/* words of counters ctr .. ctr + BLK - 1, interleaved: w[4c + j] */
static inline __attribute__((always_inline)) void philox_block(uint64_t ctr, uint64_t key, uint32_t *w) {
  for (int c = 0; c < BLK; c++) {
    uint32_t r[4];
    ln_philox(ctr + (uint64_t)c, key, r);
    w[4 * c] = r[0]; w[4 * c + 1] = r[1]; w[4 * c + 2] = r[2]; w[4 * c + 3] = r[3];
  }
}

/* v[0 .. cnt) into elements e0 .. e0 + cnt of the output */
static inline __attribute__((always_inline)) void store_f(const ln_kview *o, int64_t e0, const float *v, int cnt) {
  switch (o->dtype) {
    case LN_FLOAT32: memcpy((float *)o->data + e0, v, (size_t)cnt * 4); break;
    case LN_FLOAT64: for (int i = 0; i < cnt; i++) ((double *)o->data)[e0 + i] = v[i]; break;
    case LN_BFLOAT16: for (int i = 0; i < cnt; i++) ((uint16_t *)o->data)[e0 + i] = ln_float_to_bf16(v[i]); break;
    case LN_FLOAT16: for (int i = 0; i < cnt; i++) ((uint16_t *)o->data)[e0 + i] = ln_float_to_half(v[i]); break;
    case LN_UINT8: case LN_BOOL: for (int i = 0; i < cnt; i++) ((uint8_t *)o->data)[e0 + i] = (uint8_t)v[i]; break;
    case LN_INT32: for (int i = 0; i < cnt; i++) ((int32_t *)o->data)[e0 + i] = (int32_t)v[i]; break;
    case LN_INT64: for (int i = 0; i < cnt; i++) ((int64_t *)o->data)[e0 + i] = (int64_t)v[i]; break;
    default: for (int i = 0; i < cnt; i++) ln_store_from_double(o->data + (e0 + i) * ln_dtype_size(o->dtype), o->dtype, v[i]);
  }
}

/* k = 4: uniform / normal into float32, float16, bfloat16; bernoulli into any dtype */
LN_SIMD static void narrow_range(void *p, int64_t gb, int64_t ge) {
  const rnd_ctx *c = p;
  const ln_random_args *a = c->a;
  const ln_rng_params *P = &a->prm;
  uint32_t w[4 * BLK];
  float v[4 * BLK];
  for (int64_t g = gb; g < ge; g += BLK) {
    philox_block(a->offset + (uint64_t)g, a->seed, w);
    int64_t e0 = 4 * g, cnt = c->n - e0;
    if (cnt > 4 * BLK) cnt = 4 * BLK;
    if (cnt > 4 * (ge - g)) cnt = 4 * (ge - g);
    if (a->dist == LN_RNG_UNIFORM) {
      for (int i = 0; i < 4 * BLK; i++) v[i] = ln_rng_uniformf(w[i], P);
    } else if (a->dist == LN_RNG_NORMAL) {
      for (int i = 0; i < 2 * BLK; i++) {
        float zc, zs;
        ln_rng_boxmuller(w[2 * i], w[2 * i + 1], &zc, &zs);
        v[2 * i] = LN_FADD(P->mean, LN_FMUL(P->std, zc));
        v[2 * i + 1] = LN_FADD(P->mean, LN_FMUL(P->std, zs));
      }
    } else {
      for (int i = 0; i < 4 * BLK; i++) v[i] = (uint64_t)w[i] < P->thresh ? 1.0f : 0.0f;
    }
    store_f(&a->out, e0, v, (int)cnt);
  }
}

/* k = 2: float64 uniform / normal, randint */
static void wide_range(void *p, int64_t gb, int64_t ge) {
  const rnd_ctx *c = p;
  const ln_random_args *a = c->a;
  const ln_rng_params *P = &a->prm;
  uint32_t w[4 * BLK];
  for (int64_t g = gb; g < ge; g += BLK) {
    philox_block(a->offset + (uint64_t)g, a->seed, w);
    int64_t e0 = 2 * g, cnt = c->n - e0;
    if (cnt > 2 * BLK) cnt = 2 * BLK;
    if (cnt > 2 * (ge - g)) cnt = 2 * (ge - g);
    for (int64_t i = 0; i < cnt; i++) {
      const uint32_t *x = w + 2 * i;
      char *dst = a->out.data + (e0 + i) * c->es;
      if (a->dist == LN_RNG_RANDINT) {   /* (the front end checked that [lo, hi) fits the dtype) */
        int64_t iv = (int64_t)((uint64_t)a->ilo + (((uint64_t)x[0] << 32) | x[1]) % a->irange);
        if (a->out.dtype == LN_INT64) *(int64_t *)dst = iv;
        else ln_store_from_double(dst, a->out.dtype, (double)iv);
      } else if (a->dist == LN_RNG_UNIFORM) {
        double v = LN_DADD(P->dlo, LN_DMUL(P->drange, ln_rng_u53(x[0], x[1])));
        *(double *)dst = v >= P->dhi ? P->dbelow : v;
      } else {
        const uint32_t *q = w + 4 * (i / 2);
        double u1 = LN_DADD(ln_rng_u53(q[0], q[1]), 0x1p-53), t = ln_rng_u53(q[2], q[3]);
        double r = sqrt(-2.0 * log(u1)), ang = 6.283185307179586 * t;
        *(double *)dst = LN_DADD(P->dmean, LN_DMUL(P->dstd, LN_DMUL(r, (i & 1) ? sin(ang) : cos(ang))));
      }
    }
  }
}

int ln_cpu_random(void *p) {
  ln_random_args *a = p;
  int64_t n = 1;
  for (int d = 0; d < a->out.ndim; d++) n *= a->out.shape[d];
  rnd_ctx c = {a, n, ln_dtype_size(a->out.dtype)};
  int k = a->prm.per_counter;
  ln_parallel_for((n + k - 1) / k, 1024, k == 4 ? narrow_range : wide_range, &c);
  return 0;
}
