/* elementwise.c -- CPU kernels for unary, binary, where, cast/copy, fill.
 * Each kernel takes views broadcast to the output shape (see ops/elementwise.c
 * for the front ends); ln_iter flattens them and feeds the thread pool. */
#include "cpu.h"
#include "iter.h"
#include <math.h>
#include "../core/special.h"
#include "vact.h"
#if defined(__x86_64__)
#include <immintrin.h>
#endif

/* ---- streaming stores -------------------------------------------------------- */
/* An output of at least STREAM_MIN bytes, written contiguously, is computed
 * in chunks into an L1 buffer and sent to memory with non-temporal stores:
 * the destination lines are not read first (no read-for-ownership) and the
 * inputs are not evicted, as memcpy does for large copies. */
enum { STREAM_MIN = 16 << 20, STREAM_CHUNK = 2048 };   /* chunk: elements, <= 16 KB */

static bool stream_output(const ln_iter *it, int es) {
  return it->items && it->outer * it->inner * es >= STREAM_MIN;
}

static void stream_out(char *dst, const char *src, int64_t n) {
#if defined(__x86_64__)
  while (n > 0 && ((uintptr_t)dst & 15)) { *dst++ = *src++; n--; }
  for (; n >= 64; n -= 64, dst += 64, src += 64) {
    __m128i x0 = _mm_loadu_si128((const __m128i *)src), x1 = _mm_loadu_si128((const __m128i *)(src + 16));
    __m128i x2 = _mm_loadu_si128((const __m128i *)(src + 32)), x3 = _mm_loadu_si128((const __m128i *)(src + 48));
    _mm_stream_si128((__m128i *)dst, x0);
    _mm_stream_si128((__m128i *)(dst + 16), x1);
    _mm_stream_si128((__m128i *)(dst + 32), x2);
    _mm_stream_si128((__m128i *)(dst + 48), x3);
  }
#endif
  if (n > 0) memcpy(dst, src, (size_t)n);
}

static void stream_fence(void) {
#if defined(__x86_64__)
  _mm_sfence();
#endif
}

/* ---- binary ------------------------------------------------------------------ */

#define BIN_LOOP(T, TO, EXPR)                                                      \
  do {                                                                             \
    if (so == (int64_t)sizeof(TO) && sa == (int64_t)sizeof(T) && sb == (int64_t)sizeof(T)) { \
      TO *o = (TO *)po; const T *x = (const T *)pa, *y = (const T *)pb;            \
      for (int64_t i = 0; i < n; i++) { T a_ = x[i], b_ = y[i]; o[i] = (TO)(EXPR); } \
    } else if (so == (int64_t)sizeof(TO) && sa == (int64_t)sizeof(T) && sb == 0) {   \
      TO *o = (TO *)po; const T *x = (const T *)pa; const T b_ = *(const T *)pb;   \
      for (int64_t i = 0; i < n; i++) { T a_ = x[i]; o[i] = (TO)(EXPR); }          \
    } else if (so == (int64_t)sizeof(TO) && sa == 0 && sb == (int64_t)sizeof(T)) {   \
      TO *o = (TO *)po; const T a_ = *(const T *)pa; const T *y = (const T *)pb;   \
      for (int64_t i = 0; i < n; i++) { T b_ = y[i]; o[i] = (TO)(EXPR); }          \
    } else {                                                                       \
      for (int64_t i = 0; i < n; i++) {                                            \
        T a_ = *(const T *)(pa + i * sa), b_ = *(const T *)(pb + i * sb);          \
        *(TO *)(po + i * so) = (TO)(EXPR);                                         \
      }                                                                            \
    }                                                                              \
  } while (0)

#define FLOAT_MAX(a, b) ((a) > (b) || (a) != (a) ? (a) : (b))
#define FLOAT_MIN(a, b) ((a) < (b) || (a) != (a) ? (a) : (b))

#define BIN_COMMON(T)                                                              \
  case LN_ADD: BIN_LOOP(T, T, a_ + b_); break;                                     \
  case LN_SUB: BIN_LOOP(T, T, a_ - b_); break;                                     \
  case LN_MUL: BIN_LOOP(T, T, a_ * b_); break;                                     \
  case LN_AXPY: BIN_LOOP(T, T, a_ + (T)alpha * b_); break;                         \
  case LN_EQ: BIN_LOOP(T, uint8_t, a_ == b_); break;                               \
  case LN_NE: BIN_LOOP(T, uint8_t, a_ != b_); break;                               \
  case LN_LT: BIN_LOOP(T, uint8_t, a_ < b_); break;                                \
  case LN_LE: BIN_LOOP(T, uint8_t, a_ <= b_); break;                               \
  case LN_GT: BIN_LOOP(T, uint8_t, a_ > b_); break;                                \
  case LN_GE: BIN_LOOP(T, uint8_t, a_ >= b_); break;                               \
  case LN_LOGICAL_AND: BIN_LOOP(T, uint8_t, (a_ != 0) & (b_ != 0)); break;         \
  case LN_LOGICAL_OR: BIN_LOOP(T, uint8_t, (a_ != 0) | (b_ != 0)); break;

#define F32(name) name##f   /* the float32 or float64 libm function */
#define F64(name) name

/* log(e^a + e^b) as max + log1p(e^-|a-b|), PyTorch's formula: no overflow;
 * equal infinities give themselves (inf - inf would be NaN). logaddexp2 the
 * same in base 2. */
