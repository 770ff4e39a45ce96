/* reduce.c -- CPU reduction kernels (sum, mean, prod, max, min, argmax, argmin,
 * var, std, norm, any, all).
 *
 * The front end (c/ops/reduce.c) hands a view `a` whose leading dims are the
 * kept ones and whose last dim is the reduced one (size r), and a contiguous
 * output with one element per kept position (row-major). Two loops:
 *  - rows: each output reduces r elements at a fixed stride (the reduced dim
 *    is the innermost one, or nothing better applies). A long row is cut into
 *    fixed chunks whose partial results combine in order, so results do not
 *    depend on the thread count.
 *  - columns: the innermost kept dim is contiguous and the reduced dim is not
 *    (sum over dim 1 of a (N, C) tensor): tiles of outputs accumulate whole
 *    input rows, which vectorises and reads memory in order.
 * Float inputs accumulate in double; integer sums and products in int64. */
#include "../core/backend.h"
#include "iter.h"
#include <math.h>
#include <omp.h>
#include <stdlib.h>

int ln_cpu_reduce(void *args);

enum { CHUNK = 16384, TILE = 256 };
enum { NORM_P = 0, NORM_0, NORM_1, NORM_2, NORM_INF, NORM_NINF };

/* partial result of a segment */
typedef struct {
  double d;     /* float: sum, product, extreme, mean (var), norm accumulation */
  int64_t q;    /* integer: sum, product, extreme; any/all flag */
  int64_t i;    /* position of the extreme */
  int64_t n;    /* elements seen */
  double m2;    /* var: sum of squared deviations from the mean d */
} rstate;

typedef struct {
  int op, nk, fl, need_idx;   /* nk: norm kind; fl: input is float */
  double p, corr;
  int64_t r, sr;              /* reduced size and stride (elements) */
} rctx;

static int norm_kind(double p) {
  if (p == 2) return NORM_2;
  if (p == 1) return NORM_1;
  if (p == 0) return NORM_0;
  if (isinf(p)) return p > 0 ? NORM_INF : NORM_NINF;
  return NORM_P;
}

static void state_init(const rctx *c, rstate *s) {
  s->d = 0; s->q = 0; s->i = 0; s->n = 0; s->m2 = 0;
  if (c->op == LN_RPROD) { s->d = 1; s->q = 1; }
  if (c->op == LN_RALL) s->q = 1;
}

/* b (later positions) into a */
static void state_combine(const rctx *c, rstate *a, const rstate *b) {
  if (b->n == 0) return;
  if (a->n == 0) { *a = *b; return; }
  switch (c->op) {
    /* integer sums and products wrap like int64 (as PyTorch's): in uint64, no signed overflow */
    case LN_RSUM: case LN_RMEAN: a->d += b->d; a->q = (int64_t)((uint64_t)a->q + (uint64_t)b->q); break;
    case LN_RPROD: a->d *= b->d; a->q = (int64_t)((uint64_t)a->q * (uint64_t)b->q); break;
    case LN_RMAX: case LN_RARGMAX: case LN_RMIN: case LN_RARGMIN: {
      bool mx = c->op == LN_RMAX || c->op == LN_RARGMAX, take;
      if (c->fl) {
        if (isnan(a->d)) take = false;
        else if (isnan(b->d)) take = true;
        else take = mx ? b->d > a->d : b->d < a->d;
      } else take = mx ? b->q > a->q : b->q < a->q;
      if (take) { a->d = b->d; a->q = b->q; a->i = b->i; }
      break;
    }
    case LN_RVAR: case LN_RSTD: {   /* Chan et al. */
      double na = (double)a->n, nb = (double)b->n, n = na + nb, delta = b->d - a->d;
      a->d += delta * nb / n;
      a->m2 += b->m2 + delta * delta * na * nb / n;
      break;
    }
    case LN_RNORM:
      if (c->nk == NORM_INF || c->nk == NORM_NINF) {
        if (!isnan(a->d) && (isnan(b->d) || (c->nk == NORM_INF ? b->d > a->d : b->d < a->d))) a->d = b->d;
      } else a->d += b->d;
      break;
    case LN_RANY: a->q = a->q || b->q; break;
    case LN_RALL: a->q = a->q && b->q; break;
  }
  a->n += b->n;
}

