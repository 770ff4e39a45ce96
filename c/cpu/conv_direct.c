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
 * per-thread partial sums added in thread order (deterministic).
 *
 * LeNet's second layer (6 -> 16, 5x5, 14x14 input, 10x10 output) has two
 * more: its data gradient through the same kernel in a narrow shape (blocks
 * of 4-8 channels by one 16-column vector, two rows at a time), and its
 * weight gradient over vectors of the 16 output channels
 * (nn_conv_direct_wgrad16); both beat oneDNN there (bench/RESULTS.md).
 *
 * RGB stems (3 input channels, e.g. ResNet-8's and seed32's 3->16 3x3 at
 * 32x32): the forward in the 8 x 32 blocks (NCHW out, no reorder), the
 * input gradient in a fourth shape, 3 channels by 8 rows of one vector, and
 * (3x3 over rows of whole vectors, AVX-512) the weight gradient three output
 * channels at a time (wgrad33_run). */
#include "nn_kernels.h"
#include <omp.h>

enum { OB = 16, CW = 16, SOB = 8, SCW = 32, NOB = 8 };

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

/* 1-3 input channels, at most 16 outputs, rows of 16+ columns: the 8 x 32
 * blocks (LeNet's first layer 1->6 5x5 at 28x28: forward 3-5x faster than
 * im2col + GEMM here, which oneDNN does not beat on 1 channel; RGB stems:
 * conv2d.c's direct_stem) */
static bool small_ok(const ln_conv2d_args *a) {
  return a->C <= 3 && a->O <= 16 && a->OW >= 16 && a->KH * a->KW >= 9 && a->KH <= 7 && a->KW <= 7;
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

/* direct_block_small for a 3x3 kernel and a full block of SOB output
 * channels (RGB and 1-channel stems with 3x3 kernels): the kernel loops
 * unrolled and every accumulator stored, so that the 16 accumulators stay in
 * registers with no bookkeeping between (c, kh) rows; the stem forward
 * 0.72-0.94x the time of the generic block (3->16 at 32x32, batch 64, 5 A/B
 * comparisons) */
DIRECT_SIMD NO_MEMCPY static void direct_block_small33(const float *restrict xp, const float *restrict wp,
                                                       const float *b, float *restrict out, int64_t o0,
                                                       int64_t C, int64_t Hp, int64_t Wp, int64_t OH,
                                                       int64_t OW) {
  for (int64_t oh = 0; oh < OH; oh++)
    for (int64_t ow0 = 0; ow0 < OW; ow0 += SCW) {
      float acc[SOB][SCW];
      for (int64_t o = 0; o < SOB; o++) {
        float init = b ? b[o0 + o] : 0.0f;
        for (int64_t j = 0; j < SCW; j++) acc[o][j] = init;
      }
      const float *wk = wp;
      for (int64_t c = 0; c < C; c++) {
        const float *row = xp + (c * Hp + oh) * Wp + ow0;
        _Pragma("GCC unroll 3")
        for (int64_t kh = 0; kh < 3; kh++, row += Wp)
          _Pragma("GCC unroll 3")
          for (int64_t kw = 0; kw < 3; kw++, wk += SOB) {
            const float *sv = row + kw;
            for (int64_t o = 0; o < SOB; o++) {
              float wv = wk[o];
              _Pragma("omp simd")
              for (int64_t j = 0; j < SCW; j++) acc[o][j] += wv * sv[j];
            }
          }
      }
      int64_t n = OW - ow0 < SCW ? OW - ow0 : SCW;
      for (int64_t o = 0; o < SOB; o++) {
        float *dst = out + ((o0 + o) * OH + oh) * OW + ow0;
        if (n == SCW) {
          _Pragma("omp simd")
          for (int64_t j = 0; j < SCW; j++) dst[j] = acc[o][j];
        } else {
          _Pragma("omp simd")
          for (int64_t j = 0; j < n; j++) dst[j] = acc[o][j];
        }
      }
    }
}

/* the narrow shape: NB (4, 6 or 8 >= the channels) channels by CW columns,
 * two output rows at a time (each broadcast weight feeds both rows: 2 x NB
 * independent accumulator chains); xp holds one spare zero row below the
 * image for an odd OH; rows [r0, r1) of xp hold the image, the others padding */
#define DEF_NARROW(NB)                                                                       \
DIRECT_SIMD NO_MEMCPY static void direct_block_narrow##NB(                                   \
    const float *restrict xp, const float *restrict wp, const float *b, float *restrict out, \
    int64_t o0, int64_t ob, int64_t C, int64_t Hp, int64_t Wp, int64_t KH, int64_t KW,        \
    int64_t OH, int64_t OW, int64_t r0, int64_t r1) {                                         \
  for (int64_t oh = 0; oh < OH; oh += 2)                                                      \
    for (int64_t ow0 = 0; ow0 < OW; ow0 += CW) {                                              \
      float acc0[NB][CW], acc1[NB][CW];                                                       \
      for (int64_t o = 0; o < NB; o++) {                                                      \
        float init = (b && o < ob) ? b[o0 + o] : 0.0f;                                        \
        for (int64_t j = 0; j < CW; j++) acc0[o][j] = acc1[o][j] = init;                      \
      }                                                                                       \
      const float *wk = wp;                                                                   \
      for (int64_t c = 0; c < C; c++)                                                         \
        for (int64_t kh = 0; kh < KH; kh++) {                                                 \
          /* a pair of zero (padding) rows adds nothing */                                    \
          if (oh + kh + 1 < r0 || oh + kh >= r1) { wk += KW * NB; continue; }                \
          const float *row = xp + (c * Hp + oh + kh) * Wp + ow0;                              \
          for (int64_t kw = 0; kw < KW; kw++, wk += NB) {                                     \
            const float *s0 = row + kw, *s1 = row + Wp + kw;                                  \
            for (int64_t o = 0; o < NB; o++) {                                                \
              float wv = wk[o];                                                               \
_Pragma("omp simd")                                                                           \
              for (int64_t j = 0; j < CW; j++) { acc0[o][j] += wv * s0[j]; acc1[o][j] += wv * s1[j]; } \
            }                                                                                 \
          }                                                                                   \
        }                                                                                     \
      int64_t n = OW - ow0 < CW ? OW - ow0 : CW;                                              \
      for (int64_t o = 0; o < ob; o++) {                                                      \
        float *dst = out + ((o0 + o) * OH + oh) * OW + ow0;                                   \
_Pragma("omp simd")                                                                           \
        for (int64_t j = 0; j < n; j++) dst[j] = acc0[o][j];                                  \
        if (oh + 1 < OH) {                                                                    \
_Pragma("omp simd")                                                                           \
          for (int64_t j = 0; j < n; j++) dst[OW + j] = acc1[o][j];                           \
        }                                                                                     \
      }                                                                                       \
    }                                                                                         \
}
DEF_NARROW(4)
DEF_NARROW(6)
DEF_NARROW(8)

