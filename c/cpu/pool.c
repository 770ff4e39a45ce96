/* pool.c -- max, average and adaptive average 2-D pooling (torch semantics:
 * ceil_mode, padding, dilation for max pooling, count_include_pad), the
 * CPU kernels (front ends: c/nn/pool.c). Inputs are (N,C,H,W) or (C,H,W); kernels run over
 * the N*C planes in parallel, one plane per work item, so backward passes
 * scatter into their own plane without races. */
#include "nn_kernels.h"
#include <math.h>
#include <omp.h>

/* threads for `work` element-visits */
static int pool_threads(int64_t work, int64_t planes) {
  int nt = ln_kernel_threads();
  if (work < 32768) nt = 1;
  if (nt > planes) nt = (int)LN_MAX(planes, 1);
  return nt;
}

/* ---- kernels ----------------------------------------------------------------- */

enum { CHUNK = 256 };

/* The loops run along output rows: for each window offset (kh, kw) in
 * scan order, a branch-free pass over the valid output columns updates the
 * row, so the compiler can vectorise and random data costs no mispredicts.
 * Per output, candidates are still visited in PyTorch's order (kh outer, kw
 * inner; strictly greater wins, NaN wins), so indices agree on ties. */
#define DEF_POOL(T, SFX)                                                                     \
  static void maxpool_fwd_##SFX(const ln_pool2d_args *a, int nt) {                          \
    const ln_pool2d_params *p = &a->p;                                                       \
    const int64_t H = a->H, W = a->W, OH = a->OH, OW = a->OW, sw = p->stride_w;              \
    _Pragma("omp parallel for num_threads(nt) schedule(static) if (nt > 1)")                 \
    for (int64_t pl = 0; pl < a->planes; pl++) {                                             \
      const T *x = (const T *)a->in + pl * H * W;                                            \
      for (int64_t oh = 0; oh < OH; oh++) {                                                  \
        T *m = (T *)a->out + (pl * OH + oh) * OW;                                            \
        int64_t *mi = a->idx + (pl * OH + oh) * OW;                                          \
        int64_t hs = oh * p->stride_h - p->pad_h, h0 = hs;                                   \
        while (h0 < 0) h0 += p->dil_h;                                                       \
        for (int64_t ow = 0; ow < OW; ow++) {                                                \
          int64_t w0 = ow * sw - p->pad_w;                                                   \
          while (w0 < 0) w0 += p->dil_w;                                                     \
          m[ow] = -INFINITY;                                                                 \
          mi[ow] = h0 * W + w0;                                                              \
        }                                                                                    \
        for (int64_t kh = 0; kh < p->kh; kh++) {                                             \
          int64_t h = hs + kh * p->dil_h;                                                    \
          if (h < 0 || h >= H) continue;                                                     \
          const T *row = x + h * W;                                                          \
          for (int64_t kw = 0; kw < p->kw; kw++) {                                           \
            int64_t off = kw * p->dil_w - p->pad_w, lo, hi;                                  \
            nn_valid_range(off, sw, W, OW, &lo, &hi);                                        \
            _Pragma("omp simd")                                                              \
            for (int64_t ow = lo; ow < hi; ow++) {                                           \
              int64_t iw = ow * sw + off;                                                    \
              T v = row[iw], cur = m[ow];                                                    \
              int64_t c = -(int64_t)((v > cur) | (v != v)); /* mask form vectorises */       \
              m[ow] = c ? v : cur;                                                           \
              mi[ow] = (mi[ow] & ~c) | ((h * W + iw) & c);                                   \
            }                                                                                \
          }                                                                                  \
        }                                                                                    \
      }                                                                                      \
    }                                                                                        \
  }                                                                                          \
  static int maxpool_bwd_##SFX(const ln_pool2d_args *a, int nt) {                           \
    const int64_t HW = a->H * a->W, OHW = a->OH * a->OW;                                     \
    int bad = 0;                                                                             \
    int64_t bad_index = 0;                                                                   \
    _Pragma("omp parallel for num_threads(nt) schedule(static) if (nt > 1)")                 \
    for (int64_t pl = 0; pl < a->planes; pl++) {                                             \
      T *dx = (T *)a->din + pl * HW;                                                         \
      const T *dy = (const T *)a->dout + pl * OHW;                                           \
      const int64_t *ix = a->idx + pl * OHW;                                                 \
      memset(dx, 0, (size_t)HW * sizeof(T));                                                 \
      for (int64_t o = 0; o < OHW; o++) {                                                    \
        int64_t i = ix[o];                                                                   \
        if (i < 0 || i >= HW) { bad = 1; bad_index = i; continue; }                          \
        dx[i] += dy[o];                                                                      \
      }                                                                                      \
    }                                                                                        \
    if (bad)                                                                                 \
      return ln_error("max_pool2d_backward: index %lld out of range for a %lldx%lld plane",  \
                      (long long)bad_index, (long long)a->H, (long long)a->W);               \
    return 0;                                                                                \
  }                                                                                          \
  /* 1/divisor of output columns [c0, c1) of row oh (PyTorch's rule), 0 when the        \
   * window holds no input */                                                                \
  static void avg_scale_##SFX(const ln_pool2d_args *a, int64_t oh, int64_t c0, int64_t c1,  \
                              T *r) {                                                        \
    const ln_pool2d_params *p = &a->p;                                                       \
    int64_t hs = oh * p->stride_h - p->pad_h, he = LN_MIN(hs + p->kh, a->H + p->pad_h);      \
    int64_t ph = he - hs;                                                                    \
    hs = LN_MAX(hs, 0); he = LN_MIN(he, a->H);                                               \
    for (int64_t ow = c0; ow < c1; ow++) {                                                   \
      int64_t ws = ow * p->stride_w - p->pad_w, we = LN_MIN(ws + p->kw, a->W + p->pad_w);    \
      int64_t pool = ph * (we - ws);                                                         \
      ws = LN_MAX(ws, 0); we = LN_MIN(we, a->W);                                             \
      int64_t div = p->count_include_pad ? pool : (he - hs) * (we - ws);                     \
      r[ow - c0] = (hs >= he || ws >= we) ? (T)0 : (T)1 / (T)div;                            \
    }                                                                                        \
  }                                                                                          \
  static void avgpool_fwd_##SFX(const ln_pool2d_args *a, int nt) {                          \
    const ln_pool2d_params *p = &a->p;                                                       \
    const int64_t H = a->H, W = a->W, OH = a->OH, OW = a->OW, sw = p->stride_w;              \
    _Pragma("omp parallel for num_threads(nt) schedule(static) if (nt > 1)")                 \
    for (int64_t pl = 0; pl < a->planes; pl++) {                                             \
      const T *x = (const T *)a->in + pl * H * W;                                            \
      for (int64_t oh = 0; oh < OH; oh++) {                                                  \
        T *y = (T *)a->out + (pl * OH + oh) * OW;                                            \
        for (int64_t ow = 0; ow < OW; ow++) y[ow] = 0;                                       \
        int64_t hs = oh * p->stride_h - p->pad_h;                                            \
        for (int64_t kh = 0; kh < p->kh; kh++) {                                             \
          int64_t h = hs + kh;                                                               \
          if (h < 0 || h >= H) continue;                                                     \
          const T *row = x + h * W;                                                          \
          for (int64_t kw = 0; kw < p->kw; kw++) {                                           \
            int64_t off = kw - p->pad_w, lo, hi;                                             \
            nn_valid_range(off, sw, W, OW, &lo, &hi);                                        \
            for (int64_t ow = lo; ow < hi; ow++) y[ow] += row[ow * sw + off];                \
          }                                                                                  \
        }                                                                                    \
        for (int64_t c0 = 0; c0 < OW; c0 += CHUNK) {                                         \
          T r[CHUNK];                                                                        \
          int64_t c1 = LN_MIN(OW, c0 + CHUNK);                                               \
          avg_scale_##SFX(a, oh, c0, c1, r);                                                 \
          for (int64_t ow = c0; ow < c1; ow++) y[ow] *= r[ow - c0];                          \
        }                                                                                    \
      }                                                                                      \
    }                                                                                        \
  }                                                                                          \
  static void avgpool_bwd_##SFX(const ln_pool2d_args *a, int nt) {                          \
    const ln_pool2d_params *p = &a->p;                                                       \
    const int64_t H = a->H, W = a->W, OH = a->OH, OW = a->OW, sw = p->stride_w;              \
    _Pragma("omp parallel for num_threads(nt) schedule(static) if (nt > 1)")                 \
    for (int64_t pl = 0; pl < a->planes; pl++) {                                             \
      T *dx = (T *)a->din + pl * H * W;                                                      \
      memset(dx, 0, (size_t)(H * W) * sizeof(T));                                            \
      for (int64_t oh = 0; oh < OH; oh++) {                                                  \
        const T *dy = (const T *)a->dout + (pl * OH + oh) * OW;                              \
        int64_t hs = oh * p->stride_h - p->pad_h;                                            \
        for (int64_t c0 = 0; c0 < OW; c0 += CHUNK) {                                         \
          T g[CHUNK];                                                                        \
          int64_t c1 = LN_MIN(OW, c0 + CHUNK);                                               \
          avg_scale_##SFX(a, oh, c0, c1, g);                                                 \
          for (int64_t ow = c0; ow < c1; ow++) g[ow - c0] *= dy[ow];                         \
          for (int64_t kh = 0; kh < p->kh; kh++) {                                           \
            int64_t h = hs + kh;                                                             \
            if (h < 0 || h >= H) continue;                                                   \
            T *row = dx + h * W;                                                             \
            for (int64_t kw = 0; kw < p->kw; kw++) {                                         \
              int64_t off = kw - p->pad_w, lo, hi;                                           \
              nn_valid_range(off, sw, W, OW, &lo, &hi);                                      \
              lo = LN_MAX(lo, c0); hi = LN_MIN(hi, c1);                                      \
              for (int64_t ow = lo; ow < hi; ow++) row[ow * sw + off] += g[ow - c0];         \
            }                                                                                \
          }                                                                                  \
        }                                                                                    \
      }                                                                                      \
    }                                                                                        \
  }                                                                                          \
  /* adaptive bins: [floor(o*H/OH), ceil((o+1)*H/OH)) */                                     \
  static void adaptive_fwd_##SFX(const ln_pool2d_args *a, int nt) {                         \
    const int64_t H = a->H, W = a->W, OH = a->OH, OW = a->OW;                                \
    _Pragma("omp parallel for num_threads(nt) schedule(static) if (nt > 1)")                 \
    for (int64_t pl = 0; pl < a->planes; pl++) {                                             \
      const T *x = (const T *)a->in + pl * H * W;                                            \
      T *y = (T *)a->out + pl * OH * OW;                                                     \
      for (int64_t oh = 0; oh < OH; oh++) {                                                  \
        int64_t hs = oh * H / OH, he = ((oh + 1) * H + OH - 1) / OH;                         \
        for (int64_t ow = 0; ow < OW; ow++) {                                                \
          int64_t ws = ow * W / OW, we = ((ow + 1) * W + OW - 1) / OW;                       \
          T s = 0;                                                                           \
          for (int64_t h = hs; h < he; h++) {                                                \
            const T *r = x + h * W;                                                          \
            _Pragma("omp simd reduction(+:s)")                                               \
            for (int64_t w = ws; w < we; w++) s += r[w];                                     \
          }                                                                                  \
          y[oh * OW + ow] = s / (T)((he - hs) * (we - ws));                                  \
        }                                                                                    \
      }                                                                                      \
    }                                                                                        \
  }                                                                                          \
  static void adaptive_bwd_##SFX(const ln_pool2d_args *a, int nt) {                         \
    const int64_t H = a->H, W = a->W, OH = a->OH, OW = a->OW;                                \
    _Pragma("omp parallel for num_threads(nt) schedule(static) if (nt > 1)")                 \
    for (int64_t pl = 0; pl < a->planes; pl++) {                                             \
      T *dx = (T *)a->din + pl * H * W;                                                      \
      const T *dy = (const T *)a->dout + pl * OH * OW;                                       \
      memset(dx, 0, (size_t)(H * W) * sizeof(T));                                            \
      for (int64_t oh = 0; oh < OH; oh++) {                                                  \
        int64_t hs = oh * H / OH, he = ((oh + 1) * H + OH - 1) / OH;                         \
        for (int64_t ow = 0; ow < OW; ow++) {                                                \
          int64_t ws = ow * W / OW, we = ((ow + 1) * W + OW - 1) / OW;                       \
          T g = dy[oh * OW + ow] / (T)((he - hs) * (we - ws));                               \
          for (int64_t h = hs; h < he; h++) {                                                \
            T *r = dx + h * W;                                                               \
            _Pragma("omp simd")                                                              \
            for (int64_t w = ws; w < we; w++) r[w] += g;                                     \
          }                                                                                  \
        }                                                                                    \
      }                                                                                      \
    }                                                                                        \
  }