/* ---- one segment: n elements from p at stride s (elements), positions i0.. ---- */

#define SEG_FLOAT(NAME, T)                                                                   \
  LN_SIMD static void NAME(const rctx *c, const char *pc, int64_t n, int64_t s, int64_t i0,   \
                           rstate *st) {                                                    \
    const T *x = (const T *)pc;                                                              \
    state_init(c, st);                                                                       \
    st->n = n;                                                                               \
    if (n == 0) return;                                                                      \
    switch (c->op) {                                                                         \
      case LN_RSUM: case LN_RMEAN: {                                                         \
        double acc = 0;                                                                      \
        if (s == 1) {                                                                        \
          _Pragma("omp simd reduction(+:acc)")                                               \
          for (int64_t k = 0; k < n; k++) acc += (double)x[k];                               \
        } else for (int64_t k = 0; k < n; k++) acc += (double)x[k * s];                      \
        st->d = acc; break;                                                                  \
      }                                                                                      \
      case LN_RPROD: {                                                                       \
        double acc = 1;                                                                      \
        for (int64_t k = 0; k < n; k++) acc *= (double)x[k * s];                             \
        st->d = acc; break;                                                                  \
      }                                                                                      \
      case LN_RMAX: case LN_RMIN: case LN_RARGMAX: case LN_RARGMIN: {                         \
        bool mx = c->op == LN_RMAX || c->op == LN_RARGMAX;                                   \
        if (s == 1) {  /* vectorised value pass, NaN tracked apart; then the first position */ \
          T best = x[0]; int nan = 0;                                                        \
          if (mx) {                                                                          \
            _Pragma("omp simd reduction(max:best) reduction(|:nan)")                         \
            for (int64_t k = 0; k < n; k++) { best = x[k] > best ? x[k] : best; nan |= x[k] != x[k]; } \
          } else {                                                                           \
            _Pragma("omp simd reduction(min:best) reduction(|:nan)")                         \
            for (int64_t k = 0; k < n; k++) { best = x[k] < best ? x[k] : best; nan |= x[k] != x[k]; } \
          }                                                                                  \
          st->d = nan ? NAN : (double)best;                                                  \
          if (c->need_idx) {  /* first block holding the result, then a short scan */       \
            int64_t k = 0;                                                                   \
            if (nan) while (x[k] == x[k]) k++;                                               \
            else {                                                                           \
              for (int64_t b0 = 0;; b0 += 64) {                                              \
                int64_t e = LN_MIN(n, b0 + 64); int hit = 0;                                 \
                _Pragma("omp simd reduction(|:hit)")                                         \
                for (int64_t q = b0; q < e; q++) hit |= x[q] == best;                        \
                if (hit) { k = b0; break; }                                                  \
              }                                                                              \
              while (x[k] != best) k++;                                                      \
            }                                                                                \
            st->i = i0 + k;                                                                  \
          }                                                                                  \
          break;                                                                             \
        }                                                                                    \
        T best = x[0]; int64_t bi = 0;                                                       \
        if (best == best)                                                                    \
          for (int64_t k = 1; k < n; k++) {                                                  \
            T v = x[k * s];                                                                  \
            if (v != v) { best = v; bi = k; break; }                                         \
            if (mx ? v > best : v < best) { best = v; bi = k; }                              \
          }                                                                                  \
        st->d = (double)best; st->i = i0 + bi; break;                                        \
      }                                                                                      \
      case LN_RVAR: case LN_RSTD: {  /* two passes over the segment */                      \
        double acc = 0, m2 = 0;                                                              \
        if (s == 1) {                                                                        \
          _Pragma("omp simd reduction(+:acc)")                                               \
          for (int64_t k = 0; k < n; k++) acc += (double)x[k];                               \
        } else for (int64_t k = 0; k < n; k++) acc += (double)x[k * s];                      \
        double mean = acc / (double)n;                                                       \
        if (s == 1) {                                                                        \
          _Pragma("omp simd reduction(+:m2)")                                                \
          for (int64_t k = 0; k < n; k++) { double dv = (double)x[k] - mean; m2 += dv * dv; } \
        } else for (int64_t k = 0; k < n; k++) { double dv = (double)x[k * s] - mean; m2 += dv * dv; } \
        st->d = mean; st->m2 = m2; break;                                                    \
      }                                                                                      \
      case LN_RNORM: {                                                                       \
        double acc = 0;                                                                      \
        switch (c->nk) {                                                                     \
          case NORM_2:                                                                       \
            if (s == 1) {                                                                    \
              _Pragma("omp simd reduction(+:acc)")                                           \
              for (int64_t k = 0; k < n; k++) acc += (double)x[k] * (double)x[k];            \
            } else for (int64_t k = 0; k < n; k++) acc += (double)x[k * s] * (double)x[k * s]; \
            break;                                                                           \
          case NORM_1: for (int64_t k = 0; k < n; k++) acc += fabs((double)x[k * s]); break; \
          case NORM_0: for (int64_t k = 0; k < n; k++) acc += x[k * s] != 0; break;          \
          case NORM_INF: case NORM_NINF: {                                                   \
            acc = fabs((double)x[0]);                                                        \
            for (int64_t k = 1; k < n && acc == acc; k++) {                                  \
              double v = fabs((double)x[k * s]);                                             \
              if (v != v || (c->nk == NORM_INF ? v > acc : v < acc)) acc = v;                \
            }                                                                                \
            break;                                                                           \
          }                                                                                  \
          default: for (int64_t k = 0; k < n; k++) acc += pow(fabs((double)x[k * s]), c->p); \
        }                                                                                    \
        st->d = acc; break;                                                                  \
      }                                                                                      \
      case LN_RANY: { int64_t f = 0; for (int64_t k = 0; k < n && !f; k++) f = x[k * s] != 0; st->q = f; break; } \
      case LN_RALL: { int64_t f = 1; for (int64_t k = 0; k < n && f; k++) f = x[k * s] != 0; st->q = f; break; } \
    }                                                                                        \
  }