/* the few shape: 3 output channels (an RGB stem's input gradient: the
 * forward's 16+ output channels in, 3 out, rows wider than 16) by FR rows of
 * one CW-column vector: 3 x 8 accumulators, each shifted input row loaded
 * once per (c, kh, kw) for the 3 channels. The narrow shape (4 channels by 2
 * rows) ran at half the forward's rate per multiply-add here, bound by its
 * loads, and im2col + GEMM + col2im took 1.8x the forward. Rows past the
 * image read the next channel's rows (after the last, FR - 1 spare zero
 * rows) into accumulators that are never stored. */
enum { FR = 8, FNB = 3 };
/* a CW-float vector that may sit at any float boundary */
typedef float few_vec __attribute__((vector_size(CW * sizeof(float)), aligned(4)));
#define DEF_FEW(NAME, ATTR, PIN)                                                                        \
  ATTR NO_MEMCPY static void NAME(const float *restrict xp, const float *restrict wp, float *restrict out, \
                                  int64_t ob, int64_t C, int64_t Hp, int64_t Wp, int64_t KH, int64_t KW,   \
                                  int64_t OH, int64_t OW) {                                             \
    for (int64_t oh0 = 0; oh0 < OH; oh0 += FR)                                                          \
      for (int64_t ow0 = 0; ow0 < OW; ow0 += CW) {                                                      \
        few_vec acc[FNB][FR];                                                                           \
        for (int o = 0; o < FNB; o++)                                                                   \
          for (int r = 0; r < FR; r++) acc[o][r] = (few_vec){0};                                        \
        const float *wk = wp;                                                                           \
        for (int64_t c = 0; c < C; c++)                                                                 \
          for (int64_t kh = 0; kh < KH; kh++) {                                                         \
            const float *row = xp + (c * Hp + oh0 + kh) * Wp + ow0;                                     \
            for (int64_t kw = 0; kw < KW; kw++, wk += FNB) {                                            \
              const float w0 = wk[0], w1 = wk[1], w2 = wk[2];                                           \
              _Pragma("GCC unroll 8") for (int r = 0; r < FR; r++) {                                    \
                few_vec v = *(const few_vec *)(row + r * Wp + kw);                                      \
                PIN(v);                                                                                 \
                acc[0][r] += w0 * v;                                                                    \
                acc[1][r] += w1 * v;                                                                    \
                acc[2][r] += w2 * v;                                                                    \
              }                                                                                         \
            }                                                                                           \
          }                                                                                             \
        int64_t n = OW - ow0 < CW ? OW - ow0 : CW, nr = OH - oh0 < FR ? OH - oh0 : FR;                  \
        for (int64_t o = 0; o < ob; o++)                                                                \
          for (int64_t r = 0; r < nr; r++) {                                                            \
            float *dst = out + (o * OH + oh0 + r) * OW + ow0;                                           \
            const float *a = (const float *)&acc[o][r];                                                 \
            for (int64_t j = 0; j < n; j++) dst[j] = a[j];                                              \
          }                                                                                             \
      }                                                                                                 \
  }
#define FEW_NO_PIN(v) (void)0
DEF_FEW(direct_block_few_any, DIRECT_SIMD, FEW_NO_PIN)
#if defined(__x86_64__) && !defined(__clang__) && !defined(LN_NO_CLONES)
/* AVX-512: the empty asm keeps each loaded vector in a register; without it
 * GCC folds the load into each of the three multiply-adds, tripling the
 * split cache-line loads (the kernel took twice as long that way) */
#define FEW_PIN(v) __asm__("" : "+v"(v))
DEF_FEW(direct_block_few_v4, __attribute__((target("arch=x86-64-v4"))), FEW_PIN)
static void direct_block_few(const float *xp, const float *wp, float *out, int64_t ob, int64_t C, int64_t Hp,
                             int64_t Wp, int64_t KH, int64_t KW, int64_t OH, int64_t OW) {
  /* (a read of libgcc's cpu model, set at load time: cheap per block) */
  (__builtin_cpu_supports("x86-64-v4") ? direct_block_few_v4 : direct_block_few_any)(xp, wp, out, ob, C, Hp, Wp,
                                                                                    KH, KW, OH, OW);
}
#else
#define direct_block_few direct_block_few_any
#endif

/* The few shape for 3x3, padding 1 and rows of whole vectors (RGB stems at
 * 32x32) on AVX-512, reading the image itself instead of a padded copy: the
 * copy of the 16-channel grad_output (pad_image and its memset) took about
 * a third of the input gradient's time; without it the stem's input gradient
 * takes 0.87-0.99x the time (3->16 at 32x32, batch 64, 2 threads, 6 A/B runs
 * in one process). A row above or below the image
 * reads `zero` (a row of W zeros); the column left of a row's first vector
 * and right of its last are masked off (masked lanes are not read). */
