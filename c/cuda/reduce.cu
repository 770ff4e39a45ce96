// reduce.cu -- reductions over a view's last dim (size r) into a contiguous
// output, one block per output element: sum, mean, max, min, argmax, argmin
// (then prod, var, std, norm, any, all: reduce2_k). As c/cpu/reduce.c: floats accumulate
// in double, integer sums in wrapping int64; a NaN wins max/min (its first
// position); ties keep the first position. Also the SGD update.
#include "kern.h"
#include "../include/lunet.h"
#include <cuda_runtime.h>
#include <math.h>

namespace {

const int THREADS = 256;

struct St { double d; int64_t q, i; int nan; };

template <typename T> __device__ __forceinline__ bool isnan_t(T v) { return v != v; }

// b into a (a's positions come first when equal)
__device__ __forceinline__ void merge(int op, bool fl, St &a, const St &b) {
  switch (op) {
    case LN_RSUM: case LN_RMEAN:
      a.d += b.d; a.q = (int64_t)((uint64_t)a.q + (uint64_t)b.q); return;
    default: {
      bool mx = op == LN_RMAX || op == LN_RARGMAX;
      if (b.i < 0) return;
      if (a.i < 0) { a = b; return; }
      if (fl) {
        if (a.nan || b.nan) { if (b.nan && (!a.nan || b.i < a.i)) a = b; return; }
        bool better = mx ? b.d > a.d : b.d < a.d;
        if (better || (b.d == a.d && b.i < a.i)) a = b;
      } else {
        bool better = mx ? b.q > a.q : b.q < a.q;
        if (better || (b.q == a.q && b.i < a.i)) a = b;
      }
    }
  }
}

template <typename T, bool FL>
__global__ void reduce_k(int op, int64_t r, lnc_view a, char *out, int odt, int64_t *idx) {
  __shared__ St sh[THREADS];
  int64_t o = blockIdx.x, base = 0, rest = o;
  int k = a.ndim - 1;
  for (int d = k - 1; d >= 0; d--) {
    int64_t q = rest / a.shape[d];
    base += (rest - q * a.shape[d]) * a.stride[d];
    rest = q;
  }
  const T *x = (const T *)a.data + base;
  int64_t s = a.stride[k];
  St st = {0, 0, -1, 0};
  bool sum = op == LN_RSUM || op == LN_RMEAN;
  if (sum) st.i = 0;
  for (int64_t j = threadIdx.x; j < r; j += blockDim.x) {
    T v = x[j * s];
    St e;
    e.d = (double)v; e.q = FL ? 0 : (int64_t)v; e.i = j; e.nan = FL && isnan_t(v);
    if (sum) { st.d += e.d; st.q = (int64_t)((uint64_t)st.q + (uint64_t)e.q); }
    else merge(op, FL, st, e);
  }
  sh[threadIdx.x] = st;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w >>= 1) {
    if ((int)threadIdx.x < w) { St t = sh[threadIdx.x]; merge(op, FL, t, sh[threadIdx.x + w]); sh[threadIdx.x] = t; }
    __syncthreads();
  }
  if (threadIdx.x) return;
  St f = sh[0];
  double v = f.nan ? (double)NAN : f.d;
  switch (op) {
    case LN_RARGMAX: case LN_RARGMIN: ((int64_t *)out)[o] = f.i; return;
    case LN_RMEAN: v = (FL ? f.d : (double)f.q) / (double)r; break;
    default:
      if (idx) idx[o] = f.i;
      if (!FL) {
        if (odt == LN_INT64) ((int64_t *)out)[o] = f.q;
        else if (odt == LN_INT32) ((int32_t *)out)[o] = (int32_t)f.q;
        else ((uint8_t *)out)[o] = (uint8_t)f.q;
        return;
      }
  }
  switch (odt) {
    case LN_FLOAT32: ((float *)out)[o] = (float)v; return;
    case LN_FLOAT64: ((double *)out)[o] = v; return;
    case LN_INT32: ((int32_t *)out)[o] = (int32_t)v; return;
    case LN_INT64: ((int64_t *)out)[o] = (int64_t)v; return;
    default: ((uint8_t *)out)[o] = (uint8_t)(int64_t)v; return;
  }
}

template <typename T>
__global__ void sgd_k(int64_t n, T *p, const T *g, T *buf, lnc_sgd h) {
  const T lr = (T)h.lr, wd = (T)h.weight_decay, mom = (T)h.momentum;
  const T damp1 = (T)(1.0 - h.dampening), sign = h.maximize ? (T)-1 : (T)1;
  int mode = buf ? (h.first ? 1 : 2) : 0;
  bool nest = h.nesterov && mode, decay = h.weight_decay != 0;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    T d = sign * g[i];
    if (decay) d = d + wd * p[i];
    if (mode) {
      T m = mode == 1 ? d : buf[i] * mom + damp1 * d;
      buf[i] = m;
      d = nest ? d + mom * m : m;
    }
    p[i] = p[i] - lr * d;
  }
}