#define SEG_INT(NAME, T)                                                                     \
  LN_SIMD static void NAME(const rctx *c, const char *pc, int64_t n, int64_t s, int64_t i0,   \
                           rstate *st) {                                                    \
    const T *x = (const T *)pc;                                                              \
    state_init(c, st);                                                                       \
    st->n = n;                                                                               \
    if (n == 0) return;                                                                      \
    switch (c->op) {                                                                         \
      case LN_RSUM: {                                                                        \
        uint64_t acc = 0;  /* wraps like int64 */                                            \
        if (s == 1) {                                                                        \
          _Pragma("omp simd reduction(+:acc)")                                               \
          for (int64_t k = 0; k < n; k++) acc += (uint64_t)(int64_t)x[k];                    \
        } else for (int64_t k = 0; k < n; k++) acc += (uint64_t)(int64_t)x[k * s];           \
        st->q = (int64_t)acc; break;                                                         \
      }                                                                                      \
      case LN_RPROD: {                                                                       \
        uint64_t acc = 1;  /* wraps like int64 */                                            \
        for (int64_t k = 0; k < n; k++) acc *= (uint64_t)(int64_t)x[k * s];                  \
        st->q = (int64_t)acc; break;                                                         \
      }                                                                                      \
      case LN_RMAX: case LN_RMIN: case LN_RARGMAX: case LN_RARGMIN: {                         \
        bool mx = c->op == LN_RMAX || c->op == LN_RARGMAX;                                   \
        T best = x[0]; int64_t bi = 0;                                                       \
        if (s == 1) {                                                                        \
          if (mx) {                                                                          \
            _Pragma("omp simd reduction(max:best)")                                          \
            for (int64_t k = 0; k < n; k++) best = x[k] > best ? x[k] : best;                \
          } else {                                                                           \
            _Pragma("omp simd reduction(min:best)")                                          \
            for (int64_t k = 0; k < n; k++) best = x[k] < best ? x[k] : best;                \
          }                                                                                  \
          if (c->need_idx) {  /* first block holding the result, then a short scan */       \
            for (int64_t b0 = 0;; b0 += 64) {                                                \
              int64_t e = LN_MIN(n, b0 + 64); int hit = 0;                                   \
              _Pragma("omp simd reduction(|:hit)")                                           \
              for (int64_t q = b0; q < e; q++) hit |= x[q] == best;                          \
              if (hit) { bi = b0; break; }                                                   \
            }                                                                                \
            while (x[bi] != best) bi++;                                                      \
          }                                                                                  \
        } else                                                                               \
          for (int64_t k = 1; k < n; k++) {                                                  \
            T v = x[k * s];                                                                  \
            if (mx ? v > best : v < best) { best = v; bi = k; }                              \
          }                                                                                  \
        st->q = (int64_t)best; st->i = i0 + bi; break;                                       \
      }                                                                                      \
      case LN_RANY: { int64_t f = 0; for (int64_t k = 0; k < n && !f; k++) f = x[k * s] != 0; st->q = f; break; } \
      case LN_RALL: { int64_t f = 1; for (int64_t k = 0; k < n && f; k++) f = x[k * s] != 0; st->q = f; break; } \
    }                                                                                        \
  }

