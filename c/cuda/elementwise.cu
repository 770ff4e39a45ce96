// elementwise.cu -- CUDA kernels for copy/cast, fill, arange, where, binary and
// unary ops, over views broadcast to the output's shape (kern.h). The host
// side folds the views' dims (size-1 dims dropped, dims contiguous in every
// view merged); one dim left with unit or zero strides takes the contiguous
// fast path, else one generic kernel decodes each index over up to 8 dims.
// The arithmetic mirrors c/cpu/elementwise.c op by op (integer add, sub and
// mul wrap; NaN propagates through maximum and minimum).
#include "kern.h"
#include "../include/lunet.h"
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <math.h>
#include "../core/special.h"
#include <type_traits>

enum { LN_AXPY = LN_NBINARY, LN_CLAMP = LN_NUNARY };   // (c/core/backend.h)

namespace {

const int THREADS = 256;

struct Q { double a, b, c; };   // an op's parameters: alpha (axpy), or an activation's p0, p1, p2

struct Geo {                 // folded shape; per view strides in elements
  int ndim;
  int64_t n;
  int64_t shape[LNC_MAX_DIMS];
  int64_t stride[4][LNC_MAX_DIMS];
};

// fold the views' common shape (views[0]'s) into g; nv views
void fold(Geo &g, const lnc_view *const *v, int nv) {
  int nd = 0;
  g.n = 1;
  for (int d = 0; d < v[0]->ndim; d++) {
    int64_t s = v[0]->shape[d];
    g.n *= s;
    if (s == 1) continue;
    bool merge = nd > 0;
    for (int k = 0; k < nv && merge; k++) merge = g.stride[k][nd - 1] == v[k]->stride[d] * s;
    if (merge) {
      g.shape[nd - 1] *= s;
      for (int k = 0; k < nv; k++) g.stride[k][nd - 1] = v[k]->stride[d];
    } else {
      g.shape[nd] = s;
      for (int k = 0; k < nv; k++) g.stride[k][nd] = v[k]->stride[d];
      nd++;
    }
  }
  if (nd == 0) { nd = 1; g.shape[0] = 1; for (int k = 0; k < nv; k++) g.stride[k][0] = 0; }
  g.ndim = nd;
}

// the offsets (elements) of linear index i in each of nv views
template <int NV>
__device__ __forceinline__ void offsets(const Geo &g, int64_t i, int64_t *off) {
  for (int k = 0; k < NV; k++) off[k] = 0;
  if (g.ndim == 1) { for (int k = 0; k < NV; k++) off[k] = i * g.stride[k][0]; return; }
  for (int d = g.ndim - 1; d >= 0; d--) {
    int64_t q = i / g.shape[d], r = i - q * g.shape[d];
    for (int k = 0; k < NV; k++) off[k] += r * g.stride[k][d];
    i = q;
  }
}

unsigned blocks_for(int64_t n) {
  int64_t b = (n + THREADS - 1) / THREADS;
  return (unsigned)(b < 65535 * 8 ? (b > 0 ? b : 1) : 65535 * 8);
}

#define GRID_LOOP(i, n) for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

// ---- loads and stores by dtype ------------------------------------------------

__device__ __forceinline__ double load_f(const char *p, int dt) {
  switch (dt) {
    case LN_FLOAT32: return *(const float *)p;
    case LN_FLOAT64: return *(const double *)p;
    case LN_INT32: return *(const int32_t *)p;
    case LN_INT64: return (double)*(const int64_t *)p;
    case LN_UINT8: case LN_BOOL: return *(const uint8_t *)p;
    case LN_FLOAT16: return __half2float(*(const __half *)p);
    case LN_BFLOAT16: return __bfloat162float(*(const __nv_bfloat16 *)p);
  }
  return 0;
}
__device__ __forceinline__ int64_t load_i(const char *p, int dt) {
  switch (dt) {
    case LN_INT32: return *(const int32_t *)p;
    case LN_INT64: return *(const int64_t *)p;
    case LN_UINT8: case LN_BOOL: return *(const uint8_t *)p;
  }
  return 0;
}
__device__ __forceinline__ bool is_int(int dt) { return dt == LN_INT32 || dt == LN_INT64 || dt == LN_UINT8 || dt == LN_BOOL; }

// src element (dtype si) to dst element (dtype di), as c/cpu/elementwise.c's casts
__device__ __forceinline__ void cast_one(char *o, int di, const char *x, int si) {
  if (is_int(si) && is_int(di)) {
    int64_t v = load_i(x, si);
    switch (di) {
      case LN_INT32: *(int32_t *)o = (int32_t)v; return;
      case LN_INT64: *(int64_t *)o = v; return;
      case LN_UINT8: *(uint8_t *)o = (uint8_t)v; return;
      case LN_BOOL: *(uint8_t *)o = v != 0; return;
    }
  }
  double v = load_f(x, si);
  if (si == LN_FLOAT32 || si == LN_FLOAT16 || si == LN_BFLOAT16) {   // (float)x_ on the CPU
    float f = (float)v;
    switch (di) {
      case LN_FLOAT32: *(float *)o = f; return;
      case LN_FLOAT16: *(__half *)o = __float2half_rn(f); return;
      case LN_BFLOAT16: *(__nv_bfloat16 *)o = __float2bfloat16_rn(f); return;
    }
  }
  switch (di) {
    case LN_FLOAT32: *(float *)o = (float)v; return;
    case LN_FLOAT64: *(double *)o = v; return;
    case LN_INT32: *(int32_t *)o = (int32_t)v; return;
    case LN_INT64: *(int64_t *)o = (int64_t)v; return;
    case LN_UINT8: *(uint8_t *)o = (uint8_t)(int64_t)v; return;
    case LN_BOOL: *(uint8_t *)o = v != 0; return;
    case LN_FLOAT16: *(__half *)o = __float2half_rn((float)v); return;
    case LN_BFLOAT16: *(__nv_bfloat16 *)o = __float2bfloat16_rn((float)v); return;
  }
}

int esize(int dt) {
  switch (dt) {
    case LN_FLOAT64: case LN_INT64: return 8;
    case LN_FLOAT32: case LN_INT32: return 4;
    case LN_FLOAT16: case LN_BFLOAT16: return 2;
  }
  return 1;
}

// ---- copy ---------------------------------------------------------------------

template <typename E>   // same dtype: move elements of E's size
__global__ void copy_same(Geo g, E *o, const E *x) {
  GRID_LOOP(i, g.n) {
    int64_t off[2];
    offsets<2>(g, i, off);
    o[off[0]] = x[off[1]];
  }
}
template <typename E>
__global__ void copy_same_dense(int64_t n, E *o, const E *x) { GRID_LOOP(i, n) o[i] = x[i]; }

__global__ void copy_cast(Geo g, char *o, int di, const char *x, int si) {
  int oe = 0, xe = 0;
  switch (di) { case LN_FLOAT64: case LN_INT64: oe = 8; break; case LN_FLOAT32: case LN_INT32: oe = 4; break;
                case LN_FLOAT16: case LN_BFLOAT16: oe = 2; break; default: oe = 1; }
  switch (si) { case LN_FLOAT64: case LN_INT64: xe = 8; break; case LN_FLOAT32: case LN_INT32: xe = 4; break;
                case LN_FLOAT16: case LN_BFLOAT16: xe = 2; break; default: xe = 1; }
  GRID_LOOP(i, g.n) {
    int64_t off[2];
    offsets<2>(g, i, off);
    cast_one(o + off[0] * oe, di, x + off[1] * xe, si);
  }
}

// ---- fill, arange ---------------------------------------------------------------

template <typename E>
__global__ void fill_k(Geo g, E *o, E v) {
  GRID_LOOP(i, g.n) {
    int64_t off[1];
    offsets<1>(g, i, off);
    o[off[0]] = v;
  }
}

__global__ void arange_k(int64_t n, char *o, int dt, int es, double start, double step) {
  GRID_LOOP(i, n) {
    double v = start + (double)i * step;
    cast_one(o + i * es, dt, (const char *)&v, LN_FLOAT64);
  }
}

// ---- where ------------------------------------------------------------------------

template <typename E>
__global__ void where_k(Geo g, E *o, const uint8_t *c, const E *a, const E *b) {
  GRID_LOOP(i, g.n) {
    int64_t off[4];
    offsets<4>(g, i, off);
    o[off[0]] = c[off[1]] ? a[off[2]] : b[off[3]];
  }
}

// ---- binary -------------------------------------------------------------------------

__device__ __forceinline__ bool is_cmp(int op) { return op >= LN_EQ && op <= LN_LOGICAL_OR; }

template <typename T> __device__ __forceinline__ T fpow(T a, T b);
template <> __device__ __forceinline__ float fpow(float a, float b) { return powf(a, b); }
template <> __device__ __forceinline__ double fpow(double a, double b) { return pow(a, b); }

template <typename T>
__device__ __forceinline__ uint8_t cmp_op(int op, T a, T b) {
  switch (op) {
    case LN_EQ: return a == b;
    case LN_NE: return a != b;
    case LN_LT: return a < b;
    case LN_LE: return a <= b;
    case LN_GT: return a > b;
    case LN_GE: return a >= b;
    case LN_LOGICAL_AND: return (a != 0) & (b != 0);
    case LN_LOGICAL_OR: return (a != 0) | (b != 0);
  }
  return 0;
}

// log(e^a + e^b) (base 2 with two): max + log1p(e^-|a-b|) as on the CPU
// (c/cpu/elementwise.c); equal infinities give themselves
template <typename T>
__device__ __forceinline__ T logaddexp(T a, T b, bool two) {
  if (isinf(a) && a == b) return a;
  T m = a < b ? b : a, d = -fabs(a - b);
  return two ? m + log1p(exp2(d)) * (T)1.4426950408889634 : m + log1p(exp(d));
}

template <typename T>
__device__ __forceinline__ T float_op(int op, T a, T b, Q q) {
  switch (op) {
    case LN_ADD: return a + b;
    case LN_SUB: return a - b;
    case LN_MUL: return a * b;
    case LN_AXPY: return a + (T)q.a * b;
    case LN_DIV: return a / b;
    case LN_POW: return fpow(a, b);
    case LN_MAXIMUM: return a > b || a != a ? a : b;
    case LN_MINIMUM: return a < b || a != a ? a : b;
    case LN_FMOD: return fmod(a, b);
    case LN_ATAN2: return atan2(a, b);
    case LN_HYPOT: return hypot(a, b);
    case LN_LOGADDEXP: return logaddexp(a, b, false);
    case LN_LOGADDEXP2: return logaddexp(a, b, true);
    case LN_IGAMMA: return (T)ln_igamma((double)a, (double)b);
    case LN_IGAMMAC: return (T)ln_igammac((double)a, (double)b);
    // the activations' gradients: a = x, b = grad_output
    case LN_SILU_BWD: { T s = (T)1 / ((T)1 + exp(-a)); return b * s * ((T)1 + a * ((T)1 - s)); }
    case LN_GELU_BWD: {
      T cdf = (T)0.5 * ((T)1 + erf(a * (T)0.70710678118654752440));
      return b * (cdf + a * (T)0.39894228040143267794 * exp(a * a * (T)-0.5));
    }
    case LN_GELU_TANH_BWD: {
      T x2 = a * a, t = tanh((T)0.79788456080286535588 * (a + (T)0.044715 * x2 * a));
      T dright = (T)0.5 * a * (((T)1 - t * t) * (T)0.79788456080286535588 * ((T)1 + (T)(3 * 0.044715) * x2));
      return b * ((T)0.5 * ((T)1 + t) + dright);
    }
    case LN_MISH_BWD: {
      T s = (T)1 / ((T)1 + exp(-a)), t = tanh(log1p(exp(a)));
      return b * (t + a * s * ((T)1 - t * t));
    }
    case LN_HARDSWISH_BWD: return a < (T)-3 ? (T)0 : a > (T)3 ? b : b * (a / (T)3 + (T)0.5);
    case LN_HARDSIGMOID_BWD: return a > (T)-3 && a < (T)3 ? b * (T)(1.0f / 6.0f) : (T)0;
    case LN_ELU_BWD: {   // q: alpha, scale, input_scale
      T ni = (T)q.c;
      return a > (T)0 ? b * (T)q.b : b * ni * ((T)q.a * (T)q.b) * exp(a * ni);
    }
    case LN_SOFTPLUS_BWD: {   // q: beta, threshold
      T xb = a * (T)q.a, z = exp(xb);
      return xb > (T)q.b ? b : b * z / (z + (T)1);
    }
    case LN_TANH_BWD: return b * ((T)1 - a * a);   // a: the output
    case LN_SIGMOID_BWD: return b * ((T)1 - a) * a;
  }
  return 0;
}

__device__ __forceinline__ int64_t sat_i64(double x) {
  return x != x ? 0 : x >= 9.2233720368547758e18 ? INT64_MAX : x <= -9.2233720368547758e18 ? INT64_MIN : (int64_t)x;
}
__device__ __forceinline__ int64_t ipow(int64_t a, int64_t b) {
  if (b < 0) return a == 1 ? 1 : (a == -1 ? ((b & 1) ? -1 : 1) : 0);
  uint64_t r = 1, x = (uint64_t)a;
  while (b) { if (b & 1) r *= x; x *= x; b >>= 1; }
  return (int64_t)r;
}

// |x| wrapping at the minimum, torch's calc_gcd and lcm as on the CPU
// (c/cpu/elementwise.c)
template <typename T>
__device__ __forceinline__ T wabs(T x) {
  typedef typename std::make_unsigned<T>::type U;
  return x < (T)0 ? (T)((U)0 - (U)x) : x;
}
template <typename T>
__device__ __forceinline__ T igcd(T a, T b) {
  a = wabs(a); b = wabs(b);
  while (a != 0) { T c = a; a = b % a; b = c; }
  return b;
}
template <typename T>
__device__ __forceinline__ T ilcm(T a, T b) {
  typedef typename std::make_unsigned<T>::type U;
  T g = igcd(a, b);
  if (g == 0) return 0;
  T q = (T)-1 < (T)0 && g == (T)-1 ? (T)((U)0 - (U)a) : (T)(a / g);
  return wabs((T)((U)q * (U)b));
}
// shift counts modulo the width (32 for uint8), as the CPU kernels (torch
// 1.13's CPU results; its CUDA ones differ past the width)
template <typename T>
__device__ __forceinline__ int shift_count(T b) { return (int)(b & (T)(sizeof(T) < 4 ? 31 : sizeof(T) * 8 - 1)); }

template <typename T>   // wrapping two's complement arithmetic through the unsigned type
__device__ __forceinline__ T int_op(int op, T a, T b, Q q) {
  typedef typename std::make_unsigned<T>::type U;
  switch (op) {
    case LN_ADD: return (T)((U)a + (U)b);
    case LN_SUB: return (T)((U)a - (U)b);
    case LN_MUL: return (T)((U)a * (U)b);
    case LN_AXPY: return (T)((U)a + (U)((U)(T)sat_i64(q.a) * (U)b));
    case LN_POW: return (T)ipow(a, b);
    case LN_MAXIMUM: return a > b ? a : b;
    case LN_MINIMUM: return a < b ? a : b;
    case LN_DIV: return b == 0 ? 0 : (T)(a / b);   // (the front end sends integer division as float)
    case LN_BITWISE_AND: return a & b;
    case LN_BITWISE_OR: return a | b;
    case LN_BITWISE_XOR: return a ^ b;
    case LN_BITWISE_LSHIFT: return (T)((unsigned long long)(long long)a << shift_count(b));
    case LN_BITWISE_RSHIFT: return (T)(a >> shift_count(b));
    case LN_GCD: return igcd(a, b);
    case LN_LCM: return ilcm(a, b);
  }
  return 0;
}

template <typename T> __device__ __forceinline__ T bin_val(int op, T a, T b, Q al);
template <> __device__ __forceinline__ float bin_val(int op, float a, float b, Q al) { return float_op(op, a, b, al); }
template <> __device__ __forceinline__ double bin_val(int op, double a, double b, Q al) { return float_op(op, a, b, al); }
template <> __device__ __forceinline__ int32_t bin_val(int op, int32_t a, int32_t b, Q al) { return int_op(op, a, b, al); }
template <> __device__ __forceinline__ int64_t bin_val(int op, int64_t a, int64_t b, Q al) { return int_op(op, a, b, al); }
template <> __device__ __forceinline__ uint8_t bin_val(int op, uint8_t a, uint8_t b, Q al) { return int_op(op, a, b, al); }

template <typename T>
__global__ void binary_k(Geo g, int op, Q alpha, char *o, const T *a, const T *b, int ss, T sv) {
  bool cmp = is_cmp(op);
  GRID_LOOP(i, g.n) {
    int64_t off[3];
    offsets<3>(g, i, off);
    T x = ss == 1 ? sv : a[off[1]], y = ss == 2 ? sv : b[off[2]];
    if (cmp) ((uint8_t *)o)[off[0]] = cmp_op(op, x, y);
    else ((T *)o)[off[0]] = bin_val(op, x, y, alpha);
  }
}

// contiguous output; each input dense (stride 1) or a scalar (stride 0)
template <typename T>
__global__ void binary_dense(int64_t n, int op, Q alpha, char *o, const T *a, int sa, const T *b, int sb,
                             int ss, T sv) {
  bool cmp = is_cmp(op);
  GRID_LOOP(i, n) {
    T x = ss == 1 ? sv : a[i * sa], y = ss == 2 ? sv : b[i * sb];
    if (cmp) ((uint8_t *)o)[i] = cmp_op(op, x, y);
    else ((T *)o)[i] = bin_val(op, x, y, alpha);
  }
}

// ---- unary ----------------------------------------------------------------------------

__device__ __forceinline__ bool un_bool(int op) { return op == LN_LOGICAL_NOT || op == LN_ISNAN || op == LN_ISINF || op == LN_SIGNBIT; }

template <typename T>
__device__ __forceinline__ T un_float(int op, T x, T lo, T hi, T p2) {
  switch (op) {
    case LN_NEG: return -x;
    case LN_ABS: return fabs(x);
    case LN_EXP: return exp(x);
    case LN_LOG: return log(x);
    case LN_SQRT: return sqrt(x);
    case LN_TANH: return tanh(x);
    case LN_SIGMOID: return (T)1 / ((T)1 + exp(-x));
    case LN_RELU: return x < 0 ? (T)0 : x;
    case LN_SIN: return sin(x);
    case LN_COS: return cos(x);
    case LN_RSQRT: return (T)1 / sqrt(x);
    case LN_SIGN: return (T)((x > 0) - (x < 0));
    case LN_FLOOR: return floor(x);
    case LN_CEIL: return ceil(x);
    case LN_ROUND: return rint(x);
    case LN_RECIPROCAL: return (T)1 / x;
    case LN_LOG1P: return log1p(x);
    case LN_EXPM1: return expm1(x);
    case LN_SQUARE: return x * x;
    case LN_ERF: return erf(x);
    case LN_SINH: return sinh(x);
    case LN_COSH: return cosh(x);
    case LN_ASINH: return asinh(x);
    case LN_ACOSH: return acosh(x);
    case LN_ATANH: return atanh(x);
    case LN_ASIN: return asin(x);
    case LN_ACOS: return acos(x);
    case LN_ATAN: return atan(x);
    case LN_LOG2: return log2(x);
    case LN_LOG10: return log10(x);
    case LN_EXP2: return exp2(x);
    case LN_TRUNC: return trunc(x);
    case LN_FRAC: return x - trunc(x);
    case LN_LGAMMA: return lgamma(x);
    case LN_DIGAMMA: return (T)ln_digamma((double)x);
    case LN_TRIGAMMA: return (T)ln_trigamma((double)x);
    case LN_ERFC: return erfc(x);
    case LN_ERFINV: return (T)ln_erfinv((double)x);
    case LN_CLAMP: return x < lo ? lo : (x > hi ? hi : x);
    // the activations (PyTorch 1.13's formulas, as c/cpu/elementwise.c's)
    case LN_SILU: return x / ((T)1 + exp(-x));
    case LN_GELU: return x * (T)0.5 * ((T)1 + erf(x * (T)0.70710678118654752440));
    case LN_GELU_TANH: return (T)0.5 * x * ((T)1 + tanh((T)0.79788456080286535588 * (x + (T)0.044715 * x * x * x)));
    case LN_MISH: return x * tanh(log1p(exp(x)));
    case LN_HARDSWISH: case LN_HARDSIGMOID: {
      T c = x + (T)3;
      c = c < (T)0 ? (T)0 : c;
      c = c > (T)6 ? (T)6 : c;
      return op == LN_HARDSWISH ? x * c / (T)6 : c / (T)6;
    }
    // lo, hi, p2: elu's alpha, scale, input_scale; softplus's beta, threshold
    case LN_ELU: return x <= (T)0 ? (exp(x * p2) - (T)1) * (lo * hi) : x * hi;
    case LN_SOFTPLUS: { T xb = x * lo; return xb > hi ? x : log1p(exp(xb)) / lo; }
  }
  return 0;
}

template <typename T>
__device__ __forceinline__ T un_int(int op, T x, double lo, double hi) {
  typedef typename std::make_unsigned<T>::type U;
  switch (op) {
    case LN_NEG: return (T)((U)0 - (U)x);
    case LN_ABS: return x < 0 ? (T)((U)0 - (U)x) : x;
    case LN_RELU: return x > 0 ? x : 0;
    case LN_SIGN: return (T)((x > 0) - (x < 0));
    case LN_SQUARE: return (T)((U)x * (U)x);
    case LN_FLOOR: case LN_CEIL: case LN_ROUND: case LN_TRUNC: return x;
    case LN_BITWISE_NOT: return (T)~x;
    case LN_CLAMP: return x < lo ? (T)lo : (x > hi ? (T)hi : x);
  }
  return 0;
}

template <typename T> __device__ __forceinline__ T un_val(int op, T x, Q q);
template <> __device__ __forceinline__ float un_val(int op, float x, Q q) { return un_float(op, x, (float)q.a, (float)q.b, (float)q.c); }
template <> __device__ __forceinline__ double un_val(int op, double x, Q q) { return un_float(op, x, q.a, q.b, q.c); }
template <> __device__ __forceinline__ int32_t un_val(int op, int32_t x, Q q) { return un_int(op, x, q.a, q.b); }
template <> __device__ __forceinline__ int64_t un_val(int op, int64_t x, Q q) { return un_int(op, x, q.a, q.b); }
template <> __device__ __forceinline__ uint8_t un_val(int op, uint8_t x, Q q) { return un_int(op, x, q.a, q.b); }

template <typename T> __device__ __forceinline__ uint8_t un_flag(int op, T x) {
  if (op == LN_LOGICAL_NOT) return x == 0;
  if (op == LN_ISNAN) return x != x;
  if (op == LN_SIGNBIT) return signbit((double)x) != 0;
  return fabs((double)x) == (double)INFINITY;   // LN_ISINF (never for integers)
}

template <typename T>
__global__ void unary_k(Geo g, int op, Q q, char *o, const T *a) {
  bool flag = un_bool(op);
  GRID_LOOP(i, g.n) {
    int64_t off[2];
    offsets<2>(g, i, off);
    T x = a[off[1]];
    if (flag) ((uint8_t *)o)[off[0]] = un_flag(op, x);
    else ((T *)o)[off[0]] = un_val(op, x, q);
  }
}

template <typename T>
int binary_t(cudaStream_t s, int op, Q alpha, const lnc_view *out, const lnc_view *a, const lnc_view *b,
             int scalar_side, uint64_t scalar) {
  // a scalar operand's value travels in the kernel's arguments
  const T *pa = (const T *)a->data, *pb = (const T *)b->data;
  T sv;
  memcpy(&sv, &scalar, sizeof sv);
  lnc_view va = *a, vb = *b;
  if (scalar_side == 1) for (int d = 0; d < va.ndim; d++) va.stride[d] = 0;
  if (scalar_side == 2) for (int d = 0; d < vb.ndim; d++) vb.stride[d] = 0;
  const lnc_view *v[3] = {out, &va, &vb};
  Geo g;
  fold(g, v, 3);
  if (g.n > 0) {
    if (g.ndim == 1 && g.stride[0][0] == 1 && (g.stride[1][0] | 1) == 1 && (g.stride[2][0] | 1) == 1)
      binary_dense<T><<<blocks_for(g.n), THREADS, 0, s>>>(g.n, op, alpha, out->data, pa, (int)g.stride[1][0], pb,
                                                         (int)g.stride[2][0], scalar_side, sv);
    else
      binary_k<T><<<blocks_for(g.n), THREADS, 0, s>>>(g, op, alpha, out->data, pa, pb, scalar_side, sv);
  }
  return cudaGetLastError();
}

template <typename T>
int unary_t(cudaStream_t s, int op, Q q, const lnc_view *out, const lnc_view *a) {
  const lnc_view *v[2] = {out, a};
  Geo g;
  fold(g, v, 2);
  if (g.n > 0) unary_k<T><<<blocks_for(g.n), THREADS, 0, s>>>(g, op, q, out->data, (const T *)a->data);
  return cudaGetLastError();
}

}  // namespace

