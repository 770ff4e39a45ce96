// nn.cu -- NN kernels of the CUDA backend without cuDNN (first version):
// ReLU backward, softmax / log-softmax and their backward, NLL loss and its
// backward (targets checked on the device; the caller reads the flag back),
// max and average 2-D pooling and their backward. One thread per output
// element or per softmax column; each mirrors c/cpu/ (softmax.c, loss.c,
// pool.c) in its order of operations, except that max pooling's backward
// adds overlapping windows' gradients with atomics (order differs).
#include "kern.h"
#include "../include/lunet.h"
#include <cuda_runtime.h>
#include <math.h>

namespace {
const int THREADS = 256;
unsigned blocks(int64_t n) {
  int64_t b = (n + THREADS - 1) / THREADS;
  return (unsigned)(b < 65535 * 8 ? (b > 0 ? b : 1) : 65535 * 8);
}
#define GRID_LOOP(i, n) for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

template <typename T> __global__ void relu_bwd_k(int64_t n, T *dx, const T *dy, const T *y) {
  GRID_LOOP(i, n) dx[i] = y[i] > 0 ? dy[i] : (T)0;
}

// one thread per (outer, inner) column of D elements
template <typename T> __global__ void softmax_k(int64_t outer, int64_t D, int64_t inner, int lg, T *y, const T *x) {
  GRID_LOOP(c, outer * inner) {
    int64_t o = c / inner, j = c - o * inner;
    const T *xc = x + o * D * inner + j;
    T *yc = y + o * D * inner + j;
    T m = -INFINITY, s = 0;
    for (int64_t d = 0; d < D; d++) { T v = xc[d * inner]; m = (v > m || v != v) ? v : m; }
    for (int64_t d = 0; d < D; d++) { T e = exp(xc[d * inner] - m); if (!lg) yc[d * inner] = e; s += e; }
    if (lg) { T lse = m + log(s); for (int64_t d = 0; d < D; d++) yc[d * inner] = xc[d * inner] - lse; }
    else { T r = (T)1 / s; for (int64_t d = 0; d < D; d++) yc[d * inner] *= r; }
  }
}

// softmax: dx = y * (dy - sum(dy*y)); log-softmax: dx = dy - exp(y) * sum(dy)
template <typename T> __global__ void softmax_bwd_k(int64_t outer, int64_t D, int64_t inner, int lg, T *dx,
                                                   const T *dy, const T *y) {
  GRID_LOOP(c, outer * inner) {
    int64_t o = c / inner, j = c - o * inner, base = o * D * inner + j;
    T s = 0;
    for (int64_t d = 0; d < D; d++) s += lg ? dy[base + d * inner] : dy[base + d * inner] * y[base + d * inner];
    for (int64_t d = 0; d < D; d++) {
      int64_t k = base + d * inner;
      dx[k] = lg ? dy[k] - exp(y[k]) * s : y[k] * (dy[k] - s);
    }
  }
}

// the first bad target's sample into *bad (atomicMin over sample numbers)
__global__ void check_targets_k(int64_t N, int64_t C, int64_t base, int64_t ignore, const int64_t *t,
                                unsigned long long *bad) {
  GRID_LOOP(i, N) {
    int64_t v = t[i];
    if (v != ignore && (v < base || v >= base + C)) atomicMin(bad, (unsigned long long)i);
  }
}

// single block: the loss in double, in sample order per thread then a tree
template <typename T> __global__ void nll_fwd_k(int64_t N, int64_t C, int64_t base, int64_t ignore, int red,
                                               const T *lp, const T *w, const int64_t *t, T *out) {
  __shared__ double ss[THREADS], sw[THREADS];
  double sum = 0, wsum = 0;
  for (int64_t i = threadIdx.x; i < N; i += blockDim.x) {
    int64_t v = t[i];
    double l = 0, wi = 0;
    if (v != ignore) { int64_t k = v - base; wi = w ? (double)w[k] : 1.0; l = -wi * (double)lp[i * C + k]; }
    if (red == 0) out[i] = (T)l;
    sum += l; wsum += wi;
  }
  ss[threadIdx.x] = sum; sw[threadIdx.x] = wsum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if ((int)threadIdx.x < s) { ss[threadIdx.x] += ss[threadIdx.x + s]; sw[threadIdx.x] += sw[threadIdx.x + s]; }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    if (red == 1) out[0] = (T)(ss[0] / sw[0]);
    else if (red == 2) out[0] = (T)ss[0];
  }
}