#if defined(__x86_64__) && !defined(__clang__) && !defined(LN_NO_CLONES)
#include <immintrin.h>
#define HAVE_FEW_UNPADDED 1
__attribute__((target("arch=x86-64-v4"))) NO_MEMCPY static void direct_block_few33_unpadded(
    const float *restrict img, const float *restrict zero, const float *restrict wp, float *restrict out,
    int64_t ob, int64_t C, int64_t H, int64_t W) {
  for (int64_t oh0 = 0; oh0 < H; oh0 += FR)
    for (int64_t ow0 = 0; ow0 < W; ow0 += CW) {
      __m512 acc[FNB][FR];
      _Pragma("GCC unroll 3") for (int o = 0; o < FNB; o++)
        _Pragma("GCC unroll 8") for (int r = 0; r < FR; r++) acc[o][r] = _mm512_setzero_ps();
      const __mmask16 mask[3] = {ow0 == 0 ? (__mmask16)0xFFFE : (__mmask16)0xFFFF, (__mmask16)0xFFFF,
                                 ow0 + CW == W ? (__mmask16)0x7FFF : (__mmask16)0xFFFF};
      const float *wk = wp;
      for (int64_t c = 0; c < C; c++)
        for (int64_t kh = 0; kh < 3; kh++) {
          const float *row[FR];
          for (int r = 0; r < FR; r++) {
            int64_t ih = oh0 + r + kh - 1;
            row[r] = (ih >= 0 && ih < H ? img + (c * H + ih) * W : zero) + ow0;
          }
          /* (kw not unrolled: 9 broadcast weights and 24 accumulators would spill) */
          _Pragma("GCC unroll 1") for (int kw = 0; kw < 3; kw++, wk += FNB) {
            const __m512 w0 = _mm512_set1_ps(wk[0]), w1 = _mm512_set1_ps(wk[1]), w2 = _mm512_set1_ps(wk[2]);
            _Pragma("GCC unroll 8") for (int r = 0; r < FR; r++) {
              __m512 v = _mm512_maskz_loadu_ps(mask[kw], row[r] + kw - 1);
              acc[0][r] = _mm512_fmadd_ps(w0, v, acc[0][r]);
              acc[1][r] = _mm512_fmadd_ps(w1, v, acc[1][r]);
              acc[2][r] = _mm512_fmadd_ps(w2, v, acc[2][r]);
            }
          }
        }
      /* constant indices only: a variable one would keep acc in memory */
      const int64_t nr = H - oh0 < FR ? H - oh0 : FR;
      _Pragma("GCC unroll 3") for (int o = 0; o < FNB; o++)
        _Pragma("GCC unroll 8") for (int r = 0; r < FR; r++)
          if (o < ob && r < nr) _mm512_storeu_ps(out + (o * H + oh0 + r) * W + ow0, acc[o][r]);
    }
}
#endif

/* whether direct_run's few shape reads the image unpadded (above) */
static bool few_unpadded(int64_t KH, int64_t KW, int64_t ph, int64_t pw, int64_t W) {
#ifdef HAVE_FEW_UNPADDED
  return KH == 3 && KW == 3 && ph == 1 && pw == 1 && W % CW == 0 && __builtin_cpu_supports("x86-64-v4");
#else
  (void)KH; (void)KW; (void)ph; (void)pw; (void)W;
  return false;
#endif
}

/* block shapes of direct_run */
enum { SHAPE_WIDE, SHAPE_SMALL, SHAPE_NARROW, SHAPE_FEW };

/* img (C, H, W) -> xp (C, H + 2 ph, W + 2 pw) with zero borders, xe floats
 * zeroed in all; rows copied by vector loops (memcpy calls of one short row
 * each had cost half as much as the few shape's kernel) */
DIRECT_SIMD NO_MEMCPY static void pad_image(const float *restrict img, int64_t C, int64_t H, int64_t W, int64_t ph,
                                            int64_t pw, float *restrict xp, int64_t xe) {
  const int64_t Hp = H + 2 * ph, Wp = W + 2 * pw;
  memset(xp, 0, (size_t)xe * sizeof(float));
  for (int64_t c = 0; c < C; c++)
    for (int64_t h = 0; h < H; h++) {
      const float *src = img + (c * H + h) * W;
      float *dst = xp + (c * Hp + h + ph) * Wp + pw;
#pragma omp simd
      for (int64_t j = 0; j < W; j++) dst[j] = src[j];
    }
}

/* rows of zeros after the padded image that a shape's row blocks read past it */
static int64_t spare_rows(int shape) { return shape == SHAPE_NARROW ? 1 : shape == SHAPE_FEW ? FR - 1 : 0; }

/* One direct convolution, stride 1: in (N, C, H, W) -> out (N, O, OH, OW),
 * padding (ph, pw), kernel KH x KW. w is (O, C, KH, KW); with `flip` it is
 * the forward's weight (C, O, KH, KW) used transposed and flipped, which makes
 * this the data gradient of a stride-1 convolution (in = its grad_output,
 * out = its grad_input, padding KH-1-pad). `small`: the 8 x 32 blocks. */
