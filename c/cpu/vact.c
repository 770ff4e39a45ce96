/* vact.c -- ln_vact_f32: the float32 activation kernels of vact_body.h at the
 * widest vector width this CPU runs (AVX-512, AVX2+FMA, SSE), chosen once.
 * LUNET_NO_SLEEF=1 turns them off (the scalar libm loops run instead: for
 * before/after figures and for checking one against the other). */
#include "vact.h"
#include <stdlib.h>

static int scalar_only(int op, float *y, const float *x, const float *g, int64_t n, const double *q) { return 0; }

static ln_vact_fn pick(void) {
  const char *e = getenv("LUNET_NO_SLEEF");
  if (e && *e && *e != '0') return scalar_only;
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return ln_vact_f32_avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return ln_vact_f32_avx2;
  return ln_vact_f32_sse;
#else
  return scalar_only;
#endif
}

int ln_vact_f32(int op, float *y, const float *x, const float *g, int64_t n, const double *q) {
  /* (a race on first use stores the same pointer twice) */
  static ln_vact_fn fn;
  ln_vact_fn f = __atomic_load_n(&fn, __ATOMIC_RELAXED);
  if (!f) { f = pick(); __atomic_store_n(&fn, f, __ATOMIC_RELAXED); }
  return f(op, y, x, g, n, q);
}
