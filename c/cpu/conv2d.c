/* conv2d.c -- 2-D convolution (cross-correlation, as torch's conv2d):
 * the CPU kernels and their planner (front ends: c/nn/conv2d.c).
 *
 * The CPU kernels lower the convolution to GEMM (OpenBLAS, one thread per
 * call) over tiles of output positions: per image n, group g and tile of T
 * output positions, im2col writes the (C/G*KH*KW, T) input columns into the
 * thread's scratch and
 *   forward          out[n,g] (O/G, T)    = w[g] (O/G, K) . col (K, T)
 *   weight gradient  dw[g] (O/G, K)      += dout[n,g] (O/G, T) . col^T
 *   data gradient    dcol (K, T)          = w[g]^T . dout[n,g], col2im into din
 * 1x1 convolutions with stride 1 and no padding use the input (or din)
 * directly as the column matrix. Work items (image x tile) are spread over the
 * kernel's threads, each with its own slice of scratch; the weight gradient
 * accumulates per thread and is reduced at the end; the data gradient is
 * split by (image, group, channel chunk) so col2im never races. Scratch comes
 * from the device's caching allocator (no system allocation in the steady
 * state) and is sized by a plan made on the calling thread.
 * Float32 one-group convolutions with 3+ input channels (4+ for the data
 * gradient) and grouped / depthwise ones run through oneDNN instead
 * (conv_dnnl.c; conv_auto_dnnl below), and some small stride-1 ones (and the
 * depthwise weight gradient of kernels over 3x3) through the direct kernels
 * (conv_direct.c).
 * LUNET_CONV_IMPL=gemm|direct|dnnl forces one for comparison (direct: the
 * direct kernels where they apply, else im2col + GEMM). */
#include "nn_kernels.h"
#include <math.h>
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

/* COL_BUDGET: elements of one thread's im2col tile; SMALL_MACS: below, one thread */
enum { COL_BUDGET = 1 << 19, MIN_TILE = 64, SMALL_MACS = 1 << 20 };

/* ---- typed helpers ----------------------------------------------------------- */

/* C (m,n) = op(A) . op(B) + beta*C, row-major. */
static void gemm(int dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const char *A,
                 int64_t lda, const char *B, int64_t ldb, double beta, char *C, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    if (beta == 0)
      for (int64_t i = 0; i < m; i++)
        memset(C + i * ldc * (dt == LN_FLOAT64 ? 8 : 4), 0, (size_t)n * (dt == LN_FLOAT64 ? 8 : 4));
    return;
  }
  CBLAS_TRANSPOSE TA = ta ? CblasTrans : CblasNoTrans, TB = tb ? CblasTrans : CblasNoTrans;
  if (dt == LN_FLOAT64)
    cblas_dgemm(CblasRowMajor, TA, TB, (int)m, (int)n, (int)k, 1.0, (const double *)A, (int)lda,
                (const double *)B, (int)ldb, beta, (double *)C, (int)ldc);
  else
    cblas_sgemm(CblasRowMajor, TA, TB, (int)m, (int)n, (int)k, 1.0f, (const float *)A, (int)lda,
                (const float *)B, (int)ldb, (float)beta, (float *)C, (int)ldc);
}

/* im2col of Cc channels of one image (Cc,H,W) for output positions [p0,p1):
 * col (Cc*KH*KW, p1-p0). col2im adds such columns back into din (Cc,H,W). */