static void direct_run(const float *in, int64_t N, int64_t C, int64_t H, int64_t W, const float *w,
                       bool flip, const float *b, float *out, int64_t O, int64_t KH, int64_t KW,
                       int64_t ph, int64_t pw, int64_t OH, int64_t OW, char *scratch, int64_t slice,
                       int nt, int shape) {
  const int64_t Hp = H + 2 * ph, Wp = W + 2 * pw, KK = KH * KW;
  /* the narrow shape: blocks of 4, 6 or 8, the smallest that holds O */
  const int64_t OBn = shape == SHAPE_WIDE ? OB : shape == SHAPE_SMALL ? SOB : shape == SHAPE_FEW ? FNB
                      : O <= 4 ? 4 : O <= 6 ? 6 : NOB;
  const int64_t nblk = (O + OBn - 1) / OBn, items = N * nblk;
  const bool unpadded = shape == SHAPE_FEW && OH == H && OW == W && few_unpadded(KH, KW, ph, pw, W);
  if (nt > items) nt = (int)items;
  if (nt < 1) nt = 1;
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    float *xp = (float *)scratch + (int64_t)omp_get_thread_num() * slice;
    const int64_t xe = C * Hp * Wp + SCW + spare_rows(shape) * Wp;
    float *wp = xp + xe;   /* this block's packed weights */
    int64_t have = -1, packed = -1;   /* the image now in xp, the block now in wp */
    if (unpadded) memset(xp, 0, (size_t)W * sizeof(float));   /* xp: the zero row */
#pragma omp for schedule(static)
    for (int64_t it = 0; it < items; it++) {
      int64_t n = it / nblk, o0 = (it % nblk) * OBn;
      if (n != have && !unpadded) {
        const float *img = in + n * C * H * W;
        pad_image(img, C, H, W, ph, pw, xp, xe);
        have = n;
      }
      int64_t ob = LN_MIN(OBn, O - o0);
      if (o0 == packed) {
        /* one block of output channels (LeNet's layers): packed once per thread */
      } else if (!flip) {
        for (int64_t k = 0; k < C * KK; k++)
          for (int64_t o = 0; o < OBn; o++) wp[k * OBn + o] = o < ob ? w[(o0 + o) * C * KK + k] : 0.0f;
      } else {
        for (int64_t c = 0; c < C; c++)
          for (int64_t k = 0; k < KK; k++)
            for (int64_t o = 0; o < OBn; o++)
              wp[(c * KK + k) * OBn + o] = o < ob ? w[(c * O + o0 + o) * KK + (KK - 1 - k)] : 0.0f;
      }
      packed = o0;
      float *on = out + n * O * OH * OW;
#ifdef HAVE_FEW_UNPADDED
      if (unpadded) direct_block_few33_unpadded(in + n * C * H * W, xp, wp, on + o0 * OH * OW, ob, C, H, W);
      else
#endif
      if (shape == SHAPE_FEW) direct_block_few(xp, wp, on + o0 * OH * OW, ob, C, Hp, Wp, KH, KW, OH, OW);
      else if (shape == SHAPE_SMALL && KH == 3 && KW == 3 && ob == SOB)
        direct_block_small33(xp, wp, b, on, o0, C, Hp, Wp, OH, OW);
      else if (shape == SHAPE_SMALL) direct_block_small(xp, wp, b, on, o0, ob, C, Hp, Wp, KH, KW, OH, OW);
      else if (shape == SHAPE_NARROW && OBn == 4)
        direct_block_narrow4(xp, wp, b, on, o0, ob, C, Hp, Wp, KH, KW, OH, OW, ph, ph + H);
      else if (shape == SHAPE_NARROW && OBn == 6)
        direct_block_narrow6(xp, wp, b, on, o0, ob, C, Hp, Wp, KH, KW, OH, OW, ph, ph + H);
      else if (shape == SHAPE_NARROW)
        direct_block_narrow8(xp, wp, b, on, o0, ob, C, Hp, Wp, KH, KW, OH, OW, ph, ph + H);
      else direct_block(xp, wp, b, on, o0, ob, C, Hp, Wp, KH, KW, OH, OW);
    }
  }
}

int nn_conv_direct_fwd(const ln_conv2d_args *a) {
  direct_run((const float *)a->in, a->N, a->C, a->H, a->W, (const float *)a->w, false, (const float *)a->b,
             (float *)a->out, a->O, a->KH, a->KW, a->p.pad_h, a->p.pad_w, a->OH, a->OW, a->scratch, a->slice,
             LN_MIN(a->nthreads, ln_kernel_threads()), small_ok(a) ? SHAPE_SMALL : SHAPE_WIDE);
  return 0;
}

/* data gradient: the same shape rules with input and output channels swapped */
/* data gradient into 3-8 channels of rows up to 16 wide (LeNet's 6->16 5x5
 * at 14x14): blocks of NOB = 8 channels by one 16-column vector, where the
 * wide shape would leave 10 of 16 channel accumulators empty */
static bool narrow_ok(const ln_conv2d_args *a) { return a->C <= NOB && a->W <= CW; }

/* data gradient into 3 channels of rows wider than 16 (an RGB stem's input
 * gradient): the few shape, 1.2-1.4x im2col + GEMM + col2im (3->16 at 32x32,
 * batch 64, 2 threads: 0.67 against 0.83-0.94 ms) */
static bool few_ok(const ln_conv2d_args *a) { return a->C == FNB && a->W > CW; }

static int data_shape(const ln_conv2d_args *a) {
  return few_ok(a) ? SHAPE_FEW : narrow_ok(a) ? SHAPE_NARROW : SHAPE_WIDE;
}

bool nn_conv_direct_narrow_data_ok(const ln_conv2d_args *a) {
  return narrow_ok(a) && nn_conv_direct_bwd_data_ok(a);
}