__device__ double block_sum(double v, double *sh) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w >>= 1) {
    if ((int)threadIdx.x < w) sh[threadIdx.x] += sh[threadIdx.x + w];
    __syncthreads();
  }
  double r = sh[0];
  __syncthreads();
  return r;
}

// the other reductions, one block per output: prod (in order: one thread, as
// a product's rounding depends on it), var/std (two passes, deviations from
// the double mean), norm by order (2, 1, 0, +-inf, p), any, all
template <typename T, bool FL>
__global__ void reduce2_k(int op, double p, int64_t r, lnc_view a, char *out, int odt) {
  __shared__ double sh[THREADS];
  int64_t o = blockIdx.x, base = 0, rest = o;
  int k = a.ndim - 1;
  for (int d = k - 1; d >= 0; d--) {
    int64_t q = rest / a.shape[d];
    base += (rest - q * a.shape[d]) * a.stride[d];
    rest = q;
  }
  const T *x = (const T *)a.data + base;
  int64_t s = a.stride[k];
  double v = 0;
  int64_t q = 0;
  bool intout = false;
  switch (op) {
    case LN_RPROD: {
      if (threadIdx.x == 0) {
        double d = 1; uint64_t u = 1;
        for (int64_t j = 0; j < r; j++) { d *= (double)x[j * s]; u *= (uint64_t)(int64_t)x[j * s]; }
        v = d; q = (int64_t)u;
      }
      intout = !FL;
      break;
    }
    case LN_RVAR: case LN_RSTD: {
      double acc = 0;
      for (int64_t j = threadIdx.x; j < r; j += blockDim.x) acc += (double)x[j * s];
      double mean = block_sum(acc, sh) / (double)r, m2 = 0;
      for (int64_t j = threadIdx.x; j < r; j += blockDim.x) { double dv = (double)x[j * s] - mean; m2 += dv * dv; }
      m2 = block_sum(m2, sh);
      double den = (double)r - p;
      v = r == 0 ? (double)NAN : m2 / (den > 0 ? den : 0);
      if (op == LN_RSTD) v = sqrt(v);
      break;
    }
    case LN_RNORM: {
      if (isinf(p)) {   // max (min) |x|, a NaN wins: one thread, in order
        if (threadIdx.x == 0) {
          double acc = r ? fabs((double)x[0]) : 0;
          for (int64_t j = 1; j < r && acc == acc; j++) {
            double w = fabs((double)x[j * s]);
            if (w != w || (p > 0 ? w > acc : w < acc)) acc = w;
          }
          v = acc;
        }
        break;
      }
      double acc = 0;
      for (int64_t j = threadIdx.x; j < r; j += blockDim.x) {
        double w = (double)x[j * s];
        acc += p == 2 ? w * w : p == 1 ? fabs(w) : p == 0 ? (double)(w != 0) : pow(fabs(w), p);
      }
      v = block_sum(acc, sh);
      if (p == 2) v = sqrt(v);
      else if (p != 1 && p != 0) v = pow(v, 1.0 / p);
      break;
    }
    case LN_RANY: case LN_RALL: {
      double acc = 0;   // the count of nonzero elements
      for (int64_t j = threadIdx.x; j < r; j += blockDim.x) acc += x[j * s] != 0;
      acc = block_sum(acc, sh);
      if (threadIdx.x == 0) ((uint8_t *)out)[o] = op == LN_RANY ? acc > 0 : acc == (double)r;
      return;
    }
  }
  if (threadIdx.x) return;
  if (intout) {
    if (odt == LN_INT64) ((int64_t *)out)[o] = q;
    else if (odt == LN_INT32) ((int32_t *)out)[o] = (int32_t)q;
    else ((uint8_t *)out)[o] = (uint8_t)q;
    return;
  }
  switch (odt) {
    case LN_FLOAT32: ((float *)out)[o] = (float)v; return;
    case LN_FLOAT64: ((double *)out)[o] = v; return;
    case LN_INT32: ((int32_t *)out)[o] = (int32_t)v; return;
    case LN_INT64: ((int64_t *)out)[o] = (int64_t)v; return;
    default: ((uint8_t *)out)[o] = (uint8_t)(int64_t)v; return;
  }
}