template <typename T> __global__ void wsum_k(int64_t N, int64_t base, int64_t ignore, const T *w, const int64_t *t,
                                            double *wsum) {
  __shared__ double sw[THREADS];
  double s = 0;
  for (int64_t i = threadIdx.x; i < N; i += blockDim.x) if (t[i] != ignore) s += w ? (double)w[t[i] - base] : 1.0;
  sw[threadIdx.x] = s;
  __syncthreads();
  for (int k = blockDim.x / 2; k > 0; k >>= 1) { if ((int)threadIdx.x < k) sw[threadIdx.x] += sw[threadIdx.x + k]; __syncthreads(); }
  if (threadIdx.x == 0) *wsum = sw[0];
}

template <typename T> __global__ void nll_bwd_k(int64_t N, int64_t C, int64_t base, int64_t ignore, int red,
                                               const T *w, const int64_t *t, const T *dout, const double *wsum, T *dlp) {
  GRID_LOOP(i, N * C) {
    int64_t n = i / C, k = i - n * C, v = t[n];
    T g = 0;
    if (v != ignore && v - base == k) {
      double gg = red == 0 ? (double)dout[n] : (double)dout[0] * (red == 1 ? 1 / *wsum : 1.0);
      g = (T)(-(w ? (double)w[k] : 1.0) * gg);
    }
    dlp[i] = g;
  }
}

// one thread per output; candidates in PyTorch's order (kh outer, kw inner):
// strictly greater wins, a NaN wins
template <typename T> __global__ void maxpool_k(ln_pool2d_params p, int64_t planes, int64_t H, int64_t W, int64_t OH,
                                               int64_t OW, const T *x, T *y, int64_t *idx) {
  GRID_LOOP(o, planes * OH * OW) {
    int64_t pl = o / (OH * OW), r = o - pl * OH * OW, oh = r / OW, ow = r - oh * OW;
    int64_t hs = oh * p.stride_h - p.pad_h, ws = ow * p.stride_w - p.pad_w, h0 = hs, w0 = ws;
    while (h0 < 0) h0 += p.dil_h;
    while (w0 < 0) w0 += p.dil_w;
    const T *xp = x + pl * H * W;
    T m = -INFINITY;
    int64_t mi = h0 * W + w0;
    for (int64_t kh = 0; kh < p.kh; kh++) {
      int64_t h = hs + kh * p.dil_h;
      if (h < 0 || h >= H) continue;
      for (int64_t kw = 0; kw < p.kw; kw++) {
        int64_t w = ws + kw * p.dil_w;
        if (w < 0 || w >= W) continue;
        T v = xp[h * W + w];
        if (v > m || v != v) { m = v; mi = h * W + w; }
      }
    }
    y[o] = m;
    idx[o] = mi;
  }
}

template <typename T> __global__ void zero_k(int64_t n, T *x) { GRID_LOOP(i, n) x[i] = 0; }

template <typename T> __global__ void maxpool_bwd_k(int64_t planes, int64_t HW, int64_t OHW, const T *dy,
                                                   const int64_t *idx, T *dx, unsigned long long *bad) {
  GRID_LOOP(o, planes * OHW) {
    int64_t pl = o / OHW, i = idx[o];
    if (i < 0 || i >= HW) { atomicMin(bad, (unsigned long long)o); continue; }
    atomicAdd(dx + pl * HW + i, dy[o]);
  }
}

// 1/divisor of output (oh, ow) by PyTorch's rule (0 when the window holds no input)
template <typename T> __device__ T avg_scale(const ln_pool2d_params &p, int64_t H, int64_t W, int64_t oh, int64_t ow) {
  int64_t hs = oh * p.stride_h - p.pad_h, he = min(hs + (int64_t)p.kh, H + p.pad_h), ph = he - hs;
  hs = max(hs, (int64_t)0); he = min(he, H);
  int64_t ws = ow * p.stride_w - p.pad_w, we = min(ws + (int64_t)p.kw, W + p.pad_w);
  int64_t pool = ph * (we - ws);
  ws = max(ws, (int64_t)0); we = min(we, W);
  int64_t div = p.count_include_pad ? pool : (he - hs) * (we - ws);
  return (hs >= he || ws >= we) ? (T)0 : (T)1 / (T)div;
}

