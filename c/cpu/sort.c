/* sort.c -- CPU kernel of sort/argsort/topk (front end: c/ops/sort.c).
 *
 * Each row of the input view (its last dim, r elements at any stride) is
 * copied into a buffer of (value, position) pairs and merge-sorted there:
 * insertion sort of short runs, then bottom-up merges between the buffer and
 * a scratch one of the same size. Merges take the left element unless the
 * right one comes strictly before it, so equal elements keep their input
 * order (stable). NaN is above every number (ascending: last; descending:
 * first); -0.0 and 0.0 compare equal. topk (k < r) sorts the whole row and
 * writes its first k positions: O(r log r) where a selection would be O(r),
 * simple and stable. Rows go to the device's threads when the work is large
 * (LN_PAR_MIN); each part allocates its buffers once. */
#include "../core/backend.h"
#include "iter.h"
#include <math.h>
#include <stdlib.h>

int ln_cpu_sort(void *args);

enum { RUN = 24 };

typedef struct {
  const ln_sort_args *a;
  int nk;                                        /* kept dims */
  int64_t shape[LN_MAX_DIMS];                    /* kept dims' sizes */
  int64_t ast[LN_MAX_DIMS], ost[LN_MAX_DIMS];    /* their strides, elements */
  int failed;                                    /* a part could not allocate */
} sort_job;

/* One type T and one order BEFORE(x, y) (x strictly before y): a row sorter. */
#define SORTER(NAME, T, BEFORE)                                                              \
  typedef struct { T v; int64_t i; } NAME##_pair;                                            \
  static void NAME##_msort(NAME##_pair *p, NAME##_pair *tmp, int64_t n) {                   \
    for (int64_t b = 0; b < n; b += RUN) {   /* insertion sort of runs */                    \
      int64_t e = LN_MIN(n, b + RUN);                                                        \
      for (int64_t i = b + 1; i < e; i++) {                                                  \
        NAME##_pair x = p[i];                                                                \
        int64_t j = i;                                                                       \
        while (j > b && BEFORE(x.v, p[j - 1].v)) { p[j] = p[j - 1]; j--; }                   \
        p[j] = x;                                                                            \
      }                                                                                      \
    }                                                                                        \
    NAME##_pair *src = p, *dst = tmp;                                                        \
    for (int64_t w = RUN; w < n; w *= 2) {                                                   \
      for (int64_t lo = 0; lo < n; lo += 2 * w) {                                            \
        int64_t mid = LN_MIN(n, lo + w), hi = LN_MIN(n, lo + 2 * w), i = lo, j = mid, o = lo; \
        if (mid == hi || !BEFORE(src[mid].v, src[mid - 1].v)) {   /* already in order */     \
          memcpy(dst + lo, src + lo, (size_t)(hi - lo) * sizeof *src);                       \
          continue;                                                                          \
        }                                                                                    \
        while (i < mid && j < hi) dst[o++] = BEFORE(src[j].v, src[i].v) ? src[j++] : src[i++]; \
        while (i < mid) dst[o++] = src[i++];                                                 \
        while (j < hi) dst[o++] = src[j++];                                                  \
      }                                                                                      \
      NAME##_pair *t = src; src = dst; dst = t;                                              \
    }                                                                                        \
    if (src != p) memcpy(p, src, (size_t)n * sizeof *p);                                     \
  }                                                                                          \
  static void NAME##_rows(void *ctx, int64_t b, int64_t e) {                                 \
    sort_job *j = ctx;                                                                       \
    const ln_sort_args *A = j->a;                                                            \
    int64_t r = A->r, k = A->k;                                                              \
    int64_t sr = A->a.stride[A->a.ndim - 1], so = A->out.stride[A->out.ndim - 1];            \
    size_t nb;                                                                               \
    NAME##_pair *p = NULL;                                                                   \
    if (!__builtin_mul_overflow((size_t)r, 2 * sizeof *p, &nb)) p = malloc(nb);              \
    if (!p) { __atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED); return; }                   \
    for (int64_t row = b; row < e; row++) {                                                  \
      int64_t rem = row, ao = 0, oo = 0;                                                     \
      for (int d = j->nk - 1; d >= 0; d--) {                                                 \
        int64_t i = rem % j->shape[d];                                                       \
        rem /= j->shape[d];                                                                  \
        ao += i * j->ast[d]; oo += i * j->ost[d];                                            \
      }                                                                                      \
      const T *x = (const T *)A->a.data + ao;                                                \
      for (int64_t i = 0; i < r; i++) { p[i].v = x[i * sr]; p[i].i = i; }                    \
      NAME##_msort(p, p + r, r);                                                             \
      int64_t *out = (int64_t *)A->out.data + oo;                                            \
      for (int64_t i = 0; i < k; i++) out[i * so] = p[i].i;                                  \
    }                                                                                        \
    free(p);                                                                                 \
  }

#define LT_INT(x, y) ((x) < (y))
#define GT_INT(x, y) ((x) > (y))
/* NaN above every number; x != x is NaN */
#define LT_FLT(x, y) ((x) < (y) || ((x) == (x) && (y) != (y)))
#define GT_FLT(x, y) ((x) > (y) || ((x) != (x) && (y) == (y)))

SORTER(asc_f32, float, LT_FLT)
SORTER(desc_f32, float, GT_FLT)
SORTER(asc_f64, double, LT_FLT)
SORTER(desc_f64, double, GT_FLT)
SORTER(asc_i32, int32_t, LT_INT)
SORTER(desc_i32, int32_t, GT_INT)
SORTER(asc_i64, int64_t, LT_INT)
SORTER(desc_i64, int64_t, GT_INT)
SORTER(asc_u8, uint8_t, LT_INT)
SORTER(desc_u8, uint8_t, GT_INT)

int ln_cpu_sort(void *args) {
  const ln_sort_args *a = args;
  int dt = a->a.dtype, desc = a->descending;
  ln_range_fn fn;
  switch (dt) {
    case LN_FLOAT32: fn = desc ? desc_f32_rows : asc_f32_rows; break;
    case LN_FLOAT64: fn = desc ? desc_f64_rows : asc_f64_rows; break;
    case LN_INT32: fn = desc ? desc_i32_rows : asc_i32_rows; break;
    case LN_INT64: fn = desc ? desc_i64_rows : asc_i64_rows; break;
    case LN_UINT8: case LN_BOOL: fn = desc ? desc_u8_rows : asc_u8_rows; break;
    default: return ln_error("sort: unsupported dtype %s", ln_dtype_name(dt));
  }
  sort_job j;
  memset(&j, 0, sizeof j);
  j.a = a;
  j.nk = a->a.ndim - 1;
  int64_t rows = 1;
  for (int d = 0; d < j.nk; d++) {
    j.shape[d] = a->a.shape[d]; j.ast[d] = a->a.stride[d]; j.ost[d] = a->out.stride[d];
    rows *= j.shape[d];
  }
  if (rows == 0 || a->r == 0 || a->k == 0) return 0;
  if (ln_kernel_threads() > 1 && rows > 1 && rows * a->r > LN_PAR_MIN) ln_parallel_for(rows, 1, fn, &j);
  else fn(&j, 0, rows);
  if (j.failed)
    return ln_error("sort: out of host memory for the scratch of a row of %lld elements", (long long)a->r);
  return 0;
}
