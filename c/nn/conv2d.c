/* conv2d.c -- 2-D convolution (cross-correlation, as torch's conv2d):
 * front ends and CPU kernels.
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
 * gradient) run through oneDNN instead (conv_dnnl.c; conv_auto_dnnl below),
 * and some small stride-1 ones through the direct kernels (conv_direct.c).
 * LUNET_CONV_IMPL=gemm|direct|dnnl forces one for comparison (direct: the
 * direct kernels where they apply, else im2col + GEMM). */
#include "nn.h"
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

/* ---- front ends -------------------------------------------------------------- */

/* Checks input and weight against the parameters, fills the geometry. */
static int conv_geometry_dims(const char *fn, const char *wname, int dt, int dev, const int64_t *ishape,
                              const ln_tensor *w, const ln_conv2d_params *p, ln_conv2d_args *a);

static int conv_geometry(const char *fn, const ln_tensor *in, const ln_tensor *w, const ln_conv2d_params *p,
                         ln_conv2d_args *a) {
  char s1[160];
  if (!p) return ln_error("%s: params is NULL", fn);
  if (nn_check(fn, "input", in, -1, -1, -1, NULL) != 0) return -1;
  if (in->ndim != 4)
    return ln_error("%s: input must be 4-d (N,C,H,W), got shape %s", fn, nn_shape(s1, sizeof s1, in));
  return conv_geometry_dims(fn, "weight", in->dtype_id, in->device_id, in->shape, w, p, a);
}