DEF_POOL(float, f32)
DEF_POOL(double, f64)

/* The common 2x2, stride 2, no padding, no dilation case, every window inside
 * the plane: two input rows per output row, no strided gathers. Candidates in
 * the same order as the general loop (row h0: w0, w0+1; row h0+1: w0, w0+1;
 * strictly greater or NaN wins), so values and indices agree with it. */
#if defined(__x86_64__) && !defined(__clang__) && !defined(LN_NO_CLONES)
#define POOL_SIMD __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define POOL_SIMD
#endif
/* the tail's padded copies stay inline loops: as memmove calls (two per row)
 * they had taken as long as the pooling itself on LeNet's 14- and 5-wide rows */
#if defined(__GNUC__) && !defined(__clang__)
#define POOL_NO_MEMCPY __attribute__((optimize("no-tree-loop-distribute-patterns")))
#else
#define POOL_NO_MEMCPY
#endif
/* Rows run in chunks of PC outputs with a constant trip count, so the whole
 * chunk is vector code; the last partial chunk goes through a padded local
 * copy (LeNet's rows are 14 and 5 wide: a scalar tail loop with branches on
 * random data had been most of the pass). */
enum { PC = 16 };
#define DEF_MAXPOOL22(T, SFX)                                                                \
  /* PC outputs from input rows r0, r1 (base: r0's offset in the plane) */                  \
  static inline void max22_chunk_##SFX(const T *restrict r0, const T *restrict r1,         \
                                       T *restrict m, int64_t *restrict mi, int64_t base,   \
                                       int64_t W) {                                          \
    _Pragma("omp simd")                                                                      \
    for (int64_t ow = 0; ow < PC; ow++) {                                                    \
      T v0 = r0[2 * ow], v1 = r0[2 * ow + 1], v2 = r1[2 * ow], v3 = r1[2 * ow + 1];          \
      T best = v0;                                                                           \
      int64_t bi = 0;                                                                        \
      bool c = (v1 > best) | (v1 != v1); /* selects, not branches: vectorises */             \
      best = c ? v1 : best; bi = c ? 1 : bi;                                                 \
      c = (v2 > best) | (v2 != v2);                                                          \
      best = c ? v2 : best; bi = c ? W : bi;                                                 \
      c = (v3 > best) | (v3 != v3);                                                          \
      best = c ? v3 : best; bi = c ? W + 1 : bi;                                             \
      m[ow] = best;                                                                          \
      mi[ow] = base + 2 * ow + bi;                                                           \
    }                                                                                        \
  }                                                                                          \
  /* one output row from input rows r0, r1 */                                               \
  POOL_SIMD POOL_NO_MEMCPY static void max22_row_##SFX(const T *restrict r0, const T *restrict r1,        \
                                        T *restrict m, int64_t *restrict mi, int64_t OW,     \
                                        int64_t base, int64_t W, const T *end) {             \
    int64_t ow = 0;                                                                          \
    for (; ow + PC <= OW; ow += PC)                                                          \
      max22_chunk_##SFX(r0 + 2 * ow, r1 + 2 * ow, m + ow, mi + ow, base + 2 * ow, W);        \
    if (ow < OW) {                                                                           \
      T a0[2 * PC], a1[2 * PC], mo[PC];                                                      \
      int64_t io[PC], n = OW - ow;                                                           \
      if (r1 + 2 * ow + 2 * PC <= end) {                                                     \
        /* the chunk reads on into the next rows (inside the input), and keeps n */         \
        max22_chunk_##SFX(r0 + 2 * ow, r1 + 2 * ow, mo, io, base + 2 * ow, W);               \
        for (int64_t j = 0; j < n; j++) { m[ow + j] = mo[j]; mi[ow + j] = io[j]; }           \
        return;                                                                              \
      }                                                                                      \
      for (int64_t j = 0; j < 2 * PC; j++) {                                                 \
        a0[j] = j < 2 * n ? r0[2 * ow + j] : 0;                                              \
        a1[j] = j < 2 * n ? r1[2 * ow + j] : 0;                                              \
      }                                                                                      \
      max22_chunk_##SFX(a0, a1, mo, io, base + 2 * ow, W);                                   \
      for (int64_t j = 0; j < n; j++) { m[ow + j] = mo[j]; mi[ow + j] = io[j]; }             \
    }                                                                                        \
  }                                                                                          \
  static void maxpool22_fwd_##SFX(const ln_pool2d_args *a, int nt) {                        \
    const int64_t H = a->H, W = a->W, OH = a->OH, OW = a->OW;                                \
    const T *end = (const T *)a->in + a->planes * H * W;                                     \
    _Pragma("omp parallel for num_threads(nt) schedule(static) if (nt > 1)")                 \
    for (int64_t pl = 0; pl < a->planes; pl++) {                                             \
      const T *x = (const T *)a->in + pl * H * W;                                            \
      for (int64_t oh = 0; oh < OH; oh++)                                                    \
        max22_row_##SFX(x + 2 * oh * W, x + (2 * oh + 1) * W, (T *)a->out + (pl * OH + oh) * OW, \
                        a->idx + (pl * OH + oh) * OW, OW, 2 * oh * W, W, end);               \
    }                                                                                        \
  }