bool nn_conv_direct_bwd_data_ok(const ln_conv2d_args *a) {
  const ln_conv2d_params *p = &a->p;
  if (a->dtype != LN_FLOAT32 || p->groups != 1 || p->stride_h != 1 || p->stride_w != 1 || p->dil_h != 1 ||
      p->dil_w != 1 || p->pad_h > a->KH - 1 || p->pad_w > a->KW - 1)
    return false;
  const int shape = data_shape(a);
  if (a->O < 4 || a->C < (shape == SHAPE_WIDE ? 12 : 3) || a->W < 10 || a->N < 2 || a->KH * a->KW < 9 ||
      a->O > 64 || a->C > 64 || !a->scratch)
    return false;
  int64_t php = a->KH - 1 - p->pad_h, pwp = a->KW - 1 - p->pad_w;
  return a->slice >= a->O * (a->OH + 2 * php + spare_rows(shape)) * (a->OW + 2 * pwp) + SCW +
                         a->O * a->KH * a->KW * OB;
}

void nn_conv_direct_bwd_data(const ln_conv2d_args *a, int nt) {
  direct_run((const float *)a->dout, a->N, a->O, a->OH, a->OW, (const float *)a->w, true, NULL,
             (float *)a->din, a->C, a->KH, a->KW, a->KH - 1 - a->p.pad_h, a->KW - 1 - a->p.pad_w, a->H, a->W,
             a->scratch, a->slice, nt, data_shape(a));
}

/* ---- weight (and bias) gradient for 1-2 input channels ------------------------------ */

enum { WCW = 16, WMAX_O = 16, WMAX_K = 7 };

static bool wgrad33_ok(const ln_conv2d_args *a);

bool nn_conv_direct_wgrad_ok(const ln_conv2d_args *a) {
  const ln_conv2d_params *p = &a->p;
  if (a->dtype != LN_FLOAT32 || p->groups != 1 || p->stride_h != 1 || p->stride_w != 1 || p->dil_h != 1 ||
      p->dil_w != 1 || !a->scratch || !a->dw)
    return false;
  if (a->C > (wgrad33_ok(a) ? 3 : 2) || a->O > WMAX_O || a->KH > WMAX_K || a->KW > WMAX_K || a->KH * a->KW < 9 || a->OW < 8)
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

/* 3x3 for two output channels at once: dw0, dw1 (3, 3) += the input plane xp
 * (Hp, Wp) shifted by (kh, kw) times dy0, dy1 (OH, OW rows, OW a multiple of
 * WCW). Each shifted input vector feeds both channels: 11 loads per 18
 * multiply-adds (one channel: 10 per 9), 18 accumulators in registers. */
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

/* 3x3 kernels over rows of whole 16-column vectors with AVX-512 (RGB stems
 * at 32x32: oneDNN's weight gradient ran at ~70-80 GFLOP/s there): WT output
 * channels at a time, so that each shifted input vector, loaded once, feeds
 * WT multiply-adds (per 16 columns: WT + 9 loads for 9 * WT multiply-adds,
 * against 10 for 9 above), 9 * WT accumulators in registers. Each pass adds
 * its accumulators into per-thread vector partials (vp, O*C*9 vectors); lanes
 * and threads are summed once at the end, in order (deterministic). */
enum { WT = 3 };
typedef float wg_vec __attribute__((vector_size(WCW * sizeof(float)), aligned(4)));

#define DEF_WG33(T)                                                                                  \
  __attribute__((target("arch=x86-64-v4"))) static void wg33_##T(                                    \
      const float *restrict xp, int64_t Wp, const float *restrict dy, int64_t plane, int64_t OW,     \
      int64_t OH, wg_vec *restrict vp, int64_t vstride) {                                            \
    wg_vec acc[T][9];                                                                                \
    _Pragma("GCC unroll 3") for (int u = 0; u < T; u++)                                              \
    _Pragma("GCC unroll 9") for (int k = 0; k < 9; k++) acc[u][k] = (wg_vec){0};                     \
    for (int64_t oh = 0; oh < OH; oh++)                                                              \
      for (int64_t ow0 = 0; ow0 < OW; ow0 += WCW) {                                                  \
        wg_vec d[T];                                                                                 \
        _Pragma("GCC unroll 3") for (int u = 0; u < T; u++)                                          \
          d[u] = *(const wg_vec *)(dy + u * plane + oh * OW + ow0);                                  \
        _Pragma("GCC unroll 9") for (int k = 0; k < 9; k++) {                                        \
          wg_vec x = *(const wg_vec *)(xp + (oh + k / 3) * Wp + ow0 + k % 3);                        \
          __asm__("" : "+v"(x));   /* one load for the T multiply-adds, not one each */             \
          _Pragma("GCC unroll 3") for (int u = 0; u < T; u++) acc[u][k] += d[u] * x;                 \
        }                                                                                            \
      }                                                                                              \
    _Pragma("GCC unroll 3") for (int u = 0; u < T; u++)                                              \
    _Pragma("GCC unroll 9") for (int k = 0; k < 9; k++) vp[u * vstride + k] += acc[u][k];            \
  }
DEF_WG33(1)
DEF_WG33(2)
DEF_WG33(3)

/* AVX-512, 3x3, rows of whole vectors, at most WMAX_O outputs and 3 inputs
 * (the partials' size; stride 1 etc. as nn_conv_direct_wgrad_ok checks) */
static bool wgrad33_ok(const ln_conv2d_args *a) {
#if defined(__x86_64__) && !defined(__clang__) && !defined(LN_NO_CLONES)
  return a->KH == 3 && a->KW == 3 && a->OW % WCW == 0 && a->O <= WMAX_O && a->C <= 3 &&
         __builtin_cpu_supports("avx512f");
#else
  (void)a;
  return false;
#endif
}

DIRECT_SIMD static float plane_sum(const float *restrict d, int64_t n) {
  float acc[WCW] = {0};
  int64_t i = 0;
  for (; i + WCW <= n; i += WCW)
    _Pragma("omp simd") for (int j = 0; j < WCW; j++) acc[j] += d[i + j];
  float t = 0.0f;
  for (; i < n; i++) t += d[i];
  for (int j = 0; j < WCW; j++) t += acc[j];
  return t;
}

