// conv_ep.cu -- the element-wise parts around cuDNN's convolution
// (conv_cudnn.c), in c/cpu/conv2d.c's arithmetic: folding eval batch norm
// into weights and bias (in double), the forward epilogue
// out = relu?(out + b + res), and the bias gradient (sum of dout over N and
// the plane, in double, one block per channel).
#include "kern.h"
#include "../include/lunet.h"
#include <cuda_runtime.h>

namespace {
const int THREADS = 256;
#define GRID_LOOP(i, n) for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)
unsigned blocks(int64_t n) {
  int64_t b = (n + THREADS - 1) / THREADS;
  return (unsigned)(b < 65535 * 8 ? (b > 0 ? b : 1) : 65535 * 8);
}

template <typename T>
__global__ void fold_k(int64_t O, int64_t K, const T *w, const T *b, const T *g, const T *be, const T *m, const T *v,
                       double eps, T *wf, T *bf) {
  GRID_LOOP(i, O * K) {
    int64_t o = i / K;
    double sc = m ? (g ? (double)g[o] : 1.0) / sqrt((double)v[o] + eps) : 1.0;
    wf[i] = (T)((double)w[i] * sc);
    if (i % K == 0) bf[o] = (T)(((b ? (double)b[o] : 0.0) - (m ? (double)m[o] : 0.0)) * sc + (m && be ? (double)be[o] : 0.0));
  }
}

template <typename T>
__global__ void epilogue_k(int64_t n, int64_t O, int64_t S, T *out, const T *b, const T *res, int relu, int zero) {
  GRID_LOOP(i, n) {
    int64_t o = (i / S) % O;
    T y = (zero ? (T)0 : out[i]) + (b ? b[o] : (T)0);
    y = y + (res ? res[i] : (T)0);
    out[i] = relu && !(y > 0) ? (T)0 : y;
  }
}

template <typename T>
__global__ void bias_grad_k(int64_t N, int64_t O, int64_t S, const T *dout, T *db) {
  __shared__ double sh[THREADS];
  int64_t o = blockIdx.x;
  double s = 0;
  for (int64_t j = threadIdx.x; j < N * S; j += blockDim.x) {
    int64_t n = j / S, k = j - n * S;
    s += (double)dout[(n * O + o) * S + k];
  }
  sh[threadIdx.x] = s;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w >>= 1) {
    if ((int)threadIdx.x < w) sh[threadIdx.x] += sh[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) db[o] = (T)sh[0];
}
}  // namespace

extern "C" int lnc_bn_fold(lnc_stream s, int dt, int64_t O, int64_t K, const char *w, const char *b, const char *g,
                           const char *be, const char *m, const char *v, double eps, char *wf, char *bf) {
  if (O * K == 0) return cudaSuccess;
  cudaStream_t st = (cudaStream_t)s;
  if (dt == LN_FLOAT64)
    fold_k<double><<<blocks(O * K), THREADS, 0, st>>>(O, K, (const double *)w, (const double *)b, (const double *)g,
        (const double *)be, (const double *)m, (const double *)v, eps, (double *)wf, (double *)bf);
  else
    fold_k<float><<<blocks(O * K), THREADS, 0, st>>>(O, K, (const float *)w, (const float *)b, (const float *)g,
        (const float *)be, (const float *)m, (const float *)v, eps, (float *)wf, (float *)bf);
  return cudaGetLastError();
}

extern "C" int lnc_conv_epilogue(lnc_stream s, int dt, int64_t N, int64_t O, int64_t S, char *out, const char *b,
                                 const char *res, int relu, int zero) {
  int64_t n = N * O * S;
  if (n == 0) return cudaSuccess;
  cudaStream_t st = (cudaStream_t)s;
  if (dt == LN_FLOAT64)
    epilogue_k<double><<<blocks(n), THREADS, 0, st>>>(n, O, S, (double *)out, (const double *)b, (const double *)res, relu, zero);
  else
    epilogue_k<float><<<blocks(n), THREADS, 0, st>>>(n, O, S, (float *)out, (const float *)b, (const float *)res, relu, zero);
  return cudaGetLastError();
}

extern "C" int lnc_bias_grad(lnc_stream s, int dt, int64_t N, int64_t O, int64_t S, const char *dout, char *db) {
  if (O == 0) return cudaSuccess;
  if (O > 0x7fffffffLL) return cudaErrorInvalidConfiguration;
  cudaStream_t st = (cudaStream_t)s;
  if (dt == LN_FLOAT64) bias_grad_k<double><<<(unsigned)O, THREADS, 0, st>>>(N, O, S, (const double *)dout, (double *)db);
  else bias_grad_k<float><<<(unsigned)O, THREADS, 0, st>>>(N, O, S, (const float *)dout, (float *)db);
  return cudaGetLastError();
}
