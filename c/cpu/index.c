/* index.c -- CPU kernels of index_select, gather, scatter_add_ and scatter_reduce_.
 *
 * Index values are only known here, so each kernel first checks them all (in
 * order, so the first bad one is named) and fails before writing anything.
 * Messages show positions 1-based, as the rest of the API's messages do. */
#include "../core/backend.h"
#include "iter.h"
#include <math.h>
#include <stdio.h>

int ln_cpu_index_select(void *args);
int ln_cpu_gather(void *args);
int ln_cpu_scatter_add(void *args);
int ln_cpu_scatter_reduce(void *args);

static inline int64_t idx_at(const ln_kview *ix, const char *p) {
  return ix->dtype == LN_INT32 ? (int64_t)*(const int32_t *)p : *(const int64_t *)p;
}

/* Walks every element of the view v (odometer); returns the first value
 * outside [0, size) through *bad, or 0 when all are in range. */
static int check_indices(const ln_kview *v, int64_t size, int64_t *bad) {
  int64_t n = 1;
  for (int d = 0; d < v->ndim; d++) n *= v->shape[d];
  int64_t pos[LN_MAX_DIMS] = {0}, off = 0;
  int es = ln_dtype_size(v->dtype);
  for (int64_t i = 0; i < n; i++) {
    int64_t x = idx_at(v, v->data + off * es);
    if (x < 0 || x >= size) { *bad = x; return -1; }
    for (int d = v->ndim - 1; d >= 0; d--) {
      off += v->stride[d];
      if (++pos[d] < v->shape[d]) break;
      off -= pos[d] * v->stride[d];
      pos[d] = 0;
    }
  }
  return 0;
}

static inline void copy_elem(char *dst, const char *src, int es) {
  switch (es) {
    case 8: *(uint64_t *)dst = *(const uint64_t *)src; break;
    case 4: *(uint32_t *)dst = *(const uint32_t *)src; break;
    case 2: *(uint16_t *)dst = *(const uint16_t *)src; break;
    default: *dst = *src;
  }
}

/* ---- index_select, gather: out[m] = a[m with m[dim] replaced] ------------------------- */
/* Rows are all dims of out but the last; gather reads its index at m, index_select at
 * m[dim]. */

typedef struct { const ln_index_args *a; int gather, es, ies; int64_t rows; } sel_job;

static void sel_range(void *ctx, int64_t b, int64_t e) {
  const sel_job *j = ctx;
  const ln_index_args *A = j->a;
  const ln_kview *o = &A->out, *x = &A->a, *ix = &A->index;
  int nd = o->ndim, last = nd - 1, dim = A->dim, es = j->es, ies = j->ies;
  int64_t n = o->shape[last];
  for (int64_t row = b; row < e; row++) {
    int64_t rem = row, ooff = 0, xoff = 0, ioff = 0;
    for (int d = last - 1; d >= 0; d--) {
      int64_t i = rem % o->shape[d];
      rem /= o->shape[d];
      ooff += i * o->stride[d];
      if (j->gather) { ioff += i * ix->stride[d]; if (d != dim) xoff += i * x->stride[d]; }
      else if (d == dim) xoff += idx_at(ix, ix->data + i * ix->stride[0] * ies) * x->stride[d];
      else xoff += i * x->stride[d];
    }
    char *po = o->data + ooff * es;
    const char *px = x->data + xoff * es;
    if (j->gather) {
      const char *pi = ix->data + ioff * ies;
      int64_t sx = last == dim ? 0 : x->stride[last];
      for (int64_t k = 0; k < n; k++)
        copy_elem(po + k * o->stride[last] * es,
                  px + (k * sx + idx_at(ix, pi + k * ix->stride[last] * ies) * x->stride[dim]) * es, es);
    } else if (last == dim) {
      for (int64_t k = 0; k < n; k++)
        copy_elem(po + k * o->stride[last] * es,
                  px + idx_at(ix, ix->data + k * ix->stride[0] * ies) * x->stride[last] * es, es);
    } else {
      int64_t so = o->stride[last], sx = x->stride[last];
      if (so == 1 && sx == 1) memcpy(po, px, (size_t)(n * es));
      else for (int64_t k = 0; k < n; k++) copy_elem(po + k * so * es, px + k * sx * es, es);
    }
  }
}

static int run_select(ln_index_args *a, int gather, const char *fn) {
  int64_t bad, size = a->a.shape[a->dim];
  if (check_indices(&a->index, size, &bad) != 0)
    return ln_error("%s: index %.0f is out of range for dim %d of size %lld (valid: 1..%lld)", fn,
                    (double)bad + 1, a->dim + 1, (long long)size, (long long)size);  /* (bad may be INT64_MAX) */
  const ln_kview *o = &a->out;
  int64_t rows = 1, n = 1;
  for (int d = 0; d < o->ndim; d++) { n *= o->shape[d]; if (d < o->ndim - 1) rows *= o->shape[d]; }
  if (n == 0) return 0;
  sel_job j = {a, gather, ln_dtype_size(o->dtype), ln_dtype_size(a->index.dtype), rows};
  if (ln_kernel_threads() > 1 && n > LN_PAR_MIN) ln_parallel_for(rows, 1, sel_range, &j);
  else sel_range(&j, 0, rows);
  return 0;
}

int ln_cpu_index_select(void *p) { return run_select(p, 0, "index_select"); }
int ln_cpu_gather(void *p) { return run_select(p, 1, "gather"); }

/* ---- scatter_add_ / scatter_reduce_: out[m with m[dim] = index[m]] op= src[m] ---------- */
/* Fibers (all coordinates of index but dim) write disjoint parts of out, so they
 * run in parallel without races, each in index order (deterministic). */

