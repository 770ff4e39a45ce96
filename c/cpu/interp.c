/* interp.c -- interpolation's CPU kernels (front ends: c/nn/interp.c; source
 * indices and weights: core/interp_index.h). Every mode is separable: a
 * plane is resized one dim at a time, the last first (as PyTorch sums, and
 * as lunet's composed path does, so the rounding agrees), each output row of
 * a dim a weighted sum of its 1, 2 or 4 source rows; a kept dim is skipped.
 * The backward runs the adjoint passes in the reverse order, each adding an
 * output row's gradient into its sources (as gathers per source row).
 * Planes run in parallel, one per work item, the intermediate planes in
 * per-thread scratch; with fewer planes than threads (a batch of one) each
 * plane's passes split their rows among the threads instead, forward by
 * output rows, backward by source rows, so no element is written by two
 * threads and every one is computed alike on any number of threads. */
#include "nn_kernels.h"
#include "../core/interp_index.h"
#include "../core/simd.h"
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* one dim's pass over a plane seen as (outer, n_in, inner) -> (outer, n_out, inner) */
typedef struct {
  int64_t n_in, n_out, outer, inner;
  int taps, dbl;        /* dbl: nearest doubling (source j/2), a faster loop */
  int64_t *idx;         /* n_out * taps sources */
  double *w;            /* their weights (NULL: nearest) */
  float *wf;            /* the same as floats (the float32 kernels' factors) */
  /* the backward's adjoint as gathers (not dbl): source k sums the outputs
   * tj[e] times tw[e] for e in tofs[k] .. tofs[k+1]-1, in the order (output,
   * tap) that a scatter would add them (so the sums round alike) */
  int64_t *tofs, *tj;
  double *tw;
  float *twf;
  /* lin2: linear doubling (out = 2 in): outputs 2k and 2k+1 of every inner k
   * read k + lo[0..3] (weights those of j = 2, 3), and (tm > 0) source k of
   * every inner k (from 2) sums outputs 2k + to[r] (weights those of source 2): loops
   * without index tables, the same sums */
  int lin2, tm;
  int64_t lo[4], to[4];
} interp_pass;

typedef struct {
  int n;                /* active passes, in forward order (last dim first) */
  int fuse;             /* two nearest passes, the first along the last dim: one forward pass */
  interp_pass p[3];
  int64_t scratch;      /* elements of the largest intermediate plane */
  void *mem;
} interp_plan;

/* p's lin2 structure (see interp_pass), checked over every inner output and source */
static void lin2_detect(interp_pass *p) {
  const int64_t in = p->n_in, out = p->n_out, *ix = p->idx;
  const double *w = p->w;
  bool ok = true;
  for (int t = 0; t < 4; t++) p->lo[t] = ix[4 + t] - 1;
  for (int64_t j = 4; j < out - 2 && ok; j++)
    for (int t = 0; t < 2; t++) ok = ok && ix[2 * j + t] == ix[2 * j - 4 + t] + 1 && w[2 * j + t] == w[2 * j - 4 + t];
  p->lin2 = ok;
  if (!p->tofs) return;
  const int64_t *of = p->tofs, *tj = p->tj;
  int64_t m = of[3] - of[2];   /* (source 1 may have a weight-0 extra: j = 0's second tap) */
  ok = m >= 1 && m <= 4;
  for (int64_t r = 0; r < m && ok; r++) p->to[r] = tj[of[2] + r] - 4;
  for (int64_t k = 3; k < in - 1 && ok; k++) {
    ok = of[k + 1] - of[k] == m;
    for (int64_t r = 0; r < m && ok; r++)
      ok = tj[of[k] + r] == 2 * k + p->to[r] && p->tw[of[k] + r] == p->tw[of[2] + r];
  }
  p->tm = ok ? (int)m : 0;
}