DEF_MAXPOOL22(float, f32)
DEF_MAXPOOL22(double, f64)

static bool is_pool22(const ln_pool2d_args *a) {
  const ln_pool2d_params *p = &a->p;
  return p->kh == 2 && p->kw == 2 && p->stride_h == 2 && p->stride_w == 2 && p->pad_h == 0 &&
         p->pad_w == 0 && p->dil_h == 1 && p->dil_w == 1 && 2 * a->OH <= a->H && 2 * a->OW <= a->W;
}

static int64_t window(const ln_pool2d_args *a) { return (int64_t)a->p.kh * a->p.kw; }

int ln_cpu_maxpool2d_fwd(void *args) {
  const ln_pool2d_args *a = args;
  int nt = pool_threads(a->planes * a->OH * a->OW * window(a), a->planes);
  if (is_pool22(a)) {
    if (a->dtype == LN_FLOAT64) maxpool22_fwd_f64(a, nt); else maxpool22_fwd_f32(a, nt);
    return 0;
  }
  if (a->dtype == LN_FLOAT64) maxpool_fwd_f64(a, nt); else maxpool_fwd_f32(a, nt);
  return 0;
}

int ln_cpu_maxpool2d_bwd(void *args) {
  const ln_pool2d_args *a = args;
  int nt = pool_threads(a->planes * (a->OH * a->OW + a->H * a->W), a->planes);
  return a->dtype == LN_FLOAT64 ? maxpool_bwd_f64(a, nt) : maxpool_bwd_f32(a, nt);
}

