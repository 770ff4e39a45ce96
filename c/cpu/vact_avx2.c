/* vact_avx2.c -- vact_body.h for AVX2+FMA (compiled with -mavx2 -mfma: Makefile) */
#if defined(__x86_64__)
#define VNAME ln_vact_f32_avx2
#define VF __m256
#define VW 8
#define VEXP Sleef_expf8_u10avx2
#define VTANH Sleef_tanhf8_u10avx2
#define VERF Sleef_erff8_u10avx2
#define VLOG1P Sleef_log1pf8_u10avx2
#define VEXPM1 Sleef_expm1f8_u10avx2
#include <immintrin.h>
#include "vact_body.h"
#endif