static int plan_interp(const ln_interp_args *a, interp_plan *pl, bool bwd) {
  int taps = ln_interp_taps(a->mode);
  int64_t total = 0, nin = 0;
  for (int d = 0; d < a->sd; d++) total += a->osz[d] * taps, nin += a->isz[d] + 1;
  memset(pl, 0, sizeof *pl);
  /* idx, w, wf; for a backward tofs, tj, tw, twf too */
  size_t each = sizeof(int64_t) + sizeof(double) + sizeof(float);
  pl->mem = malloc((size_t)total * each * (bwd ? 2 : 1) + (bwd ? (size_t)nin * sizeof(int64_t) : 0) + 16);
  if (!pl->mem) return ln_error("interpolate: out of memory for the index tables");
  int64_t *ip = pl->mem, *tp = ip + total, *op = tp + (bwd ? total : 0);
  double *wp = (double *)(op + (bwd ? nin : 0)), *twp = wp + total;
  float *fp = (float *)(twp + (bwd ? total : 0)), *tfp = fp + total;
  int64_t cur[3];
  for (int d = 0; d < a->sd; d++) cur[d] = a->isz[d];
  for (int d = a->sd - 1; d >= 0; d--) {
    int64_t in = a->isz[d], out = a->osz[d];
    if (ln_interp_kept(a->mode, in, out, a->scale[d], a->align_corners)) continue;
    interp_pass *p = &pl->p[pl->n];
    p->n_in = in, p->n_out = out, p->taps = taps, p->idx = ip, p->w = taps > 1 ? wp : NULL;
    p->outer = 1, p->inner = 1;
    for (int e = 0; e < d; e++) p->outer *= cur[e];
    for (int e = d + 1; e < a->sd; e++) p->inner *= cur[e];
    if (taps == 1) {
      float sc = ln_interp_nearest_scale(in, out, a->scale[d]);
      bool same = in == out;
      p->dbl = out == 2 * in;
      for (int64_t j = 0; j < out; j++) {
        ip[j] = ln_interp_nearest(j, in, out, sc, a->mode == LN_INTERP_NEAREST_EXACT);
        same = same && ip[j] == j;
        p->dbl = p->dbl && ip[j] == j / 2;
      }
      if (same) continue;   /* (nearest-exact with a scale near 1) */
    } else {
      double r = ln_interp_ratio(in, out, a->scale[d], a->align_corners);
      for (int64_t j = 0; j < out; j++) {
        if (taps == 2) ln_interp_linear(j, in, r, a->align_corners, ip + 2 * j, wp + 2 * j);
        else ln_interp_cubic(j, in, r, a->align_corners, ip + 4 * j, wp + 4 * j);
      }
    }
    if (p->w)
      for (int64_t e = 0; e < out * taps; e++) fp[e] = (float)wp[e];
    p->wf = fp;
    if (bwd && !p->dbl) {   /* the transpose: count per source, then fill in (output, tap) order */
      p->tofs = op, p->tj = tp, p->tw = twp, p->twf = tfp;
      memset(op, 0, (size_t)(in + 1) * sizeof(int64_t));
      for (int64_t e = 0; e < out * taps; e++) op[ip[e] + 1]++;
      for (int64_t k = 0; k < in; k++) op[k + 1] += op[k];
      for (int64_t e = 0; e < out * taps; e++) {
        int64_t at = op[ip[e]]++;
        tp[at] = e / taps;
        twp[at] = p->w ? wp[e] : 1;
        tfp[at] = (float)twp[at];
      }
      for (int64_t k = in; k > 0; k--) op[k] = op[k - 1];   /* (back to the starts) */
      op[0] = 0;
      op += in + 1, tp += out * taps, twp += out * taps, tfp += out * taps;
    }
    if (taps == 2 && out == 2 * in && in >= 4) lin2_detect(p);
    ip += out * taps, wp += out * taps, fp += out * taps;
    cur[d] = out;
    pl->n++;
    if (pl->n > 1) {   /* the previous pass's output is an intermediate */
      interp_pass *q = &pl->p[pl->n - 2];
      int64_t qs = q->outer * q->n_out * q->inner;
      if (qs > pl->scratch) pl->scratch = qs;
    }
  }
  pl->fuse = pl->n == 2 && taps == 1 && pl->p[0].inner == 1 && pl->p[1].inner == pl->p[0].n_out;
  return 0;
}