SEG_FLOAT(seg_f32, float)
SEG_FLOAT(seg_f64, double)
SEG_INT(seg_i32, int32_t)
SEG_INT(seg_i64, int64_t)
SEG_INT(seg_u8, uint8_t)

typedef void (*seg_fn)(const rctx *, const char *, int64_t, int64_t, int64_t, rstate *);

/* ---- writing a result ----------------------------------------------------------- */

static void store_int(char *p, int dt, int64_t v) {
  switch (dt) {
    case LN_INT64: *(int64_t *)p = v; break;
    case LN_INT32: *(int32_t *)p = (int32_t)v; break;
    case LN_UINT8: *(uint8_t *)p = (uint8_t)v; break;
    case LN_BOOL: *(uint8_t *)p = v != 0; break;
    default: ln_store_from_double(p, dt, (double)v);
  }
}

static void finish(const rctx *c, const rstate *s, char *out, int odt, int64_t *idx) {
  double v = s->d;
  switch (c->op) {
    case LN_RSUM: case LN_RPROD: case LN_RMAX: case LN_RMIN:
      if (c->fl) ln_store_from_double(out, odt, v); else store_int(out, odt, s->q);
      if (idx) *idx = s->i;
      return;
    case LN_RMEAN: ln_store_from_double(out, odt, v / (double)c->r); return;
    case LN_RARGMAX: case LN_RARGMIN: *(int64_t *)out = s->i; return;
    case LN_RVAR: case LN_RSTD: {
      double den = (double)s->n - c->corr;
      v = s->n == 0 ? NAN : s->m2 / (den > 0 ? den : 0);
      ln_store_from_double(out, odt, c->op == LN_RSTD ? sqrt(v) : v);
      return;
    }
    case LN_RNORM:
      if (c->nk == NORM_2) v = sqrt(v);
      else if (c->nk == NORM_P) v = pow(v, 1.0 / c->p);
      ln_store_from_double(out, odt, v);
      return;
    case LN_RANY: case LN_RALL: *(uint8_t *)out = s->q != 0; return;
  }
}

/* ---- rows ------------------------------------------------------------------------ */

/* the whole reduced row starting at p, chunk by chunk */
static void reduce_row(const rctx *c, seg_fn seg, const char *p, int es, rstate *acc) {
  state_init(c, acc);
  for (int64_t b = 0; b < c->r; b += CHUNK) {
    rstate s;
    seg(c, p + b * c->sr * es, LN_MIN(CHUNK, c->r - b), c->sr, b, &s);
    state_combine(c, acc, &s);
  }
}

typedef struct {
  const rctx *c; seg_fn seg; int es, odt, nk;   /* nk: kept dims */
  const ln_kview *a; char *out, *idx;
  int64_t shape[LN_MAX_DIMS], stride[LN_MAX_DIMS];   /* kept dims, strides in bytes */
} row_job;

