/* activation.c -- activation backward kernels: relu_backward (from the
 * forward's output). The CPU kernel (front end: c/nn/activation.c). */
#include "nn_kernels.h"
#include <omp.h>

#define DEF_RELU_BWD(T, SFX)                                                                 \
  static void relu_bwd_##SFX(const ln_relu_bwd_args *a, int nt) {                           \
    const T *dy = (const T *)a->dout, *y = (const T *)a->out;                                \
    T *dx = (T *)a->din;                                                                     \
    _Pragma("omp parallel for simd num_threads(nt) schedule(static) if (parallel: nt > 1)")  \
    for (int64_t i = 0; i < a->n; i++) { T g = dy[i]; dx[i] = y[i] > 0 ? g : (T)0; }        \
  }

DEF_RELU_BWD(float, f32)
DEF_RELU_BWD(double, f64)

int ln_cpu_relu_bwd(void *args) {
  const ln_relu_bwd_args *a = args;
  int nt = a->n < 65536 ? 1 : ln_kernel_threads();
  if (a->dtype == LN_FLOAT64) relu_bwd_f64(a, nt); else relu_bwd_f32(a, nt);
  return 0;
}
