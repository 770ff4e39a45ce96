// grid.cu -- grid_sample's CUDA kernels, a translation of c/cpu/grid.c with
// the same per-point arithmetic (c/core/grid_taps.h): one thread per output
// point computes its taps and loops over the channels; the backward adds
// the input gradient with atomics (order differs from the CPU's) and writes
// the point's grid gradient itself.
#include "kern.h"
#include "../include/lunet.h"
#include <cuda_runtime.h>
#include <math.h>

#define GT float
#define GS_SFX f32
#define GS_FN __device__ static inline
#include "../core/grid_taps.h"
#undef GT
#undef GS_SFX
#define GT double
#define GS_SFX f64
#include "../core/grid_taps.h"
#undef GT
#undef GS_SFX
#undef GS_FN

namespace {
const int THREADS = 256;
unsigned blocks(int64_t n) {
  int64_t b = (n + THREADS - 1) / THREADS;
  return (unsigned)(b < 65535 * 8 ? (b > 0 ? b : 1) : 65535 * 8);
}
#define GRID_LOOP(i, n) for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

__device__ inline void taps(const float *g, const lnc_grid &a, int64_t *off, float *w, float *dw) {
  taps_f32(g, a.sd, a.size, a.mode, a.padding, a.align, off, w, dw, 1, 0);
}
__device__ inline void taps(const double *g, const lnc_grid &a, int64_t *off, double *w, double *dw) {
  taps_f64(g, a.sd, a.size, a.mode, a.padding, a.align, off, w, dw, 1, 0);
}
__host__ __device__ inline int taps_of(const lnc_grid &a) {
  return a.mode == GS_NEAREST ? 1 : a.mode == GS_BICUBIC ? 16 : 1 << a.sd;
}

template <typename T> __global__ void grid_fwd_k(lnc_grid a) {
  const int K = taps_of(a);
  GRID_LOOP(i, a.N * a.P) {
    int64_t n = i / a.P, p = i - n * a.P, off[16];
    T w[16];
    taps((const T *)a.grid + i * a.sd, a, off, w, (T *)nullptr);
    for (int64_t c = 0; c < a.C; c++) {
      const T *x = (const T *)a.in + (n * a.C + c) * a.PI;
      T acc = 0;
      for (int k = 0; k < K; k++) acc += off[k] >= 0 ? w[k] * x[off[k]] : (T)0;
      ((T *)a.out)[(n * a.C + c) * a.P + p] = acc;
    }
  }
}

template <typename T> __global__ void grid_bwd_k(lnc_grid a, int want_dgrid) {
  const int K = taps_of(a), sd = a.sd;
  GRID_LOOP(i, a.N * a.P) {
    int64_t n = i / a.P, p = i - n * a.P, off[16];
    T w[16], dw[32], acc[3] = {0, 0, 0};
    taps((const T *)a.grid + i * sd, a, off, w, want_dgrid ? dw : (T *)nullptr);
    for (int64_t c = 0; c < a.C; c++) {
      T g = ((const T *)a.dout)[(n * a.C + c) * a.P + p];
      if (a.din) {
        T *dx = (T *)a.din + (n * a.C + c) * a.PI;
        for (int k = 0; k < K; k++) if (off[k] >= 0) atomicAdd(dx + off[k], w[k] * g);
      }
      if (want_dgrid) {
        const T *x = (const T *)a.in + (n * a.C + c) * a.PI;
        for (int e = 0; e < sd; e++) {
          T s = 0;
          for (int k = 0; k < K; k++) if (off[k] >= 0) s += dw[e * K + k] * x[off[k]];
          acc[e] += g * s;
        }
      }
    }
    if (want_dgrid)
      for (int e = 0; e < sd; e++) ((T *)a.dgrid)[i * sd + e] = acc[e];
  }
}
}  // namespace

extern "C" int lnc_grid_sample(lnc_stream s, int bwd, const lnc_grid *a) {
  cudaStream_t st = (cudaStream_t)s;
  size_t es = a->dtype == LN_FLOAT64 ? sizeof(double) : sizeof(float);
  int64_t n = a->N * a->P;
  if (!bwd) {
    if (n == 0 || a->C == 0) return cudaSuccess;
    if (a->dtype == LN_FLOAT64) grid_fwd_k<double><<<blocks(n), THREADS, 0, st>>>(*a);
    else grid_fwd_k<float><<<blocks(n), THREADS, 0, st>>>(*a);
    return cudaGetLastError();
  }
  cudaError_t e;
  if (a->din && (e = cudaMemsetAsync(a->din, 0, (size_t)(a->N * a->C * a->PI) * es, st)) != cudaSuccess) return e;
  int want_dgrid = a->dgrid && a->mode != GS_NEAREST;
  if (a->dgrid && !want_dgrid && (e = cudaMemsetAsync(a->dgrid, 0, (size_t)(n * a->sd) * es, st)) != cudaSuccess)
    return e;
  if (n == 0 || (!a->din && !want_dgrid)) return cudaSuccess;
  if (a->dtype == LN_FLOAT64) grid_bwd_k<double><<<blocks(n), THREADS, 0, st>>>(*a, want_dgrid);
  else grid_bwd_k<float><<<blocks(n), THREADS, 0, st>>>(*a, want_dgrid);
  return cudaGetLastError();
}