/* dw (and db when a->db) = the per-thread partials, rows of `stride` floats
 * (dw's WN, then db's O), summed in thread order (deterministic) */
static void sum_partials(const ln_conv2d_args *a, const float *part, int64_t stride, int nt, int64_t WN) {
  float *dw = (float *)a->dw, *db = (float *)a->db;
  for (int64_t i = 0; i < WN; i++) {
    float s = part[i];
    for (int t = 1; t < nt; t++) s += part[t * stride + i];
    dw[i] = s;
  }
  if (db)
    for (int64_t o = 0; o < a->O; o++) {
      float s = part[WN + o];
      for (int t = 1; t < nt; t++) s += part[t * stride + WN + o];
      db[o] = s;
    }
}

static void wgrad33_run(const ln_conv2d_args *a, int nt) {
  const int64_t N = a->N, C = a->C, H = a->H, W = a->W, O = a->O, OH = a->OH, OW = a->OW, ph = a->p.pad_h,
                pw = a->p.pad_w, Hp = H + 2 * ph, Wp = W + 2 * pw, WN = O * C * 9, plane = OH * OW;
  if (nt > N) nt = (int)N;
  if (nt > 16) nt = 16;
  if (nt < 1) nt = 1;
  const float *in = (const float *)a->in, *dout = (const float *)a->dout;
  enum { STRIDE = WMAX_O * 3 * 9 + WMAX_O };
  float part[16][STRIDE];   /* per thread: dw's WN floats, then db's O */
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    int t = omp_get_thread_num(), T = omp_get_num_threads();
    wg_vec vp[WMAX_O * 3 * 9];
    memset(vp, 0, (size_t)WN * sizeof(wg_vec));
    float *db = part[t] + WN;
    memset(db, 0, (size_t)O * sizeof(float));
    float *xp = (float *)a->scratch + (int64_t)t * a->slice;
    memset(xp, 0, (size_t)(C * Hp * Wp + WCW) * sizeof(float));
    for (int64_t n = N * t / T; n < N * (t + 1) / T; n++) {
      for (int64_t c = 0; c < C; c++)
        for (int64_t h = 0; h < H; h++)
          memcpy(xp + (c * Hp + h + ph) * Wp + pw, in + ((n * C + c) * H + h) * W, (size_t)W * sizeof(float));
      for (int64_t o = 0; o < O; o += WT) {
        const float *d = dout + (n * O + o) * plane;
        for (int64_t c = 0; c < C; c++) {
          wg_vec *v = vp + (o * C + c) * 9;
          int64_t left = O - o;
          if (left >= 3) wg33_3(xp + c * Hp * Wp, Wp, d, plane, OW, OH, v, C * 9);
          else if (left == 2) wg33_2(xp + c * Hp * Wp, Wp, d, plane, OW, OH, v, C * 9);
          else wg33_1(xp + c * Hp * Wp, Wp, d, plane, OW, OH, v, C * 9);
        }
        if (a->db)
          for (int64_t u = o; u < LN_MIN(O, o + WT); u++) db[u] += plane_sum(dout + (n * O + u) * plane, plane);
      }
    }
    for (int64_t i = 0; i < WN; i++) {
      float s = 0.0f;
      for (int j = 0; j < WCW; j++) s += vp[i][j];
      part[t][i] = s;
    }
  }
  sum_partials(a, part[0], STRIDE, nt, WN);
}

/* dw (O, C, KH, KW) and db (O) (when a->db) of in (N, C, H, W), dout (N, O, OH, OW).
 * Images are split over the threads in order; each thread sums its images into
 * its own partial (images in order), and the partials are added in thread order. */
void nn_conv_direct_wgrad(const ln_conv2d_args *a, int nt) {
  const int64_t N = a->N, C = a->C, H = a->H, W = a->W, O = a->O, KH = a->KH, KW = a->KW, OH = a->OH,
                OW = a->OW, ph = a->p.pad_h, pw = a->p.pad_w;
  const int64_t Hp = H + 2 * ph, Wp = W + 2 * pw, OWr = (OW + WCW - 1) / WCW * WCW, WN = O * C * KH * KW;
  if (wgrad33_ok(a)) { wgrad33_run(a, nt); return; }
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
  sum_partials(a, part[0], WMAX_O * 2 * WMAX_K * WMAX_K + WMAX_O, nt, WN);
}

/* ---- weight (and bias) gradient for 16 output channels ------------------------------ */

/* LeNet's 6->16 5x5 (10x10 outputs: a 16-lane row vector would be 10/16 full,
 * and oneDNN's kernel for it runs at ~40 GFLOP/s here): vectors over the 16
 * output channels instead. Per image, grad_output is transposed to
 * (OH*OW, 16) in scratch; then per input channel c the KH x KW accumulators
 * (16 lanes = the output channels) stay in registers while every output
 * position adds its grad_output vector times the broadcast input value
 * under each kernel tap. No lane is idle and nothing is padded but the
 * input's own zero padding. Images are split over the threads in order, the
 * per-thread partials added in thread order (deterministic). */
enum { VO = 16 };

bool nn_conv_direct_wgrad16_ok(const ln_conv2d_args *a) {
  const ln_conv2d_params *p = &a->p;
  if (a->dtype != LN_FLOAT32 || p->groups != 1 || p->stride_h != 1 || p->stride_w != 1 || p->dil_h != 1 ||
      p->dil_w != 1 || !a->scratch || !a->dw)
    return false;
  if (a->O != VO || a->C < 3 || a->C > 16 || !((a->KH == 5 && a->KW == 5) || (a->KH == 3 && a->KW == 3)) ||
      a->OW > 16 || a->N < 2)
    return false;
  int64_t Hp = a->H + 2 * (int64_t)p->pad_h, Wp = a->W + 2 * (int64_t)p->pad_w;
  return a->slice >= a->C * Hp * Wp + a->OH * a->OW * VO;
}