#define DEF_IM2COL(T, SFX)                                                                   \
  static void im2col_##SFX(const T *in, int64_t Cc, const ln_conv2d_args *a, int64_t p0,    \
                           int64_t p1, T *col) {                                             \
    const int64_t H = a->H, W = a->W, KH = a->KH, KW = a->KW, OW = a->OW;                   \
    const int64_t sh = a->p.stride_h, sw = a->p.stride_w, Tn = p1 - p0;                     \
    const int64_t oh_first = p0 / OW, ow_first = p0 - oh_first * OW;                         \
    const bool blocks = sw == 1 && sh == 1 && OW == W && ow_first == 0 && Tn % OW == 0;     \
    for (int64_t c = 0; c < Cc; c++)                                                         \
      for (int64_t kh = 0; kh < KH; kh++)                                                    \
        for (int64_t kw = 0; kw < KW; kw++) {                                                \
          T *dst = col + ((c * KH + kh) * KW + kw) * Tn;                                     \
          const T *plane = in + c * H * W;                                                   \
          int64_t offh = kh * a->p.dil_h - a->p.pad_h, offw = kw * a->p.dil_w - a->p.pad_w;  \
          int64_t lo, hi;                                                                    \
          nn_valid_range(offw, sw, W, OW, &lo, &hi);                                         \
          if (blocks) {                                                                      \
            /* stride 1, OW == W, whole rows: one shifted copy of the rows, then the      \
             * columns that fall outside the image zeroed */                                 \
            int64_t nrows = Tn / OW;                                                         \
            int64_t A = LN_MAX(oh_first, -offh), B = LN_MIN(oh_first + nrows, H - offh);     \
            if (A >= B) { memset(dst, 0, (size_t)Tn * sizeof(T)); continue; }                \
            memset(dst, 0, (size_t)((A - oh_first) * OW) * sizeof(T));                        \
            memset(dst + (B - oh_first) * OW, 0, (size_t)((oh_first + nrows - B) * OW) * sizeof(T)); \
            T *d = dst + (A - oh_first) * OW;                                                \
            int64_t s0 = (A + offh) * W + offw, cnt = (B - A) * OW;                          \
            int64_t c0 = LN_MAX(0, -s0), c1 = LN_MIN(cnt, H * W - s0);                        \
            memset(d, 0, (size_t)c0 * sizeof(T));                                            \
            if (c1 > c0) memcpy(d + c0, plane + s0 + c0, (size_t)(c1 - c0) * sizeof(T));     \
            if (c1 < cnt) memset(d + LN_MAX(c1, c0), 0, (size_t)(cnt - LN_MAX(c1, c0)) * sizeof(T)); \
            if (lo > 0 || hi < OW)                                                           \
              for (int64_t r = 0; r < B - A; r++) {                                          \
                T *row = d + r * OW;                                                         \
                for (int64_t ow = 0; ow < lo; ow++) row[ow] = 0;                             \
                for (int64_t ow = hi; ow < OW; ow++) row[ow] = 0;                            \
              }                                                                              \
            continue;                                                                        \
          }                                                                                  \
          int64_t left = Tn, oh = oh_first, ow0 = ow_first;                                  \
          while (left > 0) {                                                                 \
            int64_t ow1 = LN_MIN(OW, ow0 + left), n = ow1 - ow0;                             \
            int64_t ih = oh * sh + offh;                                                     \
            if (ih < 0 || ih >= H) {                                                         \
              memset(dst, 0, (size_t)n * sizeof(T));                                         \
            } else {                                                                         \
              const T *src = plane + ih * W + offw;                                          \
              int64_t a0 = LN_MIN(LN_MAX(ow0, lo), ow1), a1 = LN_MAX(a0, LN_MIN(ow1, hi));   \
              T *d = dst - ow0;                                                              \
              for (int64_t ow = ow0; ow < a0; ow++) d[ow] = 0;                               \
              if (sw == 1) memcpy(d + a0, src + a0, (size_t)(a1 - a0) * sizeof(T));          \
              else for (int64_t ow = a0; ow < a1; ow++) d[ow] = src[ow * sw];                \
              for (int64_t ow = a1; ow < ow1; ow++) d[ow] = 0;                               \
            }                                                                                \
            dst += n; left -= n; oh++; ow0 = 0;                                              \
          }                                                                                  \
        }                                                                                    \
  }                                                                                          \
  /* col is scratch: the blocked path zeroes its out-of-image columns */                   \
  static void col2im_##SFX(T *col, int64_t Cc, const ln_conv2d_args *a, int64_t p0,         \
                           int64_t p1, T *din) {                                             \
    const int64_t H = a->H, W = a->W, KH = a->KH, KW = a->KW, OW = a->OW;                   \
    const int64_t sh = a->p.stride_h, sw = a->p.stride_w, Tn = p1 - p0;                     \
    const int64_t oh_first = p0 / OW, ow_first = p0 - oh_first * OW;                         \
    const bool blocks = sw == 1 && sh == 1 && OW == W && ow_first == 0 && Tn % OW == 0;     \
    for (int64_t c = 0; c < Cc; c++)                                                         \
      for (int64_t kh = 0; kh < KH; kh++)                                                    \
        for (int64_t kw = 0; kw < KW; kw++) {                                                \
          T *s = col + ((c * KH + kh) * KW + kw) * Tn;                                       \
          T *plane = din + c * H * W;                                                        \
          int64_t offh = kh * a->p.dil_h - a->p.pad_h, offw = kw * a->p.dil_w - a->p.pad_w;  \
          int64_t lo, hi;                                                                    \
          nn_valid_range(offw, sw, W, OW, &lo, &hi);                                         \
          if (blocks) {                                                                      \
            int64_t nrows = Tn / OW;                                                         \
            int64_t A = LN_MAX(oh_first, -offh), B = LN_MIN(oh_first + nrows, H - offh);     \
            if (A >= B) continue;                                                            \
            T *g = s + (A - oh_first) * OW;                                                  \
            if (lo > 0 || hi < OW)                                                           \
              for (int64_t r = 0; r < B - A; r++) {                                          \
                T *row = g + r * OW;                                                         \
                for (int64_t ow = 0; ow < lo; ow++) row[ow] = 0;                             \
                for (int64_t ow = hi; ow < OW; ow++) row[ow] = 0;                            \
              }                                                                              \
            int64_t s0 = (A + offh) * W + offw, cnt = (B - A) * OW;                          \
            int64_t c0 = LN_MAX(0, -s0), c1 = LN_MIN(cnt, H * W - s0);                        \
            T *dst = plane + s0;                                                             \
            for (int64_t i = c0; i < c1; i++) dst[i] += g[i];                                \
            continue;                                                                        \
          }                                                                                  \
          int64_t left = Tn, oh = oh_first, ow0 = ow_first;                                  \
          while (left > 0) {                                                                 \
            int64_t ow1 = LN_MIN(OW, ow0 + left), n = ow1 - ow0;                             \
            int64_t ih = oh * sh + offh;                                                     \
            if (ih >= 0 && ih < H) {                                                         \
              T *dst = plane + ih * W + offw;                                                \
              const T *g = s - ow0;                                                          \
              int64_t a0 = LN_MIN(LN_MAX(ow0, lo), ow1), a1 = LN_MAX(a0, LN_MIN(ow1, hi));   \
              if (sw == 1)                                                                   \
                for (int64_t ow = a0; ow < a1; ow++) dst[ow] += g[ow];                       \
              else                                                                           \
                for (int64_t ow = a0; ow < a1; ow++) dst[ow * sw] += g[ow];                  \
            }                                                                                \
            s += n; left -= n; oh++; ow0 = 0;                                                \
          }                                                                                  \
        }                                                                                    \
  }                                                                                          \
  /* out (Og rows of stride P, Tn columns) += b */                                           \
  static void add_bias_##SFX(T *out, const T *b, int64_t Og, int64_t P, int64_t Tn) {       \
    for (int64_t o = 0; o < Og; o++) {                                                       \
      T v = b[o], *r = out + o * P;                                                          \
      for (int64_t j = 0; j < Tn; j++) r[j] += v;                                            \
    }                                                                                        \
  }                                                                                          \
  /* db[o] = sum over n, p of dout[n,o,p] */                                                 \
  static void bias_grad_##SFX(T *db, const T *dout, int64_t N, int64_t O, int64_t P,        \
                              int nt) {                                                      \
    _Pragma("omp parallel for num_threads(nt) schedule(static) if (nt > 1)")                 \
    for (int64_t o = 0; o < O; o++) {                                                        \
      double s = 0;                                                                          \
      for (int64_t n = 0; n < N; n++) {                                                      \
        const T *r = dout + (n * O + o) * P;                                                 \
        T part = 0;                                                                          \
        _Pragma("omp simd reduction(+:part)")                                                \
        for (int64_t j = 0; j < P; j++) part += r[j];                                        \
        s += part;                                                                           \
      }                                                                                      \
      db[o] = (T)s;                                                                          \
    }                                                                                        \
  }                                                                                          \
  /* dst[i] += sum over k of src[k*stride + i], i < n */                                     \
  static void reduce_into_##SFX(T *dst, const T *src, int64_t nsrc, int64_t stride,         \
                                int64_t n, int nt) {                                         \
    _Pragma("omp parallel for num_threads(nt) schedule(static) if (nt > 1 && n > 16384)")   \
    for (int64_t i = 0; i < n; i++) {                                                        \
      T s = dst[i];                                                                          \
      for (int64_t k = 0; k < nsrc; k++) s += src[k * stride + i];                           \
      dst[i] = s;                                                                            \
    }                                                                                        \
  }

