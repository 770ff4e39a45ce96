/* cpu.h -- CPU kernels: each takes its argument block (core/backend.h). */
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
int ln_cpu_norm_pow_sum(void *args);

#endif
