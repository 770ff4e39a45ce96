/* conv_direct.c -- direct float32 convolution forward for small channel
 * counts, stride 1, no dilation, one group (ResNet's 3x3 and LeNet's 5x5
 * layers), used by ln_cpu_conv2d_fwd in place of im2col + GEMM where it wins
 * (bench/cpu.lua measures both).
 *
 * Per work item (image n, block of OB output channels): the image is copied
 * once into the thread's scratch with its zero padding, then every output row
 * is computed in chunks of CW columns with OB x CW accumulators kept in vector
 * registers: for each (c, kh, kw) one load of CW shifted inputs and OB
 * broadcast multiply-adds. No column matrix is written or packed.
 * Sums run over (c, kh, kw) in order per output, in float32 (as the GEMM path
 * does, up to its blocking order). The data gradient of a stride-1
 * convolution is the same kernel over grad_output with the weight transposed
 * and flipped (direct_run's flip).
 *
 * Few input channels (LeNet's and seed28's first layer: 1 channel, 6 or 16
 * outputs, 28 columns) run a second shape of the same kernel: blocks of 8
 * output channels by 32 columns (two vectors per row: 28 columns waste 4
 * lanes, not 4 of 16 channels x 2 chunks). Their weight gradient (and bias
 * gradient) has its own direct kernel, nn_conv_direct_wgrad: per image and
 * (output channel, kernel row), KW vector accumulators over the output
 * columns, each output row's gradient loaded once for KW shifted input rows;
 * per-thread partial sums added in thread order (deterministic). */
#include "nn.h"
#include <omp.h>

enum { OB = 16, CW = 16, SOB = 8, SCW = 32 };

#if defined(__x86_64__) && !defined(__clang__) && !defined(LN_NO_CLONES)
#define DIRECT_SIMD __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define DIRECT_SIMD
#endif

/* the partial-row stores of the accumulators stay vector stores: as a memcpy
 * call (rep movs) they had taken a quarter of the 28-column forward */
#if defined(__GNUC__) && !defined(__clang__)
#define NO_MEMCPY __attribute__((optimize("no-tree-loop-distribute-patterns")))
#else
#define NO_MEMCPY
#endif

/* elements of the padded copy of one image (+ SCW >= CW slack for the last chunk) */
static int64_t padded_elems(const ln_conv2d_args *a) {
  return a->C * (a->H + 2 * (int64_t)a->p.pad_h) * (a->W + 2 * (int64_t)a->p.pad_w) + SCW;
}

/* 1-2 input channels, at most 16 outputs, rows of 16+ columns: the 8 x 32
 * blocks (LeNet's first layer 1->6 5x5 at 28x28: forward 3-5x faster than
 * im2col + GEMM here, which oneDNN does not beat on 1 channel) */
static bool small_ok(const ln_conv2d_args *a) {
  return a->C <= 2 && a->O <= 16 && a->OW >= 16 && a->KH * a->KW >= 9 && a->KH <= 7 && a->KW <= 7;
}

bool nn_conv_direct_ok(const ln_conv2d_args *a) {
  const ln_conv2d_params *p = &a->p;
  if (a->dtype != LN_FLOAT32 || p->groups != 1 || p->stride_h != 1 || p->stride_w != 1 || p->dil_h != 1 ||
      p->dil_w != 1)
    return false;
  /* where it beat im2col + GEMM here (bench: 16->16 at 32x32 and 32->32 at
   * 16x16, 3x3: 1.4x; 6->16 at 14x14, 5x5: 1.4x); few input or output channels,
   * narrow rows (CW lanes half empty) and single images stay on GEMM */
  if (!a->scratch) return false;
  if (small_ok(a)) return a->slice >= padded_elems(a) + a->C * a->KH * a->KW * SOB;
  if (a->C < 4 || a->O < 12 || a->OW < 10 || a->N < 2) return false;
  if (a->KH * a->KW < 9 || a->O > 64 || a->C > 64 || a->slice < padded_elems(a) + a->C * a->KH * a->KW * OB)
    return false;
  return true;
}