#define DEF_LOGADDEXP(NAME, T, F)                                                  \
  static inline T NAME(T a, T b) {                                                 \
    if (isinf(a) && a == b) return a;                                           \
    T m = a < b ? b : a;                                                           \
    return m + F(log1p)(F(exp)(-F(fabs)(a - b)));                                  \
  }                                                                                \
  static inline T NAME##2(T a, T b) {                                              \
    if (isinf(a) && a == b) return a;                                           \
    T m = a < b ? b : a;                                                           \
    return m + F(log1p)(F(exp2)(-F(fabs)(a - b))) * (T)1.4426950408889634;         \
  }
DEF_LOGADDEXP(logaddexp_f32, float, F32)
DEF_LOGADDEXP(logaddexp_f64, double, F64)


/* The activations and their gradients (PyTorch 1.13's formulas; scalar: the
 * float64 kernels and strided float32; contiguous float32 runs vact.c's
 * SLEEF vector kernels, VEC below). */
#define DEF_ACT(SFX, T, F)                                                         \
  static inline T sigmoid_##SFX(T x) { return (T)1 / ((T)1 + F(exp)(-x)); }         \
  static inline T silu_##SFX(T x) { return x / ((T)1 + F(exp)(-x)); }               \
  static inline T gelu_##SFX(T x) { return x * (T)0.5 * ((T)1 + F(erf)(x * (T)LN_GELU_KALPHA)); } \
  static inline T gelu_tanh_##SFX(T x) {                                           \
    T inner = (T)LN_GELU_KBETA * (x + (T)LN_GELU_KKAPPA * x * x * x);                \
    return (T)0.5 * x * ((T)1 + F(tanh)(inner));                                   \
  }                                                                                \
  static inline T mish_##SFX(T x) { return x * F(tanh)(F(log1p)(F(exp)(x))); }      \
  static inline T silu_bwd_##SFX(T x, T g) {                                       \
    T s = sigmoid_##SFX(x);                                                        \
    return g * s * ((T)1 + x * ((T)1 - s));                                        \
  }                                                                                \
  static inline T gelu_bwd_##SFX(T x, T g) {                                       \
    T cdf = (T)0.5 * ((T)1 + F(erf)(x * (T)LN_GELU_KALPHA));                        \
    T pdf = (T)LN_GELU_KPDF * F(exp)(x * x * (T)-0.5);                              \
    return g * (cdf + x * pdf);                                                    \
  }                                                                                \
  static inline T gelu_tanh_bwd_##SFX(T x, T g) {                                  \
    T x2 = x * x;                                                                  \
    T t = F(tanh)((T)LN_GELU_KBETA * (x + (T)LN_GELU_KKAPPA * x2 * x));             \
    T left = (T)0.5 * x, right = (T)1 + t;                                         \
    T dright = left * (((T)1 - t * t) * (T)LN_GELU_KBETA * ((T)1 + (T)(3 * LN_GELU_KKAPPA) * x2)); \
    return g * ((T)0.5 * right + dright);                                          \
  }                                                                                \
  static inline T mish_bwd_##SFX(T x, T g) {                                       \
    T s = sigmoid_##SFX(x), t = F(tanh)(F(log1p)(F(exp)(x)));                       \
    return g * (t + x * s * ((T)1 - t * t));                                       \
  }                                                                                \
  static inline T hardswish_##SFX(T x) {                                           \
    T c = x + (T)3;                                                                \
    c = c < (T)0 ? (T)0 : c;                                                       \
    c = c > (T)6 ? (T)6 : c;                                                       \
    return x * c / (T)6;                                                           \
  }                                                                                \
  static inline T hardsigmoid_##SFX(T x) {                                         \
    T c = x + (T)3;                                                                \
    c = c < (T)0 ? (T)0 : c;                                                       \
    return (c > (T)6 ? (T)6 : c) / (T)6;                                           \
  }                                                                                \
  /* torch's scalar loop: g (x / 3 + 1/2) at -3 and 3; NaN for NaN, as its */     \
  /* vector loop */                                                                \
  static inline T hardswish_bwd_##SFX(T x, T g) {                                  \
    return x < (T)-3 ? (T)0 : x > (T)3 ? g : g * (x / (T)3 + (T)0.5);               \
  }                                                                                \
  /* (torch multiplies by the float 1/6 for doubles too) */                        \
  static inline T hardsigmoid_bwd_##SFX(T x, T g) {                                \
    return x > (T)-3 && x < (T)3 ? g * (T)(1.0f / 6.0f) : (T)0;                    \
  }                                                                                \
  /* q: alpha, scale, input_scale (negcoef = alpha scale in T; exp - 1, not */    \
  /* expm1: torch 1.13's, 0 for tiny x) */                                         \
  static inline T elu_##SFX(T x, const double *q) {                                \
    return x <= (T)0 ? (F(exp)(x * (T)q[2]) - (T)1) * ((T)q[0] * (T)q[1]) : x * (T)q[1]; \
  }                                                                                \
  /* (NaN for NaN, as torch's vector loop) */                                     \
  static inline T elu_bwd_##SFX(T x, T g, const double *q) {                       \
    T ni = (T)q[2];                                                                \
    return x > (T)0 ? g * (T)q[1] : g * ni * ((T)q[0] * (T)q[1]) * F(exp)(x * ni);  \
  }                                                                                \
  /* q: beta, threshold */                                                         \
  static inline T softplus_##SFX(T x, const double *q) {                           \
    T b = (T)q[0], xb = x * b;                                                     \
    return xb > (T)q[1] ? x : F(log1p)(F(exp)(xb)) / b;                             \
  }                                                                                \
  static inline T softplus_bwd_##SFX(T x, T g, const double *q) {                  \
    T xb = x * (T)q[0], z = F(exp)(xb);                                            \
    return xb > (T)q[1] ? g : g * z / (z + (T)1);                                  \
  }