typedef struct { const ln_index_args *a; int es, ies, nf; int64_t fshape[LN_MAX_DIMS], fd[LN_MAX_DIMS]; } sc_job;

/* scatter_reduce_'s ops; amax/amin: a NaN on either side wins (torch's
 * `isnan(s) ? s : max(o, s)`, its max keeping a NaN o) */
#define RED_SUM(o, s) ((o) + (s))
#define RED_PROD(o, s) ((o) * (s))
#define RED_MAX(o, s) ((s) != (s) ? (s) : (o) < (s) ? (s) : (o))
#define RED_MIN(o, s) ((s) != (s) ? (s) : (s) < (o) ? (s) : (o))
/* integer sums and products wrap around, as the other integer ops */
#define RED_WSUM(o, s) ({ __typeof__(o) r_; __builtin_add_overflow(o, s, &r_); r_; })
#define RED_WPROD(o, s) ({ __typeof__(o) r_; __builtin_mul_overflow(o, s, &r_); r_; })

#define SC_APPLY(T, RED, ID)                                                                \
  do {                                                                                      \
    if (!A->include_self)                                                                   \
      for (int64_t k = 0; k < len; k++)                                                     \
        *(T *)(po + idx_at(ix, pi + k * ix->stride[dim] * ies) * o->stride[dim] * es) = (ID); \
    for (int64_t k = 0; k < len; k++) {                                                     \
      T *d_ = (T *)(po + idx_at(ix, pi + k * ix->stride[dim] * ies) * o->stride[dim] * es);  \
      T s_ = *(const T *)(ps + k * s->stride[dim] * es);                                    \
      *d_ = RED(*d_, s_);                                                                   \
    }                                                                                       \
  } while (0)
#define SC_FLOAT(T)                                                                         \
  switch (A->op) {                                                                          \
    case LN_SCATTER_PROD: SC_APPLY(T, RED_PROD, (T)1); break;                               \
    case LN_SCATTER_AMAX: SC_APPLY(T, RED_MAX, (T)-INFINITY); break;                        \
    case LN_SCATTER_AMIN: SC_APPLY(T, RED_MIN, (T)INFINITY); break;                         \
    default: SC_APPLY(T, RED_SUM, (T)0); break;                                             \
  }
#define SC_INT(T, LO, HI)                                                                   \
  switch (A->op) {                                                                          \
    case LN_SCATTER_PROD: SC_APPLY(T, RED_WPROD, (T)1); break;                              \
    case LN_SCATTER_AMAX: SC_APPLY(T, RED_MAX, (T)(LO)); break;                             \
    case LN_SCATTER_AMIN: SC_APPLY(T, RED_MIN, (T)(HI)); break;                             \
    default: SC_APPLY(T, RED_WSUM, (T)0); break;                                            \
  }

static void sc_range(void *ctx, int64_t b, int64_t e) {
  const sc_job *j = ctx;
  const ln_index_args *A = j->a;
  const ln_kview *o = &A->out, *ix = &A->index, *s = &A->src;
  int dim = A->dim, es = j->es, ies = j->ies;
  int64_t len = ix->shape[dim];
  for (int64_t f = b; f < e; f++) {
    int64_t rem = f, ooff = 0, ioff = 0, soff = 0;
    for (int q = j->nf - 1; q >= 0; q--) {
      int64_t i = rem % j->fshape[q], d = j->fd[q];
      rem /= j->fshape[q];
      ooff += i * o->stride[d]; ioff += i * ix->stride[d]; soff += i * s->stride[d];
    }
    char *po = o->data + ooff * es;
    const char *pi = ix->data + ioff * ies, *ps = s->data + soff * es;
    switch (o->dtype) {
      case LN_FLOAT32: SC_FLOAT(float) break;
      case LN_FLOAT64: SC_FLOAT(double) break;
      case LN_INT32: SC_INT(int32_t, INT32_MIN, INT32_MAX) break;
      case LN_INT64: SC_INT(int64_t, INT64_MIN, INT64_MAX) break;
      default: SC_INT(uint8_t, 0, 255) break;
    }
  }
}

static int run_scatter(ln_index_args *a, const char *fn) {
  int64_t bad, size = a->out.shape[a->dim];
  if (check_indices(&a->index, size, &bad) != 0)
    return ln_error("%s: index %.0f is out of range for dim %d of size %lld (valid: 1..%lld)", fn,
                    (double)bad + 1, a->dim + 1, (long long)size, (long long)size);  /* (bad may be INT64_MAX) */
  sc_job j = {a, ln_dtype_size(a->out.dtype), ln_dtype_size(a->index.dtype), 0, {0}, {0}};
  int64_t nfib = 1, n = 1;
  for (int d = 0; d < a->index.ndim; d++) {
    n *= a->index.shape[d];
    if (d == a->dim) continue;
    j.fshape[j.nf] = a->index.shape[d]; j.fd[j.nf] = d; j.nf++;
    nfib *= a->index.shape[d];
  }
  if (n == 0) return 0;
  if (ln_kernel_threads() > 1 && n > LN_PAR_MIN && nfib > 1) ln_parallel_for(nfib, 1, sc_range, &j);
  else sc_range(&j, 0, nfib);
  return 0;
}

int ln_cpu_scatter_add(void *p) {
  ln_index_args *a = p;
  a->op = LN_SCATTER_SUM;
  a->include_self = 1;
  return run_scatter(a, "scatter_add_");
}
int ln_cpu_scatter_reduce(void *p) { return run_scatter(p, "scatter_reduce_"); }