// clip_grad_norm's sum |x|^p (max |x| for p = inf, a NaN wins) over n
// contiguous elements into out[0] (float64), one block: a fixed order, not
// the CPU's (sums may differ in the last bits)
template <typename T>
__global__ void norm_pow_sum_k(int64_t n, double p, const T *x, double *out) {
  __shared__ double sh[THREADS];
  bool inf = isinf(p);
  double s = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    double v = fabs((double)x[i]);
    if (inf) { if (v > s || v != v) s = s != s ? s : v; }
    else s += p == 2 ? v * v : p == 1 ? v : pow(v, p);
  }
  sh[threadIdx.x] = s;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w >>= 1) {
    if ((int)threadIdx.x < w) {
      double a = sh[threadIdx.x], b = sh[threadIdx.x + w];
      sh[threadIdx.x] = inf ? (a != a || b != b ? (double)NAN : (a > b ? a : b)) : a + b;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) *out = sh[0];
}

// Adam / AdamW as c/cpu/optim.c: host-computed scalars rounded to T
template <typename T>
__global__ void adam_k(int64_t n, T *p, const T *g, T *m, T *v, T *vmax, lnc_adam h) {
  double bc1 = 1.0 - pow(h.beta1, (double)h.step), bc2 = 1.0 - pow(h.beta2, (double)h.step);
  const T neg_step = (T)(-(h.lr / bc1)), bc2_sqrt = (T)sqrt(bc2);
  const T b1 = (T)h.beta1, b2 = (T)h.beta2, omb1 = (T)(1.0 - h.beta1), omb2 = (T)(1.0 - h.beta2);
  const T eps = (T)h.eps, wd = (T)h.weight_decay;
  const T shrink = h.decoupled ? (T)(1.0 - h.lr * h.weight_decay) : (T)1, sign = h.maximize ? (T)-1 : (T)1;
  bool coupled = !h.decoupled && h.weight_decay != 0;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    T gi = sign * g[i], pi = p[i];
    if (coupled) gi = gi + wd * pi;
    pi = pi * shrink;
    T mi = m[i] * b1 + omb1 * gi;
    T vi = v[i] * b2 + omb2 * gi * gi;
    m[i] = mi; v[i] = vi;
    if (vmax) { T x = vmax[i]; vi = x > vi || x != x ? x : vi; vmax[i] = vi; }
    T denom = sqrt(vi) / bc2_sqrt + eps;
    p[i] = pi + neg_step * (mi / denom);
  }
}

// RMSprop as c/cpu/optim.c (centered, momentum, weight decay, maximize)
template <typename T>
__global__ void rmsprop_k(int64_t n, T *p, const T *g, T *sq, T *buf, T *ga, lnc_rmsprop h) {
  const T lr = (T)h.lr, alpha = (T)h.alpha, oma = (T)(1.0 - h.alpha), eps = (T)h.eps;
  const T wd = (T)h.weight_decay, mom = (T)h.momentum, sign = h.maximize ? (T)-1 : (T)1;
  bool decay = h.weight_decay != 0, momentum = h.momentum > 0;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    T gi = sign * g[i];
    if (decay) gi = gi + wd * p[i];
    T s = sq[i] * alpha + oma * gi * gi;
    sq[i] = s;
    T avg;
    if (h.centered) { T c = ga[i] * alpha + oma * gi; ga[i] = c; avg = sqrt(s - c * c); }
    else avg = sqrt(s);
    avg = avg + eps;
    if (momentum) { T bi = buf[i] * mom + gi / avg; buf[i] = bi; p[i] = p[i] - lr * bi; }
    else p[i] = p[i] - lr * (gi / avg);
  }
}
}  // namespace

extern "C" int lnc_rmsprop_step(lnc_stream s, int dtype, int64_t n, char *param, const char *grad, char *sq, char *buf,
                                char *ga, const lnc_rmsprop *h) {
  if (n == 0) return cudaSuccess;
  int64_t b = (n + THREADS - 1) / THREADS;
  unsigned nb = (unsigned)(b < 65535 * 8 ? b : 65535 * 8);
  cudaStream_t st = (cudaStream_t)s;
  if (dtype == LN_FLOAT64)
    rmsprop_k<double><<<nb, THREADS, 0, st>>>(n, (double *)param, (const double *)grad, (double *)sq, (double *)buf, (double *)ga, *h);
  else
    rmsprop_k<float><<<nb, THREADS, 0, st>>>(n, (float *)param, (const float *)grad, (float *)sq, (float *)buf, (float *)ga, *h);
  return cudaGetLastError();
}