extern "C" int lnc_binary(lnc_stream s, int op, double alpha, double p1, double p2, const lnc_view *out,
                          const lnc_view *a, const lnc_view *b, int scalar_side, uint64_t scalar) {
  cudaStream_t st = (cudaStream_t)s;
  Q q = {alpha, p1, p2};
  switch (a->dtype) {
    case LN_FLOAT32: return binary_t<float>(st, op, q, out, a, b, scalar_side, scalar);
    case LN_FLOAT64: return binary_t<double>(st, op, q, out, a, b, scalar_side, scalar);
    case LN_INT32: return binary_t<int32_t>(st, op, q, out, a, b, scalar_side, scalar);
    case LN_INT64: return binary_t<int64_t>(st, op, q, out, a, b, scalar_side, scalar);
    case LN_UINT8: case LN_BOOL: return binary_t<uint8_t>(st, op, q, out, a, b, scalar_side, scalar);
  }
  return cudaErrorInvalidValue;
}

extern "C" int lnc_unary(lnc_stream s, int op, double p0, double p1, double p2, const lnc_view *out,
                         const lnc_view *a) {
  cudaStream_t st = (cudaStream_t)s;
  Q q = {p0, p1, p2};
  switch (a->dtype) {
    case LN_FLOAT32: return unary_t<float>(st, op, q, out, a);
    case LN_FLOAT64: return unary_t<double>(st, op, q, out, a);
    case LN_INT32: return unary_t<int32_t>(st, op, q, out, a);
    case LN_INT64: return unary_t<int64_t>(st, op, q, out, a);
    case LN_UINT8: case LN_BOOL: return unary_t<uint8_t>(st, op, q, out, a);
  }
  return cudaErrorInvalidValue;
}