DEF_IM2COL(float, f32)
DEF_IM2COL(double, f64)

static void im2col(int dt, const char *in, int64_t Cc, const ln_conv2d_args *a, int64_t p0, int64_t p1,
                   char *col) {
  if (dt == LN_FLOAT64) im2col_f64((const double *)in, Cc, a, p0, p1, (double *)col);
  else im2col_f32((const float *)in, Cc, a, p0, p1, (float *)col);
}

static void col2im(int dt, char *col, int64_t Cc, const ln_conv2d_args *a, int64_t p0, int64_t p1,
                   char *din) {
  if (dt == LN_FLOAT64) col2im_f64((double *)col, Cc, a, p0, p1, (double *)din);
  else col2im_f32((float *)col, Cc, a, p0, p1, (float *)din);
}

static bool is_pointwise(const ln_conv2d_args *a) {
  return a->KH == 1 && a->KW == 1 && a->p.stride_h == 1 && a->p.stride_w == 1 && a->p.pad_h == 0 &&
         a->p.pad_w == 0;
}

/* ---- kernels ----------------------------------------------------------------- */

/* Which implementation runs a float32 convolution. LUNET_CONV_IMPL=gemm|direct|dnnl
 * forces one where it applies (the others fall back to im2col + GEMM;
 * LUNET_CONV_GEMM=1 = gemm); otherwise the static rule of conv_auto_dnnl. */
enum { IMPL_AUTO, IMPL_GEMM, IMPL_DIRECT, IMPL_DNNL };
enum { PASS_FWD, PASS_DATA, PASS_WEIGHT };

static int conv_impl(void) {
  const char *e = getenv("LUNET_CONV_IMPL");
  if (e && *e) {
    if (!strcmp(e, "gemm")) return IMPL_GEMM;
    if (!strcmp(e, "direct")) return IMPL_DIRECT;
    if (!strcmp(e, "dnnl")) return IMPL_DNNL;
  }
  return getenv("LUNET_CONV_GEMM") ? IMPL_GEMM : IMPL_AUTO;
}