#define DEF_INTERP(T, SFX, WF, TWF)                                                                       \
  static void fwd_pass_##SFX(const interp_pass *p, const T *s, T *t, int64_t u0, int64_t u1) {   \
    const int64_t ni = p->n_in, no = p->n_out, inner = p->inner;                                 \
    const int64_t *ix = p->idx;                                                                  \
    for (int64_t u = u0; u < u1; u++) {                                                          \
      const int64_t o = inner == 1 ? u : u / no, j0 = inner == 1 ? 0 : u % no;                   \
      const T *so = s + o * ni * inner;                                                          \
      T *to = t + o * no * inner;                                                                \
      if (inner == 1) {                                                                          \
        if (p->dbl) {                                                                            \
          for (int64_t k = 0; k < ni; k++) to[2 * k] = to[2 * k + 1] = so[k];                   \
        } else if (p->taps == 1) {                                                               \
          for (int64_t j = 0; j < no; j++) to[j] = so[ix[j]];                                    \
        } else if (p->taps == 2) {                                                               \
          const int64_t lo = p->lin2 ? 1 : no, hi = p->lin2 ? no - 2 : no;                       \
          for (int64_t j = 0; j < no; j = j == lo ? hi : j + 1) {                                \
            T v = so[ix[2 * j]] * p->WF[2 * j];                                                  \
            to[j] = v + so[ix[2 * j + 1]] * p->WF[2 * j + 1];                                    \
          }                                                                                      \
          if (p->lin2) {   /* (the inner outputs in pairs: no index tables) */                   \
            const T A0 = p->WF[4], A1 = p->WF[5], B0 = p->WF[6], B1 = p->WF[7];                  \
            const T *s0 = so + p->lo[0], *s1 = so + p->lo[1], *s2 = so + p->lo[2], *s3 = so + p->lo[3]; \
            for (int64_t k = 1; k < ni - 1; k++) {                                               \
              T v = s0[k] * A0;                                                                  \
              to[2 * k] = v + s1[k] * A1;                                                        \
              T u = s2[k] * B0;                                                                  \
              to[2 * k + 1] = u + s3[k] * B1;                                                    \
            }                                                                                    \
          }                                                                                      \
        } else {                                                                                 \
          for (int64_t j = 0; j < no; j++) {                                                     \
            const int64_t *i4 = ix + 4 * j;                                                      \
            const T *w4 = p->WF + 4 * j;                                                     \
            T v = so[i4[0]] * w4[0];                                                          \
            v = v + so[i4[1]] * w4[1];                                                        \
            v = v + so[i4[2]] * w4[2];                                                        \
            to[j] = v + so[i4[3]] * w4[3];                                                    \
          }                                                                                      \
        }                                                                                        \
        continue;                                                                                \
      }                                                                                          \
      for (int64_t j = j0; j < j0 + 1; j++) {                                                    \
        T *tr = to + j * inner;                                                                  \
        if (p->taps == 1) {                                                                      \
          memcpy(tr, so + ix[j] * inner, (size_t)inner * sizeof(T));                             \
        } else if (p->taps == 2) {                                                               \
          const T *r0 = so + ix[2 * j] * inner, *r1 = so + ix[2 * j + 1] * inner;                \
          const T w0 = p->WF[2 * j], w1 = p->WF[2 * j + 1];                                  \
          _Pragma("omp simd")                                                                    \
          for (int64_t i = 0; i < inner; i++) { T v = r0[i] * w0; tr[i] = v + r1[i] * w1; }      \
        } else {                                                                                 \
          const int64_t *i4 = ix + 4 * j;                                                        \
          const T *r0 = so + i4[0] * inner, *r1 = so + i4[1] * inner;                            \
          const T *r2 = so + i4[2] * inner, *r3 = so + i4[3] * inner;                            \
          const T w0 = p->WF[4 * j], w1 = p->WF[4 * j + 1];                                  \
          const T w2 = p->WF[4 * j + 2], w3 = p->WF[4 * j + 3];                              \
          _Pragma("omp simd")                                                                    \
          for (int64_t i = 0; i < inner; i++) {                                                  \
            T v = r0[i] * w0;                                                                    \
            v = v + r1[i] * w1;                                                                  \
            v = v + r2[i] * w2;                                                                  \
            tr[i] = v + r3[i] * w3;                                                              \
          }                                                                                      \
        }                                                                                        \
      }                                                                                          \
    }                                                                                            \
  }                                                                                              \
  /* d (outer, n_in, inner) = the adjoint of the pass applied to g (outer, n_out, inner) */      \
  static void bwd_pass_##SFX(const interp_pass *p, const T *g, T *d, int64_t u0, int64_t u1) {   \
    const int64_t ni = p->n_in, no = p->n_out, inner = p->inner, taps = p->taps;                 \
    for (int64_t u = u0; u < u1; u++) {                                                          \
      const int64_t o = inner == 1 ? u : u / ni, k0 = inner == 1 ? 0 : u % ni;                   \
      T *dd = d + o * ni * inner;                                                                \
      const T *go = g + o * no * inner;                                                          \
      if (p->dbl) {   /* (row k the sum of rows 2k and 2k+1: no zeroing, one pass) */           \
        if (inner == 1) {                                                                        \
          for (int64_t k = 0; k < ni; k++) dd[k] = go[2 * k] + go[2 * k + 1];                    \
        } else {                                                                                 \
          for (int64_t k = k0; k < k0 + 1; k++) {                                                \
            const T *g0 = go + 2 * k * inner, *g1 = g0 + inner;                                  \
            T *dr = dd + k * inner;                                                              \
            _Pragma("omp simd")                                                                  \
            for (int64_t i = 0; i < inner; i++) dr[i] = g0[i] + g1[i];                           \
          }                                                                                      \
        }                                                                                        \
        continue;                                                                                \
      }                                                                                          \
      /* each source the sum of its outputs, in the scatter's order (from 0, as the scatter's  \
       * zeroed start: the same rounding and the same zeros' signs) */                           \
      const int64_t *of = p->tofs, *tj = p->tj;                                                  \
      const T *tw = p->TWF;                                                                      \
      if (inner == 1) {                                                                          \
        if (taps == 1) {                                                                         \
          for (int64_t k = 0; k < ni; k++) {                                                     \
            T acc = 0;                                                                           \
            for (int64_t e = of[k]; e < of[k + 1]; e++) acc += go[tj[e]];                        \
            dd[k] = acc;                                                                         \
          }                                                                                      \
        } else {                                                                                 \
          const int64_t lo = p->tm ? 1 : ni, hi = p->tm ? ni - 1 : ni;                           \
          for (int64_t k = 0; k < ni; k = k == lo ? hi : k + 1) {                                \
            T acc = 0;                                                                           \
            for (int64_t e = of[k]; e < of[k + 1]; e++) acc += go[tj[e]] * tw[e];                \
            dd[k] = acc;                                                                         \
          }                                                                                      \
          if (p->tm == 4) {   /* (linear doubling's inner sources: no index tables) */           \
            const T *W = tw + of[2];                                                             \
            const T *g0 = go + p->to[0], *g1 = go + p->to[1], *g2 = go + p->to[2], *g3 = go + p->to[3]; \
            for (int64_t k = 2; k < ni - 1; k++) {                                               \
              T acc = 0;                                                                         \
              acc += g0[2 * k] * W[0];                                                           \
              acc += g1[2 * k] * W[1];                                                           \
              acc += g2[2 * k] * W[2];                                                           \
              dd[k] = acc + g3[2 * k] * W[3];                                                    \
            }                                                                                    \
          } else if (p->tm) {                                                                    \
            const T *W = tw + of[2];                                                             \
            for (int64_t k = 2; k < ni - 1; k++) {                                               \
              T acc = 0;                                                                         \
              for (int r = 0; r < p->tm; r++) acc += go[2 * k + p->to[r]] * W[r];                \
              dd[k] = acc;                                                                       \
            }                                                                                    \
          }                                                                                      \
        }                                                                                        \
        continue;                                                                                \
      }                                                                                          \
      for (int64_t k = k0; k < k0 + 1; k++) {                                                   \
        T *restrict dr = dd + k * inner;                                                         \
        if (of[k] == of[k + 1]) { memset(dr, 0, (size_t)inner * sizeof(T)); continue; }         \
        for (int64_t e = of[k]; e < of[k + 1]; e++) {                                            \
          const T *restrict gr = go + tj[e] * inner;                                             \
          const T wm = tw[e];                                                                    \
          if (e == of[k]) {                                                                      \
            if (taps == 1) {                                                                     \
              _Pragma("omp simd")                                                                \
              for (int64_t i = 0; i < inner; i++) dr[i] = (T)0 + gr[i];                          \
            } else {                                                                             \
              _Pragma("omp simd")                                                                \
              for (int64_t i = 0; i < inner; i++) dr[i] = (T)0 + gr[i] * wm;                     \
            }                                                                                    \
          } else if (taps == 1) {                                                                \
            _Pragma("omp simd")                                                                  \
            for (int64_t i = 0; i < inner; i++) dr[i] += gr[i];                                  \
          } else {                                                                               \
            _Pragma("omp simd")                                                                  \
            for (int64_t i = 0; i < inner; i++) dr[i] += gr[i] * wm;                             \
          }                                                                                      \
        }                                                                                        \
      }                                                                                          \
    }                                                                                            \
  }                                                                                              \
  /* rows [r0, r1) of plane q of a strided dout gathered into buf (dense, the output's sizes) */  \
  static void gather_##SFX(const ln_interp_args *a, int64_t q, T *buf, int64_t r0, int64_t r1) { \
    int64_t sz[3] = {1, 1, 1}, st[3] = {0, 0, 0};                                                \
    for (int d = 0; d < a->sd; d++) sz[3 - a->sd + d] = a->osz[d], st[3 - a->sd + d] = a->gst[2 + d]; \
    const T *g = (const T *)a->dout + (q / a->C) * a->gst[0] + (q % a->C) * a->gst[1];           \
    for (int64_t rr = r0; rr < r1; rr++) {                                                       \
      const T *r = g + (rr / sz[1]) * st[0] + (rr % sz[1]) * st[1];                              \
      T *b = buf + rr * sz[2];                                                                   \
      if (st[2] == 1) memcpy(b, r, (size_t)sz[2] * sizeof(T));                                   \
      else if (st[2] == 0) { const T v = r[0]; for (int64_t i = 0; i < sz[2]; i++) b[i] = v; }   \
      else for (int64_t i = 0; i < sz[2]; i++) b[i] = r[i * st[2]];                              \
    }                                                                                            \
  }                                                                                              \
  /* the fused nearest forward's rows [u0, u1) (see interp_plan): output row u of the second \
   * pass is the first pass applied to its one source row, no intermediate plane; a row      \
   * with the previous one's source is a copy of it (one this thread wrote) */               \
  LN_SIMD static void fused_##SFX(const interp_plan *pl, const T *s, T *t, int64_t u0, int64_t u1) { \
    const interp_pass *p0 = &pl->p[0], *p1 = &pl->p[1];                                          \
    const int64_t wi = p0->n_in, wo = p0->n_out, ni = p1->n_in, no = p1->n_out;                  \
    const int64_t *ix0 = p0->idx, *ix1 = p1->idx;                                                \
    for (int64_t u = u0; u < u1; u++) {                                                          \
      const int64_t o = u / no, j = u % no;                                                      \
      T *restrict tr = t + u * wo;                                                               \
      if (u > u0 && j > 0 && ix1[j] == ix1[j - 1]) {                                             \
        memcpy(tr, tr - wo, (size_t)wo * sizeof(T));                                             \
        continue;                                                                                \
      }                                                                                          \
      const T *restrict sr = s + (o * ni + ix1[j]) * wi;                                         \
      if (p0->dbl)                                                                               \
        for (int64_t k = 0; k < wi; k++) tr[2 * k] = tr[2 * k + 1] = sr[k];                      \
      else                                                                                       \
        for (int64_t k = 0; k < wo; k++) tr[k] = sr[ix0[k]];                                     \
    }                                                                                            \
  }                                                                                              \
  /* plane q: src (ss elements) -> dst through the passes (scratch: buf). Thread tid of nth     \
   * takes its share of each pass's rows (a barrier between passes); every row is computed     \
   * alike whoever takes it, so the results do not depend on the split. */                     \
  static void plane_##SFX(const ln_interp_args *a, const interp_plan *pl, bool bwd, T *buf,      \
                          const T *s, T *t, int64_t ds, int tid, int nth) {                      \
    if (pl->n == 0) {                                                                            \
      int64_t e0 = ds * tid / nth, e1 = ds * (tid + 1) / nth;                                    \
      memcpy(t + e0, s + e0, (size_t)(e1 - e0) * sizeof(T));                                     \
      return;                                                                                    \
    }                                                                                            \
    if (pl->fuse && !bwd) {                                                                      \
      int64_t units = pl->p[1].outer * pl->p[1].n_out;                                           \
      fused_##SFX(pl, s, t, units * tid / nth, units * (tid + 1) / nth);                         \
      return;                                                                                    \
    }                                                                                            \
    for (int k = 0; k < pl->n; k++) {                                                            \
      T *o = k == pl->n - 1 ? t : buf + (k & 1) * pl->scratch;                                   \
      const interp_pass *p = &pl->p[bwd ? pl->n - 1 - k : k];                                    \
      int64_t units = p->inner == 1 ? p->outer : p->outer * (bwd ? p->n_in : p->n_out);          \
      int64_t u0 = units * tid / nth, u1 = units * (tid + 1) / nth;                              \
      if (k > 0 && nth > 1) { _Pragma("omp barrier") }                                           \
      if (bwd) bwd_pass_##SFX(p, s, o, u0, u1);                                                  \
      else fwd_pass_##SFX(p, s, o, u0, u1);                                                      \
      s = o;                                                                                     \
    }                                                                                            \
  }                                                                                              \
  /* plane q split over the rows among the team (called by every thread of a parallel region) */\
  static void plane_rows_##SFX(const ln_interp_args *a, const interp_plan *pl, bool bwd, T *buf, \
                               int64_t q, const T *s, T *t, int64_t ds, bool strided) {          \
    int tid = omp_get_thread_num(), nth = omp_get_num_threads();                                 \
    if (strided) {                                                                               \
      int64_t rows = 1;                                                                          \
      for (int d = 0; d < a->sd - 1; d++) rows *= a->osz[d];                                     \
      s = buf + 2 * pl->scratch;                                                                 \
      gather_##SFX(a, q, (T *)s, rows * tid / nth, rows * (tid + 1) / nth);                      \
      _Pragma("omp barrier")                                                                     \
    }                                                                                            \
    plane_##SFX(a, pl, bwd, buf, s, t, ds, tid, nth);                                            \
    _Pragma("omp barrier")   /* (the next plane reuses the scratch) */                           \
  }                                                                                              \
  static void run_##SFX(const ln_interp_args *a, const interp_plan *pl, bool bwd, T *scratch,    \
                        int64_t per, int nt, bool rows) {                                        \
    int64_t isz = 1, osz = 1;                                                                    \
    for (int d = 0; d < a->sd; d++) isz *= a->isz[d], osz *= a->osz[d];                          \
    const T *src = (const T *)(bwd ? a->dout : a->in);                                           \
    T *dst = (T *)(bwd ? a->din : a->out);                                                       \
    const int64_t ss = bwd ? osz : isz, ds = bwd ? isz : osz;                                    \
    const bool strided = bwd && a->gstrided;                                                     \
    /* every plane of dout the same one (sum's gradient): one plane's backward, copied */        \
    if (strided && (a->gst[0] == 0 || a->planes == a->C) && (a->gst[1] == 0 || a->C == 1)) {     \
      if (rows) {                                                                                \
        _Pragma("omp parallel num_threads(nt)")                                                  \
        plane_rows_##SFX(a, pl, true, scratch, 0, NULL, dst, ds, true);                          \
      } else {                                                                                   \
        T *g = scratch + 2 * pl->scratch;                                                        \
        int64_t nr = 1;                                                                          \
        for (int d = 0; d < a->sd - 1; d++) nr *= a->osz[d];                                     \
        gather_##SFX(a, 0, g, 0, nr);                                                            \
        plane_##SFX(a, pl, true, scratch, g, dst, ds, 0, 1);                                     \
      }                                                                                          \
      _Pragma("omp parallel for num_threads(nt) schedule(static) if (nt > 1)")                   \
      for (int64_t q = 1; q < a->planes; q++) memcpy(dst + q * ds, dst, (size_t)ds * sizeof(T)); \
      return;                                                                                    \
    }                                                                                            \
    if (rows) {   /* fewer planes than threads: each plane's rows split among them */          \
      _Pragma("omp parallel num_threads(nt)")                                                    \
      for (int64_t q = 0; q < a->planes; q++)                                                    \
        plane_rows_##SFX(a, pl, bwd, scratch, q, src + q * ss, dst + q * ds, ds, strided);       \
      return;                                                                                    \
    }                                                                                            \
    _Pragma("omp parallel for num_threads(nt) schedule(static) if (nt > 1)")                     \
    for (int64_t q = 0; q < a->planes; q++) {                                                    \
      T *buf = scratch + (int64_t)omp_get_thread_num() * per;                                    \
      const T *s = src + q * ss;                                                                 \
      if (strided) {                                                                             \
        int64_t nr = 1;                                                                          \
        for (int d = 0; d < a->sd - 1; d++) nr *= a->osz[d];                                     \
        gather_##SFX(a, q, buf + 2 * pl->scratch, 0, nr);                                        \
        s = buf + 2 * pl->scratch;                                                               \
      }                                                                                          \
      plane_##SFX(a, pl, bwd, buf, s, dst + q * ds, ds, 0, 1);                                   \
    }                                                                                            \
  }