int ln_cpu_avgpool2d_fwd(void *args) {
  const ln_pool2d_args *a = args;
  int nt = pool_threads(a->planes * a->OH * a->OW * window(a), a->planes);
  if (a->dtype == LN_FLOAT64) avgpool_fwd_f64(a, nt); else avgpool_fwd_f32(a, nt);
  return 0;
}

int ln_cpu_avgpool2d_bwd(void *args) {
  const ln_pool2d_args *a = args;
  int nt = pool_threads(a->planes * (a->OH * a->OW * window(a) + a->H * a->W), a->planes);
  if (a->dtype == LN_FLOAT64) avgpool_bwd_f64(a, nt); else avgpool_bwd_f32(a, nt);
  return 0;
}

int ln_cpu_adaptive_avgpool2d_fwd(void *args) {
  const ln_pool2d_args *a = args;
  int nt = pool_threads(a->planes * (a->H * a->W + a->OH * a->OW), a->planes);
  if (a->dtype == LN_FLOAT64) adaptive_fwd_f64(a, nt); else adaptive_fwd_f32(a, nt);
  return 0;
}

int ln_cpu_adaptive_avgpool2d_bwd(void *args) {
  const ln_pool2d_args *a = args;
  int nt = pool_threads(a->planes * (a->H * a->W + a->OH * a->OW), a->planes);
  if (a->dtype == LN_FLOAT64) adaptive_bwd_f64(a, nt); else adaptive_bwd_f32(a, nt);
  return 0;
}