extern "C" int lnc_copy(lnc_stream s, const lnc_view *dst, const lnc_view *src) {
  cudaStream_t st = (cudaStream_t)s;
  const lnc_view *v[2] = {dst, src};
  Geo g;
  fold(g, v, 2);
  if (g.n == 0) return cudaSuccess;
  unsigned nb = blocks_for(g.n);
  if (dst->dtype == src->dtype) {
    int es = esize(dst->dtype);
    bool dense = g.ndim == 1 && g.stride[0][0] == 1 && g.stride[1][0] == 1;
    if (dense) return cudaMemcpyAsync(dst->data, src->data, (size_t)g.n * es, cudaMemcpyDeviceToDevice, st);
    switch (es) {
      case 1: copy_same<uint8_t><<<nb, THREADS, 0, st>>>(g, (uint8_t *)dst->data, (const uint8_t *)src->data); break;
      case 2: copy_same<uint16_t><<<nb, THREADS, 0, st>>>(g, (uint16_t *)dst->data, (const uint16_t *)src->data); break;
      case 4: copy_same<uint32_t><<<nb, THREADS, 0, st>>>(g, (uint32_t *)dst->data, (const uint32_t *)src->data); break;
      default: copy_same<uint64_t><<<nb, THREADS, 0, st>>>(g, (uint64_t *)dst->data, (const uint64_t *)src->data); break;
    }
  } else {
    copy_cast<<<nb, THREADS, 0, st>>>(g, dst->data, dst->dtype, src->data, src->dtype);
  }
  return cudaGetLastError();
}