/* out rows [o0, o0+ob) of one image from its padded copy xp (C, Hp, Wp) and
 * the block's packed weights wp (C, KH, KW, OBV), zero for o >= ob; blocks
 * of OBV output channels by CWV columns */
#define DEF_DIRECT_BLOCK(NAME, OBV, CWV) \
DIRECT_SIMD NO_MEMCPY static void NAME(const float *restrict xp, const float *restrict wp, const float *b, \
                                     float *restrict out, int64_t o0, int64_t ob, int64_t C, int64_t Hp, \
                                     int64_t Wp, int64_t KH, int64_t KW, int64_t OH, int64_t OW) { \
  for (int64_t oh = 0; oh < OH; oh++) \
    for (int64_t ow0 = 0; ow0 < OW; ow0 += CWV) { \
      float acc[OBV][CWV]; \
      for (int64_t o = 0; o < OBV; o++) { \
        float init = (b && o < ob) ? b[o0 + o] : 0.0f; \
        for (int64_t j = 0; j < CWV; j++) acc[o][j] = init; \
      } \
      const float *wk = wp; \
      for (int64_t c = 0; c < C; c++) \
        for (int64_t kh = 0; kh < KH; kh++) { \
          const float *row = xp + (c * Hp + oh + kh) * Wp + ow0; \
          for (int64_t kw = 0; kw < KW; kw++, wk += OBV) { \
            const float *s = row + kw; \
            for (int64_t o = 0; o < OBV; o++) { \
              float wv = wk[o]; \
_Pragma("omp simd") \
              for (int64_t j = 0; j < CWV; j++) acc[o][j] += wv * s[j]; \
            } \
          } \
        } \
      int64_t n = OW - ow0 < CWV ? OW - ow0 : CWV; \
      for (int64_t o = 0; o < ob; o++) { \
        float *dst = out + ((o0 + o) * OH + oh) * OW + ow0; \
_Pragma("omp simd") \
        for (int64_t j = 0; j < n; j++) dst[j] = acc[o][j]; \
      } \
    } \
} \

DEF_DIRECT_BLOCK(direct_block, OB, CW)
DEF_DIRECT_BLOCK(direct_block_small, SOB, SCW)

/* One direct convolution, stride 1: in (N, C, H, W) -> out (N, O, OH, OW),
 * padding (ph, pw), kernel KH x KW. w is (O, C, KH, KW); with `flip` it is
 * the forward's weight (C, O, KH, KW) used transposed and flipped, which makes
 * this the data gradient of a stride-1 convolution (in = its grad_output,
 * out = its grad_input, padding KH-1-pad). `small`: the 8 x 32 blocks. */
static void direct_run(const float *in, int64_t N, int64_t C, int64_t H, int64_t W, const float *w,
                       bool flip, const float *b, float *out, int64_t O, int64_t KH, int64_t KW,
                       int64_t ph, int64_t pw, int64_t OH, int64_t OW, char *scratch, int64_t slice,
                       int nt, bool small) {
  const int64_t Hp = H + 2 * ph, Wp = W + 2 * pw, KK = KH * KW;
  const int64_t OBn = small ? SOB : OB;
  const int64_t nblk = (O + OBn - 1) / OBn, items = N * nblk;
  if (nt > items) nt = (int)items;
  if (nt < 1) nt = 1;
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    float *xp = (float *)scratch + (int64_t)omp_get_thread_num() * slice;
    float *wp = xp + C * Hp * Wp + SCW;   /* this block's packed weights */
    int64_t have = -1;   /* the image now in xp */
#pragma omp for schedule(static)
    for (int64_t it = 0; it < items; it++) {
      int64_t n = it / nblk, o0 = (it % nblk) * OBn;
      if (n != have) {
        const float *img = in + n * C * H * W;
        memset(xp, 0, (size_t)(C * Hp * Wp + SCW) * sizeof(float));
        for (int64_t c = 0; c < C; c++)
          for (int64_t h = 0; h < H; h++)
            memcpy(xp + (c * Hp + h + ph) * Wp + pw, img + (c * H + h) * W, (size_t)W * sizeof(float));
        have = n;
      }
      int64_t ob = LN_MIN(OBn, O - o0);
      if (!flip) {
        for (int64_t k = 0; k < C * KK; k++)
          for (int64_t o = 0; o < OBn; o++) wp[k * OBn + o] = o < ob ? w[(o0 + o) * C * KK + k] : 0.0f;
      } else {
        for (int64_t c = 0; c < C; c++)
          for (int64_t k = 0; k < KK; k++)
            for (int64_t o = 0; o < OBn; o++)
              wp[(c * KK + k) * OBn + o] = o < ob ? w[(c * O + o0 + o) * KK + (KK - 1 - k)] : 0.0f;
      }
      if (small) direct_block_small(xp, wp, b, out + n * O * OH * OW, o0, ob, C, Hp, Wp, KH, KW, OH, OW);
      else direct_block(xp, wp, b, out + n * O * OH * OW, o0, ob, C, Hp, Wp, KH, KW, OH, OW);
    }
  }
}

