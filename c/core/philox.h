/* philox.h -- the random stream: what element i of a draw is, as a pure
 * function of (seed, counter). The CPU kernel (c/cpu/random.c) and the CUDA
 * one (c/cuda/random.cu) both call these functions, so a seed gives the same
 * bits on either (spec/tensor_random_spec.lua checks the CPU against a
 * scalar Lua copy of this file).
 *
 * A draw of n elements reserves ceil(n / k) counters from the offset; Philox
 * 4x32-10 (Salmon et al. 2011, key = seed, counter offset + c in words 0-1)
 * gives 4 words w0..w3 per counter c.
 *  k = 4: uniform and normal into float32/float16/bfloat16, bernoulli into
 *         any dtype. Element i takes word i % 4 of counter i / 4:
 *         uniform  lo + range * ((w >> (32 - b)) * 2^-b), b = 24, 11, 8
 *                  (the dtype's precision), a result rounding to hi -> the
 *                  dtype's next number below hi;
 *         normal   pairs (w0, w1), (w2, w3) by Box-Muller: r = sqrt(-2 log u1),
 *                  u1 = ((wa >> 1) | 1) * 2^-31 in (0, 1], angle 2 pi (wb >> 8) 2^-24;
 *                  the even element mean + std * r cos, the odd one r sin;
 *         bernoulli  w < ceil(p 2^32).
 *  k = 2: float64 uniform and normal, randint. Element i takes words
 *         2h, 2h+1 (h = i % 2) of counter i / 2: uniform 53 bits; randint
 *         lo + (w_2h w_2h+1 as uint64) mod range; normal u1 from words 0-1,
 *         the angle from words 2-3, cos for even i, sin for odd i (in double
 *         with libm's log/cos/sin: the GPU's may differ in the last bit).
 * Float math is IEEE single operations in a fixed order, never contracted
 * into FMAs (random.o is built with -ffp-contract=off; CUDA uses __fmul_rn,
 * __fadd_rn), and the log and sin/cos are polynomials here, not libm's, so
 * every CPU vector width and the GPU round alike. */
#ifndef LN_PHILOX_H
#define LN_PHILOX_H
#include <stdint.h>
#include <string.h>
#include <math.h>

enum { LN_RNG_UNIFORM, LN_RNG_NORMAL, LN_RNG_RANDINT, LN_RNG_BERNOULLI };

/* per draw, computed once by the front end (c/core/rng.c) */
typedef struct {
  int per_counter;                      /* k above: 4 or 2 */
  int shift;                            /* uniform, k = 4: 32 - b */
  float scale, lo, range, hi, below;    /* uniform, k = 4 */
  float mean, std;                      /* normal, k = 4 */
  double dlo, drange, dhi, dbelow;      /* uniform, k = 2 */
  double dmean, dstd;                   /* normal, k = 2 */
  uint64_t thresh;                      /* bernoulli */
} ln_rng_params;

