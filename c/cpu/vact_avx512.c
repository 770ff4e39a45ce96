/* vact_avx512.c -- vact_body.h for AVX-512 (compiled with -mavx512f: Makefile) */
#if defined(__x86_64__)
#define VNAME ln_vact_f32_avx512
#define VF __m512
#define VW 16
#define VEXP Sleef_expf16_u10avx512f
#define VTANH Sleef_tanhf16_u10avx512f
#define VERF Sleef_erff16_u10avx512f
#define VLOG1P Sleef_log1pf16_u10avx512f
#define VEXPM1 Sleef_expm1f16_u10avx512f
#include <immintrin.h>
#include "vact_body.h"
#endif
