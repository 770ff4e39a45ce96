// nccl_wire.cu -- the nccl backend's 16-bit wire formats: float32 values
// rounded to float16 or bfloat16 before they travel (round to nearest even,
// as the local backend rounds them), and back to float32 after, an average
// divided in float32 and rounded to the wire again (as local and mpi do).
#include "kern.h"
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>

namespace {
const int THREADS = 256;

__device__ __forceinline__ uint16_t to16(float x, int bf16) {
  if (bf16) { __nv_bfloat16 b = __float2bfloat16_rn(x); return *reinterpret_cast<uint16_t *>(&b); }
  __half h = __float2half_rn(x);
  return *reinterpret_cast<uint16_t *>(&h);
}
__device__ __forceinline__ float from16(uint16_t v, int bf16) {
  if (bf16) { __nv_bfloat16 b = *reinterpret_cast<__nv_bfloat16 *>(&v); return __bfloat162float(b); }
  __half h = *reinterpret_cast<__half *>(&v);
  return __half2float(h);
}

__global__ void to_wire_k(uint16_t *o, const float *x, int64_t n, int bf16) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    o[i] = to16(x[i], bf16);
}

__global__ void from_wire_k(float *o, const uint16_t *h, int64_t n, int bf16, float div) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    float v = from16(h[i], bf16);
    if (div > 0) v = from16(to16(v / div, bf16), bf16);
    o[i] = v;
  }
}

unsigned blocks(int64_t n) {
  int64_t b = (n + THREADS - 1) / THREADS;
  return (unsigned)(b < 65535 ? (b > 0 ? b : 1) : 65535);
}
}  // namespace

extern "C" int lnc_to_wire(lnc_stream s, uint16_t *o, const float *x, int64_t n, int bf16) {
  if (n <= 0) return 0;
  to_wire_k<<<blocks(n), THREADS, 0, (cudaStream_t)s>>>(o, x, n, bf16);
  return (int)cudaGetLastError();
}

extern "C" int lnc_from_wire(lnc_stream s, float *o, const uint16_t *h, int64_t n, int bf16, float div) {
  if (n <= 0) return 0;
  from_wire_k<<<blocks(n), THREADS, 0, (cudaStream_t)s>>>(o, h, n, bf16, div);
  return (int)cudaGetLastError();
}