DEF_ACT(f32, float, F32)
DEF_ACT(f64, double, F64)

/* VEC(...): the SLEEF kernel of a contiguous float32 run (returns from the
 * caller when it took the op); nothing for float64. (One element: the
 * iterator gives it stride 0; it takes the same kernel as in a longer run.) */
#define VEC_f32(op, o, a, b, n, contig, q)                                         \
  if ((contig) && ln_vact_f32(op, (float *)(o), (const float *)(a), (const float *)(b), n, q)) return;
#define VEC_f64(op, o, a, b, n, contig, q)

#define DEF_BIN_FLOAT(NAME, T, POW, FMOD, ATAN2, HYPOT, LAE, SFX)                        \
  LN_SIMD static void NAME(int op, const double *q, char *po, const char *pa,     \
                           const char *pb, int64_t n, int64_t so, int64_t sa,      \
                           int64_t sb) {                                           \
    const double alpha = q[0];                                                     \
    VEC_##SFX(op, po, pa, pb, n, op >= LN_SILU_BWD && (n == 1 || (so == 4 && sa == 4 && sb == 4)), q) \
    switch (op) {                                                                  \
      BIN_COMMON(T)                                                                \
      case LN_DIV: BIN_LOOP(T, T, a_ / b_); break;                                 \
      case LN_POW: BIN_LOOP(T, T, POW(a_, b_)); break;                             \
      case LN_MAXIMUM: BIN_LOOP(T, T, FLOAT_MAX(a_, b_)); break;                   \
      case LN_MINIMUM: BIN_LOOP(T, T, FLOAT_MIN(a_, b_)); break;                   \
      case LN_FMOD: BIN_LOOP(T, T, FMOD(a_, b_)); break;                           \
      case LN_ATAN2: BIN_LOOP(T, T, ATAN2(a_, b_)); break;                         \
      case LN_HYPOT: BIN_LOOP(T, T, HYPOT(a_, b_)); break;                         \
      case LN_LOGADDEXP: BIN_LOOP(T, T, LAE(a_, b_)); break;                       \
      case LN_LOGADDEXP2: BIN_LOOP(T, T, LAE##2(a_, b_)); break;                   \
      case LN_IGAMMA: BIN_LOOP(T, T, (T)ln_igamma(a_, b_)); break;                 \
      case LN_IGAMMAC: BIN_LOOP(T, T, (T)ln_igammac(a_, b_)); break;               \
      case LN_SILU_BWD: BIN_LOOP(T, T, silu_bwd_##SFX(a_, b_)); break;             \
      case LN_GELU_BWD: BIN_LOOP(T, T, gelu_bwd_##SFX(a_, b_)); break;             \
      case LN_GELU_TANH_BWD: BIN_LOOP(T, T, gelu_tanh_bwd_##SFX(a_, b_)); break;   \
      case LN_MISH_BWD: BIN_LOOP(T, T, mish_bwd_##SFX(a_, b_)); break;             \
      case LN_HARDSWISH_BWD: BIN_LOOP(T, T, hardswish_bwd_##SFX(a_, b_)); break;   \
      case LN_HARDSIGMOID_BWD: BIN_LOOP(T, T, hardsigmoid_bwd_##SFX(a_, b_)); break; \
      case LN_ELU_BWD: BIN_LOOP(T, T, elu_bwd_##SFX(a_, b_, q)); break;            \
      case LN_SOFTPLUS_BWD: BIN_LOOP(T, T, softplus_bwd_##SFX(a_, b_, q)); break;  \
      case LN_TANH_BWD: BIN_LOOP(T, T, b_ * ((T)1 - a_ * a_)); break;              \
      case LN_SIGMOID_BWD: BIN_LOOP(T, T, b_ * ((T)1 - a_) * a_); break;           \
    }                                                                              \
  }

static inline int64_t ipow(int64_t a, int64_t b) {
  if (b < 0) return a == 1 ? 1 : (a == -1 ? ((b & 1) ? -1 : 1) : 0);
  int64_t r = 1;   /* wraps on overflow (no UB), as the other integer ops */
  while (b) { if (b & 1) __builtin_mul_overflow(r, a, &r); __builtin_mul_overflow(a, a, &a); b >>= 1; }
  return r;
}

/* Integer add/sub/mul wrap around in two's complement, as in PyTorch (plain
 * signed overflow would be undefined behaviour); a double alpha converts
 * with saturation. */
#define WRAP(T, OP, a, b) ({ T r_; __builtin_##OP##_overflow(a, b, &r_); r_; })
static inline int64_t sat_i64(double x) {
  return x != x ? 0 : x >= 9.2233720368547758e18 ? INT64_MAX : x <= -9.2233720368547758e18 ? INT64_MIN : (int64_t)x;
}
#define BIN_COMMON_INT(T)                                                          \
  case LN_ADD: BIN_LOOP(T, T, WRAP(T, add, a_, b_)); break;                        \
  case LN_SUB: BIN_LOOP(T, T, WRAP(T, sub, a_, b_)); break;                        \
  case LN_MUL: BIN_LOOP(T, T, WRAP(T, mul, a_, b_)); break;                        \
  case LN_AXPY: BIN_LOOP(T, T, WRAP(T, add, a_, WRAP(T, mul, (T)sat_i64(alpha), b_))); break; \
  case LN_EQ: BIN_LOOP(T, uint8_t, a_ == b_); break;                               \
  case LN_NE: BIN_LOOP(T, uint8_t, a_ != b_); break;                               \
  case LN_LT: BIN_LOOP(T, uint8_t, a_ < b_); break;                                \
  case LN_LE: BIN_LOOP(T, uint8_t, a_ <= b_); break;                               \
  case LN_GT: BIN_LOOP(T, uint8_t, a_ > b_); break;                                \
  case LN_GE: BIN_LOOP(T, uint8_t, a_ >= b_); break;                               \
  case LN_LOGICAL_AND: BIN_LOOP(T, uint8_t, (a_ != 0) & (b_ != 0)); break;         \
  case LN_LOGICAL_OR: BIN_LOOP(T, uint8_t, (a_ != 0) | (b_ != 0)); break;

/* Shift counts modulo the width (32 for uint8, which C shifts as an int):
 * what torch 1.13's CPU kernels give (there a count out of range is C's
 * undefined behaviour, which x86 resolves so); defined here so that CPU and
 * CUDA agree. Left shifts through uint64 (no signed overflow), right shifts
 * arithmetic for signed types. */
#define SHIFT_MASK(T) ((int)(sizeof(T) < 4 ? 31 : sizeof(T) * 8 - 1))
#define LSHIFT(T, a, b) ((T)((uint64_t)(int64_t)(a) << ((b) & SHIFT_MASK(T))))
#define RSHIFT(T, a, b) ((T)((a) >> ((b) & SHIFT_MASK(T))))
/* torch's calc_gcd and lcm (Euclid on |a|, |b|; |a / g * b|), with their
 * wraparound at the type's limits made explicit */
#define DEF_GCD(NAME, T, ABS)                                                      \
  static inline T NAME(T a, T b) {                                                 \
    a = ABS(a); b = ABS(b);                                                        \
    while (a != 0) { T c = a; a = b % a; b = c; }                                  \
    return b;                                                                      \
  }                                                                                \
  static inline T NAME##_lcm(T a, T b) {                                           \
    T g = NAME(a, b);                                                              \
    if (g == 0) return 0;                                                          \
    T q = (T)-1 < 0 && g == (T)-1 ? WRAP(T, sub, (T)0, a) : (T)(a / g);            \
    return ABS(WRAP(T, mul, q, b));                                                \
  }
#define IABS32(x) ((x) < 0 ? WRAP(int32_t, sub, 0, (x)) : (x))
#define IABS64(x) ((x) < 0 ? WRAP(int64_t, sub, 0, (x)) : (x))
#define UABS8(x) (x)
DEF_GCD(gcd_i32, int32_t, IABS32)
DEF_GCD(gcd_i64, int64_t, IABS64)
DEF_GCD(gcd_u8, uint8_t, UABS8)

#define DEF_BIN_INT(NAME, T, GCD)                                                  \
  static void NAME(int op, const double *q, char *po, const char *pa, const char *pb, \
                   int64_t n, int64_t so, int64_t sa, int64_t sb) {                \
    const double alpha = q[0];                                                     \
    switch (op) {                                                                  \
      BIN_COMMON_INT(T)                                                            \
      case LN_POW: BIN_LOOP(T, T, (T)ipow(a_, b_)); break;                            \
      case LN_MAXIMUM: BIN_LOOP(T, T, a_ > b_ ? a_ : b_); break;                   \
      case LN_MINIMUM: BIN_LOOP(T, T, a_ < b_ ? a_ : b_); break;                   \
      case LN_FMOD: BIN_LOOP(T, T, b_ == 0 || ((T)-1 < 0 && b_ == (T)-1) ? 0 : a_ % b_); break; \
      case LN_BITWISE_AND: BIN_LOOP(T, T, a_ & b_); break;                         \
      case LN_BITWISE_OR: BIN_LOOP(T, T, a_ | b_); break;                          \
      case LN_BITWISE_XOR: BIN_LOOP(T, T, a_ ^ b_); break;                         \
      case LN_BITWISE_LSHIFT: BIN_LOOP(T, T, LSHIFT(T, a_, b_)); break;            \
      case LN_BITWISE_RSHIFT: BIN_LOOP(T, T, RSHIFT(T, a_, b_)); break;            \
      case LN_GCD: BIN_LOOP(T, T, GCD(a_, b_)); break;                             \
      case LN_LCM: BIN_LOOP(T, T, GCD##_lcm(a_, b_)); break;                       \
    }                                                                              \
  }

DEF_BIN_FLOAT(bin_f32, float, powf, fmodf, atan2f, hypotf, logaddexp_f32, f32)
DEF_BIN_FLOAT(bin_f64, double, pow, fmod, atan2, hypot, logaddexp_f64, f64)
DEF_BIN_INT(bin_i32, int32_t, gcd_i32)
DEF_BIN_INT(bin_i64, int64_t, gcd_i64)
DEF_BIN_INT(bin_u8, uint8_t, gcd_u8)

typedef void (*bin_fn)(int, const double *, char *, const char *, const char *, int64_t, int64_t,
                       int64_t, int64_t);
typedef struct { bin_fn fn; int op; double q[3]; bool stream; int es; } bin_ctx;   /* q: alpha, p1, p2 */

static inline void bin_item(const bin_ctx *c, const ln_iter *it, int64_t item) {
  char *p[3];
  int64_t n = ln_iter_item(it, item, p);
  int d = it->ndim - 1;
  int64_t so = it->stride[0][d], sa = it->stride[1][d], sb = it->stride[2][d];
  if (c->stream && so == c->es) {
    _Alignas(64) char tmp[STREAM_CHUNK * 8];
    for (int64_t s = 0; s < n; s += STREAM_CHUNK) {
      int64_t len = LN_MIN((int64_t)STREAM_CHUNK, n - s);
      c->fn(c->op, c->q, tmp, p[1] + s * sa, p[2] + s * sb, len, so, sa, sb);
      stream_out(p[0] + s * so, tmp, len * so);
    }
    stream_fence();
    return;
  }
  c->fn(c->op, c->q, p[0], p[1], p[2], n, so, sa, sb);
}

/* Whether an integer view holds a 0 (each distinct element once: stride-0
 * dims are visited at one index). */
static bool int_view_has_zero(const ln_kview *v) {
  int64_t idx[LN_MAX_DIMS] = {0}, shape[LN_MAX_DIMS];
  for (int d = 0; d < v->ndim; d++) {
    shape[d] = v->stride[d] == 0 ? LN_MIN(v->shape[d], 1) : v->shape[d];
    if (shape[d] == 0) return false;
  }
  int es = ln_dtype_size(v->dtype);
  for (;;) {
    int64_t off = 0;
    for (int d = 0; d < v->ndim; d++) off += idx[d] * v->stride[d];
    if (ln_load_as_double(v->data + off * es, v->dtype) == 0) return true;
    int d = v->ndim - 1;
    for (; d >= 0; d--) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
    if (d < 0) return false;
  }
}

int ln_cpu_binary(void *p) {
  ln_binary_args *a = p;
  if (a->scalar_side == 1) a->a.data = a->scalar;
  if (a->scalar_side == 2) a->b.data = a->scalar;
  /* integer fmod by zero has no value (PyTorch raises too): refused before
   * anything is written */
  if (a->op == LN_FMOD && !ln_is_float(a->b.dtype) && int_view_has_zero(&a->b))
    return ln_error("fmod: integer division by zero");
  bin_ctx c = {NULL, a->op, {a->alpha, a->p1, a->p2}};
  switch (a->a.dtype) {
    case LN_FLOAT32: c.fn = bin_f32; break;
    case LN_FLOAT64: c.fn = bin_f64; break;
    case LN_INT32: c.fn = bin_i32; break;
    case LN_INT64: c.fn = bin_i64; break;
    case LN_UINT8: case LN_BOOL: c.fn = bin_u8; break;
    default: return ln_error("%s: unsupported dtype %s", "binary", ln_dtype_name(a->a.dtype));
  }
  ln_kview v[3] = {a->out, a->a, a->b};
  ln_iter it;
  ln_iter_init(&it, 3, v);
  c.es = ln_dtype_size(a->out.dtype);
  c.stream = stream_output(&it, c.es);
  LN_ITER_PARALLEL(&it, bin_item, &c);
  return 0;
}

/* ---- unary ------------------------------------------------------------------- */

#define UN_LOOP(T, TO, EXPR)                                                       \
  do {                                                                             \
    if (so == (int64_t)sizeof(TO) && sa == (int64_t)sizeof(T)) {                   \
      TO *o = (TO *)po; const T *x = (const T *)pa;                                \
      for (int64_t i = 0; i < n; i++) { T x_ = x[i]; o[i] = (TO)(EXPR); }          \
    } else {                                                                       \
      for (int64_t i = 0; i < n; i++) {                                            \
        T x_ = *(const T *)(pa + i * sa);                                          \
        *(TO *)(po + i * so) = (TO)(EXPR);                                         \
      }                                                                            \
    }                                                                              \
  } while (0)

#define DEF_UN_FLOAT(NAME, T, F, SFX)                                              \
  LN_SIMD static void NAME(int op, const double *q, char *po, const char *pa,     \
                           int64_t n, int64_t so, int64_t sa) {                    \
    const T lo = (T)q[0], hi = (T)q[1];                                            \
    VEC_##SFX(op, po, pa, NULL, n, n == 1 || (so == 4 && sa == 4), q)             \
    switch (op) {                                                                  \
      case LN_NEG: UN_LOOP(T, T, -x_); break;                                      \
      case LN_ABS: UN_LOOP(T, T, F(fabs)(x_)); break;                              \
      case LN_EXP: UN_LOOP(T, T, F(exp)(x_)); break;                               \
      case LN_LOG: UN_LOOP(T, T, F(log)(x_)); break;                               \
      case LN_SQRT: UN_LOOP(T, T, F(sqrt)(x_)); break;                             \
      case LN_TANH: UN_LOOP(T, T, F(tanh)(x_)); break;                             \
      case LN_SIGMOID: UN_LOOP(T, T, sigmoid_##SFX(x_)); break;                    \
      case LN_SILU: UN_LOOP(T, T, silu_##SFX(x_)); break;                          \
      case LN_GELU: UN_LOOP(T, T, gelu_##SFX(x_)); break;                          \
      case LN_GELU_TANH: UN_LOOP(T, T, gelu_tanh_##SFX(x_)); break;                \
      case LN_MISH: UN_LOOP(T, T, mish_##SFX(x_)); break;                          \
      case LN_HARDSWISH: UN_LOOP(T, T, hardswish_##SFX(x_)); break;                \
      case LN_HARDSIGMOID: UN_LOOP(T, T, hardsigmoid_##SFX(x_)); break;            \
      case LN_ELU: UN_LOOP(T, T, elu_##SFX(x_, q)); break;                         \
      case LN_SOFTPLUS: UN_LOOP(T, T, softplus_##SFX(x_, q)); break;               \
      case LN_RELU: UN_LOOP(T, T, x_ < 0 ? (T)0 : x_); break;                      \
      case LN_SIN: UN_LOOP(T, T, F(sin)(x_)); break;                               \
      case LN_COS: UN_LOOP(T, T, F(cos)(x_)); break;                               \
      case LN_RSQRT: UN_LOOP(T, T, (T)1 / F(sqrt)(x_)); break;                     \
      case LN_SIGN: UN_LOOP(T, T, (T)((x_ > 0) - (x_ < 0))); break;                \
      case LN_FLOOR: UN_LOOP(T, T, F(floor)(x_)); break;                           \
      case LN_CEIL: UN_LOOP(T, T, F(ceil)(x_)); break;                             \
      case LN_ROUND: UN_LOOP(T, T, F(nearbyint)(x_)); break;                       \
      case LN_RECIPROCAL: UN_LOOP(T, T, (T)1 / x_); break;                         \
      case LN_LOG1P: UN_LOOP(T, T, F(log1p)(x_)); break;                           \
      case LN_EXPM1: UN_LOOP(T, T, F(expm1)(x_)); break;                           \
      case LN_SQUARE: UN_LOOP(T, T, x_ * x_); break;                               \
      case LN_LOGICAL_NOT: UN_LOOP(T, uint8_t, x_ == 0); break;                    \
      case LN_ISNAN: UN_LOOP(T, uint8_t, x_ != x_); break;                         \
      case LN_ISINF: UN_LOOP(T, uint8_t, F(fabs)(x_) == (T)INFINITY); break;       \
      case LN_ERF: UN_LOOP(T, T, F(erf)(x_)); break;                               \
      case LN_SINH: UN_LOOP(T, T, F(sinh)(x_)); break;                             \
      case LN_COSH: UN_LOOP(T, T, F(cosh)(x_)); break;                             \
      case LN_ASINH: UN_LOOP(T, T, F(asinh)(x_)); break;                           \
      case LN_ACOSH: UN_LOOP(T, T, F(acosh)(x_)); break;                           \
      case LN_ATANH: UN_LOOP(T, T, F(atanh)(x_)); break;                           \
      case LN_ASIN: UN_LOOP(T, T, F(asin)(x_)); break;                             \
      case LN_ACOS: UN_LOOP(T, T, F(acos)(x_)); break;                             \
      case LN_ATAN: UN_LOOP(T, T, F(atan)(x_)); break;                             \
      case LN_LOG2: UN_LOOP(T, T, F(log2)(x_)); break;                             \
      case LN_LOG10: UN_LOOP(T, T, F(log10)(x_)); break;                           \
      case LN_EXP2: UN_LOOP(T, T, F(exp2)(x_)); break;                             \
      case LN_TRUNC: UN_LOOP(T, T, F(trunc)(x_)); break;                           \
      case LN_FRAC: UN_LOOP(T, T, x_ - F(trunc)(x_)); break;  /* (as PyTorch: frac(inf) = NaN) */ \
      case LN_LGAMMA: UN_LOOP(T, T, F(lgamma)(x_)); break;                         \
      case LN_DIGAMMA: UN_LOOP(T, T, (T)ln_digamma(x_)); break;                    \
      case LN_TRIGAMMA: UN_LOOP(T, T, (T)ln_trigamma(x_)); break;                  \
      case LN_ERFC: UN_LOOP(T, T, F(erfc)(x_)); break;                             \
      case LN_ERFINV: UN_LOOP(T, T, (T)ln_erfinv(x_)); break;                      \
      case LN_SIGNBIT: UN_LOOP(T, uint8_t, signbit(x_) != 0); break;               \
      case LN_CLAMP: UN_LOOP(T, T, x_ < lo ? lo : (x_ > hi ? hi : x_)); break;     \
    }                                                                              \
  }

DEF_UN_FLOAT(un_f32, float, F32, f32)
DEF_UN_FLOAT(un_f64, double, F64, f64)

#define DEF_UN_INT(NAME, T, ABS)                                                   \
  static void NAME(int op, const double *q, char *po, const char *pa,             \
                   int64_t n, int64_t so, int64_t sa) {                            \
    const double lo = q[0], hi = q[1];                                             \
    switch (op) {                                                                  \
      case LN_NEG: UN_LOOP(T, T, WRAP(T, sub, (T)0, x_)); break;                   \
      case LN_ABS: UN_LOOP(T, T, ABS); break;                                      \
      case LN_RELU: UN_LOOP(T, T, x_ > 0 ? x_ : 0); break;                         \
      case LN_SIGN: UN_LOOP(T, T, (x_ > 0) - (x_ < 0)); break;                     \
      case LN_SQUARE: UN_LOOP(T, T, WRAP(T, mul, x_, x_)); break;                  \
      case LN_FLOOR: case LN_CEIL: case LN_ROUND: case LN_TRUNC: UN_LOOP(T, T, x_); break; \
      case LN_LOGICAL_NOT: UN_LOOP(T, uint8_t, x_ == 0); break;                    \
      case LN_BITWISE_NOT: UN_LOOP(T, T, ~x_); break;                              \
      case LN_ISNAN: case LN_ISINF: UN_LOOP(T, uint8_t, 0 * x_); break;            \
      case LN_CLAMP: UN_LOOP(T, T, x_ < lo ? (T)lo : (x_ > hi ? (T)hi : x_)); break; \
    }                                                                              \
  }

DEF_UN_INT(un_i32, int32_t, x_ < 0 ? WRAP(int32_t, sub, 0, x_) : x_)
DEF_UN_INT(un_i64, int64_t, x_ < 0 ? WRAP(int64_t, sub, 0, x_) : x_)
DEF_UN_INT(un_u8, uint8_t, x_)

typedef void (*un_fn)(int, const double *, char *, const char *, int64_t, int64_t, int64_t);
typedef struct { un_fn fn; int op; double q[3]; bool stream; int es; } un_ctx;   /* q: p0, p1, p2 */

static inline void un_item(const un_ctx *c, const ln_iter *it, int64_t item) {
  char *p[2];
  int64_t n = ln_iter_item(it, item, p);
  int d = it->ndim - 1;
  int64_t so = it->stride[0][d], sa = it->stride[1][d];
  if (c->stream && so == c->es) {
    _Alignas(64) char tmp[STREAM_CHUNK * 8];
    for (int64_t s = 0; s < n; s += STREAM_CHUNK) {
      int64_t len = LN_MIN((int64_t)STREAM_CHUNK, n - s);
      c->fn(c->op, c->q, tmp, p[1] + s * sa, len, so, sa);
      stream_out(p[0] + s * so, tmp, len * so);
    }
    stream_fence();
    return;
  }
  c->fn(c->op, c->q, p[0], p[1], n, so, sa);
}

int ln_cpu_unary(void *p) {
  ln_unary_args *a = p;
  un_ctx c = {NULL, a->op, {a->p0, a->p1, a->p2}};
  switch (a->a.dtype) {
    case LN_FLOAT32: c.fn = un_f32; break;
    case LN_FLOAT64: c.fn = un_f64; break;
    case LN_INT32: c.fn = un_i32; break;
    case LN_INT64: c.fn = un_i64; break;
    case LN_UINT8: case LN_BOOL: c.fn = un_u8; break;
    default: return ln_error("unary: unsupported dtype %s", ln_dtype_name(a->a.dtype));
  }
  ln_kview v[2] = {a->out, a->a};
  ln_iter it;
  ln_iter_init(&it, 2, v);
  c.es = ln_dtype_size(a->out.dtype);
  c.stream = stream_output(&it, c.es);
  LN_ITER_PARALLEL(&it, un_item, &c);
  return 0;
}

/* ---- cast / copy ---------------------------------------------------------------- */

#define CAST_LOOP(TI, TO, CONV)                                                    \
  do {                                                                             \
    if (so == (int64_t)sizeof(TO) && sa == (int64_t)sizeof(TI)) {                  \
      TO *o = (TO *)po; const TI *x = (const TI *)pa;                              \
      for (int64_t i = 0; i < n; i++) { TI x_ = x[i]; o[i] = CONV; }               \
    } else {                                                                       \
      for (int64_t i = 0; i < n; i++) {                                            \
        TI x_ = *(const TI *)(pa + i * sa);                                        \
        *(TO *)(po + i * so) = CONV;                                               \
      }                                                                            \
    }                                                                              \
  } while (0)

#define CAST_TO(TI)                                                                \
  switch (dto) {                                                                   \
    case LN_FLOAT32: CAST_LOOP(TI, float, (float)x_); break;                       \
    case LN_FLOAT64: CAST_LOOP(TI, double, (double)x_); break;                     \
    case LN_INT32: CAST_LOOP(TI, int32_t, (int32_t)x_); break;                     \
    case LN_INT64: CAST_LOOP(TI, int64_t, (int64_t)x_); break;                     \
    case LN_UINT8: CAST_LOOP(TI, uint8_t, (uint8_t)(int64_t)x_); break;            \
    case LN_BOOL: CAST_LOOP(TI, uint8_t, (uint8_t)(x_ != 0)); break;               \
    case LN_FLOAT16: CAST_LOOP(TI, uint16_t, ln_float_to_half((float)x_)); break;  \
    case LN_BFLOAT16: CAST_LOOP(TI, uint16_t, ln_float_to_bf16((float)x_)); break; \
  }

LN_SIMD static void cast_run(int dti, int dto, char *po, const char *pa, int64_t n,
                             int64_t so, int64_t sa) {
  if (dti == dto && so == sa && so == ln_dtype_size(dti)) {
    memcpy(po, pa, (size_t)(n * so));
    return;
  }
  switch (dti) {
    case LN_FLOAT32: CAST_TO(float); break;
    case LN_FLOAT64: CAST_TO(double); break;
    case LN_INT32: CAST_TO(int32_t); break;
    case LN_INT64: CAST_TO(int64_t); break;
    case LN_UINT8: case LN_BOOL: CAST_TO(uint8_t); break;
    case LN_FLOAT16: {
      if (dto == LN_FLOAT16) { CAST_LOOP(uint16_t, uint16_t, x_); break; }
      for (int64_t i = 0; i < n; i++)
        ln_store_from_double(po + i * so, dto, ln_half_to_float(*(const uint16_t *)(pa + i * sa)));
      break;
    }
    case LN_BFLOAT16: {
      if (dto == LN_BFLOAT16) { CAST_LOOP(uint16_t, uint16_t, x_); break; }
      for (int64_t i = 0; i < n; i++)
        ln_store_from_double(po + i * so, dto, ln_bf16_to_float(*(const uint16_t *)(pa + i * sa)));
      break;
    }
  }
}

typedef struct { int dti, dto; bool stream; int es; } cast_ctx;
static inline void cast_item(const cast_ctx *c, const ln_iter *it, int64_t item) {
  char *p[2];
  int64_t n = ln_iter_item(it, item, p);
  int d = it->ndim - 1;
  int64_t so = it->stride[0][d], sa = it->stride[1][d];
  if (c->stream && so == c->es) {
    if (c->dti == c->dto && sa == so) stream_out(p[0], p[1], n * so);   /* plain copy */
    else {
      _Alignas(64) char tmp[STREAM_CHUNK * 8];
      for (int64_t s = 0; s < n; s += STREAM_CHUNK) {
        int64_t len = LN_MIN((int64_t)STREAM_CHUNK, n - s);
        cast_run(c->dti, c->dto, tmp, p[1] + s * sa, len, so, sa);
        stream_out(p[0] + s * so, tmp, len * so);
      }
    }
    stream_fence();
    return;
  }
  cast_run(c->dti, c->dto, p[0], p[1], n, so, sa);
}

int ln_cpu_copy(void *p) {
  ln_copy_args *a = p;
  cast_ctx c = {a->src.dtype, a->dst.dtype, false, ln_dtype_size(a->dst.dtype)};
  ln_kview v[2] = {a->dst, a->src};
  ln_iter it;
  ln_iter_init(&it, 2, v);
  c.stream = stream_output(&it, c.es);
  LN_ITER_PARALLEL(&it, cast_item, &c);
  return 0;
}

/* ---- where ---------------------------------------------------------------------- */

typedef struct { int es; } where_ctx;
static inline void where_item(const where_ctx *c, const ln_iter *it, int64_t item) {
  char *p[4];
  int64_t n = ln_iter_item(it, item, p);
  int d = it->ndim - 1;
  int64_t so = it->stride[0][d], sc = it->stride[1][d], sa = it->stride[2][d], sb = it->stride[3][d];
  for (int64_t i = 0; i < n; i++) {
    const char *src = *(const uint8_t *)(p[1] + i * sc) ? p[2] + i * sa : p[3] + i * sb;
    memcpy(p[0] + i * so, src, (size_t)c->es);
  }
}

int ln_cpu_where(void *p) {
  ln_where_args *a = p;
  where_ctx c = {ln_dtype_size(a->out.dtype)};
  ln_kview v[4] = {a->out, a->cond, a->a, a->b};
  ln_iter it;
  ln_iter_init(&it, 4, v);
  LN_ITER_PARALLEL(&it, where_item, &c);
  return 0;
}

/* ---- fill, arange ------------------------------------------------------------------ */

typedef struct { double start, step; int es; _Alignas(8) char value[8]; } fill_ctx;
static inline void fill_item(const fill_ctx *c, const ln_iter *it, int64_t item) {
  char *p[1];
  int64_t n = ln_iter_item(it, item, p);
  int64_t so = it->stride[0][it->ndim - 1];
  if (c->step == 0) {
    if (c->es == 4 && so == 4) {
      uint32_t v; memcpy(&v, c->value, 4);
      uint32_t *o = (uint32_t *)p[0];
      for (int64_t i = 0; i < n; i++) o[i] = v;
    } else {
      for (int64_t i = 0; i < n; i++) memcpy(p[0] + i * so, c->value, (size_t)c->es);
    }
  }
}

int ln_cpu_fill(void *p) {
  ln_fill_args *a = p;
  fill_ctx c = {0, 0, ln_dtype_size(a->out.dtype), {0}};
  ln_store_from_double(c.value, a->out.dtype, a->value);
  ln_iter it;
  ln_iter_init(&it, 1, &a->out);
  LN_ITER_PARALLEL(&it, fill_item, &c);
  return 0;
}

int ln_cpu_arange(void *p) {   /* out is contiguous */
  ln_fill_args *a = p;
  int64_t n = 1;
  for (int d = 0; d < a->out.ndim; d++) n *= a->out.shape[d];
  int es = ln_dtype_size(a->out.dtype);
  for (int64_t i = 0; i < n; i++)
    ln_store_from_double(a->out.data + i * es, a->out.dtype, a->value + (double)i * a->step);
  return 0;
}
