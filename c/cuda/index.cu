// index.cu -- index_select, gather, scatter_add_ and scatter_reduce_ as c/cpu/index.c: the
// indices (int32 or int64) are checked first, in order, so the first bad one
// is named and nothing is written (a synchronisation: the check's result is
// read back); scatter_add_ runs each fiber (all coordinates but dim) in
// index order on one thread, so sums are the CPU's, deterministically;
// scatter_reduce_ the same with its op (include_self = 0: the named
// positions first set to the op's identity, in the same thread).
#include "kern.h"
#include "../include/lunet.h"
#include <cuda_runtime.h>
#include <math.h>

namespace {
const int THREADS = 256;
#define GRID_LOOP(i, n) for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)
unsigned blocks(int64_t n) {
  int64_t b = (n + THREADS - 1) / THREADS;
  return (unsigned)(b < 65535 * 8 ? (b > 0 ? b : 1) : 65535 * 8);
}
int64_t numel(const lnc_view *v) { int64_t n = 1; for (int d = 0; d < v->ndim; d++) n *= v->shape[d]; return n; }

__device__ __forceinline__ int64_t idx_at(const lnc_view &ix, int64_t off) {
  return ix.dtype == LN_INT32 ? (int64_t)((const int32_t *)ix.data)[off] : ((const int64_t *)ix.data)[off];
}
__device__ __forceinline__ int64_t offset_of(const lnc_view &v, int64_t i) {   // linear index -> element offset
  int64_t off = 0;
  for (int d = v.ndim - 1; d >= 0; d--) { int64_t q = i / v.shape[d]; off += (i - q * v.shape[d]) * v.stride[d]; i = q; }
  return off;
}

__global__ void check_k(lnc_view ix, int64_t n, int64_t size, unsigned long long *first) {
  GRID_LOOP(i, n) {
    int64_t x = idx_at(ix, offset_of(ix, i));
    if (x < 0 || x >= size) atomicMin(first, (unsigned long long)i);
  }
}

template <typename E>
__global__ void select_k(lnc_view o, lnc_view x, lnc_view ix, int dim, int gather, int64_t n) {
  GRID_LOOP(i, n) {
    int64_t rem = i, ooff = 0, xoff = 0, ioff = 0;
    for (int d = o.ndim - 1; d >= 0; d--) {
      int64_t q = rem / o.shape[d], c = rem - q * o.shape[d];
      rem = q;
      ooff += c * o.stride[d];
      if (gather) ioff += c * ix.stride[d];
      if (d != dim) xoff += c * x.stride[d];
      else if (!gather) xoff += idx_at(ix, c * ix.stride[0]) * x.stride[d];
    }
    if (gather) xoff += idx_at(ix, ioff) * x.stride[dim];
    ((E *)o.data)[ooff] = ((const E *)x.data)[xoff];
  }
}

template <typename T>
__global__ void scatter_k(lnc_view o, lnc_view ix, lnc_view s, int dim, int64_t fibers) {
  GRID_LOOP(f, fibers) {
    int64_t rem = f, ooff = 0, ioff = 0, soff = 0;
    for (int d = ix.ndim - 1; d >= 0; d--) {
      if (d == dim) continue;
      int64_t q = rem / ix.shape[d], c = rem - q * ix.shape[d];
      rem = q;
      ooff += c * o.stride[d]; ioff += c * ix.stride[d]; soff += c * s.stride[d];
    }
    for (int64_t k = 0; k < ix.shape[dim]; k++) {
      int64_t t = idx_at(ix, ioff + k * ix.stride[dim]);
      ((T *)o.data)[ooff + t * o.stride[dim]] += ((const T *)s.data)[soff + k * s.stride[dim]];
    }
  }
}
// scatter_reduce_'s ops (as the CPU's: a NaN src or destination wins in amax/amin)
template <typename T> __device__ __forceinline__ bool isnan_(T x) { return x != x; }
template <typename T, int OP> __device__ __forceinline__ T red(T o, T s) {
  if (OP == LN_SCATTER_PROD) return (T)(o * s);
  if (OP == LN_SCATTER_AMAX) return isnan_(s) ? s : (o < s ? s : o);
  if (OP == LN_SCATTER_AMIN) return isnan_(s) ? s : (s < o ? s : o);
  return (T)(o + s);
}
// integer sums and products wrap (through the unsigned type: no UB)
template <> __device__ __forceinline__ int32_t red<int32_t, LN_SCATTER_SUM>(int32_t o, int32_t s) { return (int32_t)((uint32_t)o + (uint32_t)s); }
template <> __device__ __forceinline__ int32_t red<int32_t, LN_SCATTER_PROD>(int32_t o, int32_t s) { return (int32_t)((uint32_t)o * (uint32_t)s); }
template <> __device__ __forceinline__ int64_t red<int64_t, LN_SCATTER_SUM>(int64_t o, int64_t s) { return (int64_t)((uint64_t)o + (uint64_t)s); }
template <> __device__ __forceinline__ int64_t red<int64_t, LN_SCATTER_PROD>(int64_t o, int64_t s) { return (int64_t)((uint64_t)o * (uint64_t)s); }

template <typename T, int OP>
__global__ void scatter_red_k(lnc_view o, lnc_view ix, lnc_view s, int dim, int include_self, T id, int64_t fibers) {
  GRID_LOOP(f, fibers) {
    int64_t rem = f, ooff = 0, ioff = 0, soff = 0;
    for (int d = ix.ndim - 1; d >= 0; d--) {
      if (d == dim) continue;
      int64_t q = rem / ix.shape[d], c = rem - q * ix.shape[d];
      rem = q;
      ooff += c * o.stride[d]; ioff += c * ix.stride[d]; soff += c * s.stride[d];
    }
    T *out = (T *)o.data;
    if (!include_self)
      for (int64_t k = 0; k < ix.shape[dim]; k++) out[ooff + idx_at(ix, ioff + k * ix.stride[dim]) * o.stride[dim]] = id;
    for (int64_t k = 0; k < ix.shape[dim]; k++) {
      T *p = out + ooff + idx_at(ix, ioff + k * ix.stride[dim]) * o.stride[dim];
      *p = red<T, OP>(*p, ((const T *)s.data)[soff + k * s.stride[dim]]);
    }
  }
}

template <typename T>
int launch_red(cudaStream_t st, unsigned nb, int op, int include_self, T lo, T hi, const lnc_view *out,
               const lnc_view *index, const lnc_view *src, int dim, int64_t fibers) {
  switch (op) {
    case LN_SCATTER_PROD: scatter_red_k<T, LN_SCATTER_PROD><<<nb, THREADS, 0, st>>>(*out, *index, *src, dim, include_self, (T)1, fibers); break;
    case LN_SCATTER_AMAX: scatter_red_k<T, LN_SCATTER_AMAX><<<nb, THREADS, 0, st>>>(*out, *index, *src, dim, include_self, lo, fibers); break;
    case LN_SCATTER_AMIN: scatter_red_k<T, LN_SCATTER_AMIN><<<nb, THREADS, 0, st>>>(*out, *index, *src, dim, include_self, hi, fibers); break;
    default: scatter_red_k<T, LN_SCATTER_SUM><<<nb, THREADS, 0, st>>>(*out, *index, *src, dim, include_self, (T)0, fibers); break;
  }
  return cudaGetLastError();
}
}  // namespace