int nn_conv_direct_fwd(const ln_conv2d_args *a) {
  direct_run((const float *)a->in, a->N, a->C, a->H, a->W, (const float *)a->w, false, (const float *)a->b,
             (float *)a->out, a->O, a->KH, a->KW, a->p.pad_h, a->p.pad_w, a->OH, a->OW, a->scratch, a->slice,
             LN_MIN(a->nthreads, ln_kernel_threads()), small_ok(a));
  return 0;
}

/* data gradient: the same shape rules with input and output channels swapped */
bool nn_conv_direct_bwd_data_ok(const ln_conv2d_args *a) {
  const ln_conv2d_params *p = &a->p;
  if (a->dtype != LN_FLOAT32 || p->groups != 1 || p->stride_h != 1 || p->stride_w != 1 || p->dil_h != 1 ||
      p->dil_w != 1 || p->pad_h > a->KH - 1 || p->pad_w > a->KW - 1)
    return false;
  if (a->O < 4 || a->C < 12 || a->W < 10 || a->N < 2 || a->KH * a->KW < 9 || a->O > 64 || a->C > 64 ||
      !a->scratch)
    return false;
  int64_t php = a->KH - 1 - p->pad_h, pwp = a->KW - 1 - p->pad_w;
  return a->slice >= a->O * (a->OH + 2 * php) * (a->OW + 2 * pwp) + SCW + a->O * a->KH * a->KW * OB;
}

void nn_conv_direct_bwd_data(const ln_conv2d_args *a, int nt) {
  direct_run((const float *)a->dout, a->N, a->O, a->OH, a->OW, (const float *)a->w, true, NULL,
             (float *)a->din, a->C, a->KH, a->KW, a->KH - 1 - a->p.pad_h, a->KW - 1 - a->p.pad_w, a->H, a->W,
             a->scratch, a->slice, nt, false);
}

/* ---- weight (and bias) gradient for 1-2 input channels ------------------------------ */

enum { WCW = 16, WMAX_O = 16, WMAX_K = 7 };

bool nn_conv_direct_wgrad_ok(const ln_conv2d_args *a) {
  const ln_conv2d_params *p = &a->p;
  if (a->dtype != LN_FLOAT32 || p->groups != 1 || p->stride_h != 1 || p->stride_w != 1 || p->dil_h != 1 ||
      p->dil_w != 1 || !a->scratch || !a->dw)
    return false;
  if (a->C > 2 || a->O > WMAX_O || a->KH > WMAX_K || a->KW > WMAX_K || a->KH * a->KW < 9 || a->OW < 8)
    return false;
  int64_t Hp = a->H + 2 * (int64_t)p->pad_h, Wp = a->W + 2 * (int64_t)p->pad_w;
  int64_t OWr = (a->OW + WCW - 1) / WCW * WCW;
  return a->slice >= a->C * Hp * Wp + WCW + a->OH * OWr;
}