extern "C" int lnc_fill(lnc_stream s, const lnc_view *out, uint64_t value) {
  cudaStream_t st = (cudaStream_t)s;
  const lnc_view *v[1] = {out};
  Geo g;
  fold(g, v, 1);
  if (g.n == 0) return cudaSuccess;
  unsigned nb = blocks_for(g.n);
  switch (esize(out->dtype)) {
    case 1: fill_k<uint8_t><<<nb, THREADS, 0, st>>>(g, (uint8_t *)out->data, (uint8_t)value); break;
    case 2: fill_k<uint16_t><<<nb, THREADS, 0, st>>>(g, (uint16_t *)out->data, (uint16_t)value); break;
    case 4: fill_k<uint32_t><<<nb, THREADS, 0, st>>>(g, (uint32_t *)out->data, (uint32_t)value); break;
    default: fill_k<uint64_t><<<nb, THREADS, 0, st>>>(g, (uint64_t *)out->data, value); break;
  }
  return cudaGetLastError();
}

extern "C" int lnc_arange(lnc_stream s, const lnc_view *out, double start, double step) {
  int64_t n = 1;
  for (int d = 0; d < out->ndim; d++) n *= out->shape[d];
  if (n == 0) return cudaSuccess;
  arange_k<<<blocks_for(n), THREADS, 0, (cudaStream_t)s>>>(n, out->data, out->dtype, esize(out->dtype), start, step);
  return cudaGetLastError();
}