// *bad_pos: -1, or the position (in index order) of the first index outside [0, size), its value in *bad
extern "C" int lnc_index_check(lnc_stream s, const lnc_view *ix, int64_t size, int64_t *bad_pos, int64_t *bad) {
  cudaStream_t st = (cudaStream_t)s;
  int64_t n = numel(ix);
  *bad_pos = -1;
  if (n == 0) return cudaSuccess;
  unsigned long long *d = NULL, h = ~0ULL;
  cudaError_t e = cudaMallocAsync((void **)&d, sizeof *d, st);
  if (e) return e;
  e = cudaMemcpyAsync(d, &h, sizeof h, cudaMemcpyHostToDevice, st);
  if (!e) { check_k<<<blocks(n), THREADS, 0, st>>>(*ix, n, size, d); e = cudaGetLastError(); }
  if (!e) e = cudaMemcpyAsync(&h, d, sizeof h, cudaMemcpyDeviceToHost, st);
  cudaFreeAsync(d, st);
  if (!e) e = cudaStreamSynchronize(st);
  if (!e && h != ~0ULL) {
    *bad_pos = (int64_t)h;
    // the element offset of position h, on the host (views are small descriptors)
    int64_t i = (int64_t)h, off = 0;
    for (int dd = ix->ndim - 1; dd >= 0; dd--) { int64_t q = i / ix->shape[dd]; off += (i - q * ix->shape[dd]) * ix->stride[dd]; i = q; }
    if (ix->dtype == LN_INT32) { int32_t v; e = cudaMemcpy(&v, (const int32_t *)ix->data + off, sizeof v, cudaMemcpyDeviceToHost); *bad = v; }
    else e = cudaMemcpy(bad, (const int64_t *)ix->data + off, sizeof *bad, cudaMemcpyDeviceToHost);
  }
  return e;
}