/* acc (C, KH*KW, VO) += the image's share; returns nothing: the bias sum is
 * taken once per image by the caller. xp (C, Hp, Wp), dyt (OH*OW, VO). */
#define DEF_WGRAD16(KH, KW)                                                                 \
  DIRECT_SIMD static void wgrad16_##KH##x##KW(const float *restrict xp, int64_t C, int64_t Hp, \
                                              int64_t Wp, const float *restrict dyt, int64_t OH, \
                                              int64_t OW, float *restrict acc) {            \
    for (int64_t c = 0; c < C; c++) {                                                        \
      float r[KH * KW][VO];                                                                  \
      float *ac = acc + c * KH * KW * VO;                                                    \
      _Pragma("GCC unroll 25") for (int k = 0; k < KH * KW; k++)                             \
      _Pragma("omp simd") for (int j = 0; j < VO; j++) r[k][j] = ac[k * VO + j];             \
      const float *x = xp + c * Hp * Wp;                                                     \
      for (int64_t oh = 0; oh < OH; oh++)                                                    \
        for (int64_t ow = 0; ow < OW; ow++) {                                                \
          const float *d = dyt + (oh * OW + ow) * VO, *xr = x + oh * Wp + ow;                \
          _Pragma("GCC unroll 8") for (int kh = 0; kh < KH; kh++)                            \
          _Pragma("GCC unroll 8") for (int kw = 0; kw < KW; kw++) {                          \
            float xv = xr[kh * Wp + kw];                                                     \
            _Pragma("omp simd") for (int j = 0; j < VO; j++) r[kh * KW + kw][j] += xv * d[j]; \
          }                                                                                  \
        }                                                                                    \
      _Pragma("GCC unroll 25") for (int k = 0; k < KH * KW; k++)                             \
      _Pragma("omp simd") for (int j = 0; j < VO; j++) ac[k * VO + j] = r[k][j];             \
    }                                                                                        \
  }
DEF_WGRAD16(5, 5)
DEF_WGRAD16(3, 3)

/* dy (VO, P) -> dyt (P, VO); acb (VO) += the sums over P */
DIRECT_SIMD static void transpose16(const float *restrict dy, int64_t P, float *restrict dyt, float *restrict acb) {
  for (int64_t p = 0; p < P; p++) {
    float v[VO];
    for (int j = 0; j < VO; j++) v[j] = dy[j * P + p];
#pragma omp simd
    for (int j = 0; j < VO; j++) { dyt[p * VO + j] = v[j]; acb[j] += v[j]; }
  }
}

void nn_conv_direct_wgrad16(const ln_conv2d_args *a, int nt) {
  const int64_t N = a->N, C = a->C, H = a->H, W = a->W, KH = a->KH, KW = a->KW, OH = a->OH, OW = a->OW,
                ph = a->p.pad_h, pw = a->p.pad_w, KK = KH * KW;
  const int64_t Hp = H + 2 * ph, Wp = W + 2 * pw, WN = C * KK * VO;
  if (nt > N) nt = (int)N;
  if (nt > 16) nt = 16;   /* the partials live on this stack */
  if (nt < 1) nt = 1;
  float part[nt][16 * 25 * VO + VO] __attribute__((aligned(64)));
  const float *in = (const float *)a->in, *dout = (const float *)a->dout;
  const bool padded = ph || pw;
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    int t = omp_get_thread_num(), T = omp_get_num_threads();
    float *acc = part[t], *acb = part[t] + WN;
    memset(acc, 0, (size_t)(WN + VO) * sizeof(float));
    float *xp = (float *)a->scratch + (int64_t)t * a->slice, *dyt = xp + C * Hp * Wp;
    if (padded) memset(xp, 0, (size_t)(C * Hp * Wp) * sizeof(float));
    int64_t n0 = N * t / T, n1 = N * (t + 1) / T;
    for (int64_t n = n0; n < n1; n++) {
      const float *x = in + n * C * H * W;
      if (padded) {
        for (int64_t c = 0; c < C; c++)
          for (int64_t h = 0; h < H; h++)
            memcpy(xp + (c * Hp + h + ph) * Wp + pw, x + (c * H + h) * W, (size_t)W * sizeof(float));
        x = xp;
      }
      transpose16(dout + n * VO * OH * OW, OH * OW, dyt, acb);
      if (KH == 5) wgrad16_5x5(x, C, Hp, Wp, dyt, OH, OW, acc);
      else wgrad16_3x3(x, C, Hp, Wp, dyt, OH, OW, acc);
    }
  }
  /* dw[o][c][k] = sum over threads of acc[c][k][o], in thread order */
  float *dw = (float *)a->dw, *db = (float *)a->db;
  for (int64_t c = 0; c < C; c++)
    for (int64_t k = 0; k < KK; k++)
      for (int64_t o = 0; o < VO; o++) {
        int64_t i = (c * KK + k) * VO + o;
        float s = part[0][i];
        for (int t = 1; t < nt; t++) s += part[t][i];
        dw[(o * C + c) * KK + k] = s;
      }
  if (db)
    for (int64_t o = 0; o < VO; o++) {
      float s = part[0][WN + o];
      for (int t = 1; t < nt; t++) s += part[t][WN + o];
      db[o] = s;
    }
}

/* ---- depthwise weight (and bias) gradient ------------------------------------------- */