DEF_INTERP(float, f32, wf, twf)
DEF_INTERP(double, f64, w, tw)

static int run(void *args, bool bwd) {
  const ln_interp_args *a = args;
  if (a->planes == 0) return 0;
  interp_plan pl;
  if (plan_interp(a, &pl, bwd) != 0) return -1;
  int64_t isz = 1, osz = 1;
  for (int d = 0; d < a->sd; d++) isz *= a->isz[d], osz *= a->osz[d];
  int64_t work = a->planes * (isz + osz) * ln_interp_taps(a->mode);
  int nt = ln_kernel_threads();
  if (work < 32768) nt = 1;
  /* fewer planes than threads, or an uneven share of a few: split each
   * plane's rows among the threads instead (one scratch, shared) */
  bool rows = nt > 1 && (a->planes < nt || (a->planes < 4 * nt && a->planes % nt != 0));
  if (!rows && nt > a->planes) nt = (int)a->planes;
  size_t es = a->dtype == LN_FLOAT64 ? sizeof(double) : sizeof(float);
  /* per thread: two intermediate planes, and a strided dout's gathered plane */
  int64_t per = 2 * pl.scratch + (bwd && a->gstrided ? osz : 0);
  void *scratch = NULL;
  if (per > 0) {
    scratch = malloc((size_t)(rows ? 1 : nt) * (size_t)per * es);
    if (!scratch) {
      free(pl.mem);
      return ln_error("interpolate: out of memory for %d x %lld scratch elements", nt, (long long)per);
    }
  }
  if (a->dtype == LN_FLOAT64) run_f64(a, &pl, bwd, scratch, per, nt, rows);
  else run_f32(a, &pl, bwd, scratch, per, nt, rows);
  free(scratch);
  free(pl.mem);
  return 0;
}

int ln_cpu_interp_fwd(void *args) { return run(args, false); }
int ln_cpu_interp_bwd(void *args) { return run(args, true); }