extern "C" int lnc_index_select(lnc_stream s, int gather, int dim, const lnc_view *out, const lnc_view *a,
                                const lnc_view *index, int es) {
  int64_t n = numel(out);
  if (n == 0) return cudaSuccess;
  cudaStream_t st = (cudaStream_t)s;
  unsigned nb = blocks(n);
  switch (es) {
    case 1: select_k<uint8_t><<<nb, THREADS, 0, st>>>(*out, *a, *index, dim, gather, n); break;
    case 2: select_k<uint16_t><<<nb, THREADS, 0, st>>>(*out, *a, *index, dim, gather, n); break;
    case 4: select_k<uint32_t><<<nb, THREADS, 0, st>>>(*out, *a, *index, dim, gather, n); break;
    default: select_k<uint64_t><<<nb, THREADS, 0, st>>>(*out, *a, *index, dim, gather, n); break;
  }
  return cudaGetLastError();
}

extern "C" int lnc_scatter_add(lnc_stream s, int dim, const lnc_view *out, const lnc_view *index, const lnc_view *src) {
  int64_t n = numel(index);
  if (n == 0) return cudaSuccess;
  int64_t fibers = index->shape[dim] ? n / index->shape[dim] : 0;
  cudaStream_t st = (cudaStream_t)s;
  unsigned nb = blocks(fibers);
  switch (out->dtype) {
    case LN_FLOAT32: scatter_k<float><<<nb, THREADS, 0, st>>>(*out, *index, *src, dim, fibers); break;
    case LN_FLOAT64: scatter_k<double><<<nb, THREADS, 0, st>>>(*out, *index, *src, dim, fibers); break;
    case LN_INT32: scatter_k<int32_t><<<nb, THREADS, 0, st>>>(*out, *index, *src, dim, fibers); break;
    case LN_INT64: scatter_k<int64_t><<<nb, THREADS, 0, st>>>(*out, *index, *src, dim, fibers); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

extern "C" int lnc_scatter_reduce(lnc_stream s, int op, int include_self, int dim, const lnc_view *out,
                                  const lnc_view *index, const lnc_view *src) {
  int64_t n = numel(index);
  if (n == 0) return cudaSuccess;
  int64_t fibers = index->shape[dim] ? n / index->shape[dim] : 0;
  cudaStream_t st = (cudaStream_t)s;
  unsigned nb = blocks(fibers);
  switch (out->dtype) {
    case LN_FLOAT32: return launch_red<float>(st, nb, op, include_self, -INFINITY, INFINITY, out, index, src, dim, fibers);
    case LN_FLOAT64: return launch_red<double>(st, nb, op, include_self, -INFINITY, INFINITY, out, index, src, dim, fibers);
    case LN_INT32: return launch_red<int32_t>(st, nb, op, include_self, INT32_MIN, INT32_MAX, out, index, src, dim, fibers);
    case LN_INT64: return launch_red<int64_t>(st, nb, op, include_self, INT64_MIN, INT64_MAX, out, index, src, dim, fibers);
    case LN_UINT8: return launch_red<uint8_t>(st, nb, op, include_self, 0, 255, out, index, src, dim, fibers);
    default: return cudaErrorInvalidValue;
  }
}