/* the checks of conv_geometry for an input of shape ishape (N,C,H,W) */
static int conv_geometry_dims(const char *fn, const char *wname, int dt, int dev, const int64_t *ishape,
                              const ln_tensor *w, const ln_conv2d_params *p, ln_conv2d_args *a) {
  char s1[160];
  if (!p) return ln_error("%s: params is NULL", fn);
  if (nn_check(fn, wname, w, dt, dev, -1, NULL) != 0) return -1;
  if (w->ndim != 4)
    return ln_error("%s: weight must be 4-d (out_channels, in_channels/groups, kH, kW), got shape %s", fn,
                    nn_shape(s1, sizeof s1, w));
  if (p->stride_h < 1 || p->stride_w < 1)
    return ln_error("%s: stride must be >= 1, got (%d,%d)", fn, p->stride_h, p->stride_w);
  if (p->pad_h < 0 || p->pad_w < 0)
    return ln_error("%s: padding must be >= 0, got (%d,%d)", fn, p->pad_h, p->pad_w);
  if (p->dil_h < 1 || p->dil_w < 1)
    return ln_error("%s: dilation must be >= 1, got (%d,%d)", fn, p->dil_h, p->dil_w);
  if (p->groups < 1) return ln_error("%s: groups must be >= 1, got %d", fn, p->groups);
  int64_t N = ishape[0], C = ishape[1], H = ishape[2], W = ishape[3];
  int64_t O = w->shape[0], KH = w->shape[2], KW = w->shape[3];
  if (C % p->groups != 0)
    return ln_error("%s: input channels %lld are not divisible by groups %d", fn, (long long)C, p->groups);
  if (O % p->groups != 0)
    return ln_error("%s: output channels %lld are not divisible by groups %d", fn, (long long)O, p->groups);
  if (w->shape[1] * p->groups != C)
    return ln_error("%s: input has %lld channels, weight %s expects %lld (in_channels/groups %lld x groups %d)",
                    fn, (long long)C, nn_shape(s1, sizeof s1, w), (long long)(w->shape[1] * p->groups),
                    (long long)w->shape[1], p->groups);
  if (KH < 1 || KW < 1 || O < 1 || C < 1)
    return ln_error("%s: weight %s has an empty dim", fn, nn_shape(s1, sizeof s1, w));
  int64_t eh = (int64_t)p->dil_h * (KH - 1) + 1, ew = (int64_t)p->dil_w * (KW - 1) + 1;
  int64_t hp = H + 2 * (int64_t)p->pad_h, wp = W + 2 * (int64_t)p->pad_w;
  if (hp < eh || wp < ew)
    return ln_error("%s: padded input %lldx%lld is smaller than the (dilated) kernel %lldx%lld", fn,
                    (long long)hp, (long long)wp, (long long)eh, (long long)ew);
  memset(a, 0, sizeof *a);
  a->dtype = dt;
  a->N = N; a->C = C; a->H = H; a->W = W; a->O = O; a->KH = KH; a->KW = KW;
  a->OH = (hp - eh) / p->stride_h + 1;
  a->OW = (wp - ew) / p->stride_w + 1;
  a->p = *p;
  return 0;
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
 * elements, or 0 (geometry a from conv_geometry). */
static int64_t saved_numel(const ln_conv2d_args *a) {
  const int impl = conv_impl();
  if (a->C % 16 || a->O % 16 || a->OH * a->OW == 0 || !use_dnnl(a, impl, PASS_FWD) ||
      !use_dnnl(a, impl, PASS_WEIGHT) || !use_dnnl(a, impl, PASS_DATA))
    return 0;
  return (int64_t)(nn_conv_dnnl_blocked_bytes(a->N, a->C, a->H, a->W) / 4);
}

static int check_saved(const char *fn, const ln_tensor *saved, const ln_conv2d_args *a, int dev) {
  int64_t n = saved_numel(a);
  if (n == 0) return ln_error("%s: no saved input is used for this convolution (ln_conv2d_saved_numel is 0)", fn);
  int64_t shape[1] = {n};
  if (nn_check(fn, "saved", saved, LN_FLOAT32, dev, 1, shape) != 0) return -1;
  if (!ln_is_contiguous(saved)) return ln_error("%s: saved must be contiguous", fn);
  return 0;
}

static int conv_forward(const char *fn, ln_tensor *out, const ln_tensor *in, const ln_tensor *w,
                        const ln_tensor *b, const ln_conv2d_fuse *f, ln_tensor *saved,
                        const ln_conv2d_params *p) {
  ln_conv2d_args a;
  if (conv_geometry(fn, in, w, p, &a) != 0) return -1;
  int dt = in->dtype_id, dev = in->device_id;
  int64_t bshape[1] = {a.O}, oshape[4] = {a.N, a.O, a.OH, a.OW};
  if (b && nn_check(fn, "bias", b, dt, dev, 1, bshape) != 0) return -1;
  if (nn_check(fn, "out", out, dt, dev, 4, oshape) != 0) return -1;
  if (saved && check_saved(fn, saved, &a, dev) != 0) return -1;
  const bool bn = f && f->bn_mean;
  if (f) {
    if ((!f->bn_mean) != (!f->bn_var))
      return ln_error("%s: give both bn_mean and bn_var (the running statistics), or neither", fn);
    if (!bn && (f->bn_weight || f->bn_bias))
      return ln_error("%s: bn_weight/bn_bias need bn_mean and bn_var", fn);
    if ((f->bn_weight && nn_check(fn, "bn_weight", f->bn_weight, dt, dev, 1, bshape) != 0) ||
        (f->bn_bias && nn_check(fn, "bn_bias", f->bn_bias, dt, dev, 1, bshape) != 0) ||
        (bn && nn_check(fn, "bn_mean", f->bn_mean, dt, dev, 1, bshape) != 0) ||
        (bn && nn_check(fn, "bn_var", f->bn_var, dt, dev, 1, bshape) != 0) ||
        (f->residual && nn_check(fn, "residual", f->residual, dt, dev, 4, oshape) != 0))
      return -1;
    if (bn && !(f->bn_eps >= 0)) return ln_error("%s: bn_eps must be >= 0, got %g", fn, f->bn_eps);
  }
  nn_in xi = {0}, wi = {0}, bi = {0}, ri = {0}, gi = {0}, ei = {0}, mi = {0}, vi = {0};
  nn_out o = {0};
  nn_scratch s = {0};
  int rc = -1;
  if (nn_input(fn, "input", in, &xi) != 0 || nn_input(fn, "weight", w, &wi) != 0 ||
      nn_input(fn, "bias", b, &bi) != 0 || nn_output(fn, "out", out, &o) != 0)
    goto done;
  if (f && (nn_input(fn, "residual", f->residual, &ri) != 0 || nn_input(fn, "bn_weight", f->bn_weight, &gi) != 0 ||
            nn_input(fn, "bn_bias", f->bn_bias, &ei) != 0 || nn_input(fn, "bn_mean", f->bn_mean, &mi) != 0 ||
            nn_input(fn, "bn_var", f->bn_var, &vi) != 0))
    goto done;
  size_t bytes = conv_plan(&a, nn_device_threads(dev), false, false);
  const int64_t es = dt == LN_FLOAT64 ? 8 : 4, WN = a.O * w->shape[1] * a.KH * a.KW;
  if (bn) {   /* the folded weights and bias after the column slices */
    a.fold_off = (int64_t)((bytes + 63) & ~(size_t)63);
    bytes = (size_t)a.fold_off + (size_t)((WN + a.O) * es);
  }
  if (nn_scratch_new(fn, dev, bytes, &s) != 0) goto done;
  a.out = nn_ptr(o.t); a.in = nn_ptr(xi.t); a.w = nn_ptr(wi.t); a.b = nn_ptr(bi.t);
  a.scratch = s.data;
  if (bn) {   /* launch 1 of 2: fold (a task keeps at most LN_TASK_KEEP tensors) */
    a.bn_w = nn_ptr(gi.t); a.bn_b = nn_ptr(ei.t); a.bn_m = nn_ptr(mi.t); a.bn_v = nn_ptr(vi.t);
    a.bn_eps = f->bn_eps;
    a.fold_only = 1;
    const ln_tensor *keep[7] = {&s.hold, wi.t, bi.t, gi.t, ei.t, mi.t, vi.t};
    if ((rc = ln_launch(dev, fn, ln_backend_of(dev)->conv2d_fwd, &a, sizeof a, keep, 7)) != 0) goto done;
    a.fold_only = 0;
    a.bn_w = a.bn_b = a.bn_m = a.bn_v = NULL;
    a.w = s.data + a.fold_off;
    a.b = a.w + WN * es;
  }
  if (f) { a.res = nn_ptr(ri.t); a.relu = f->relu != 0; }
  a.saved = saved ? nn_ptr(saved) : NULL;
  const ln_tensor *keep[7] = {o.t, xi.t, &s.hold, bn ? NULL : wi.t, bn ? NULL : bi.t, ri.t, saved};
  rc = ln_launch(dev, fn, ln_backend_of(dev)->conv2d_fwd, &a, sizeof a, keep, 7);
done:
  rc = nn_out_finish(&o, rc);
  nn_scratch_free(&s);
  nn_in_free(&xi); nn_in_free(&wi); nn_in_free(&bi);
  nn_in_free(&ri); nn_in_free(&gi); nn_in_free(&ei); nn_in_free(&mi); nn_in_free(&vi);
  return rc;
}

int ln_conv2d_forward(ln_tensor *out, const ln_tensor *in, const ln_tensor *w, const ln_tensor *b,
                      const ln_conv2d_params *p) {
  return conv_forward("conv2d", out, in, w, b, NULL, NULL, p);
}

int64_t ln_conv2d_saved_numel(const ln_tensor *in, const ln_tensor *w, const ln_conv2d_params *p) {
  ln_conv2d_args a;
  if (!in || !w || !p || in->ndim != 4 || w->ndim != 4) return 0;
  if (conv_geometry("conv2d_saved_numel", in, w, p, &a) != 0) { ln_clear_error(); return 0; }
  return saved_numel(&a);
}

int ln_conv2d_forward_saving(ln_tensor *out, ln_tensor *saved, const ln_tensor *in, const ln_tensor *w,
                             const ln_tensor *b, const ln_conv2d_params *p) {
  return conv_forward("conv2d", out, in, w, b, NULL, saved, p);
}

int ln_conv2d_forward_fused(ln_tensor *out, const ln_tensor *in, const ln_tensor *w, const ln_tensor *b,
                            const ln_conv2d_fuse *f, const ln_conv2d_params *p) {
  return conv_forward("conv2d_fused", out, in, w, b, f, NULL, p);
}

static int conv_backward(ln_tensor *din, ln_tensor *dw, ln_tensor *db, const ln_tensor *dout,
                         const ln_tensor *in, const ln_tensor *w, const ln_tensor *saved,
                         const ln_conv2d_params *p) {
  const char *fn = "conv2d_backward";
  ln_conv2d_args a;
  if (conv_geometry(fn, in, w, p, &a) != 0) return -1;
  int dt = in->dtype_id, dev = in->device_id;
  if (saved && check_saved(fn, saved, &a, dev) != 0) return -1;
  int64_t oshape[4] = {a.N, a.O, a.OH, a.OW}, bshape[1] = {a.O};
  if (nn_check(fn, "grad_output", dout, dt, dev, 4, oshape) != 0) return -1;
  if (din && nn_check(fn, "grad_input", din, dt, dev, 4, in->shape) != 0) return -1;
  if (dw && nn_check(fn, "grad_weight", dw, dt, dev, 4, w->shape) != 0) return -1;
  if (db && nn_check(fn, "grad_bias", db, dt, dev, 1, bshape) != 0) return -1;
  if (!din && !dw && !db) return 0;
  nn_in xi, wi, gi;
  nn_out oi, ow, ob;
  nn_scratch s = {0};
  int rc = -1;
  xi.owned = wi.owned = gi.owned = NULL;
  oi.user = oi.t = ow.user = ow.t = ob.user = ob.t = NULL;
  if (nn_input(fn, "input", in, &xi) != 0 || nn_input(fn, "weight", w, &wi) != 0 ||
      nn_input(fn, "grad_output", dout, &gi) != 0 || nn_output(fn, "grad_input", din, &oi) != 0 ||
      nn_output(fn, "grad_weight", dw, &ow) != 0 || nn_output(fn, "grad_bias", db, &ob) != 0)
    goto done;
  size_t bytes = conv_plan(&a, nn_device_threads(dev), din != NULL, dw != NULL);
  if (nn_scratch_new(fn, dev, bytes, &s) != 0) goto done;
  a.in = nn_ptr(xi.t); a.w = nn_ptr(wi.t); a.dout = nn_ptr(gi.t);
  a.din = nn_ptr(oi.t); a.dw = nn_ptr(ow.t); a.db = nn_ptr(ob.t);
  a.scratch = s.data;
  a.saved = saved ? nn_ptr(saved) : NULL;
  const ln_tensor *keep[8] = {oi.t, ow.t, ob.t, xi.t, wi.t, gi.t, &s.hold, saved};
  rc = ln_launch(dev, fn, ln_backend_of(dev)->conv2d_bwd, &a, sizeof a, keep, 8);
done:
  rc = nn_out_finish(&oi, rc);
  rc = nn_out_finish(&ow, rc);
  rc = nn_out_finish(&ob, rc);
  nn_scratch_free(&s);
  nn_in_free(&xi); nn_in_free(&wi); nn_in_free(&gi);
  return rc;
}

int ln_conv2d_backward(ln_tensor *din, ln_tensor *dw, ln_tensor *db, const ln_tensor *dout,
                       const ln_tensor *in, const ln_tensor *w, const ln_conv2d_params *p) {
  return conv_backward(din, dw, db, dout, in, w, NULL, p);
}

int ln_conv2d_backward_saved(ln_tensor *din, ln_tensor *dw, ln_tensor *db, const ln_tensor *dout,
                             const ln_tensor *in, const ln_tensor *w, const ln_tensor *saved,
                             const ln_conv2d_params *p) {
  return conv_backward(din, dw, db, dout, in, w, saved, p);
}

/* ---- ln_basicblock_forward_fused -------------------------------------------------- */

static int check_bn(const char *fn, const ln_conv_bn *c, int dt, int dev, int64_t O) {
  int64_t shape[1] = {O};
  if (!c->bn_mean != !c->bn_var)
    return ln_error("%s: give both bn_mean and bn_var (the running statistics), or neither", fn);
  if (!c->bn_mean && (c->bn_weight || c->bn_bias))
    return ln_error("%s: bn_weight/bn_bias need bn_mean and bn_var", fn);
  if (c->bn_mean && !(c->bn_eps >= 0)) return ln_error("%s: bn_eps must be >= 0, got %g", fn, c->bn_eps);
  if ((c->bias && nn_check(fn, "bias", c->bias, dt, dev, 1, shape) != 0) ||
      (c->bn_weight && nn_check(fn, "bn_weight", c->bn_weight, dt, dev, 1, shape) != 0) ||
      (c->bn_bias && nn_check(fn, "bn_bias", c->bn_bias, dt, dev, 1, shape) != 0) ||
      (c->bn_mean && nn_check(fn, "bn_mean", c->bn_mean, dt, dev, 1, shape) != 0) ||
      (c->bn_mean && nn_check(fn, "bn_var", c->bn_var, dt, dev, 1, shape) != 0))
    return -1;
  return 0;
}

/* launches the fold of c (weights, bias, batch norm) into scratch + a->fold_off */
static int fold_launch(const char *fn, int dev, ln_conv2d_args *a, const ln_conv_bn *c, nn_scratch *s) {
  nn_in in[6] = {{0}};
  const ln_tensor *t[6] = {c->weight, c->bias, c->bn_weight, c->bn_bias, c->bn_mean, c->bn_var};
  int rc = -1;
  for (int i = 0; i < 6; i++)
    if (nn_input(fn, "conv/bn tensor", t[i], &in[i]) != 0) goto done;
  ln_conv2d_args f = *a;
  f.fold_only = 1;
  f.scratch = s->data;
  f.w = nn_ptr(in[0].t); f.b = nn_ptr(in[1].t);
  f.bn_w = nn_ptr(in[2].t); f.bn_b = nn_ptr(in[3].t); f.bn_m = nn_ptr(in[4].t); f.bn_v = nn_ptr(in[5].t);
  f.bn_eps = c->bn_eps;
  const ln_tensor *keep[7] = {&s->hold, in[0].t, in[1].t, in[2].t, in[3].t, in[4].t, in[5].t};
  rc = ln_launch(dev, fn, ln_backend_of(dev)->conv2d_fwd, &f, sizeof f, keep, 7);
done:
  for (int i = 0; i < 6; i++) nn_in_free(&in[i]);
  return rc;
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

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

/* nb blocks, block i = (cb[3i], cb[3i+1], cb[3i+2] or NULL): each block's
 * output feeds the next; intermediate outputs stay blocked when
 * chain_blocked, else NCHW in scratch. One fold launch per convolution,
 * then one launch per block, all holding one scratch allocation. */
static int blocks_forward(const char *fn, ln_tensor *out, const ln_tensor *in, const ln_conv_bn *stem,
                          const ln_conv_bn *const *cb, int nb) {
  enum { MAXB = 16 };
  ln_block_args b[MAXB];
  ln_conv2d_args sa;
  char s1[160];
  if (nb < 1 || nb > MAXB) return ln_error("%s: expected 1 to %d blocks, got %d", fn, MAXB, nb);
  if (nn_check(fn, "input", in, -1, -1, -1, NULL) != 0) return -1;
  if (in->ndim != 4)
    return ln_error("%s: input must be 4-d (N,C,H,W), got shape %s", fn, nn_shape(s1, sizeof s1, in));
  const int dt = in->dtype_id, dev = in->device_id, nt = nn_device_threads(dev);
  const int64_t es = dt == LN_FLOAT64 ? 8 : 4;
  int64_t xshape[MAXB + 1][4];
  memcpy(xshape[0], in->shape, sizeof xshape[0]);
  size_t bytes = 0;
  if (stem) {   /* conv + bn + relu before the blocks: xshape[0] is its output */
    if (conv_geometry_dims(fn, "stem.weight", dt, dev, in->shape, stem->weight, &stem->p, &sa) != 0) return -1;
    if (check_bn(fn, stem, dt, dev, sa.O) != 0) return -1;
    xshape[0][1] = sa.O; xshape[0][2] = sa.OH; xshape[0][3] = sa.OW;
    bytes = conv_plan(&sa, nt, false, false);
  }
  for (int i = 0; i < nb; i++) {
    const ln_conv_bn *c1 = cb[3 * i], *c2 = cb[3 * i + 1], *cs = cb[3 * i + 2];
    memset(&b[i], 0, sizeof b[i]);
    if (!c1 || !c2) return ln_error("%s: block %d: conv1 and conv2 are required", fn, i + 1);
    if (conv_geometry_dims(fn, "conv1.weight", dt, dev, xshape[i], c1->weight, &c1->p, &b[i].c[0]) != 0) return -1;
    int64_t hshape[4] = {b[i].c[0].N, b[i].c[0].O, b[i].c[0].OH, b[i].c[0].OW};
    if (conv_geometry_dims(fn, "conv2.weight", dt, dev, hshape, c2->weight, &c2->p, &b[i].c[1]) != 0) return -1;
    int64_t rshape[4] = {xshape[i][0], xshape[i][1], xshape[i][2], xshape[i][3]};
    b[i].has_sc = cs != NULL;
    if (cs) {
      if (conv_geometry_dims(fn, "shortcut.weight", dt, dev, xshape[i], cs->weight, &cs->p, &b[i].c[2]) != 0)
        return -1;
      rshape[1] = b[i].c[2].O; rshape[2] = b[i].c[2].OH; rshape[3] = b[i].c[2].OW;
    }
    int64_t *os = xshape[i + 1];
    os[0] = b[i].c[1].N; os[1] = b[i].c[1].O; os[2] = b[i].c[1].OH; os[3] = b[i].c[1].OW;
    if (rshape[1] != os[1] || rshape[2] != os[2] || rshape[3] != os[3])
      return ln_error("%s: block %d: conv2's output (%lld,%lld,%lld) does not match the shortcut's (%lld,%lld,%lld)",
                      fn, i + 1, (long long)os[1], (long long)os[2], (long long)os[3], (long long)rshape[1],
                      (long long)rshape[2], (long long)rshape[3]);
    for (int j = 0; j < 3; j++)
      if (cb[3 * i + j] && check_bn(fn, cb[3 * i + j], dt, dev, b[i].c[j].O) != 0) return -1;
    for (int j = 0; j < 3; j++)
      if (cb[3 * i + j]) bytes = LN_MAX(bytes, conv_plan(&b[i].c[j], nt, false, false));
  }
  if (nn_check(fn, "out", out, dt, dev, 4, xshape[nb]) != 0) return -1;
  const bool blk = chain_blocked(b, nb, stem ? &sa : NULL);
  /* scratch: column slices, folded weights, then per block xb, hb, rb and
   * (NCHW chains) the block's output */
#define ACT(sh) LN_MAX(nn_conv_dnnl_blocked_bytes((sh)[0], (sh)[1], (sh)[2], (sh)[3]), \
                       (size_t)((sh)[0] * (sh)[1] * (sh)[2] * (sh)[3] * es))
  size_t off = bytes, xo[MAXB], ho[MAXB], ro[MAXB], oo[MAXB], so = 0;
  if (stem) {
    off = align64(off);
    sa.fold_off = (int64_t)off;
    off += (size_t)((sa.O * (sa.C / sa.p.groups) * sa.KH * sa.KW + sa.O) * es);
    so = off = align64(off);
    off += ACT(xshape[0]);
  }
  for (int i = 0; i < nb; i++)
    for (int j = 0; j < 3; j++) {
      if (!cb[3 * i + j]) continue;
      ln_conv2d_args *c = &b[i].c[j];
      off = align64(off);
      c->fold_off = (int64_t)off;
      off += (size_t)((c->O * (c->C / c->p.groups) * c->KH * c->KW + c->O) * es);
    }
  for (int i = 0; i < nb; i++) {
    int64_t hs[4] = {b[i].c[0].N, b[i].c[0].O, b[i].c[0].OH, b[i].c[0].OW};
    xo[i] = off = align64(off); off += ACT(xshape[i]);
    ho[i] = off = align64(off); off += ACT(hs);
    ro[i] = off = align64(off); if (b[i].has_sc) off += ACT(xshape[i + 1]);
    oo[i] = off = align64(off); if (!blk && i < nb - 1) off += ACT(xshape[i + 1]);
  }
#undef ACT
  nn_in xi = {0};
  nn_out o = {0};
  nn_scratch s = {0};
  int rc = -1;
  if (nn_input(fn, "input", in, &xi) != 0 || nn_output(fn, "out", out, &o) != 0) goto done;
  if (nn_scratch_new(fn, dev, off, &s) != 0) goto done;
  for (int i = 0; i < nb; i++)
    for (int j = 0; j < 3; j++) {
      ln_conv2d_args *c = &b[i].c[j];
      if (!cb[3 * i + j]) continue;
      if ((rc = fold_launch(fn, dev, c, cb[3 * i + j], &s)) != 0) goto done;
      c->scratch = s.data;
      c->w = s.data + c->fold_off;
      c->b = c->w + (c->O * (c->C / c->p.groups) * c->KH * c->KW) * es;
    }
  char *prev = nn_ptr(xi.t);
  if (stem) {
    if ((rc = fold_launch(fn, dev, &sa, stem, &s)) != 0) goto done;
    sa.scratch = s.data;
    sa.w = s.data + sa.fold_off;
    sa.b = sa.w + (sa.O * (sa.C / sa.p.groups) * sa.KH * sa.KW) * es;
    sa.in = prev; sa.out = s.data + so; sa.relu = 1; sa.raw = blk ? 2 : 0;   /* RAW_DST of conv_dnnl.c */
    const ln_tensor *keep[3] = {xi.t, &s.hold, NULL};
    if ((rc = ln_launch(dev, fn, ln_backend_of(dev)->conv2d_fwd, &sa, sizeof sa, keep, 3)) != 0) goto done;
    prev = sa.out;
  }
  for (int i = 0; i < nb; i++) {
    b[i].c[0].block = 1;
    b[i].in_blk = blk && (i > 0 || stem);
    b[i].out_blk = blk && i < nb - 1;
    b[i].in = prev;
    b[i].xb = b[i].in_blk ? prev : s.data + xo[i];
    b[i].hb = s.data + ho[i];
    b[i].rb = b[i].has_sc ? s.data + ro[i] : NULL;
    b[i].out = i == nb - 1 ? nn_ptr(o.t) : b[i].out_blk ? NULL : s.data + oo[i];
    /* a blocked output stays where conv2 wrote it: rb, or xb (identity) */
    prev = b[i].out_blk ? (b[i].has_sc ? b[i].rb : b[i].xb) : b[i].out;
    const ln_tensor *keep[3] = {o.t, xi.t, &s.hold};
    if ((rc = ln_launch(dev, fn, ln_backend_of(dev)->conv2d_fwd, &b[i], sizeof b[i], keep, 3)) != 0) goto done;
  }
done:
  rc = nn_out_finish(&o, rc);
  nn_scratch_free(&s);
  nn_in_free(&xi);
  return rc;
}

int ln_basicblock_forward_fused(ln_tensor *out, const ln_tensor *in, const ln_conv_bn *conv1,
                                const ln_conv_bn *conv2, const ln_conv_bn *shortcut) {
  const ln_conv_bn *cb[3] = {conv1, conv2, shortcut};
  return blocks_forward("basicblock_fused", out, in, NULL, cb, 1);
}

int ln_basicblocks_forward_fused(ln_tensor *out, const ln_tensor *in, const ln_conv_bn *stem,
                                 const ln_conv_bn *convs, int nblocks) {
  enum { MAXB = 16 };
  const ln_conv_bn *cb[3 * MAXB];
  if (!convs) return ln_error("basicblocks_fused: convs is NULL");
  if (nblocks < 1 || nblocks > MAXB)
    return ln_error("basicblocks_fused: expected 1 to %d blocks, got %d", MAXB, nblocks);
  for (int i = 0; i < nblocks; i++) {
    cb[3 * i] = &convs[3 * i];
    cb[3 * i + 1] = &convs[3 * i + 1];
    cb[3 * i + 2] = convs[3 * i + 2].weight ? &convs[3 * i + 2] : NULL;
  }
  return blocks_forward("basicblocks_fused", out, in, stem, cb, nblocks);
}