#ifdef __CUDACC__
#define LN_RNG_FN static __device__ __forceinline__
#define LN_FMUL(a, b) __fmul_rn(a, b)
#define LN_FADD(a, b) __fadd_rn(a, b)
#define LN_DMUL(a, b) __dmul_rn(a, b)
#define LN_DADD(a, b) __dadd_rn(a, b)
#define LN_F2U(f) __float_as_uint(f)
#define LN_U2F(u) __uint_as_float(u)
#else
#define LN_RNG_FN static inline __attribute__((always_inline))
#define LN_FMUL(a, b) ((a) * (b))
#define LN_FADD(a, b) ((a) + (b))
#define LN_DMUL(a, b) ((a) * (b))
#define LN_DADD(a, b) ((a) + (b))
static inline uint32_t ln_f2u_(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float ln_u2f_(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
#define LN_F2U(f) ln_f2u_(f)
#define LN_U2F(u) ln_u2f_(u)
#endif

LN_RNG_FN void ln_philox(uint64_t ctr, uint64_t key, uint32_t out[4]) {
  uint32_t c0 = (uint32_t)ctr, c1 = (uint32_t)(ctr >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
#ifdef __CUDACC__
#pragma unroll
#else
#pragma GCC unroll 10
#endif
  for (int r = 0; r < 10; r++) {
    uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
    uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
    c1 = (uint32_t)p1; c3 = (uint32_t)p0; c0 = n0; c2 = n2;
    k0 += 0x9E3779B9u; k1 += 0xBB67AE85u;
  }
  out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

/* k = 4 uniform: exact in [0, 1) to b bits, then scaled */
LN_RNG_FN float ln_rng_uniformf(uint32_t w, const ln_rng_params *p) {
  float u = LN_FMUL((float)(int32_t)(w >> p->shift), p->scale);
  float v = LN_FADD(p->lo, LN_FMUL(p->range, u)), hi = p->hi, below = p->below;
  return v >= hi ? below : v;
}

/* log x for x in (0, 1], a normal float: x = m 2^e, m in (sqrt(1/2), sqrt(2)],
 * log m = f - f^2/2 + f^3 P(f), f = m - 1 (Cephes logf; 1 ulp) */
LN_RNG_FN float ln_rng_logf(float x) {
  uint32_t b = LN_F2U(x);
  int32_t e = (int32_t)(b >> 23) - 127;
  float m = LN_U2F((b & 0x7fffffu) | 0x3f800000u);
  int big = m > 1.41421356f;
  m = big ? LN_FMUL(m, 0.5f) : m;
  e += big;
  float f = LN_FADD(m, -1.0f), z = LN_FMUL(f, f);
  float q = 7.0376836292e-2f;
  q = LN_FADD(LN_FMUL(q, f), -1.1514610310e-1f);
  q = LN_FADD(LN_FMUL(q, f), 1.1676998740e-1f);
  q = LN_FADD(LN_FMUL(q, f), -1.2420140846e-1f);
  q = LN_FADD(LN_FMUL(q, f), 1.4249322787e-1f);
  q = LN_FADD(LN_FMUL(q, f), -1.6668057665e-1f);
  q = LN_FADD(LN_FMUL(q, f), 2.0000714765e-1f);
  q = LN_FADD(LN_FMUL(q, f), -2.4999993993e-1f);
  q = LN_FADD(LN_FMUL(q, f), 3.3333331174e-1f);
  float fe = (float)e;
  float y = LN_FMUL(LN_FMUL(q, f), z);
  y = LN_FADD(y, LN_FMUL(fe, -2.12194440e-4f));
  y = LN_FADD(y, LN_FMUL(-0.5f, z));
  return LN_FADD(LN_FADD(f, y), LN_FMUL(fe, 0.693359375f));
}

/* Box-Muller from two words: *c = r cos(2 pi t), *s = r sin(2 pi t). The
 * angle 2 pi t = q pi/2 + s pi/2, q the nearest quadrant and |s| <= 1/2
 * (exact in integers); then minimax polynomials in s (1.5 ulp). */
LN_RNG_FN void ln_rng_boxmuller(uint32_t wa, uint32_t wb, float *zc, float *zs) {
  float u1 = LN_FMUL((float)(int32_t)((wa >> 1) | 1u), 0x1p-31f);
  float r = sqrtf(LN_FMUL(-2.0f, ln_rng_logf(u1)));
  int32_t t = (int32_t)(wb >> 8), qq = (t + (1 << 21)) >> 22;
  float s = LN_FMUL((float)(t - (qq << 22)), 0x1p-22f), x = LN_FMUL(s, s);
  float ps = 1.5819484542589635e-4f;
  ps = LN_FADD(LN_FMUL(ps, x), -4.681260325014591e-3f);
  ps = LN_FADD(LN_FMUL(ps, x), 7.969257980585098e-2f);
  ps = LN_FADD(LN_FMUL(ps, x), -6.459640860557556e-1f);
  ps = LN_FADD(LN_FMUL(ps, x), 1.5707963705062866f);
  float sn = LN_FMUL(s, ps);
  float pc = 9.037196286953986e-4f;
  pc = LN_FADD(LN_FMUL(pc, x), -2.086014114320278e-2f);
  pc = LN_FADD(LN_FMUL(pc, x), 2.5366923213005066e-1f);
  pc = LN_FADD(LN_FMUL(pc, x), -1.2337005138397217f);
  float cs = LN_FADD(LN_FMUL(pc, x), 1.0f);
  int q = qq & 3;   /* cos(q pi/2 + a), sin(q pi/2 + a) */
  float c = (q & 1) ? sn : cs, sv = (q & 1) ? cs : sn;
  c = (q == 1 || q == 2) ? -c : c;
  sv = (q >= 2) ? -sv : sv;
  *zc = LN_FMUL(r, c);
  *zs = LN_FMUL(r, sv);
}

/* k = 2: 53 bits from two words, [0, 1) */
LN_RNG_FN double ln_rng_u53(uint32_t hi, uint32_t lo) {
  return (double)(int64_t)(((uint64_t)hi << 21) | (lo >> 11)) * 0x1p-53;
}

#endif
