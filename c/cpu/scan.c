/* scan.c -- CPU kernel of cumsum/cumprod (front end: c/ops/scan.c).
 *
 * Each row of the input view (its last dim, r elements at any stride) is a
 * running sum or product, written as it goes, starting from 0 (sum: so that
 * -0.0 alone gives 0.0, as PyTorch's) or 1 (product). float32 and float64
 * accumulate in double (PyTorch's CPU kernel accumulates float in double
 * too, so a long float32 row matches it), integers in uint64 (two's
 * complement wrap-around without signed overflow); each output element is
 * the accumulator rounded (truncated) to the dtype.
 *
 * A scan along a dim whose stride is not 1 while the last kept dim's stride
 * is 1 in both views (a contiguous tensor scanned along any dim but its last)
 * runs by columns: a block of adjacent rows advances together, one step
 * along dim at a time, reading and writing contiguous memory (row by row,
 * each step would touch one element of a new cache line). Rows, or (outer
 * row, column block) items, go to the device's threads when the work is
 * large (LN_PAR_MIN). */
#include "../core/backend.h"
#include "iter.h"

int ln_cpu_scan(void *args);

enum { COLS = 256 };   /* columns advanced together (their accumulators on the stack) */

typedef struct {
  const ln_scan_args *a;
  int nk;                                        /* kept dims an item's offsets walk */
  int64_t shape[LN_MAX_DIMS];                    /* their sizes */
  int64_t ast[LN_MAX_DIMS], ost[LN_MAX_DIMS];    /* their strides, elements */
  int64_t ncols, nblk;                           /* by columns: the last kept dim's size, its blocks */
} scan_job;

/* element offsets of row `row` (over the walked kept dims) in a and out */
static inline void row_offsets(const scan_job *j, int64_t row, int64_t *ao, int64_t *oo) {
  int64_t a = 0, o = 0;
  for (int d = j->nk - 1; d >= 0; d--) {
    int64_t i = row % j->shape[d];
    row /= j->shape[d];
    a += i * j->ast[d]; o += i * j->ost[d];
  }
  *ao = a; *oo = o;
}

/* One element type T, accumulator A (LOAD: T -> A, STORE: A -> T) and
 * operation OP with its identity INIT: a row scanner and a column scanner. */
#define SCANNER(NAME, T, A, LOAD, STORE, OP, INIT)                                           \
  static void NAME##_rows(void *ctx, int64_t b, int64_t e) {                                 \
    const scan_job *j = ctx;                                                                 \
    const ln_scan_args *S = j->a;                                                            \
    int64_t r = S->r, sa = S->a.stride[S->a.ndim - 1], so = S->out.stride[S->out.ndim - 1]; \
    for (int64_t row = b; row < e; row++) {                                                  \
      int64_t ao, oo;                                                                        \
      row_offsets(j, row, &ao, &oo);                                                         \
      const T *x = (const T *)S->a.data + ao;                                                \
      T *y = (T *)S->out.data + oo;                                                          \
      A acc = INIT;                                                                          \
      for (int64_t i = 0; i < r; i++) {                                                      \
        acc = OP(acc, LOAD(x[i * sa]));                                                      \
        y[i * so] = STORE(T, acc);                                                           \
      }                                                                                      \
    }                                                                                        \
  }                                                                                          \
  static void NAME##_cols(void *ctx, int64_t b, int64_t e) {                                 \
    const scan_job *j = ctx;                                                                 \
    const ln_scan_args *S = j->a;                                                            \
    int64_t r = S->r, sa = S->a.stride[S->a.ndim - 1], so = S->out.stride[S->out.ndim - 1]; \
    A acc[COLS];                                                                             \
    for (int64_t item = b; item < e; item++) {                                               \
      int64_t row = item / j->nblk, c0 = item % j->nblk * COLS, ao, oo;                      \
      int64_t n = LN_MIN((int64_t)COLS, j->ncols - c0);                                      \
      row_offsets(j, row, &ao, &oo);                                                         \
      const T *x = (const T *)S->a.data + ao + c0;                                           \
      T *y = (T *)S->out.data + oo + c0;                                                     \
      for (int64_t c = 0; c < n; c++) acc[c] = INIT;                                         \
      for (int64_t i = 0; i < r; i++, x += sa, y += so)                                      \
        for (int64_t c = 0; c < n; c++) {                                                    \
          acc[c] = OP(acc[c], LOAD(x[c]));                                                   \
          y[c] = STORE(T, acc[c]);                                                           \
        }                                                                                    \
    }                                                                                        \
  }

