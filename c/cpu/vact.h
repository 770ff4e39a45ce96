/* vact.h -- float32 activations on contiguous memory, vectorised with SLEEF
 * (its u10 functions: within 1 ulp), as PyTorch's CPU kernels are. One body
 * (vact_body.h) is compiled for AVX-512, AVX2+FMA and SSE (vact_*.c); vact.c
 * picks one at run time. The formulas are PyTorch 1.13's. */
#ifndef LN_VACT_H
#define LN_VACT_H
#include <stdint.h>

/* y = f(x) for the unary ops LN_EXP, LN_SIGMOID, LN_TANH, LN_ERF, LN_LOG1P, LN_EXPM1, LN_SILU,
 * LN_GELU, LN_GELU_TANH, LN_MISH, LN_HARDSWISH .. LN_SOFTPLUS; for the backward ops
 * LN_SILU_BWD .. LN_SIGMOID_BWD (binary: a = x, or the output for tanh and sigmoid,
 * b = grad_output; g not NULL) y = g f'(x). q: the op's parameters (lunet.h).
 * Returns 0 when the op has no vector kernel here (the caller then runs its
 * scalar loop). */
int ln_vact_f32(int op, float *y, const float *x, const float *g, int64_t n, const double *q);

typedef int (*ln_vact_fn)(int op, float *y, const float *x, const float *g, int64_t n, const double *q);
int ln_vact_f32_avx512(int op, float *y, const float *x, const float *g, int64_t n, const double *q);
int ln_vact_f32_avx2(int op, float *y, const float *x, const float *g, int64_t n, const double *q);
int ln_vact_f32_sse(int op, float *y, const float *x, const float *g, int64_t n, const double *q);

/* PyTorch's constants (ATen's GeluKernel.cpp) */
#define LN_GELU_KALPHA 0.70710678118654752440    /* M_SQRT1_2 */
#define LN_GELU_KPDF 0.39894228040143267794      /* M_2_SQRTPI * M_SQRT1_2 * 0.5 */
#define LN_GELU_KBETA 0.79788456080286535588     /* M_SQRT2 * M_2_SQRTPI * 0.5 */
#define LN_GELU_KKAPPA 0.044715

#endif