/* dw (KH, KW) += sum over rows and columns of dy (OH, OWr: zero past OW) times the
 * input xp (Hp, Wp) shifted by (kh, kw). KH, KW constants after inlining: all
 * KH x KW vector accumulators stay in registers (5x5: 25 of AVX-512's 32), one
 * load of dy per chunk, KH x KW independent multiply-add chains. */
#define DEF_WGRAD(KH, KW)                                                                   \
  static inline __attribute__((always_inline)) float wgrad_##KH##x##KW(                     \
      const float *restrict xp, int64_t Wp, const float *restrict dy, int64_t OWr, int64_t OH, \
      float *restrict dw) {                                                                  \
    float acc[KH][KW][WCW], accb[WCW];                                                       \
    _Pragma("omp simd") for (int j = 0; j < WCW; j++) accb[j] = 0.0f;                        \
    _Pragma("GCC unroll 8") for (int kh = 0; kh < KH; kh++)                                  \
    _Pragma("GCC unroll 8") for (int kw = 0; kw < KW; kw++)                                  \
    _Pragma("omp simd") for (int j = 0; j < WCW; j++) acc[kh][kw][j] = 0.0f;                 \
    for (int64_t oh = 0; oh < OH; oh++)                                                      \
      for (int64_t ow0 = 0; ow0 < OWr; ow0 += WCW) {                                         \
        const float *d = dy + oh * OWr + ow0;                                                \
        _Pragma("omp simd") for (int j = 0; j < WCW; j++) accb[j] += d[j];                   \
        _Pragma("GCC unroll 8") for (int kh = 0; kh < KH; kh++) {                            \
          const float *xr = xp + (oh + kh) * Wp + ow0;                                       \
          _Pragma("GCC unroll 8") for (int kw = 0; kw < KW; kw++) {                          \
            _Pragma("omp simd") for (int j = 0; j < WCW; j++) acc[kh][kw][j] += d[j] * xr[kw + j]; \
          }                                                                                  \
        }                                                                                    \
      }                                                                                      \
    for (int kh = 0; kh < KH; kh++)                                                          \
      for (int kw = 0; kw < KW; kw++) {                                                      \
        float t = 0.0f;                                                                      \
        for (int j = 0; j < WCW; j++) t += acc[kh][kw][j];                                   \
        dw[kh * KW + kw] += t;                                                               \
      }                                                                                      \
    float sb = 0.0f;                                                                         \
    for (int j = 0; j < WCW; j++) sb += accb[j];                                             \
    return sb;                                                                               \
  }
DEF_WGRAD(5, 5)
DEF_WGRAD(3, 3)

/* the generic shape: one kernel row at a time */
static float wgrad_plane_any(const float *restrict xp, int64_t Wp, const float *restrict dy, int64_t OWr,
                             int64_t OH, int64_t KH, int64_t KW, float *restrict dw) {
  for (int64_t kh = 0; kh < KH; kh++)
    for (int64_t kw = 0; kw < KW; kw++) {
      float acc[WCW] = {0};
      for (int64_t oh = 0; oh < OH; oh++) {
        const float *xr = xp + (oh + kh) * Wp + kw, *d = dy + oh * OWr;
        for (int64_t ow0 = 0; ow0 < OWr; ow0 += WCW) {
#pragma omp simd
          for (int j = 0; j < WCW; j++) acc[j] += d[ow0 + j] * xr[ow0 + j];
        }
      }
      float t = 0.0f;
      for (int j = 0; j < WCW; j++) t += acc[j];
      dw[kh * KW + kw] += t;
    }
  float acc[WCW] = {0};
  for (int64_t i = 0; i < OH * OWr; i += WCW)
    for (int j = 0; j < WCW; j++) acc[j] += dy[i + j];
  float t = 0.0f;
  for (int j = 0; j < WCW; j++) t += acc[j];
  return t;
}

