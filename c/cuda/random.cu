// random.cu -- c/cpu/random.c's Philox draws on the GPU, through the same
// functions (c/core/philox.h): one thread per counter writes its k elements,
// so a seed gives the CPU's numbers bit for bit (float64 normal draws up to
// the last bit of the device's log/cos/sin). out is contiguous.
#include "kern.h"
#include "../include/lunet.h"
#include "../core/philox.h"
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>

namespace {
const int THREADS = 256;

__device__ __forceinline__ void store(char *out, int dt, int64_t i, float v) {
  switch (dt) {
    case LN_FLOAT32: ((float *)out)[i] = v; break;
    case LN_FLOAT64: ((double *)out)[i] = v; break;
    case LN_INT32: ((int32_t *)out)[i] = (int32_t)v; break;
    case LN_INT64: ((int64_t *)out)[i] = (int64_t)v; break;
    case LN_UINT8: case LN_BOOL: ((uint8_t *)out)[i] = (uint8_t)v; break;
    case LN_FLOAT16: ((__half *)out)[i] = __float2half_rn(v); break;
    case LN_BFLOAT16: ((__nv_bfloat16 *)out)[i] = __float2bfloat16_rn(v); break;
  }
}

// k = 4: uniform / normal into float32, float16, bfloat16; bernoulli into any dtype
__global__ void narrow_k(int64_t n, lnc_random_args a, char *out, int dt) {
  const ln_rng_params *P = &a.prm;
  for (int64_t g = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; g < (n + 3) / 4; g += (int64_t)gridDim.x * blockDim.x) {
    uint32_t w[4];
    float v[4];
    ln_philox(a.offset + (uint64_t)g, a.seed, w);
    if (a.dist == LN_RNG_UNIFORM) {
      for (int j = 0; j < 4; j++) v[j] = ln_rng_uniformf(w[j], P);
    } else if (a.dist == LN_RNG_NORMAL) {
      for (int j = 0; j < 2; j++) {
        float zc, zs;
        ln_rng_boxmuller(w[2 * j], w[2 * j + 1], &zc, &zs);
        v[2 * j] = LN_FADD(P->mean, LN_FMUL(P->std, zc));
        v[2 * j + 1] = LN_FADD(P->mean, LN_FMUL(P->std, zs));
      }
    } else {
      for (int j = 0; j < 4; j++) v[j] = (uint64_t)w[j] < P->thresh ? 1.0f : 0.0f;
    }
    for (int j = 0; j < 4 && 4 * g + j < n; j++) store(out, dt, 4 * g + j, v[j]);
  }
}

// k = 2: float64 uniform / normal, randint
__global__ void wide_k(int64_t n, lnc_random_args a, char *out, int dt) {
  const ln_rng_params *P = &a.prm;
  for (int64_t g = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; g < (n + 1) / 2; g += (int64_t)gridDim.x * blockDim.x) {
    uint32_t w[4];
    ln_philox(a.offset + (uint64_t)g, a.seed, w);
    for (int h = 0; h < 2 && 2 * g + h < n; h++) {
      int64_t i = 2 * g + h;
      const uint32_t *x = w + 2 * h;
      if (a.dist == LN_RNG_RANDINT) {   // (the front end checked that [lo, hi) fits the dtype)
        int64_t iv = (int64_t)((uint64_t)a.ilo + (((uint64_t)x[0] << 32) | x[1]) % a.irange);
        switch (dt) {
          case LN_INT64: ((int64_t *)out)[i] = iv; break;
          case LN_FLOAT64: ((double *)out)[i] = (double)iv; break;
          default: store(out, dt, i, (float)iv);   // (exact: the range fits the dtype)
        }
      } else if (a.dist == LN_RNG_UNIFORM) {
        double v = LN_DADD(P->dlo, LN_DMUL(P->drange, ln_rng_u53(x[0], x[1])));
        ((double *)out)[i] = v >= P->dhi ? P->dbelow : v;
      } else {
        double u1 = LN_DADD(ln_rng_u53(w[0], w[1]), 0x1p-53), t = ln_rng_u53(w[2], w[3]);
        double r = sqrt(-2.0 * log(u1)), ang = 6.283185307179586 * t;
        ((double *)out)[i] = LN_DADD(P->dmean, LN_DMUL(P->dstd, LN_DMUL(r, h ? sin(ang) : cos(ang))));
      }
    }
  }
}
}  // namespace

extern "C" int lnc_random(lnc_stream s, const lnc_random_args *a, char *out, int dtype, int64_t n) {
  if (n == 0) return cudaSuccess;
  int k = a->prm.per_counter;
  int64_t b = ((n + k - 1) / k + THREADS - 1) / THREADS;
  unsigned grid = (unsigned)(b < 65535 * 8 ? b : 65535 * 8);
  if (k == 4) narrow_k<<<grid, THREADS, 0, (cudaStream_t)s>>>(n, *a, out, dtype);
  else wide_k<<<grid, THREADS, 0, (cudaStream_t)s>>>(n, *a, out, dtype);
  return cudaGetLastError();
}
