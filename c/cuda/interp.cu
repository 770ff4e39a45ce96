// interp.cu -- interpolation's CUDA kernels (front ends: c/nn/interp.c):
// one thread per output element sums its taps over every dim (sources and
// weights from core/interp_index.h, the CPU's); the backward adds each output's
// gradient into its sources with atomics (order differs from the CPU's
// per-plane passes). A kept dim reads its own position with weight 1.
#include "kern.h"
#include "../include/lunet.h"
#include "../core/interp_index.h"
#include <cuda_runtime.h>

namespace {
const int THREADS = 256;
unsigned blocks(int64_t n) {
  int64_t b = (n + THREADS - 1) / THREADS;
  return (unsigned)(b < 65535 * 8 ? (b > 0 ? b : 1) : 65535 * 8);
}
#define GRID_LOOP(i, n) for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

struct Geo {
  int mode, sd, align;
  int64_t planes, isz[3], osz[3];
  double scale[3];
};

// the taps of output position j of dim d: sources i, weights w; count
__device__ int taps_of(const Geo &g, int d, int64_t j, int64_t *i, double *w) {
  int64_t in = g.isz[d], out = g.osz[d];
  if (ln_interp_kept(g.mode, in, out, g.scale[d], g.align)) { i[0] = j; w[0] = 1; return 1; }
  if (g.mode <= 1) {
    float sc = ln_interp_nearest_scale(in, out, g.scale[d]);
    i[0] = ln_interp_nearest(j, in, out, sc, g.mode == 1);
    w[0] = 1;
    return 1;
  }
  double r = ln_interp_ratio(in, out, g.scale[d], g.align);
  if (g.mode == 2) { ln_interp_linear(j, in, r, g.align, i, w); return 2; }
  ln_interp_cubic(j, in, r, g.align, i, w);
  return 4;
}

// output element e: its plane, position per dim, taps per dim
__device__ void locate(const Geo &g, int64_t e, int64_t *pl, int64_t ti[3][4], double tw[3][4], int nt[3]) {
  for (int d = g.sd - 1; d >= 0; d--) {
    int64_t j = e % g.osz[d];
    e /= g.osz[d];
    nt[d] = taps_of(g, d, j, ti[d], tw[d]);
  }
  for (int d = g.sd; d < 3; d++) { nt[d] = 1; ti[d][0] = 0; tw[d][0] = 1; }
  *pl = e;
}

template <typename T> __global__ void interp_fwd_k(Geo g, int64_t n, const T *x, T *y) {
  GRID_LOOP(e, n) {
    int64_t pl, ti[3][4];
    double tw[3][4];
    int nt[3];
    locate(g, e, &pl, ti, tw, nt);
    int64_t s1 = g.sd > 1 ? g.isz[g.sd - 1] : 1, s2 = g.sd > 2 ? g.isz[1] * g.isz[2] : s1;
    int64_t isz = 1;
    for (int d = 0; d < g.sd; d++) isz *= g.isz[d];
    const T *xp = x + pl * isz;
    // strides of the (up to 3) dims, the first dim outermost
    int64_t st[3] = {1, 1, 1};
    if (g.sd == 2) st[0] = s1;
    if (g.sd == 3) st[0] = s2, st[1] = g.isz[2];
    T acc = 0;
    for (int a = 0; a < nt[0]; a++)
      for (int b = 0; b < nt[1]; b++)
        for (int c = 0; c < nt[2]; c++)
          acc += (T)(tw[0][a] * tw[1][b] * tw[2][c]) * xp[ti[0][a] * st[0] + ti[1][b] * st[1] + ti[2][c] * st[2]];
    y[e] = acc;
  }
}

template <typename T> __global__ void interp_bwd_k(Geo g, int64_t n, const T *dy, T *dx) {
  GRID_LOOP(e, n) {
    int64_t pl, ti[3][4];
    double tw[3][4];
    int nt[3];
    locate(g, e, &pl, ti, tw, nt);
    int64_t s1 = g.sd > 1 ? g.isz[g.sd - 1] : 1, s2 = g.sd > 2 ? g.isz[1] * g.isz[2] : s1;
    int64_t isz = 1;
    for (int d = 0; d < g.sd; d++) isz *= g.isz[d];
    T *xp = dx + pl * isz;
    int64_t st[3] = {1, 1, 1};
    if (g.sd == 2) st[0] = s1;
    if (g.sd == 3) st[0] = s2, st[1] = g.isz[2];
    T gv = dy[e];
    for (int a = 0; a < nt[0]; a++)
      for (int b = 0; b < nt[1]; b++)
        for (int c = 0; c < nt[2]; c++)
          atomicAdd(xp + ti[0][a] * st[0] + ti[1][b] * st[1] + ti[2][c] * st[2], (T)(tw[0][a] * tw[1][b] * tw[2][c]) * gv);
  }
}
}  // namespace

extern "C" int lnc_interp(lnc_stream s, int bwd, int dt, int mode, int sd, int align, int64_t planes,
                          const int64_t *isz, const int64_t *osz, const double *scale, char *out, const char *in,
                          char *din, const char *dout) {
  cudaStream_t st = (cudaStream_t)s;
  Geo g;
  g.mode = mode, g.sd = sd, g.align = align, g.planes = planes;
  int64_t ni = planes, no = planes;
  for (int d = 0; d < 3; d++) {
    g.isz[d] = d < sd ? isz[d] : 1, g.osz[d] = d < sd ? osz[d] : 1, g.scale[d] = d < sd ? scale[d] : 0;
    ni *= g.isz[d], no *= g.osz[d];
  }
  if (no == 0) return cudaSuccess;
  if (!bwd) {
    if (dt == LN_FLOAT64) interp_fwd_k<double><<<blocks(no), THREADS, 0, st>>>(g, no, (const double *)in, (double *)out);
    else interp_fwd_k<float><<<blocks(no), THREADS, 0, st>>>(g, no, (const float *)in, (float *)out);
  } else {
    size_t es = dt == LN_FLOAT64 ? sizeof(double) : sizeof(float);
    cudaError_t e = cudaMemsetAsync(din, 0, (size_t)ni * es, st);
    if (e != cudaSuccess) return e;
    if (dt == LN_FLOAT64) interp_bwd_k<double><<<blocks(no), THREADS, 0, st>>>(g, no, (const double *)dout, (double *)din);
    else interp_bwd_k<float><<<blocks(no), THREADS, 0, st>>>(g, no, (const float *)dout, (float *)din);
  }
  return cudaGetLastError();
}