/* The measured rule (batch 1 and 64, 2 threads, AVX-512; bench/RESULTS.md):
 * oneDNN's blocked-layout JIT kernels, reorders included, take 0.4-0.8x the
 * time of im2col + GEMM or the direct kernel on every ResNet-8 3x3 layer
 * (forward, data and weight gradients) and LeNet's 6->16 5x5; they lose on
 * 1-channel inputs (LeNet's first layer: forward 1.2x, weight gradient 1.4x)
 * and on the data gradient of 3-channel inputs (3.5x); 1x1 layers tie. */
static bool conv_auto_dnnl(const ln_conv2d_args *a, int pass) {
  /* 16 outputs, narrow rows (LeNet's 6->16 5x5): the direct weight gradient
   * over output-channel vectors, 1.7x faster than oneDNN's (conv_direct.c;
   * 1 thread, batch 64) */
  if (pass == PASS_WEIGHT && nn_conv_direct_wgrad16_ok(a)) return false;
  /* weight gradient of 1-3 input channels (RGB stems: 3x3 over rows of whole
   * vectors, conv_direct.c's wgrad33): the stem 3->16 at 32x32, batch 64,
   * forward + weight gradient 0.80-0.85x the time with oneDNN's */
  if (pass == PASS_WEIGHT && nn_conv_direct_wgrad_ok(a)) return false;
  /* data gradient into 3-8 channels of rows up to 16 (LeNet's conv2): the
   * direct kernel's narrow shape, 1.5x oneDNN's (1 thread, batch 64) */
  if (pass == PASS_DATA && nn_conv_direct_narrow_data_ok(a)) return false;
  /* grouped and depthwise (the mobile CNNs): oneDNN's grouped and depthwise
   * (jit_dw) JIT kernels, reorders included, take 0.05-0.5x the time of
   * im2col + GEMM per group in every pass; not the depthwise weight gradient
   * of kernels over 3x3, which oneDNN runs as its gemm: the direct kernel */
  if (a->p.groups > 1) return !(pass == PASS_WEIGHT && nn_conv_direct_dw_wgrad_ok(a));
  return a->C >= (pass == PASS_DATA ? 4 : 3);
}

/* A plain (NCHW in and out) 1x1 strided forward (ResNet shortcuts in
 * training): a subsampling copy and a GEMM, 1.4-2.4x faster than oneDNN's
 * with its reorders (16->32 and 32->64 channels, batch 64). Inside the fused
 * inference blocks, where activations stay blocked, oneDNN still runs it. */
static bool plain_1x1_strided(const ln_conv2d_args *a, int impl) {
  return impl == IMPL_AUTO && a->KH == 1 && a->KW == 1 && (a->p.stride_h > 1 || a->p.stride_w > 1);
}

static bool use_dnnl(const ln_conv2d_args *a, int impl, int pass) {
  if (!(pass == PASS_FWD ? nn_conv_dnnl_ok(a) : nn_conv_dnnl_bwd_ok(a))) return false;
  return impl == IMPL_DNNL || (impl == IMPL_AUTO && conv_auto_dnnl(a, pass));
}

static int conv_nt(const ln_conv2d_args *a) {
  int nt = LN_MIN(a->nthreads, ln_kernel_threads());
  return nt < 1 ? 1 : nt;
}

/* ---- fused forward (ln_conv2d_forward_fused) ------------------------------------ */

/* Eval batch norm folded into the convolution: w' = w * s, b' = (b - mean) * s
 * + beta with s = gamma / sqrt(var + eps), in double, written at scratch +
 * fold_off (O*K weights, then O biases). */
#define DEF_FOLD(T, SFX)                                                                     \
  static void bn_fold_##SFX(const ln_conv2d_args *a, T *wf, T *bf) {                        \
    const int64_t K = a->C / a->p.groups * a->KH * a->KW;                                    \
    const T *w = (const T *)a->w, *b = (const T *)a->b, *g = (const T *)a->bn_w;             \
    const T *be = (const T *)a->bn_b, *m = (const T *)a->bn_m, *v = (const T *)a->bn_v;      \
    for (int64_t o = 0; o < a->O; o++) {   /* no batch norm (m NULL): a plain copy */        \
      double sc = m ? (g ? (double)g[o] : 1.0) / sqrt((double)v[o] + a->bn_eps) : 1.0;       \
      for (int64_t k = 0; k < K; k++) wf[o * K + k] = (T)((double)w[o * K + k] * sc);        \
      bf[o] = (T)(((b ? (double)b[o] : 0.0) - (m ? (double)m[o] : 0.0)) * sc + (m && be ? (double)be[o] : 0.0)); \
    }                                                                                        \
  }                                                                                          \
  /* out += res, then relu, over n elements */                                              \
  static void epilogue_##SFX(T *out, const T *res, bool relu, int64_t n, int nt) {           \
    _Pragma("omp parallel for simd num_threads(nt) schedule(static) if (parallel: nt > 1)")  \
    for (int64_t i = 0; i < n; i++) {                                                        \
      T y = out[i] + (res ? res[i] : (T)0);                                                  \
      out[i] = relu && !(y > 0) ? (T)0 : y;                                                  \
    }                                                                                        \
  }
