/* cpu.h -- the CPU backend: kernels (each takes its argument block,
 * core/backend.h) and its runtime's entries. */
#ifndef LN_CPU_H
#define LN_CPU_H
#include "../core/backend.h"

int ln_cpu_binary(void *args);
int ln_cpu_unary(void *args);
int ln_cpu_copy(void *args);
int ln_cpu_where(void *args);
int ln_cpu_fill(void *args);
int ln_cpu_arange(void *args);
int ln_cpu_random(void *args);
int ln_cpu_gemm(void *args);
int ln_cpu_sgd_step(void *args);      /* optim.c */
int ln_cpu_adam_step(void *args);
int ln_cpu_rmsprop_step(void *args);
int ln_cpu_adagrad_step(void *args);
int ln_cpu_adamax_step(void *args);
int ln_cpu_nadam_step(void *args);
int ln_cpu_radam_step(void *args);
int ln_cpu_adadelta_step(void *args);
int ln_cpu_norm_pow_sum(void *args);

extern const ln_backend ln_cpu_backend;

/* the runtime (runtime.c) */
struct ln_stream;
void *ln_cpu_alloc(int index, size_t nbytes);
void ln_cpu_free(int index, void *p, size_t nbytes);
struct ln_stream *ln_cpu_stream(int index, int which, bool start);

/* Threads the current kernel may use (the device's share of the cores; the
 * runtime sets it per task). */
int ln_kernel_threads(void);
/* Split [0, n) into chunks of at least `grain` and run fn(ctx, begin, end) on
 * the current kernel's threads (parallel.c; other layers reach it as
 * ln_host_parallel_for, through the runtime's parallel_for). */
void ln_parallel_for(int64_t n, int64_t grain, ln_range_fn fn, void *ctx);

/* precision.c: float32 products in bfloat16 now ("medium" on AVX512_BF16) */
bool ln_cpu_bf16_math(void);
/* gemm_bf16.c: a float32 product with bfloat16 inputs on oneDNN; 0, or -1
 * (the caller runs sgemm) */
int ln_cpu_gemm_bf16(const ln_gemm_args *g, int nt);

#endif