/* Depthwise (groups = C = O) kernels over 3x3 (ConvNeXt's 7x7,
 * EfficientNet's and MNASNet's 5x5), stride 1 or 2: oneDNN has no depthwise
 * JIT weight gradient for them and runs its gemm one, slower than im2col +
 * GEMM here (bench/RESULTS.md). Each channel is a one-input, one-output
 * convolution. Stride s is s x s stride-1 ones: phase (a, b) of the padded
 * input, q[i][j] = xp[i*s + a][j*s + b], meets the taps kh = a + s*i',
 * kw = b + s*j' of the output grid at q[oh + i'][ow + j']. Per image and
 * phase, q is copied (zero padding included) and wgrad_image adds that
 * sub-kernel's gradient (vector accumulators over the output columns). The
 * threads split the channels, each summing its channels' images in order
 * (deterministic, no partials). */
static int64_t dw_ceil(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* one phase plane's rows and columns (the largest, phase 0) */
static void dw_phase_dims(const ln_conv2d_args *a, int64_t *Hq, int64_t *Wq) {
  *Hq = a->OH + dw_ceil(a->KH, a->p.stride_h) - 1;
  *Wq = a->OW + dw_ceil(a->KW, a->p.stride_w) - 1;
}

bool nn_conv_direct_dw_wgrad_ok(const ln_conv2d_args *a) {
  const ln_conv2d_params *p = &a->p;
  if (a->dtype != LN_FLOAT32 || p->groups < 2 || p->groups != a->C || a->O != a->C || p->stride_h > 2 ||
      p->stride_w > 2 || p->dil_h != 1 || p->dil_w != 1 || !a->scratch || !a->dw)
    return false;
  if (a->KH * a->KW <= 9 || a->KH > WMAX_K || a->KW > WMAX_K || a->OW < 8)
    return false;
  int64_t Hq, Wq;
  dw_phase_dims(a, &Hq, &Wq);
  int64_t OWr = (a->OW + WCW - 1) / WCW * WCW;
  return a->slice >= Hq * Wq + WCW + a->OH * OWr + WMAX_K * WMAX_K;
}

/* q (Hq, Wq) = phase (ra, ca) of plane x (H, W) under padding (ph, pw) and stride (sh, sw) */
DIRECT_SIMD static void dw_phase(const float *restrict x, int64_t H, int64_t W, int64_t ph, int64_t pw, int64_t sh,
                                 int64_t sw, int64_t ra, int64_t ca, float *restrict q, int64_t Hq, int64_t Wq) {
  int64_t lo, hi;   /* the columns j with 0 <= j*sw + ca - pw < W */
  nn_valid_range(ca - pw, sw, W, Wq, &lo, &hi);
  for (int64_t i = 0; i < Hq; i++) {
    float *r = q + i * Wq;
    int64_t h = i * sh + ra - ph;
    if (h < 0 || h >= H || lo >= hi) { memset(r, 0, (size_t)Wq * sizeof(float)); continue; }
    const float *src = x + h * W + ca - pw;
    for (int64_t j = 0; j < lo; j++) r[j] = 0.0f;
    if (sw == 1) memcpy(r + lo, src + lo, (size_t)(hi - lo) * sizeof(float));
    else for (int64_t j = lo; j < hi; j++) r[j] = src[j * sw];
    for (int64_t j = hi; j < Wq; j++) r[j] = 0.0f;
  }
}

void nn_conv_direct_dw_wgrad(const ln_conv2d_args *a, int nt) {
  const int64_t N = a->N, C = a->C, H = a->H, W = a->W, KH = a->KH, KW = a->KW, OH = a->OH, OW = a->OW,
                ph = a->p.pad_h, pw = a->p.pad_w, sh = a->p.stride_h, sw = a->p.stride_w;
  int64_t Hq, Wq;
  dw_phase_dims(a, &Hq, &Wq);
  const int64_t OWr = (OW + WCW - 1) / WCW * WCW;
  const float *in = (const float *)a->in, *dout = (const float *)a->dout;
  float *dwt = (float *)a->dw, *db = (float *)a->db;
  if (nt > C) nt = (int)C;
  if (nt < 1) nt = 1;
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    float *q = (float *)a->scratch + (int64_t)omp_get_thread_num() * a->slice, *dyp = q + Hq * Wq + WCW;
    float *sub = dyp + OH * OWr;   /* one phase's sub-kernel gradient */
    memset(q, 0, (size_t)(Hq * Wq + WCW + OH * OWr) * sizeof(float));   /* the slack and dyp's tails */
#pragma omp for schedule(static)
    for (int64_t c = 0; c < C; c++) {
      float *dw = dwt + c * KH * KW, s = 0.0f;
      memset(dw, 0, (size_t)(KH * KW) * sizeof(float));
      for (int64_t n = 0; n < N; n++) {
        const float *x = in + (n * C + c) * H * W;
        copy_dy(dout + (n * C + c) * OH * OW, dyp, OH, OW, OWr);
        for (int64_t ra = 0; ra < sh && ra < KH; ra++)
          for (int64_t ca = 0; ca < sw && ca < KW; ca++) {
            const int64_t kh = dw_ceil(KH - ra, sh), kw = dw_ceil(KW - ca, sw);
            dw_phase(x, H, W, ph, pw, sh, sw, ra, ca, q, Hq, Wq);
            if (sh == 1 && sw == 1) {   /* the whole kernel: straight into dw */
              s += wgrad_image(q, Wq, dyp, OWr, OH, KH, KW, dw);
              continue;
            }
            memset(sub, 0, (size_t)(kh * kw) * sizeof(float));
            float t = wgrad_image(q, Wq, dyp, OWr, OH, kh, kw, sub);
            if (ra == 0 && ca == 0) s += t;
            for (int64_t i = 0; i < kh; i++)
              for (int64_t j = 0; j < kw; j++) dw[(ra + i * sh) * KW + ca + j * sw] += sub[i * kw + j];
          }
      }
      if (db) db[c] = s;
    }
  }
}