static void rows_range(void *ctx, int64_t b, int64_t e) {
  row_job *j = ctx;
  int64_t pos[LN_MAX_DIMS], off = 0, rem = b;
  for (int d = j->nk - 1; d >= 0; d--) {
    pos[d] = rem % j->shape[d]; rem /= j->shape[d];
    off += pos[d] * j->stride[d];
  }
  int oes = ln_dtype_size(j->odt);
  for (int64_t o = b; o < e; o++) {
    rstate s;
    reduce_row(j->c, j->seg, j->a->data + off, j->es, &s);
    finish(j->c, &s, j->out + o * oes, j->odt, j->idx ? (int64_t *)j->idx + o : NULL);
    for (int d = j->nk - 1; d >= 0; d--) {   /* odometer */
      off += j->stride[d];
      if (++pos[d] < j->shape[d]) break;
      off -= pos[d] * j->stride[d];
      pos[d] = 0;
    }
  }
}

/* one long row: chunks in parallel, combined in order */
static void long_row(const rctx *c, seg_fn seg, const char *p, int es, rstate *acc) {
  int64_t nc = (c->r + CHUNK - 1) / CHUNK;
  rstate *parts = malloc((size_t)nc * sizeof *parts);
  int nt = ln_kernel_threads();
  if (!parts || nt <= 1 || nc < 2) { free(parts); reduce_row(c, seg, p, es, acc); return; }
  if (nc < nt) nt = (int)nc;
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t k = 0; k < nc; k++)
    seg(c, p + k * CHUNK * c->sr * es, LN_MIN(CHUNK, c->r - k * CHUNK), c->sr, k * CHUNK, &parts[k]);
  state_init(c, acc);
  for (int64_t k = 0; k < nc; k++) state_combine(c, acc, &parts[k]);
  free(parts);
}

/* ---- columns ------------------------------------------------------------------------ */
/* outputs [j0, j0 + m) of one outer position: x points at the first of them in input
 * row 0; input rows are sr elements apart; the outputs are contiguous. */