extern "C" int lnc_where(lnc_stream s, const lnc_view *out, const lnc_view *cond, const lnc_view *a, const lnc_view *b) {
  cudaStream_t st = (cudaStream_t)s;
  const lnc_view *v[4] = {out, cond, a, b};
  Geo g;
  fold(g, v, 4);
  if (g.n == 0) return cudaSuccess;
  unsigned nb = blocks_for(g.n);
  const uint8_t *c = (const uint8_t *)cond->data;
  switch (esize(out->dtype)) {
    case 1: where_k<uint8_t><<<nb, THREADS, 0, st>>>(g, (uint8_t *)out->data, c, (const uint8_t *)a->data, (const uint8_t *)b->data); break;
    case 2: where_k<uint16_t><<<nb, THREADS, 0, st>>>(g, (uint16_t *)out->data, c, (const uint16_t *)a->data, (const uint16_t *)b->data); break;
    case 4: where_k<uint32_t><<<nb, THREADS, 0, st>>>(g, (uint32_t *)out->data, c, (const uint32_t *)a->data, (const uint32_t *)b->data); break;
    default: where_k<uint64_t><<<nb, THREADS, 0, st>>>(g, (uint64_t *)out->data, c, (const uint64_t *)a->data, (const uint64_t *)b->data); break;
  }
  return cudaGetLastError();
}
