/* parallel.c -- ln_parallel_for over the current kernel's share of cores. */
#include "cpu.h"
#include <omp.h>

void ln_parallel_for(int64_t n, int64_t grain, ln_range_fn fn, void *ctx) {
  if (n <= 0) return;
  int nt = ln_kernel_threads();
  if (grain < 1) grain = 1;
  int64_t chunks = (n + grain - 1) / grain;
  if (nt <= 1 || chunks <= 1) { fn(ctx, 0, n); return; }
  if (chunks < nt) nt = (int)chunks;
#pragma omp parallel num_threads(nt)
  {
    int t = omp_get_thread_num(), T = omp_get_num_threads();
    int64_t b = n * t / T, e = n * (t + 1) / T;
    if (b < e) fn(ctx, b, e);
  }
}