template <typename T> __global__ void avgpool_k(ln_pool2d_params p, int64_t planes, int64_t H, int64_t W, int64_t OH,
                                               int64_t OW, const T *x, T *y) {
  GRID_LOOP(o, planes * OH * OW) {
    int64_t pl = o / (OH * OW), r = o - pl * OH * OW, oh = r / OW, ow = r - oh * OW;
    int64_t hs = oh * p.stride_h - p.pad_h, ws = ow * p.stride_w - p.pad_w;
    const T *xp = x + pl * H * W;
    T s = 0;
    for (int64_t kh = 0; kh < p.kh; kh++) {
      int64_t h = hs + kh;
      if (h < 0 || h >= H) continue;
      for (int64_t kw = 0; kw < p.kw; kw++) {
        int64_t w = ws + kw;
        if (w >= 0 && w < W) s += xp[h * W + w];
      }
    }
    y[o] = s * avg_scale<T>(p, H, W, oh, ow);
  }
}

// gather form (no atomics): each input element sums the outputs whose window holds it
template <typename T> __global__ void avgpool_bwd_k(ln_pool2d_params p, int64_t planes, int64_t H, int64_t W,
                                                   int64_t OH, int64_t OW, const T *dy, T *dx) {
  GRID_LOOP(i, planes * H * W) {
    int64_t pl = i / (H * W), r = i - pl * H * W, h = r / W, w = r - h * W;
    const T *dyp = dy + pl * OH * OW;
    T s = 0;
    for (int64_t oh = 0; oh < OH; oh++) {
      int64_t hs = oh * p.stride_h - p.pad_h;
      if (h < hs || h >= hs + p.kh) continue;
      for (int64_t ow = 0; ow < OW; ow++) {
        int64_t ws = ow * p.stride_w - p.pad_w;
        if (w < ws || w >= ws + p.kw) continue;
        s += dyp[oh * OW + ow] * avg_scale<T>(p, H, W, oh, ow);
      }
    }
    dx[i] = s;
  }
}
// adaptive bins [floor(o*H/OH), ceil((o+1)*H/OH)); one thread per output
template <typename T> __global__ void adaptive_k(int64_t planes, int64_t H, int64_t W, int64_t OH, int64_t OW,
                                                const T *x, T *y) {
  GRID_LOOP(o, planes * OH * OW) {
    int64_t pl = o / (OH * OW), r = o - pl * OH * OW, oh = r / OW, ow = r - oh * OW;
    int64_t hs = oh * H / OH, he = ((oh + 1) * H + OH - 1) / OH, ws = ow * W / OW, we = ((ow + 1) * W + OW - 1) / OW;
    const T *xp = x + pl * H * W;
    T s = 0;
    for (int64_t h = hs; h < he; h++)
      for (int64_t w = ws; w < we; w++) s += xp[h * W + w];
    y[o] = s / (T)((he - hs) * (we - ws));
  }
}

// gather form: each input element sums the shares of the bins that hold it
template <typename T> __global__ void adaptive_bwd_k(int64_t planes, int64_t H, int64_t W, int64_t OH, int64_t OW,
                                                    const T *dy, T *dx) {
  GRID_LOOP(i, planes * H * W) {
    int64_t pl = i / (H * W), r = i - pl * H * W, h = r / W, w = r - h * W;
    const T *dyp = dy + pl * OH * OW;
    T s = 0;
    for (int64_t oh = 0; oh < OH; oh++) {
      int64_t hs = oh * H / OH, he = ((oh + 1) * H + OH - 1) / OH;
      if (h < hs || h >= he) continue;
      for (int64_t ow = 0; ow < OW; ow++) {
        int64_t ws = ow * W / OW, we = ((ow + 1) * W + OW - 1) / OW;
        if (w >= ws && w < we) s += dyp[oh * OW + ow] / (T)((he - hs) * (we - ws));
      }
    }
    dx[i] = s;
  }
}
}  // namespace

