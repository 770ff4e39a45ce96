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
 * and flipped (direct_run's flip). */
#include "nn.h"
#include <omp.h>

enum { OB = 16, CW = 16 };

#if defined(__x86_64__) && !defined(__clang__) && !defined(LN_NO_CLONES)
#define DIRECT_SIMD __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define DIRECT_SIMD
#endif

/* elements of the padded copy of one image (+ CW slack for the last chunk) */
static int64_t padded_elems(const ln_conv2d_args *a) {
  return a->C * (a->H + 2 * (int64_t)a->p.pad_h) * (a->W + 2 * (int64_t)a->p.pad_w) + CW;
}

bool nn_conv_direct_ok(const ln_conv2d_args *a) {
  const ln_conv2d_params *p = &a->p;
  if (a->dtype != LN_FLOAT32 || p->groups != 1 || p->stride_h != 1 || p->stride_w != 1 || p->dil_h != 1 ||
      p->dil_w != 1)
    return false;
  /* where it beat im2col + GEMM here (bench: 16->16 at 32x32 and 32->32 at
   * 16x16, 3x3: 1.4x; 6->16 at 14x14, 5x5: 1.4x); few input or output channels,
   * narrow rows (CW lanes half empty) and single images stay on GEMM */
  if (a->C < 4 || a->O < 12 || a->OW < 10 || a->N < 2) return false;
  if (a->KH * a->KW < 9 || a->O > 64 || a->C > 64 || !a->scratch ||
      a->slice < padded_elems(a) + a->C * a->KH * a->KW * OB)
    return false;
  return true;
}

/* out rows [o0, o0+ob) of one image from its padded copy xp (C, Hp, Wp) and
 * the block's packed weights wp (C, KH, KW, OB), zero for o >= ob */
DIRECT_SIMD static void direct_block(const float *restrict xp, const float *restrict wp, const float *b,
                                     float *restrict out, int64_t o0, int64_t ob, int64_t C, int64_t Hp,
                                     int64_t Wp, int64_t KH, int64_t KW, int64_t OH, int64_t OW) {
  for (int64_t oh = 0; oh < OH; oh++)
    for (int64_t ow0 = 0; ow0 < OW; ow0 += CW) {
      float acc[OB][CW];
      for (int64_t o = 0; o < OB; o++) {
        float init = (b && o < ob) ? b[o0 + o] : 0.0f;
        for (int64_t j = 0; j < CW; j++) acc[o][j] = init;
      }
      const float *wk = wp;
      for (int64_t c = 0; c < C; c++)
        for (int64_t kh = 0; kh < KH; kh++) {
          const float *row = xp + (c * Hp + oh + kh) * Wp + ow0;
          for (int64_t kw = 0; kw < KW; kw++, wk += OB) {
            const float *s = row + kw;
            for (int64_t o = 0; o < OB; o++) {
              float wv = wk[o];
#pragma omp simd
              for (int64_t j = 0; j < CW; j++) acc[o][j] += wv * s[j];
            }
          }
        }
      int64_t n = OW - ow0 < CW ? OW - ow0 : CW;
      for (int64_t o = 0; o < ob; o++) {
        float *dst = out + ((o0 + o) * OH + oh) * OW + ow0;
        for (int64_t j = 0; j < n; j++) dst[j] = acc[o][j];
      }
    }
}

/* One direct convolution, stride 1: in (N, C, H, W) -> out (N, O, OH, OW),
 * padding (ph, pw), kernel KH x KW. w is (O, C, KH, KW); with `flip` it is
 * the forward's weight (C, O, KH, KW) used transposed and flipped, which makes
 * this the data gradient of a stride-1 convolution (in = its grad_output,
 * out = its grad_input, padding KH-1-pad). */
static void direct_run(const float *in, int64_t N, int64_t C, int64_t H, int64_t W, const float *w,
                       bool flip, const float *b, float *out, int64_t O, int64_t KH, int64_t KW,
                       int64_t ph, int64_t pw, int64_t OH, int64_t OW, char *scratch, int64_t slice,
                       int nt) {
  const int64_t Hp = H + 2 * ph, Wp = W + 2 * pw, KK = KH * KW;
  const int64_t nblk = (O + OB - 1) / OB, items = N * nblk;
  if (nt > items) nt = (int)items;
  if (nt < 1) nt = 1;
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    float *xp = (float *)scratch + (int64_t)omp_get_thread_num() * slice;
    float *wp = xp + C * Hp * Wp + CW;   /* this block's packed weights */
    int64_t have = -1;   /* the image now in xp */
#pragma omp for schedule(static)
    for (int64_t it = 0; it < items; it++) {
      int64_t n = it / nblk, o0 = (it % nblk) * OB;
      if (n != have) {
        const float *img = in + n * C * H * W;
        memset(xp, 0, (size_t)(C * Hp * Wp + CW) * sizeof(float));
        for (int64_t c = 0; c < C; c++)
          for (int64_t h = 0; h < H; h++)
            memcpy(xp + (c * Hp + h + ph) * Wp + pw, img + (c * H + h) * W, (size_t)W * sizeof(float));
        have = n;
      }
      int64_t ob = LN_MIN((int64_t)OB, O - o0);
      if (!flip) {
        for (int64_t k = 0; k < C * KK; k++)
          for (int64_t o = 0; o < OB; o++) wp[k * OB + o] = o < ob ? w[(o0 + o) * C * KK + k] : 0.0f;
      } else {
        for (int64_t c = 0; c < C; c++)
          for (int64_t k = 0; k < KK; k++)
            for (int64_t o = 0; o < OB; o++)
              wp[(c * KK + k) * OB + o] = o < ob ? w[(c * O + o0 + o) * KK + (KK - 1 - k)] : 0.0f;
      }
      direct_block(xp, wp, b, out + n * O * OH * OW, o0, ob, C, Hp, Wp, KH, KW, OH, OW);
    }
  }
}

int nn_conv_direct_fwd(const ln_conv2d_args *a) {
  direct_run((const float *)a->in, a->N, a->C, a->H, a->W, (const float *)a->w, false, (const float *)a->b,
             (float *)a->out, a->O, a->KH, a->KW, a->p.pad_h, a->p.pad_w, a->OH, a->OW, a->scratch, a->slice,
             LN_MIN(a->nthreads, ln_kernel_threads()));
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
  return a->slice >= a->O * (a->OH + 2 * php) * (a->OW + 2 * pwp) + CW + a->O * a->KH * a->KW * OB;
}

void nn_conv_direct_bwd_data(const ln_conv2d_args *a, int nt) {
  direct_run((const float *)a->dout, a->N, a->O, a->OH, a->OW, (const float *)a->w, true, NULL,
             (float *)a->din, a->C, a->KH, a->KW, a->KH - 1 - a->p.pad_h, a->KW - 1 - a->p.pad_w, a->H, a->W,
             a->scratch, a->slice, nt);
}
