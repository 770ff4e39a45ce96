// bn.cu -- batch norm over (N,C,S), forward and backward, with the fused
// ReLU and residual of c/cpu/batchnorm.c and its arithmetic: statistics in
// double (two passes: the mean, then squared deviations from the mean
// rounded to T), running variance unbiased, out = relu?(x*k + sh (+ res)).
// One block per channel (first version: few channels use few multiprocessors).
#include "kern.h"
#include "../include/lunet.h"
#include <cuda_runtime.h>

namespace {
const int THREADS = 512;

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

template <typename T>
__global__ void bn_fwd_k(lnc_bn a) {
  __shared__ double sh[THREADS];
  const int64_t c = blockIdx.x, N = a.N, C = a.C, S = a.S, M = N * S;
  const T *in = (const T *)a.in, *w = (const T *)a.weight, *b = (const T *)a.bias;
  T *rm = (T *)a.running_mean, *rv = (T *)a.running_var;
  double mean, invstd;
  if (a.training) {
    double s = 0;
    for (int64_t j = threadIdx.x; j < M; j += blockDim.x) { int64_t n = j / S; s += in[(n * C + c) * S + j - n * S]; }
    mean = block_sum(s, sh) / (double)M;
    T mu = (T)mean;
    double ss = 0;
    for (int64_t j = threadIdx.x; j < M; j += blockDim.x) {
      int64_t n = j / S;
      T d = in[(n * C + c) * S + j - n * S] - mu;
      ss += d * d;
    }
    double var = block_sum(ss, sh) / (double)M;
    invstd = 1.0 / sqrt(var + a.eps);
    if (threadIdx.x == 0) {
      if (rm) rm[c] = (T)((1 - a.momentum) * rm[c] + a.momentum * mean);
      if (rv) rv[c] = (T)((1 - a.momentum) * rv[c] + a.momentum * var * (double)M / (double)(M - 1));
    }
  } else {
    mean = rm[c];
    invstd = 1.0 / sqrt((double)rv[c] + a.eps);
  }
  if (threadIdx.x == 0) {
    if (a.save_mean) ((T *)a.save_mean)[c] = (T)mean;
    if (a.save_invstd) ((T *)a.save_invstd)[c] = (T)invstd;
  }
  double scale = (w ? (double)w[c] : 1.0) * invstd;
  T k = (T)scale, shf = (T)((b ? (double)b[c] : 0.0) - mean * scale);
  const T *res = (const T *)a.res;
  T *out = (T *)a.out;
  for (int64_t j = threadIdx.x; j < M; j += blockDim.x) {
    int64_t n = j / S, i = (n * C + c) * S + j - n * S;
    T v = in[i] * k + shf;
    if (a.relu && res) v = v + res[i];
    out[i] = a.relu && v < 0 ? (T)0 : v;
  }
}

template <typename T>
__global__ void bn_bwd_k(lnc_bn a) {
  __shared__ double sh[THREADS];
  const int64_t c = blockIdx.x, N = a.N, C = a.C, S = a.S, M = N * S;
  const T *in = (const T *)a.in, *dy = (const T *)a.dout, *fy = (const T *)a.out, *w = (const T *)a.weight;
  T mu = ((const T *)a.save_mean)[c];
  double invstd = ((const T *)a.save_invstd)[c];
  T *dres = (T *)a.dres;
  double p1 = 0, p2 = 0;
  for (int64_t j = threadIdx.x; j < M; j += blockDim.x) {
    int64_t n = j / S, i = (n * C + c) * S + j - n * S;
    T g = dy[i];
    if (a.relu) { g = fy[i] > 0 ? g : (T)0; if (dres) dres[i] = g; }
    p1 += g; p2 += g * (in[i] - mu);
  }
  double sdy = block_sum(p1, sh), dot = block_sum(p2, sh);
  if (threadIdx.x == 0) {
    if (a.dbias) ((T *)a.dbias)[c] = (T)sdy;
    if (a.dweight) ((T *)a.dweight)[c] = (T)(dot * invstd);
  }
  if (!a.din) return;
  double wc = w ? (double)w[c] : 1.0;
  T k = (T)(wc * invstd), km = 0, kx = 0;
  if (a.training) { km = (T)(sdy / (double)M); kx = (T)(invstd * invstd * dot / (double)M); }
  T *dx = (T *)a.din;
  for (int64_t j = threadIdx.x; j < M; j += blockDim.x) {
    int64_t n = j / S, i = (n * C + c) * S + j - n * S;
    T d = dy[i];
    if (a.training && a.relu) { T g = fy[i] > 0 ? d : (T)0; dx[i] = k * (g - km - (in[i] - mu) * kx); }
    else if (a.relu) dx[i] = fy[i] > 0 ? k * d : (T)0;
    else if (a.training) dx[i] = k * (d - km - (in[i] - mu) * kx);
    else dx[i] = k * d;
  }
}
}  // namespace

extern "C" int lnc_batchnorm(lnc_stream s, int bwd, const lnc_bn *a) {
  if (a->C == 0) return cudaSuccess;
  if (a->C > 0x7fffffffLL) return cudaErrorInvalidConfiguration;
  cudaStream_t st = (cudaStream_t)s;
  unsigned g = (unsigned)a->C;
  if (a->dtype == LN_FLOAT64) { if (bwd) bn_bwd_k<double><<<g, THREADS, 0, st>>>(*a); else bn_fwd_k<double><<<g, THREADS, 0, st>>>(*a); }
  else { if (bwd) bn_bwd_k<float><<<g, THREADS, 0, st>>>(*a); else bn_fwd_k<float><<<g, THREADS, 0, st>>>(*a); }
  return cudaGetLastError();
}