#define COL_FLOAT(NAME, T)                                                                   \
  LN_SIMD static void NAME(const rctx *c, const char *pc, int64_t m, int odt, char *out,      \
                           int64_t *idx) {                                                  \
    const T *x = (const T *)pc;                                                              \
    double acc[TILE], m2[TILE]; int64_t bi[TILE];                                            \
    int64_t r = c->r, sr = c->sr;                                                            \
    int oes = ln_dtype_size(odt);                                                            \
    rstate s; state_init(c, &s); s.n = r;                                                    \
    switch (c->op) {                                                                         \
      case LN_RSUM: case LN_RMEAN: case LN_RVAR: case LN_RSTD:                               \
        for (int64_t j = 0; j < m; j++) acc[j] = 0;                                          \
        for (int64_t k = 0; k < r; k++) {                                                    \
          const T *row = x + k * sr;                                                         \
          _Pragma("omp simd")                                                                \
          for (int64_t j = 0; j < m; j++) acc[j] += (double)row[j];                          \
        }                                                                                    \
        if (c->op == LN_RVAR || c->op == LN_RSTD) {                                          \
          for (int64_t j = 0; j < m; j++) { acc[j] = r ? acc[j] / (double)r : 0; m2[j] = 0; } \
          for (int64_t k = 0; k < r; k++) {                                                  \
            const T *row = x + k * sr;                                                       \
            _Pragma("omp simd")                                                              \
            for (int64_t j = 0; j < m; j++) { double dv = (double)row[j] - acc[j]; m2[j] += dv * dv; } \
          }                                                                                  \
        }                                                                                    \
        break;                                                                               \
      case LN_RPROD:                                                                         \
        for (int64_t j = 0; j < m; j++) acc[j] = 1;                                          \
        for (int64_t k = 0; k < r; k++) {                                                    \
          const T *row = x + k * sr;                                                         \
          for (int64_t j = 0; j < m; j++) acc[j] *= (double)row[j];                          \
        }                                                                                    \
        break;                                                                               \
      case LN_RMAX: case LN_RMIN: case LN_RARGMAX: case LN_RARGMIN: {                         \
        bool mx = c->op == LN_RMAX || c->op == LN_RARGMAX;                                   \
        for (int64_t j = 0; j < m; j++) { acc[j] = (double)x[j]; bi[j] = 0; }                \
        for (int64_t k = 1; k < r; k++) {  /* branch-free: vectorises; NaN sticks */        \
          const T *row = x + k * sr;                                                         \
          if (mx) {                                                                          \
            _Pragma("omp simd")                                                              \
            for (int64_t j = 0; j < m; j++) {                                                \
              double v = (double)row[j], b = acc[j];                                         \
              bool take = (v > b) | ((v != v) & (b == b));                                   \
              acc[j] = take ? v : b; bi[j] = take ? k : bi[j];                               \
            }                                                                                \
          } else {                                                                           \
            _Pragma("omp simd")                                                              \
            for (int64_t j = 0; j < m; j++) {                                                \
              double v = (double)row[j], b = acc[j];                                         \
              bool take = (v < b) | ((v != v) & (b == b));                                   \
              acc[j] = take ? v : b; bi[j] = take ? k : bi[j];                               \
            }                                                                                \
          }                                                                                  \
        }                                                                                    \
        break;                                                                               \
      }                                                                                      \
      case LN_RNORM:                                                                         \
        for (int64_t j = 0; j < m; j++)                                                      \
          acc[j] = (c->nk == NORM_INF || c->nk == NORM_NINF) && r ? fabs((double)x[j]) : 0;  \
        for (int64_t k = 0; k < r; k++) {                                                    \
          const T *row = x + k * sr;                                                         \
          switch (c->nk) {                                                                   \
            case NORM_2:                                                                     \
              _Pragma("omp simd")                                                            \
              for (int64_t j = 0; j < m; j++) acc[j] += (double)row[j] * (double)row[j];     \
              break;                                                                         \
            case NORM_1: for (int64_t j = 0; j < m; j++) acc[j] += fabs((double)row[j]); break; \
            case NORM_0: for (int64_t j = 0; j < m; j++) acc[j] += row[j] != 0; break;       \
            case NORM_INF: case NORM_NINF:                                                   \
              for (int64_t j = 0; j < m; j++) {                                              \
                double v = fabs((double)row[j]);                                             \
                if (acc[j] == acc[j] && (v != v || (c->nk == NORM_INF ? v > acc[j] : v < acc[j]))) acc[j] = v; \
              }                                                                              \
              break;                                                                         \
            default: for (int64_t j = 0; j < m; j++) acc[j] += pow(fabs((double)row[j]), c->p); \
          }                                                                                  \
        }                                                                                    \
        break;                                                                               \
      case LN_RANY: case LN_RALL: {                                                          \
        bool any = c->op == LN_RANY;                                                         \
        for (int64_t j = 0; j < m; j++) bi[j] = !any;                                        \
        for (int64_t k = 0; k < r; k++) {                                                    \
          const T *row = x + k * sr;                                                         \
          for (int64_t j = 0; j < m; j++) bi[j] = any ? (bi[j] | (row[j] != 0)) : (bi[j] & (row[j] != 0)); \
        }                                                                                    \
        for (int64_t j = 0; j < m; j++) out[j] = (char)bi[j];                                \
        return;                                                                              \
      }                                                                                      \
    }                                                                                        \
    bool var = c->op == LN_RVAR || c->op == LN_RSTD, arg = c->op >= LN_RMAX && c->op <= LN_RARGMIN; \
    for (int64_t j = 0; j < m; j++) {                                                        \
      s.d = acc[j]; if (arg) s.i = bi[j]; if (var) s.m2 = m2[j];                              \
      finish(c, &s, out + j * oes, odt, idx ? idx + j : NULL);                               \
    }                                                                                        \
  }