DEF_FOLD(float, f32)
DEF_FOLD(double, f64)

static int conv_fwd_plain(const ln_conv2d_args *a);

/* a->fold_only: the first of the two launches, folding the batch norm (the
 * task's tensors: weights, bias, batch-norm vectors); then the convolution
 * with post-ops (its tensors: input, output, residual, the folded scratch). */
static int conv_fwd_fused(const ln_conv2d_args *a0) {
  const int64_t es = a0->dtype == LN_FLOAT64 ? 8 : 4;
  const int64_t WN = a0->O * (a0->C / a0->p.groups) * a0->KH * a0->KW;
  if (a0->fold_only) {
    char *wf = a0->scratch + a0->fold_off;
    if (a0->dtype == LN_FLOAT64) bn_fold_f64(a0, (double *)wf, (double *)(wf + WN * es));
    else bn_fold_f32(a0, (float *)wf, (float *)(wf + WN * es));
    return 0;
  }
  ln_conv2d_args a = *a0;
  if (a.dtype == LN_FLOAT32 && use_dnnl(&a, conv_impl(), PASS_FWD) && nn_conv_dnnl_fwd(&a, conv_nt(&a)) == 0)
    return 0;
  if (a.raw)   /* the front end saw it fit for oneDNN (a chain's stem) */
    return ln_error("basicblocks_fused: oneDNN could not run the stem convolution into its blocked layout");
  a.res = NULL; a.relu = 0;
  conv_fwd_plain(&a);
  const int64_t n = a.N * a.O * a.OH * a.OW;
  int nt = n < 65536 ? 1 : conv_nt(&a);
  if (a.dtype == LN_FLOAT64) epilogue_f64((double *)a.out, (const double *)a0->res, a0->relu, n, nt);
  else epilogue_f32((float *)a.out, (const float *)a0->res, a0->relu, n, nt);
  return 0;
}

/* ln_basicblock_forward_fused's kernel: float32 on oneDNN keeps the
 * activations blocked between the convolutions (nn_conv_dnnl_block);
 * otherwise the fused convolutions in turn through NCHW scratch. */
static int conv_block_fwd(const ln_block_args *b) {
  const ln_conv2d_args *c1 = &b->c[0], *c2 = &b->c[1], *cs = b->has_sc ? &b->c[2] : NULL;
  const int impl = conv_impl();
  if (c1->dtype == LN_FLOAT32 && use_dnnl(c1, impl, PASS_FWD) && use_dnnl(c2, impl, PASS_FWD) &&
      (!cs || use_dnnl(cs, impl, PASS_FWD))) {
    int nt = LN_MAX(conv_nt(c1), conv_nt(c2));
    if (cs) nt = LN_MAX(nt, conv_nt(cs));
    if (nn_conv_dnnl_block(c1, c2, cs, b->in, b->out, b->xb, b->hb, b->rb, b->in_blk, b->out_blk, nt) == 0)
      return 0;
  }
  if (b->in_blk || b->out_blk)   /* the front end saw every convolution fit for oneDNN */
    return ln_error("basicblocks_fused: oneDNN could not run a block in its blocked layout");
  ln_conv2d_args a = *c1;
  a.block = 0; a.in = b->in; a.out = b->hb; a.res = NULL; a.relu = 1;
  conv_fwd_fused(&a);
  char *r = b->in;
  if (cs) {
    a = *cs;
    a.in = b->in; a.out = b->rb; a.res = NULL; a.relu = 0;
    conv_fwd_plain(&a);
    r = b->rb;
  }
  a = *c2;
  a.in = b->hb; a.out = b->out; a.res = r; a.relu = 1;
  return conv_fwd_fused(&a);
}

int ln_cpu_conv2d_fwd(void *args) {
  const ln_conv2d_args *a = args;
  if (a->block) return conv_block_fwd((const ln_block_args *)args);
  if (a->saved) {   /* training: the input kept blocked for the weight gradient */
    int rc = nn_conv_dnnl_fwd_saving(a, conv_nt(a));
    if (rc == -2) return ln_error("conv2d: cannot copy the input to the blocked layout (out of memory?)");
    if (rc == 0) return 0;
  }
  if (a->fold_only || a->res || a->relu) return conv_fwd_fused(a);
  return conv_fwd_plain(a);
}

/* An RGB stem with NCHW in and out (3 input channels, at most 16 outputs):
 * the direct kernel's 8 x 32 blocks write NCHW at once, 1.3x oneDNN with its
 * output reorder (3->16 at 32x32, batch 8 and 64), 2.8x for 8 outputs (which
 * oneDNN pads to 16), 1.3-1.5x on 64-224 pixel rows (batch 8); ties at batch
 * 1 and on 28 columns. The fused inference chain, whose stem writes blocked
 * activations, still runs oneDNN. */
