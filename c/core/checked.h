/* checked.h -- overflow-checked size arithmetic. Every product or sum of
 * sizes, strides, offsets and byte counts that a caller can steer (shapes from
 * Lua, as_strided, expand, broadcasting) goes through these, so a hostile
 * shape is a named error instead of a wrapped count that reaches memory.
 * Each returns true when the result overflowed (as the builtins do). */
#ifndef LN_CHECKED_H
#define LN_CHECKED_H

#include <stdbool.h>
#include <stdint.h>

/* The most bytes one tensor (or the span of one view) may cover: keeps every
 * element offset times an element size (at most 8) inside int64 with room to
 * add an offset, and is far beyond any machine. */
#define LN_MAX_BYTES ((int64_t)1 << 62)

static inline bool ln_mul_ovf(int64_t a, int64_t b, int64_t *r) { return __builtin_mul_overflow(a, b, r); }
static inline bool ln_add_ovf(int64_t a, int64_t b, int64_t *r) { return __builtin_add_overflow(a, b, r); }

/* a * b + c */
static inline bool ln_muladd_ovf(int64_t a, int64_t b, int64_t c, int64_t *r) {
  int64_t p;
  return __builtin_mul_overflow(a, b, &p) || __builtin_add_overflow(p, c, r);
}

/* Product of n sizes (each >= 0); true on overflow. */
static inline bool ln_numel_ovf(int n, const int64_t *shape, int64_t *r) {
  int64_t p = 1;
  for (int i = 0; i < n; i++)
    if (__builtin_mul_overflow(p, shape[i], &p)) return true;
  *r = p;
  return false;
}

/* The lowest and highest element offsets a non-empty view reaches
 * (offset + sum of (size-1)*stride over negative, resp. positive strides);
 * true on overflow. */
static inline bool ln_extent_ovf(int n, const int64_t *shape, const int64_t *stride, int64_t offset,
                                 int64_t *lo, int64_t *hi) {
  int64_t l = offset, h = offset;
  for (int i = 0; i < n; i++) {
    int64_t step;
    if (__builtin_mul_overflow(shape[i] - 1, stride[i], &step)) return true;
    if (__builtin_add_overflow(stride[i] >= 0 ? h : l, step, stride[i] >= 0 ? &h : &l)) return true;
  }
  *lo = l;
  *hi = h;
  return false;
}

#endif