#define ADD(s, v) ((s) + (v))
#define MUL(s, v) ((s) * (v))
#define LOAD_F(v) ((double)(v))
#define STORE_F(T, s) ((T)(s))
/* integers through int64 into uint64: unsigned arithmetic wraps where int64 would overflow */
#define LOAD_I(v) ((uint64_t)(int64_t)(v))
#define STORE_I(T, s) ((T)(int64_t)(s))

SCANNER(sum_f32, float, double, LOAD_F, STORE_F, ADD, 0.0)
SCANNER(prod_f32, float, double, LOAD_F, STORE_F, MUL, 1.0)
SCANNER(sum_f64, double, double, LOAD_F, STORE_F, ADD, 0.0)
SCANNER(prod_f64, double, double, LOAD_F, STORE_F, MUL, 1.0)
SCANNER(sum_i32, int32_t, uint64_t, LOAD_I, STORE_I, ADD, 0)
SCANNER(prod_i32, int32_t, uint64_t, LOAD_I, STORE_I, MUL, 1)
SCANNER(sum_i64, int64_t, uint64_t, LOAD_I, STORE_I, ADD, 0)
SCANNER(prod_i64, int64_t, uint64_t, LOAD_I, STORE_I, MUL, 1)
SCANNER(sum_u8, uint8_t, uint64_t, LOAD_I, STORE_I, ADD, 0)
SCANNER(prod_u8, uint8_t, uint64_t, LOAD_I, STORE_I, MUL, 1)

int ln_cpu_scan(void *args) {
  const ln_scan_args *a = args;
  if (a->op != LN_SCAN_SUM && a->op != LN_SCAN_PROD) return ln_error("scan: unknown op %d", a->op);
  bool prod = a->op == LN_SCAN_PROD;
  const char *name = prod ? "cumprod" : "cumsum";
  int dt = a->a.dtype;
  if (a->out.dtype != dt)
    return ln_error("%s: the output's dtype %s is not the input's %s", name, ln_dtype_name(a->out.dtype),
                    ln_dtype_name(dt));
  ln_range_fn rows, cols;
  switch (dt) {
    case LN_FLOAT32: rows = prod ? prod_f32_rows : sum_f32_rows; cols = prod ? prod_f32_cols : sum_f32_cols; break;
    case LN_FLOAT64: rows = prod ? prod_f64_rows : sum_f64_rows; cols = prod ? prod_f64_cols : sum_f64_cols; break;
    case LN_INT32: rows = prod ? prod_i32_rows : sum_i32_rows; cols = prod ? prod_i32_cols : sum_i32_cols; break;
    case LN_INT64: rows = prod ? prod_i64_rows : sum_i64_rows; cols = prod ? prod_i64_cols : sum_i64_cols; break;
    case LN_UINT8: rows = prod ? prod_u8_rows : sum_u8_rows; cols = prod ? prod_u8_cols : sum_u8_cols; break;
    default: return ln_error("%s: unsupported dtype %s", name, ln_dtype_name(dt));
  }
  int nk = a->a.ndim - 1;   /* kept dims; the last view dim is the scanned one */
  int64_t nrows = 1;
  for (int d = 0; d < nk; d++) nrows *= a->a.shape[d];
  if (nrows == 0 || a->r == 0) return 0;

  scan_job j;
  memset(&j, 0, sizeof j);
  j.a = a;
  bool by_cols = nk >= 1 && a->r > 1 && a->a.shape[nk - 1] > 1 && a->a.stride[nk] != 1 &&
                 a->a.stride[nk - 1] == 1 && a->out.stride[nk - 1] == 1;
  int64_t items = nrows;
  ln_range_fn fn = rows;
  j.nk = nk;
  if (by_cols) {
    j.nk = nk - 1;
    j.ncols = a->a.shape[nk - 1];
    j.nblk = (j.ncols + COLS - 1) / COLS;
    items = nrows / j.ncols * j.nblk;
    fn = cols;
  }
  for (int d = 0; d < j.nk; d++) {
    j.shape[d] = a->a.shape[d]; j.ast[d] = a->a.stride[d]; j.ost[d] = a->out.stride[d];
  }
  if (ln_kernel_threads() > 1 && items > 1 && nrows * a->r > LN_PAR_MIN) ln_parallel_for(items, 1, fn, &j);
  else fn(&j, 0, items);
  return 0;
}