static bool direct_stem(const ln_conv2d_args *a, int impl) {
  return impl == IMPL_AUTO && a->C == 3 && nn_conv_direct_ok(a);
}

static int conv_fwd_plain(const ln_conv2d_args *a) {
  const int impl = conv_impl();
  if (!plain_1x1_strided(a, impl) && !direct_stem(a, impl) && use_dnnl(a, impl, PASS_FWD) &&
      nn_conv_dnnl_fwd(a, conv_nt(a)) == 0)
    return 0;
  /* small stride-1 float32 convolutions: the direct kernel (conv_direct.c) */
  if (impl != IMPL_GEMM && nn_conv_direct_ok(a)) return nn_conv_direct_fwd(a);
  const int dt = a->dtype;
  const int64_t es = dt == LN_FLOAT64 ? 8 : 4, G = a->p.groups, Og = a->O / G, Cg = a->C / G;
  const int64_t K = Cg * a->KH * a->KW, P = a->OH * a->OW, HW = a->H * a->W, T = a->tile;
  const int64_t ntiles = P > 0 ? (P + T - 1) / T : 0, items = a->N * ntiles;
  const bool pw = is_pointwise(a);
  if (items == 0) return 0;
  int nt = LN_MIN(a->nthreads, ln_kernel_threads());
  if (nt > items) nt = (int)items;
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    char *col = a->scratch + (int64_t)omp_get_thread_num() * a->slice * es;
#pragma omp for schedule(dynamic, 1)
    for (int64_t it = 0; it < items; it++) {
      int64_t n = it / ntiles, p0 = (it % ntiles) * T, p1 = LN_MIN(P, p0 + T), Tn = p1 - p0;
      for (int64_t g = 0; g < G; g++) {
        const char *img = a->in + (n * a->C + g * Cg) * HW * es;
        const char *B = img + p0 * es;
        int64_t ldb = P;
        if (!pw) { im2col(dt, img, Cg, a, p0, p1, col); B = col; ldb = Tn; }
        char *C = a->out + ((n * a->O + g * Og) * P + p0) * es;
        gemm(dt, false, false, Og, Tn, K, a->w + g * Og * K * es, K, B, ldb, 0.0, C, P);
        if (a->b) {
          if (dt == LN_FLOAT64) add_bias_f64((double *)C, (const double *)a->b + g * Og, Og, P, Tn);
          else add_bias_f32((float *)C, (const float *)a->b + g * Og, Og, P, Tn);
        }
      }
    }
  }
  return 0;
}

static void conv_weight_grad(const ln_conv2d_args *a, int nt_max) {
  const int dt = a->dtype;
  const int64_t es = dt == LN_FLOAT64 ? 8 : 4, G = a->p.groups, Og = a->O / G, Cg = a->C / G;
  const int64_t K = Cg * a->KH * a->KW, P = a->OH * a->OW, HW = a->H * a->W, T = a->tile;
  const int64_t ntiles = P > 0 ? (P + T - 1) / T : 0, items = a->N * ntiles, WN = a->O * K;
  const bool pw = is_pointwise(a);
  int nt = (int)LN_MIN((int64_t)nt_max, LN_MAX(items, 1));
  char *acc_base = a->scratch + (int64_t)a->nthreads * a->slice * es;   /* threads 1.. */
  int used = 1;
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    int tid = omp_get_thread_num();
#pragma omp single
    used = omp_get_num_threads();
    char *col = a->scratch + (int64_t)tid * a->slice * es;
    char *acc = tid == 0 ? a->dw : acc_base + (int64_t)(tid - 1) * WN * es;
    memset(acc, 0, (size_t)(WN * es));
#pragma omp for schedule(dynamic, 1)
    for (int64_t it = 0; it < items; it++) {
      int64_t n = it / ntiles, p0 = (it % ntiles) * T, p1 = LN_MIN(P, p0 + T), Tn = p1 - p0;
      for (int64_t g = 0; g < G; g++) {
        const char *img = a->in + (n * a->C + g * Cg) * HW * es;
        const char *B = img + p0 * es;
        int64_t ldb = P;
        if (!pw) { im2col(dt, img, Cg, a, p0, p1, col); B = col; ldb = Tn; }
        const char *D = a->dout + ((n * a->O + g * Og) * P + p0) * es;
        gemm(dt, false, true, Og, K, Tn, D, P, B, ldb, 1.0, acc + g * Og * K * es, K);
      }
    }
  }
  if (used > 1) {
    if (dt == LN_FLOAT64) reduce_into_f64((double *)a->dw, (const double *)acc_base, used - 1, WN, WN, nt_max);
    else reduce_into_f32((float *)a->dw, (const float *)acc_base, used - 1, WN, WN, nt_max);
  }
}

