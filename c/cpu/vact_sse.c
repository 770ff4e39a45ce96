/* vact_sse.c -- vact_body.h for SSE (baseline x86-64; SLEEF's 4-wide
 * dispatcher picks its SSE4.1 or SSE2 code) */
#if defined(__x86_64__)
#define VNAME ln_vact_f32_sse
#define VF __m128
#define VW 4
#define VEXP Sleef_expf4_u10
#define VTANH Sleef_tanhf4_u10
#define VERF Sleef_erff4_u10
#define VLOG1P Sleef_log1pf4_u10
#define VEXPM1 Sleef_expm1f4_u10
#include <immintrin.h>
#include "vact_body.h"
#endif