#define COL_INT(NAME, T)                                                                     \
  LN_SIMD static void NAME(const rctx *c, const char *pc, int64_t m, int odt, char *out,      \
                           int64_t *idx) {                                                  \
    const T *x = (const T *)pc;                                                              \
    int64_t acc[TILE], bi[TILE];                                                             \
    int64_t r = c->r, sr = c->sr;                                                            \
    int oes = ln_dtype_size(odt);                                                            \
    rstate s; state_init(c, &s); s.n = r;                                                    \
    switch (c->op) {                                                                         \
      case LN_RSUM:                                                                          \
        for (int64_t j = 0; j < m; j++) acc[j] = 0;                                          \
        for (int64_t k = 0; k < r; k++) {                                                    \
          const T *row = x + k * sr;                                                         \
          _Pragma("omp simd")                                                                \
          for (int64_t j = 0; j < m; j++) acc[j] += (int64_t)row[j];                         \
        }                                                                                    \
        break;                                                                               \
      case LN_RPROD:                                                                         \
        for (int64_t j = 0; j < m; j++) acc[j] = 1;                                          \
        for (int64_t k = 0; k < r; k++) {                                                    \
          const T *row = x + k * sr;                                                         \
          for (int64_t j = 0; j < m; j++) acc[j] = (int64_t)((uint64_t)acc[j] * (uint64_t)(int64_t)row[j]); \
        }                                                                                    \
        break;                                                                               \
      case LN_RMAX: case LN_RMIN: case LN_RARGMAX: case LN_RARGMIN: {                         \
        bool mx = c->op == LN_RMAX || c->op == LN_RARGMAX;                                   \
        for (int64_t j = 0; j < m; j++) { acc[j] = (int64_t)x[j]; bi[j] = 0; }               \
        for (int64_t k = 1; k < r; k++) {                                                    \
          const T *row = x + k * sr;                                                         \
          for (int64_t j = 0; j < m; j++) {                                                  \
            int64_t v = (int64_t)row[j];                                                     \
            if (mx ? v > acc[j] : v < acc[j]) { acc[j] = v; bi[j] = k; }                     \
          }                                                                                  \
        }                                                                                    \
        break;                                                                               \
      }                                                                                      \
      case LN_RANY: case LN_RALL: {                                                          \
        bool any = c->op == LN_RANY;                                                         \
        for (int64_t j = 0; j < m; j++) acc[j] = !any;                                       \
        for (int64_t k = 0; k < r; k++) {                                                    \
          const T *row = x + k * sr;                                                         \
          for (int64_t j = 0; j < m; j++) acc[j] = any ? (acc[j] | (row[j] != 0)) : (acc[j] & (row[j] != 0)); \
        }                                                                                    \
        break;                                                                               \
      }                                                                                      \
      default: return;                                                                       \
    }                                                                                        \
    bool arg = c->op >= LN_RMAX && c->op <= LN_RARGMIN;                                     \
    for (int64_t j = 0; j < m; j++) {                                                        \
      s.q = acc[j]; if (arg) s.i = bi[j];                                                    \
      finish(c, &s, out + j * oes, odt, idx ? idx + j : NULL);                               \
    }                                                                                        \
  }

COL_FLOAT(col_f32, float)
COL_FLOAT(col_f64, double)
COL_INT(col_i32, int32_t)
COL_INT(col_i64, int64_t)
COL_INT(col_u8, uint8_t)

typedef void (*col_fn)(const rctx *, const char *, int64_t, int, char *, int64_t *);

typedef struct {
  const rctx *c; col_fn col; int es, odt, nk;
  const ln_kview *a; char *out, *idx;
  int64_t shape[LN_MAX_DIMS], stride[LN_MAX_DIMS];  /* kept dims but the inner one, bytes */
  int64_t inner, ntile;
} col_job;

