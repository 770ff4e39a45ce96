/* iter.h -- strided iteration for elementwise CPU kernels.
 *
 * Operands (out first) are views already broadcast to the output shape.
 * ln_iter_init drops size-1 dims and merges dims that are contiguous for
 * every operand, so a contiguous op becomes one flat loop. The space is then
 * cut into items: (outer row, block of the inner dim), for the thread pool. */
#ifndef LN_CPU_ITER_H
#define LN_CPU_ITER_H
#include "cpu.h"
#include "../core/simd.h"   /* LN_SIMD */

/* Elementwise, reduction, indexing and optimizer kernels over fewer elements
 * than this run on one thread. A parallel region costs a fork/join and a
 * barrier; on a loaded machine (the 2 shared cores here) a barrier waits for
 * a descheduled thread for milliseconds: at 32768, the three regions of a
 * LeNet-5 batch-1 step (zeroing, accumulating and updating fc1's 48000
 * weights) took 30x the rest of the step. 128K floats (512 KB) take ~20 us
 * on one core. */
enum { LN_PAR_MIN = 131072 };

enum { LN_ITER_MAXOP = 4, LN_ITER_BLOCK = 8192 };

typedef struct ln_iter {
  int nop, ndim;
  int64_t shape[LN_MAX_DIMS];
  int64_t stride[LN_ITER_MAXOP][LN_MAX_DIMS];   /* bytes */
  char *data[LN_ITER_MAXOP];
  int64_t inner, outer, nblk, items;
} ln_iter;

static inline void ln_iter_init(ln_iter *it, int nop, const ln_kview *v) {
  int nd = v[0].ndim, k = 0;
  it->nop = nop;
  for (int o = 0; o < nop; o++) it->data[o] = v[o].data;
  for (int d = 0; d < nd; d++) {
    if (v[0].shape[d] == 1) continue;
    if (k > 0) {
      bool merge = true;
      for (int o = 0; o < nop; o++)
        if (it->stride[o][k - 1] != v[o].stride[d] * v[0].shape[d] * ln_dtype_size(v[o].dtype)) {
          merge = false; break;
        }
      if (merge) {
        it->shape[k - 1] *= v[0].shape[d];
        for (int o = 0; o < nop; o++) it->stride[o][k - 1] = v[o].stride[d] * ln_dtype_size(v[o].dtype);
        continue;
      }
    }
    it->shape[k] = v[0].shape[d];
    for (int o = 0; o < nop; o++) it->stride[o][k] = v[o].stride[d] * ln_dtype_size(v[o].dtype);
    k++;
  }
  if (k == 0) { it->shape[0] = 1; for (int o = 0; o < nop; o++) it->stride[o][0] = 0; k = 1; }
  for (int d = 0; d < nd; d++) if (v[0].shape[d] == 0) { it->shape[0] = 0; k = 1; break; }
  it->ndim = k;
  it->inner = it->shape[k - 1];
  it->outer = 1;
  for (int d = 0; d < k - 1; d++) it->outer *= it->shape[d];
  it->nblk = (it->inner + LN_ITER_BLOCK - 1) / LN_ITER_BLOCK;
  it->items = it->inner ? it->outer * it->nblk : 0;
}

/* Pointers to the first element of an item and its length. */
static inline int64_t ln_iter_item(const ln_iter *it, int64_t item, char **p) {
  int64_t row = item / it->nblk, blk = item % it->nblk;
  for (int o = 0; o < it->nop; o++) p[o] = it->data[o];
  for (int d = it->ndim - 2; d >= 0; d--) {
    int64_t i = row % it->shape[d];
    row /= it->shape[d];
    for (int o = 0; o < it->nop; o++) p[o] += i * it->stride[o][d];
  }
  int64_t start = blk * LN_ITER_BLOCK;
  for (int o = 0; o < it->nop; o++) p[o] += start * it->stride[o][it->ndim - 1];
  int64_t n = it->inner - start;
  return n < LN_ITER_BLOCK ? n : LN_ITER_BLOCK;
}

/* Runs body(ctx, item) over all items on the kernel's threads. */
#define LN_ITER_PARALLEL(it, ITEM_FN, ctx)                                        \
  do {                                                                            \
    int64_t items_ = (it)->items;                                                 \
    int nt_ = ln_kernel_threads();                                                \
    int64_t total_ = items_ ? (it)->outer * (it)->inner : 0;                      \
    if (nt_ > 1 && total_ > LN_PAR_MIN && items_ > 1) {                           \
      _Pragma("omp parallel for num_threads(nt_) schedule(static)")               \
      for (int64_t i_ = 0; i_ < items_; i_++) ITEM_FN(ctx, it, i_);               \
    } else {                                                                      \
      for (int64_t i_ = 0; i_ < items_; i_++) ITEM_FN(ctx, it, i_);               \
    }                                                                             \
  } while (0)


#endif