extern "C" int lnc_adaptive_pool(lnc_stream s, int bwd, int dt, int64_t planes, int64_t H, int64_t W, int64_t OH,
                                 int64_t OW, char *out, const char *in, char *din, const char *dout) {
  cudaStream_t st = (cudaStream_t)s;
  int64_t n = bwd ? planes * H * W : planes * OH * OW;
  if (n == 0) return cudaSuccess;
  if (!bwd) {
    if (dt == LN_FLOAT64) adaptive_k<double><<<blocks(n), THREADS, 0, st>>>(planes, H, W, OH, OW, (const double *)in, (double *)out);
    else adaptive_k<float><<<blocks(n), THREADS, 0, st>>>(planes, H, W, OH, OW, (const float *)in, (float *)out);
  } else {
    if (dt == LN_FLOAT64) adaptive_bwd_k<double><<<blocks(n), THREADS, 0, st>>>(planes, H, W, OH, OW, (const double *)dout, (double *)din);
    else adaptive_bwd_k<float><<<blocks(n), THREADS, 0, st>>>(planes, H, W, OH, OW, (const float *)dout, (float *)din);
  }
  return cudaGetLastError();
}

#define BOTH(dt, call_f, call_d) ((dt) == LN_FLOAT64 ? (call_d) : (call_f))

extern "C" int lnc_relu_bwd(lnc_stream s, int dt, int64_t n, char *dx, const char *dy, const char *y) {
  cudaStream_t st = (cudaStream_t)s;
  if (n == 0) return cudaSuccess;
  if (dt == LN_FLOAT64) relu_bwd_k<double><<<blocks(n), THREADS, 0, st>>>(n, (double *)dx, (const double *)dy, (const double *)y);
  else relu_bwd_k<float><<<blocks(n), THREADS, 0, st>>>(n, (float *)dx, (const float *)dy, (const float *)y);
  return cudaGetLastError();
}

extern "C" int lnc_softmax(lnc_stream s, int dt, int lg, int64_t outer, int64_t D, int64_t inner, char *y,
                           const char *x, char *dx, const char *dy) {
  cudaStream_t st = (cudaStream_t)s;
  int64_t n = outer * inner;
  if (n == 0 || D == 0) return cudaSuccess;
  if (!dx) {
    if (dt == LN_FLOAT64) softmax_k<double><<<blocks(n), THREADS, 0, st>>>(outer, D, inner, lg, (double *)y, (const double *)x);
    else softmax_k<float><<<blocks(n), THREADS, 0, st>>>(outer, D, inner, lg, (float *)y, (const float *)x);
  } else {
    if (dt == LN_FLOAT64)
      softmax_bwd_k<double><<<blocks(n), THREADS, 0, st>>>(outer, D, inner, lg, (double *)dx, (const double *)dy, (const double *)y);
    else
      softmax_bwd_k<float><<<blocks(n), THREADS, 0, st>>>(outer, D, inner, lg, (float *)dx, (const float *)dy, (const float *)y);
  }
  return cudaGetLastError();
}

// *bad_sample: -1 when every target is valid, else the first bad sample (synchronous)
extern "C" int lnc_nll_check(lnc_stream s, int64_t N, int64_t C, int64_t base, int64_t ignore, const int64_t *t,
                             int64_t *bad_sample, int64_t *bad_target) {
  cudaStream_t st = (cudaStream_t)s;
  unsigned long long *d = NULL, h = ~0ULL;
  cudaError_t e = cudaMallocAsync((void **)&d, sizeof *d, st);
  if (e) return e;
  e = cudaMemcpyAsync(d, &h, sizeof h, cudaMemcpyHostToDevice, st);
  if (!e && N) check_targets_k<<<blocks(N), THREADS, 0, st>>>(N, C, base, ignore, t, d);
  if (!e) e = cudaGetLastError();
  if (!e) e = cudaMemcpyAsync(&h, d, sizeof h, cudaMemcpyDeviceToHost, st);
  cudaFreeAsync(d, st);
  if (!e) e = cudaStreamSynchronize(st);
  *bad_sample = -1;
  if (!e && h != ~0ULL) {
    *bad_sample = (int64_t)h;
    e = cudaMemcpy(bad_target, t + h, sizeof *bad_target, cudaMemcpyDeviceToHost);
  }
  return e;
}

