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
  return a->C >= (pass == PASS_DATA ? 4 : 3);
}

static bool use_dnnl(const ln_conv2d_args *a, int impl, int pass) {
  if (!nn_conv_dnnl_ok(a)) return false;
  return impl == IMPL_DNNL || (impl == IMPL_AUTO && conv_auto_dnnl(a, pass));
}

static int conv_nt(const ln_conv2d_args *a) {
  int nt = LN_MIN(a->nthreads, ln_kernel_threads());
  return nt < 1 ? 1 : nt;
}

int ln_cpu_conv2d_fwd(void *args) {
  const ln_conv2d_args *a = args;
  const int impl = conv_impl();
  if (use_dnnl(a, impl, PASS_FWD) && nn_conv_dnnl_fwd(a, conv_nt(a)) == 0) return 0;
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
  /* oneDNN's weight gradient also sums the bias gradient */
  bool w_done = a->dw && use_dnnl(a, impl, PASS_WEIGHT) && nn_conv_dnnl_bwd_weights(a, nt, a->db != NULL) == 0;
  /* 1-2 input channels: the direct weight gradient (conv_direct.c), bias included */
  if (!w_done && a->dw && impl != IMPL_GEMM && nn_conv_direct_wgrad_ok(a)) {
    nn_conv_direct_wgrad(a, nt);
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
static int conv_geometry(const char *fn, const ln_tensor *in, const ln_tensor *w, const ln_conv2d_params *p,
                         ln_conv2d_args *a) {
  char s1[160];
  if (!p) return ln_error("%s: params is NULL", fn);
  if (nn_check(fn, "input", in, -1, -1, -1, NULL) != 0) return -1;
  if (in->ndim != 4)
    return ln_error("%s: input must be 4-d (N,C,H,W), got shape %s", fn, nn_shape(s1, sizeof s1, in));
  if (nn_check(fn, "weight", w, in->dtype_id, in->device_id, -1, NULL) != 0) return -1;
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
  int64_t N = in->shape[0], C = in->shape[1], H = in->shape[2], W = in->shape[3];
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
  a->dtype = in->dtype_id;
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
    int64_t want = (nt + a->N - 1) / LN_MAX(a->N, 1);
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

int ln_conv2d_forward(ln_tensor *out, const ln_tensor *in, const ln_tensor *w, const ln_tensor *b,
                      const ln_conv2d_params *p) {
  const char *fn = "conv2d";
  ln_conv2d_args a;
  if (conv_geometry(fn, in, w, p, &a) != 0) return -1;
  int dt = in->dtype_id, dev = in->device_id;
  int64_t bshape[1] = {a.O}, oshape[4] = {a.N, a.O, a.OH, a.OW};
  if (b && nn_check(fn, "bias", b, dt, dev, 1, bshape) != 0) return -1;
  if (nn_check(fn, "out", out, dt, dev, 4, oshape) != 0) return -1;
  nn_in xi, wi, bi;
  nn_out o;
  nn_scratch s = {0};
  int rc = -1;
  xi.owned = wi.owned = bi.owned = NULL;
  o.user = o.t = NULL;
  if (nn_input(fn, "input", in, &xi) != 0 || nn_input(fn, "weight", w, &wi) != 0 ||
      nn_input(fn, "bias", b, &bi) != 0 || nn_output(fn, "out", out, &o) != 0)
    goto done;
  size_t bytes = conv_plan(&a, nn_device_threads(dev), false, false);
  if (nn_scratch_new(fn, dev, bytes, &s) != 0) goto done;
  a.out = nn_ptr(o.t); a.in = nn_ptr(xi.t); a.w = nn_ptr(wi.t); a.b = nn_ptr(bi.t);
  a.scratch = s.data;
  const ln_tensor *keep[5] = {o.t, xi.t, wi.t, bi.t, &s.hold};
  rc = ln_launch(dev, fn, ln_backend_of(dev)->conv2d_fwd, &a, sizeof a, keep, 5);
done:
  rc = nn_out_finish(&o, rc);
  nn_scratch_free(&s);
  nn_in_free(&xi); nn_in_free(&wi); nn_in_free(&bi);
  return rc;
}

int ln_conv2d_backward(ln_tensor *din, ln_tensor *dw, ln_tensor *db, const ln_tensor *dout,
                       const ln_tensor *in, const ln_tensor *w, const ln_conv2d_params *p) {
  const char *fn = "conv2d_backward";
  ln_conv2d_args a;
  if (conv_geometry(fn, in, w, p, &a) != 0) return -1;
  int dt = in->dtype_id, dev = in->device_id;
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
  const ln_tensor *keep[7] = {oi.t, ow.t, ob.t, xi.t, wi.t, gi.t, &s.hold};
  rc = ln_launch(dev, fn, ln_backend_of(dev)->conv2d_bwd, &a, sizeof a, keep, 7);
done:
  rc = nn_out_finish(&oi, rc);
  rc = nn_out_finish(&ow, rc);
  rc = nn_out_finish(&ob, rc);
  nn_scratch_free(&s);
  nn_in_free(&xi); nn_in_free(&wi); nn_in_free(&gi);
  return rc;
}