/* returns the sum of dy (the bias gradient's share) */
DIRECT_SIMD static float wgrad_image(const float *xp, int64_t Wp, const float *dy, int64_t OWr, int64_t OH,
                                     int64_t KH, int64_t KW, float *dw) {
  if (KH == 5 && KW == 5) return wgrad_5x5(xp, Wp, dy, OWr, OH, dw);
  if (KH == 3 && KW == 3) return wgrad_3x3(xp, Wp, dy, OWr, OH, dw);
  return wgrad_plane_any(xp, Wp, dy, OWr, OH, KH, KW, dw);
}

/* dy plane (OH, OW) -> the rows of dyp (OH, OWr), whose zero tails are set once
 * per thread */
DIRECT_SIMD NO_MEMCPY static void copy_dy(const float *restrict d, float *restrict dyp, int64_t OH, int64_t OW,
                                          int64_t OWr) {
  for (int64_t oh = 0; oh < OH; oh++) {
    const float *r = d + oh * OW;
    float *q = dyp + oh * OWr;
#pragma omp simd
    for (int64_t j = 0; j < OW; j++) q[j] = r[j];
  }
}

/* dw (O, C, KH, KW) and db (O) (when a->db) of in (N, C, H, W), dout (N, O, OH, OW).
 * Images are split over the threads in order; each thread sums its images into
 * its own partial (images in order), and the partials are added in thread order. */
void nn_conv_direct_wgrad(const ln_conv2d_args *a, int nt) {
  const int64_t N = a->N, C = a->C, H = a->H, W = a->W, O = a->O, KH = a->KH, KW = a->KW, OH = a->OH,
                OW = a->OW, ph = a->p.pad_h, pw = a->p.pad_w;
  const int64_t Hp = H + 2 * ph, Wp = W + 2 * pw, OWr = (OW + WCW - 1) / WCW * WCW, WN = O * C * KH * KW;
  if (nt > N) nt = (int)N;
  if (nt > 16) nt = 16;   /* the partials live on this stack */
  if (nt < 1) nt = 1;
  float part[nt][WMAX_O * 2 * WMAX_K * WMAX_K + WMAX_O];
  const float *in = (const float *)a->in, *dout = (const float *)a->dout;
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    int t = omp_get_thread_num(), T = omp_get_num_threads();
    float *dw = part[t], *db = part[t] + WN;
    memset(dw, 0, (size_t)(WN + O) * sizeof(float));
    float *xp = (float *)a->scratch + (int64_t)t * a->slice, *dyp = xp + C * Hp * Wp + WCW;
    int64_t n0 = N * t / T, n1 = N * (t + 1) / T;
    memset(xp, 0, (size_t)(C * Hp * Wp + WCW + OH * OWr) * sizeof(float));   /* dyp's tails too */
    for (int64_t n = n0; n < n1; n++) {
      for (int64_t c = 0; c < C; c++)
        for (int64_t h = 0; h < H; h++)
          memcpy(xp + (c * Hp + h + ph) * Wp + pw, in + ((n * C + c) * H + h) * W, (size_t)W * sizeof(float));
      for (int64_t o = 0; o < O; o++) {
        copy_dy(dout + (n * O + o) * OH * OW, dyp, OH, OW, OWr);
        for (int64_t c = 0; c < C; c++) {
          float s = wgrad_image(xp + c * Hp * Wp, Wp, dyp, OWr, OH, KH, KW, dw + (o * C + c) * KH * KW);
          if (c == 0) db[o] += s;
        }
      }
    }
  }
  float *dw = (float *)a->dw, *db = (float *)a->db;
  for (int64_t i = 0; i < WN; i++) {
    float s = part[0][i];
    for (int t = 1; t < nt; t++) s += part[t][i];
    dw[i] = s;
  }
  if (db)
    for (int64_t o = 0; o < O; o++) {
      float s = part[0][WN + o];
      for (int t = 1; t < nt; t++) s += part[t][WN + o];
      db[o] = s;
    }
}