extern "C" int lnc_nll(lnc_stream s, int dt, int red, int64_t N, int64_t C, int64_t base, int64_t ignore,
                       const char *lp, const char *w, const int64_t *t, char *out, char *dlp, const char *dout) {
  cudaStream_t st = (cudaStream_t)s;
  if (!dlp) {
    if (dt == LN_FLOAT64) nll_fwd_k<double><<<1, THREADS, 0, st>>>(N, C, base, ignore, red, (const double *)lp, (const double *)w, t, (double *)out);
    else nll_fwd_k<float><<<1, THREADS, 0, st>>>(N, C, base, ignore, red, (const float *)lp, (const float *)w, t, (float *)out);
    return cudaGetLastError();
  }
  double *wsum = NULL;
  cudaError_t e = cudaMallocAsync((void **)&wsum, sizeof *wsum, st);
  if (e) return e;
  if (dt == LN_FLOAT64) {
    wsum_k<double><<<1, THREADS, 0, st>>>(N, base, ignore, (const double *)w, t, wsum);
    if (N * C) nll_bwd_k<double><<<blocks(N * C), THREADS, 0, st>>>(N, C, base, ignore, red, (const double *)w, t, (const double *)dout, wsum, (double *)dlp);
  } else {
    wsum_k<float><<<1, THREADS, 0, st>>>(N, base, ignore, (const float *)w, t, wsum);
    if (N * C) nll_bwd_k<float><<<blocks(N * C), THREADS, 0, st>>>(N, C, base, ignore, red, (const float *)w, t, (const float *)dout, wsum, (float *)dlp);
  }
  e = cudaGetLastError();
  cudaFreeAsync(wsum, st);
  return e;
}

extern "C" int lnc_pool(lnc_stream s, int kind, int bwd, int dt, const ln_pool2d_params *p, int64_t planes, int64_t H,
                        int64_t W, int64_t OH, int64_t OW, char *out, const char *in, char *din, const char *dout,
                        int64_t *idx, int64_t bad[2]) {
  cudaStream_t st = (cudaStream_t)s;
  int64_t no = planes * OH * OW, ni = planes * H * W;
  bool f64 = dt == LN_FLOAT64;
  bad[0] = 0;
  if (kind == 0 && !bwd) {   // max forward
    if (!no) return cudaSuccess;
    if (f64) maxpool_k<double><<<blocks(no), THREADS, 0, st>>>(*p, planes, H, W, OH, OW, (const double *)in, (double *)out, idx);
    else maxpool_k<float><<<blocks(no), THREADS, 0, st>>>(*p, planes, H, W, OH, OW, (const float *)in, (float *)out, idx);
    return cudaGetLastError();
  }
  if (kind == 0) {           // max backward: zero, scatter with atomics, check indices (synchronous)
    if (ni) { if (f64) zero_k<double><<<blocks(ni), THREADS, 0, st>>>(ni, (double *)din); else zero_k<float><<<blocks(ni), THREADS, 0, st>>>(ni, (float *)din); }
    if (!no) return cudaGetLastError();
    unsigned long long *d = NULL, h = ~0ULL;
    cudaError_t e = cudaMallocAsync((void **)&d, sizeof *d, st);
    if (!e) e = cudaMemcpyAsync(d, &h, sizeof h, cudaMemcpyHostToDevice, st);
    if (!e) {
      if (f64) maxpool_bwd_k<double><<<blocks(no), THREADS, 0, st>>>(planes, H * W, OH * OW, (const double *)dout, idx, (double *)din, d);
      else maxpool_bwd_k<float><<<blocks(no), THREADS, 0, st>>>(planes, H * W, OH * OW, (const float *)dout, idx, (float *)din, d);
      e = cudaGetLastError();
    }
    if (!e) e = cudaMemcpyAsync(&h, d, sizeof h, cudaMemcpyDeviceToHost, st);
    if (d) cudaFreeAsync(d, st);
    if (!e) e = cudaStreamSynchronize(st);
    if (!e && h != ~0ULL) { bad[0] = 1; e = cudaMemcpy(&bad[1], idx + h, sizeof bad[1], cudaMemcpyDeviceToHost); }
    return e;
  }
  if (!bwd) {                // average forward
    if (!no) return cudaSuccess;
    if (f64) avgpool_k<double><<<blocks(no), THREADS, 0, st>>>(*p, planes, H, W, OH, OW, (const double *)in, (double *)out);
    else avgpool_k<float><<<blocks(no), THREADS, 0, st>>>(*p, planes, H, W, OH, OW, (const float *)in, (float *)out);
    return cudaGetLastError();
  }
  if (!ni) return cudaSuccess;
  if (f64) avgpool_bwd_k<double><<<blocks(ni), THREADS, 0, st>>>(*p, planes, H, W, OH, OW, (const double *)dout, (double *)din);
  else avgpool_bwd_k<float><<<blocks(ni), THREADS, 0, st>>>(*p, planes, H, W, OH, OW, (const float *)dout, (float *)din);
  return cudaGetLastError();
}