extern "C" int lnc_adam_step(lnc_stream s, int dtype, int64_t n, char *param, const char *grad, char *m, char *v,
                             char *vmax, const lnc_adam *h) {
  if (n == 0) return cudaSuccess;
  int64_t b = (n + THREADS - 1) / THREADS;
  unsigned nb = (unsigned)(b < 65535 * 8 ? b : 65535 * 8);
  cudaStream_t st = (cudaStream_t)s;
  if (dtype == LN_FLOAT64)
    adam_k<double><<<nb, THREADS, 0, st>>>(n, (double *)param, (const double *)grad, (double *)m, (double *)v, (double *)vmax, *h);
  else
    adam_k<float><<<nb, THREADS, 0, st>>>(n, (float *)param, (const float *)grad, (float *)m, (float *)v, (float *)vmax, *h);
  return cudaGetLastError();
}

extern "C" int lnc_norm_pow_sum(lnc_stream s, double p, int64_t n, const lnc_view *in, const lnc_view *out) {
  cudaStream_t st = (cudaStream_t)s;
  if (in->dtype == LN_FLOAT64) norm_pow_sum_k<double><<<1, THREADS, 0, st>>>(n, p, (const double *)in->data, (double *)out->data);
  else norm_pow_sum_k<float><<<1, THREADS, 0, st>>>(n, p, (const float *)in->data, (double *)out->data);
  return cudaGetLastError();
}

extern "C" int lnc_reduce(lnc_stream s, int op, double p, int64_t r, const lnc_view *out, const lnc_view *idx,
                          const lnc_view *a) {
  int64_t rows = 1;
  for (int d = 0; d < out->ndim; d++) rows *= out->shape[d];
  if (rows == 0) return cudaSuccess;
  if (rows > 0x7fffffffLL) return cudaErrorInvalidConfiguration;
  cudaStream_t st = (cudaStream_t)s;
  int64_t *ip = idx && idx->data ? (int64_t *)idx->data : NULL;
  dim3 grid((unsigned)rows);
  bool other = op == LN_RPROD || op == LN_RVAR || op == LN_RSTD || op == LN_RNORM || op == LN_RANY || op == LN_RALL;
  if (other) {
    switch (a->dtype) {
      case LN_FLOAT32: reduce2_k<float, true><<<grid, THREADS, 0, st>>>(op, p, r, *a, out->data, out->dtype); break;
      case LN_FLOAT64: reduce2_k<double, true><<<grid, THREADS, 0, st>>>(op, p, r, *a, out->data, out->dtype); break;
      case LN_INT32: reduce2_k<int32_t, false><<<grid, THREADS, 0, st>>>(op, p, r, *a, out->data, out->dtype); break;
      case LN_INT64: reduce2_k<int64_t, false><<<grid, THREADS, 0, st>>>(op, p, r, *a, out->data, out->dtype); break;
      case LN_UINT8: case LN_BOOL: reduce2_k<uint8_t, false><<<grid, THREADS, 0, st>>>(op, p, r, *a, out->data, out->dtype); break;
      default: return cudaErrorInvalidValue;
    }
    return cudaGetLastError();
  }
  switch (a->dtype) {
    case LN_FLOAT32: reduce_k<float, true><<<grid, THREADS, 0, st>>>(op, r, *a, out->data, out->dtype, ip); break;
    case LN_FLOAT64: reduce_k<double, true><<<grid, THREADS, 0, st>>>(op, r, *a, out->data, out->dtype, ip); break;
    case LN_INT32: reduce_k<int32_t, false><<<grid, THREADS, 0, st>>>(op, r, *a, out->data, out->dtype, ip); break;
    case LN_INT64: reduce_k<int64_t, false><<<grid, THREADS, 0, st>>>(op, r, *a, out->data, out->dtype, ip); break;
    case LN_UINT8: case LN_BOOL: reduce_k<uint8_t, false><<<grid, THREADS, 0, st>>>(op, r, *a, out->data, out->dtype, ip); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

extern "C" int lnc_sgd_step(lnc_stream s, int dtype, int64_t n, char *param, const char *grad, char *mom,
                            const lnc_sgd *h) {
  if (n == 0) return cudaSuccess;
  int64_t b = (n + THREADS - 1) / THREADS;
  unsigned nb = (unsigned)(b < 65535 * 8 ? b : 65535 * 8);
  cudaStream_t st = (cudaStream_t)s;
  if (dtype == LN_FLOAT64) sgd_k<double><<<nb, THREADS, 0, st>>>(n, (double *)param, (const double *)grad, (double *)mom, *h);
  else sgd_k<float><<<nb, THREADS, 0, st>>>(n, (float *)param, (const float *)grad, (float *)mom, *h);
  return cudaGetLastError();
}
