// random.cu -- the counter-based Philox 4x32-10 draws of c/cpu/random.c on
// the GPU: element i uses counter (offset + i), so a seed gives the CPU's
// numbers (uniform and integer draws bit for bit; normal draws up to the
// last bit of the device's log/cos). out is contiguous.
#include "kern.h"
#include "../include/lunet.h"
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>

namespace {
const int THREADS = 256;

__device__ __forceinline__ void philox(uint64_t ctr, uint64_t key, uint32_t out[4]) {
  uint32_t c0 = (uint32_t)ctr, c1 = (uint32_t)(ctr >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
  for (int r = 0; r < 10; r++) {
    uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
    uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
    c1 = (uint32_t)p1; c3 = (uint32_t)p0; c0 = n0; c2 = n2;
    k0 += 0x9E3779B9u; k1 += 0xBB67AE85u;
  }
  out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

__global__ void random_k(int64_t n, lnc_random_args a, char *out, int dt) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    uint32_t r[4];
    philox(a.offset + (uint64_t)i, a.seed, r);
    double u = (double)(((uint64_t)r[0] << 21) | (r[1] >> 11)) * 0x1.0p-53;
    double v;
    switch (a.dist) {
      case 0: v = a.p0 + (a.p1 - a.p0) * u; break;
      case 1: {
        double u1 = ((double)r[2] + 1.0) * 0x1.0p-32;
        v = a.p0 + a.p1 * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u);
        break;
      }
      case 2: {
        uint64_t x = ((uint64_t)r[2] << 32) | r[3];
        int64_t iv = (int64_t)((uint64_t)a.ilo + x % a.irange);
        if (dt == LN_INT64) { ((int64_t *)out)[i] = iv; continue; }
        v = (double)iv;
        break;
      }
      default: v = u < a.p0; break;
    }
    switch (dt) {
      case LN_FLOAT32: {
        float f = (float)v;
        if (a.dist == 0 && f >= (float)a.p1 && a.p1 > a.p0) f = nextafterf((float)a.p1, -INFINITY);
        ((float *)out)[i] = f;
        break;
      }
      case LN_FLOAT64: ((double *)out)[i] = v; break;
      case LN_INT32: ((int32_t *)out)[i] = (int32_t)v; break;
      case LN_INT64: ((int64_t *)out)[i] = (int64_t)v; break;
      case LN_UINT8: ((uint8_t *)out)[i] = (uint8_t)(int64_t)v; break;
      case LN_BOOL: ((uint8_t *)out)[i] = v != 0; break;
      case LN_FLOAT16: ((__half *)out)[i] = __float2half_rn((float)v); break;
      case LN_BFLOAT16: ((__nv_bfloat16 *)out)[i] = __float2bfloat16_rn((float)v); break;
    }
  }
}
}  // namespace

extern "C" int lnc_random(lnc_stream s, const lnc_random_args *a, char *out, int dtype, int64_t n) {
  if (n == 0) return cudaSuccess;
  int64_t b = (n + THREADS - 1) / THREADS;
  random_k<<<(unsigned)(b < 65535 * 8 ? b : 65535 * 8), THREADS, 0, (cudaStream_t)s>>>(n, *a, out, dtype);
  return cudaGetLastError();
}