static void conv_data_grad(const ln_conv2d_args *a, int nt_max) {
  const int dt = a->dtype;
  const int64_t es = dt == LN_FLOAT64 ? 8 : 4, G = a->p.groups, Og = a->O / G, Cg = a->C / G;
  const int64_t KK = a->KH * a->KW, K = Cg * KK, P = a->OH * a->OW, HW = a->H * a->W, T = a->tile;
  const int64_t ntiles = P > 0 ? (P + T - 1) / T : 0;
  if (conv_impl() != IMPL_GEMM && nn_conv_direct_bwd_data_ok(a)) {   /* conv_direct.c */
    nn_conv_direct_bwd_data(a, nt_max);
    return;
  }
  if (is_pointwise(a)) {
    /* din[n,g] (Cg, P) = w[g]^T (Cg, Og) . dout[n,g] (Og, P), by column tiles */
    const int64_t items = a->N * G * ntiles;
    int nt = (int)LN_MIN((int64_t)nt_max, LN_MAX(items, 1));
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1) if (nt > 1)
    for (int64_t it = 0; it < items; it++) {
      int64_t n = it / (G * ntiles), g = (it / ntiles) % G, p0 = (it % ntiles) * T;
      int64_t Tn = LN_MIN(P, p0 + T) - p0;
      gemm(dt, true, false, Cg, Tn, Og, a->w + g * Og * K * es, K,
           a->dout + ((n * a->O + g * Og) * P + p0) * es, P, 0.0,
           a->din + ((n * a->C + g * Cg) * HW + p0) * es, HW);
    }
    return;
  }
  const int64_t chunk = a->chunk, nchunks = (Cg + chunk - 1) / chunk;
  const int64_t items = a->N * G * nchunks;
  int nt = (int)LN_MIN((int64_t)nt_max, LN_MAX(items, 1));
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    char *dcol = a->scratch + (int64_t)omp_get_thread_num() * a->slice * es;
#pragma omp for schedule(dynamic, 1)
    for (int64_t it = 0; it < items; it++) {
      int64_t n = it / (G * nchunks), g = (it / nchunks) % G, c0 = (it % nchunks) * chunk;
      int64_t c1 = LN_MIN(Cg, c0 + chunk), rows = (c1 - c0) * KK;
      char *dimg = a->din + (n * a->C + g * Cg + c0) * HW * es;
      memset(dimg, 0, (size_t)((c1 - c0) * HW * es));
      const char *Wg = a->w + (g * Og * K + c0 * KK) * es;
      for (int64_t p0 = 0; p0 < P; p0 += T) {
        int64_t p1 = LN_MIN(P, p0 + T), Tn = p1 - p0;
        gemm(dt, true, false, rows, Tn, Og, Wg, K, a->dout + ((n * a->O + g * Og) * P + p0) * es, P,
             0.0, dcol, Tn);
        col2im(dt, dcol, c1 - c0, a, p0, p1, dimg);
      }
    }
  }
}

int ln_cpu_conv2d_bwd(void *args) {
  const ln_conv2d_args *a = args;
  int nt = LN_MIN(a->nthreads, ln_kernel_threads());
  if (nt < 1) nt = 1;
  const int64_t P = a->OH * a->OW;
  const int impl = conv_impl();
  /* both gradients on oneDNN: grad_output blocked once for the two */
  if (a->dw && a->din && P > 0 && use_dnnl(a, impl, PASS_WEIGHT) && use_dnnl(a, impl, PASS_DATA) &&
      nn_conv_dnnl_bwd(a, nt, a->db != NULL) == 0)
    return 0;
  /* oneDNN's weight gradient also sums the bias gradient */
  bool w_done = a->dw && use_dnnl(a, impl, PASS_WEIGHT) && nn_conv_dnnl_bwd_weights(a, nt, a->db != NULL) == 0;
  /* 1-2 input channels: the direct weight gradient (conv_direct.c), bias included */
  if (!w_done && a->dw && impl != IMPL_GEMM && nn_conv_direct_wgrad_ok(a)) {
    nn_conv_direct_wgrad(a, nt);
    w_done = true;
  }
  if (!w_done && a->dw && impl != IMPL_GEMM && nn_conv_direct_wgrad16_ok(a)) {
    nn_conv_direct_wgrad16(a, nt);
    w_done = true;
  }
  if (!w_done && a->dw && impl != IMPL_GEMM && nn_conv_direct_dw_wgrad_ok(a)) {
    nn_conv_direct_dw_wgrad(a, nt);
    w_done = true;
  }
  if (a->db && !w_done) {
    int bt = a->N * a->O * P < 32768 ? 1 : nt;
    if (a->dtype == LN_FLOAT64) bias_grad_f64((double *)a->db, (const double *)a->dout, a->N, a->O, P, bt);
    else bias_grad_f32((float *)a->db, (const float *)a->dout, a->N, a->O, P, bt);
  }
  if (a->dw && !w_done) conv_weight_grad(a, nt);
  if (a->din) {
    if (P == 0) memset(a->din, 0, (size_t)(a->N * a->C * a->H * a->W * (a->dtype == LN_FLOAT64 ? 8 : 4)));
    else if (!(use_dnnl(a, impl, PASS_DATA) && nn_conv_dnnl_bwd_data(a, nt) == 0)) conv_data_grad(a, nt);
  }
  return 0;
}

