/* backend.c -- the CPU backend: its runtime (runtime.c) and kernel table,
 * registered with core when the library loads. */
#include "cpu.h"
#include "nn_kernels.h"
#include <stdio.h>

int ln_cpu_reduce(void *args);        /* reduce.c */
int ln_cpu_index_select(void *args);  /* index.c */
int ln_cpu_gather(void *args);
int ln_cpu_scatter_add(void *args);
int ln_cpu_scatter_reduce(void *args);
int ln_cpu_sort(void *args);          /* sort.c */
int ln_cpu_scan(void *args);          /* scan.c */

const ln_backend ln_cpu_backend = {
  .name = "cpu",
  .type = LN_TYPE_CPU,
  .rt = {
    .device_count = ln_cpu_device_count,
    .alloc = ln_cpu_alloc,
    .free = ln_cpu_free,
    .stream = ln_cpu_stream,
    .parallel_for = ln_parallel_for,
    /* host memory: no pinned memory, no copy entries; launch, events and
     * synchronize are core's over the host streams */
  },
  .nn = &ln_cpu_nn_planner,
  .binary = ln_cpu_binary,
  .unary = ln_cpu_unary,
  .copy = ln_cpu_copy,
  .where = ln_cpu_where,
  .fill = ln_cpu_fill,
  .arange = ln_cpu_arange,
  .random = ln_cpu_random,
  .gemm = ln_cpu_gemm,
  .reduce = ln_cpu_reduce,
  .index_select = ln_cpu_index_select,
  .gather = ln_cpu_gather,
  .scatter_add = ln_cpu_scatter_add,
  .scatter_reduce = ln_cpu_scatter_reduce,
  .sort = ln_cpu_sort,
  .scan = ln_cpu_scan,
  .sgd_step = ln_cpu_sgd_step,
  .adam_step = ln_cpu_adam_step,
  .rmsprop_step = ln_cpu_rmsprop_step,
  .adagrad_step = ln_cpu_adagrad_step,
  .adamax_step = ln_cpu_adamax_step,
  .nadam_step = ln_cpu_nadam_step,
  .radam_step = ln_cpu_radam_step,
  .adadelta_step = ln_cpu_adadelta_step,
  .norm_pow_sum = ln_cpu_norm_pow_sum,
  .conv2d_fwd = ln_cpu_conv2d_fwd,
  .conv2d_bwd = ln_cpu_conv2d_bwd,
  .maxpool2d_fwd = ln_cpu_maxpool2d_fwd,
  .maxpool2d_bwd = ln_cpu_maxpool2d_bwd,
  .avgpool2d_fwd = ln_cpu_avgpool2d_fwd,
  .avgpool2d_bwd = ln_cpu_avgpool2d_bwd,
  .adaptive_avgpool2d_fwd = ln_cpu_adaptive_avgpool2d_fwd,
  .adaptive_avgpool2d_bwd = ln_cpu_adaptive_avgpool2d_bwd,
  .interp_fwd = ln_cpu_interp_fwd,
  .interp_bwd = ln_cpu_interp_bwd,
  .batchnorm_fwd = ln_cpu_batchnorm_fwd,
  .batchnorm_bwd = ln_cpu_batchnorm_bwd,
  .softmax_fwd = ln_cpu_softmax_fwd,
  .softmax_bwd = ln_cpu_softmax_bwd,
  .nll_loss_fwd = ln_cpu_nll_loss_fwd,
  .nll_loss_bwd = ln_cpu_nll_loss_bwd,
  .relu_bwd = ln_cpu_relu_bwd,
  .grid_sample_fwd = ln_cpu_grid_sample_fwd,
  .grid_sample_bwd = ln_cpu_grid_sample_bwd,
};

__attribute__((constructor)) static void register_cpu(void) {
  if (ln_backend_register(&ln_cpu_backend) != 0) fprintf(stderr, "lunet: %s\n", ln_last_error());
}

const char *ln_cpu_features(void) {
  static char buf[64];
  if (buf[0]) return buf;
  __builtin_cpu_init();
  snprintf(buf, sizeof buf, "%s%s%s%s", __builtin_cpu_supports("sse4.2") ? "sse4.2 " : "",
           __builtin_cpu_supports("avx2") ? "avx2 " : "", __builtin_cpu_supports("fma") ? "fma " : "",
           __builtin_cpu_supports("avx512f") ? "avx512f" : "");
  return buf;
}