static void cols_range(void *ctx, int64_t b, int64_t e) {
  col_job *j = ctx;
  int oes = ln_dtype_size(j->odt);
  for (int64_t it = b; it < e; it++) {
    int64_t o = it / j->ntile, t = it % j->ntile, rem = o, off = 0;
    for (int d = j->nk - 1; d >= 0; d--) { off += (rem % j->shape[d]) * j->stride[d]; rem /= j->shape[d]; }
    int64_t j0 = t * TILE, m = LN_MIN(TILE, j->inner - j0), q = o * j->inner + j0;
    j->col(j->c, j->a->data + off + j0 * j->es, m, j->odt, j->out + q * oes,
           j->idx ? (int64_t *)j->idx + q : NULL);
  }
}

/* ---- entry ----------------------------------------------------------------------- */

int ln_cpu_reduce(void *p) {
  ln_reduce_args *a = p;
  const ln_kview *v = &a->a;
  int dt = v->dtype, es = ln_dtype_size(dt);
  rctx c = {a->op, norm_kind(a->p), ln_is_float(dt),
            a->idx.data != NULL || a->op == LN_RARGMAX || a->op == LN_RARGMIN, a->p, a->p,
            a->r, v->stride[v->ndim - 1]};
  seg_fn seg; col_fn col;
  switch (dt) {
    case LN_FLOAT32: seg = seg_f32; col = col_f32; break;
    case LN_FLOAT64: seg = seg_f64; col = col_f64; break;
    case LN_INT32: seg = seg_i32; col = col_i32; break;
    case LN_INT64: seg = seg_i64; col = col_i64; break;
    case LN_UINT8: case LN_BOOL: seg = seg_u8; col = col_u8; break;
    default: return ln_error("reduce: unsupported dtype %s", ln_dtype_name(dt));
  }
  /* kept dims: drop size 1, merge where contiguous in the input */
  int nk = 0;
  int64_t shape[LN_MAX_DIMS], stride[LN_MAX_DIMS], nout = 1;
  for (int d = 0; d < v->ndim - 1; d++) {
    int64_t n = v->shape[d], s = v->stride[d] * es;
    nout *= n;
    if (n == 1) continue;
    if (nk > 0 && stride[nk - 1] == s * n) { shape[nk - 1] *= n; stride[nk - 1] = s; continue; }
    shape[nk] = n; stride[nk] = s; nk++;
  }
  if (nout == 0) return 0;
  int odt = a->out.dtype, nt = ln_kernel_threads();
  int64_t work = nout * (a->r > 0 ? a->r : 1);
  if (nk > 0 && stride[nk - 1] == es && c.sr != 1 && a->r > 0) {
    col_job j = {&c, col, es, odt, nk - 1, v, a->out.data, a->idx.data, {0}, {0}, shape[nk - 1], 0};
    for (int d = 0; d < nk - 1; d++) { j.shape[d] = shape[d]; j.stride[d] = stride[d]; }
    j.ntile = (j.inner + TILE - 1) / TILE;
    int64_t items = nout / j.inner * j.ntile;
    if (nt > 1 && work > LN_PAR_MIN) ln_parallel_for(items, 1, cols_range, &j);
    else cols_range(&j, 0, items);
    return 0;
  }
  row_job j = {&c, seg, es, odt, nk, v, a->out.data, a->idx.data, {0}, {0}};
  for (int d = 0; d < nk; d++) { j.shape[d] = shape[d]; j.stride[d] = stride[d]; }
  if (nt > 1 && nout < 2 * nt && a->r >= 4 * CHUNK) {   /* few long rows: split each */
    int64_t pos[LN_MAX_DIMS] = {0}, off = 0;
    int oes = ln_dtype_size(odt);
    for (int64_t o = 0; o < nout; o++) {
      rstate s;
      long_row(&c, seg, v->data + off, es, &s);
      finish(&c, &s, a->out.data + o * oes, odt, a->idx.data ? (int64_t *)a->idx.data + o : NULL);
      for (int d = nk - 1; d >= 0; d--) {
        off += stride[d];
        if (++pos[d] < shape[d]) break;
        off -= pos[d] * stride[d];
        pos[d] = 0;
      }
    }
    return 0;
  }
  if (nt > 1 && work > LN_PAR_MIN && nout > 1) ln_parallel_for(nout, 1, rows_range, &j);
  else rows_range(&j, 0, nout);
  return 0;
}