/* ---- the planner (ln_cpu_nn_planner) ------------------------------------------ */

int ln_cpu_device_threads(int device) {
  int n = ln_device_threads(device);
  return n > 0 ? n : 1;
}

/* Tile sizes and scratch for nt threads; returns scratch bytes. */
static size_t conv_plan(ln_conv2d_args *a, int nt, bool want_din, bool want_dw) {
  const int64_t G = a->p.groups, Cg = a->C / G, KK = a->KH * a->KW, K = Cg * KK, P = a->OH * a->OW;
  const int64_t es = a->dtype == LN_FLOAT64 ? 8 : 4;
  /* a small convolution (a batch-1 step) runs on one thread: waking the others
   * costs more than their share of the work */
  if ((double)a->N * (double)a->O * (double)P * (double)K < (double)SMALL_MACS) nt = 1;
  a->nthreads = nt;
  int64_t T = LN_MAX((int64_t)MIN_TILE, COL_BUDGET / LN_MAX(K, 1));
  if (T > P) T = LN_MAX(P, 1);
  /* enough (image, tile) items to feed the threads */
  if (a->N * ((P + T - 1) / T) < nt && P > MIN_TILE) {
    int64_t want = LN_MAX((nt + a->N - 1) / LN_MAX(a->N, 1), 1);   /* (an empty batch: N = 0) */
    T = LN_MAX((int64_t)MIN_TILE, (P + want - 1) / want);
  }
  if (T < P && T > a->OW) T = T / a->OW * a->OW;   /* whole output rows when it can */
  a->tile = T;
  int64_t chunk = Cg;
  while (chunk > 1 && a->N * G * ((Cg + chunk - 1) / chunk) < nt) chunk = (chunk + 1) / 2;
  a->chunk = chunk;
  bool pw = is_pointwise(a);
  a->slice = pw ? 0 : K * T;
  if (!want_din && !want_dw && pw) a->slice = 0;
  size_t bytes = (size_t)(nt * a->slice * es);
  if (want_dw) {
    int64_t items = a->N * ((P + T - 1) / T);
    int64_t accs = LN_MIN((int64_t)nt, items) - 1;
    if (accs > 0) bytes += (size_t)(accs * a->O * K * es);
  }
  return bytes;
}

/* The saved copy pays off when both backward passes will run on oneDNN
 * (nn_conv_dnnl_bwd) and the blocked layout needs no channel padding: its
 * elements, or 0 (geometry a from conv_geometry). Not for grouped
 * convolutions (not measured with it; oneDNN blocks narrow groups by 8). */
static int64_t saved_numel(const ln_conv2d_args *a) {
  const int impl = conv_impl();
  if (a->p.groups > 1 || a->C % 16 || a->O % 16 || a->OH * a->OW == 0 || !use_dnnl(a, impl, PASS_FWD) ||
      !use_dnnl(a, impl, PASS_WEIGHT) || !use_dnnl(a, impl, PASS_DATA))
    return 0;
  return (int64_t)(nn_conv_dnnl_blocked_bytes(a->N, a->C, a->H, a->W) / 4);
}


/* true when a run of blocks can stay in oneDNN's blocked layout between
 * blocks: float32 on oneDNN (as conv_block_fwd decides) and channels in
 * whole blocks of 16 */
static bool chain_blocked(const ln_block_args *b, int nb, const ln_conv2d_args *stem) {
  const int impl = conv_impl();
  if (stem && (stem->dtype != LN_FLOAT32 || !use_dnnl(stem, impl, PASS_FWD) || stem->O % 16)) return false;
  for (int i = 0; i < nb; i++)
    for (int j = 0; j < (b[i].has_sc ? 3 : 2); j++) {
      const ln_conv2d_args *c = &b[i].c[j];
      if (c->dtype != LN_FLOAT32 || !use_dnnl(c, impl, PASS_FWD) || c->C % 16 || c->O % 16) return false;
    }
  return nb > 1 || stem;
}

static size_t plan_conv2d(int index, ln_conv2d_args *a, bool want_din, bool want_dw) {
  return conv_plan(a, ln_cpu_device_threads(index), want_din, want_dw);
}

/* oneDNN's blocked layout of an activation (channels padded to blocks of 16) */
static size_t activation_bytes(const int64_t sh[4], int dtype) {
  return nn_conv_dnnl_blocked_bytes(sh[0], sh[1], sh[2], sh[3]);
}

const ln_nn_planner ln_cpu_nn_planner = {
  .conv2d = plan_conv2d,
  .conv2d_saved_numel = saved_numel,
  .blocks_native = chain_blocked,
  .activation_bytes = activation_bytes,
};
