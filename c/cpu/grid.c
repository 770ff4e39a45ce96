/* grid.c -- grid_sample's CPU kernels (front ends: c/nn/grid.c). Points go
 * in blocks of GB: a block's taps (offsets and weights, c/core/grid_taps.h)
 * are computed once, then every channel reads (forward) or scatters
 * (backward) with them, a pass over one input plane that stays in cache.
 * The forward splits (sample, block) among threads; the backward splits
 * (sample, channel chunk), so the input gradient's scatter never races, or
 * for nearest with fewer planes than threads, bands of each input plane. */
#include "nn_kernels.h"
#include "../core/simd.h"
#include <omp.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { GB = 128 };   /* points per block */

#define GT float
#define GS_SFX f32
#define GS_FN static inline __attribute__((always_inline))
#include "../core/grid_taps.h"
#undef GT
#undef GS_SFX
#define GT double
#define GS_SFX f64
#include "../core/grid_taps.h"
#undef GT
#undef GS_SFX
#undef GS_FN

static int taps_of(const ln_grid_args *a) {
  return a->mode == GS_NEAREST ? 1 : a->mode == GS_BICUBIC ? 16 : 1 << a->sd;
}

#define T float
#define SFX f32
#include "grid_body.h"
#undef T
#undef SFX
#define T double
#define SFX f64
#include "grid_body.h"
#undef T
#undef SFX

/* threads for `work` tap visits */
static int grid_threads(int64_t work) {
  int nt = ln_kernel_threads();
  return work < 32768 ? 1 : nt;
}

int ln_cpu_grid_sample_fwd(void *args) {
  const ln_grid_args *a = args;
  int nt = grid_threads(a->N * a->C * a->P * taps_of(a));
  if (a->dtype == LN_FLOAT64) fwd_f64(a, nt); else fwd_f32(a, nt);
  return 0;
}

int ln_cpu_grid_sample_bwd(void *args) {
  const ln_grid_args *a = args;
  int nt = grid_threads(a->N * a->C * (a->P * taps_of(a) * (a->dgrid ? 2 : 1) + (a->din ? a->PI : 0)));
  return a->dtype == LN_FLOAT64 ? bwd_f64(a, nt) : bwd_f32(a, nt);
}
