/* precision.c -- float32 matmul precision (torch.set_float32_matmul_precision):
 * "highest" (the default) computes float32 products in float32; "medium"
 * lets float32 convolutions on oneDNN (conv_dnnl.c) and matrix products
 * (gemm.c -> gemm_bf16.c) round their inputs to bfloat16 and accumulate in
 * float32, where the CPU has native bfloat16 dot products (AVX512_BF16;
 * elsewhere, as torch, medium computes as highest); "high" is highest, as on
 * torch's CPU backend (no TF32 on CPUs). Float64 is never affected.
 *
 * One process-wide setting, read by every kernel thread (device workers
 * included) when a kernel runs: an atomic, set after the queued work has run
 * so that kernels queued before the call keep the precision they were
 * queued under. */
#include "cpu.h"
#include "../core/internal.h"
#include <dnnl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

enum { P_HIGHEST, P_HIGH, P_MEDIUM };
static const char *const names[] = {"highest", "high", "medium"};
static _Atomic int precision = P_HIGHEST;

int ln_set_float32_matmul_precision(const char *p) {
  int v = -1;
  for (int i = 0; p && i < 3; i++)
    if (!strcmp(p, names[i])) v = i;
  if (v < 0)
    return ln_error("set_float32_matmul_precision: unknown precision '%s' (expected 'highest', 'high' or 'medium')",
                    p ? p : "(null)");
  if (v == atomic_load(&precision)) return 0;
  if (ln_sync_all() != 0) return -1;
  atomic_store(&precision, v);
  return 0;
}

const char *ln_float32_matmul_precision(void) { return names[atomic_load(&precision)]; }

static bool hw_bf16;
static pthread_once_t hw_once = PTHREAD_ONCE_INIT;
/* oneDNN's own ISA query: its bfloat16 kernels are native only from
 * avx512_core_bf16 on (AMX included); below, they emulate, slower than f32 */
static void hw_init(void) {
  unsigned isa = (unsigned)dnnl_get_effective_cpu_isa();
  hw_bf16 = (isa & (unsigned)dnnl_cpu_isa_avx512_core_bf16) == (unsigned)dnnl_cpu_isa_avx512_core_bf16;
}

int ln_cpu_bf16_supported(void) {
  pthread_once(&hw_once, hw_init);
  return hw_bf16;
}

bool ln_cpu_bf16_math(void) {
  return atomic_load_explicit(&precision, memory_order_relaxed) == P_MEDIUM && ln_cpu_bf16_supported();
}
