/* lunet_internal.h -- declarations for the specs and benches, not part of the
 * public API (lunet.h): test-support backends and their counters, fault
 * injection, the benches' reference kernels. The specs and benches load it
 * through lua/lunet/cdef_internal.lua, generated from this file as cdef.lua
 * is from lunet.h; it may change with any commit. */
#ifndef LUNET_INTERNAL_H
#define LUNET_INTERNAL_H

#ifndef LN_CDEF
#include "lunet.h"
#else
#define LN_API
#endif

/* The "rec" device type (c/cpu/rec_backend.c): n devices (1..4) rec:0..,
 * host memory, CPU kernels less conv2d and float64 binary ops; threaded: each
 * device's stream has a worker thread (else work runs inline). Registered
 * once per process (again with the same n: nothing happens). 0 ok. */
typedef struct ln_rec_stats {
  int64_t allocs, frees, alloc_bytes, free_bytes, launches;
  int64_t event_records, event_waits, event_queries, event_syncs, syncs;
  int64_t copies_to_host, copies_from_host, copies_peer;
  int64_t workspace_queries;   /* workspace_size calls (rec has no nn planner) */
} ln_rec_stats;
LN_API int ln_test_rec_register(int n, int threaded);
LN_API int ln_test_rec_stats(ln_rec_stats *out);
/* the op of the i-th launch on a rec device (0-based; "" once out of the log) */
LN_API const char *ln_test_rec_op(int64_t i);

/* Fault injection (c/core/device.c): enqueue a task that fails with message
 * on device's stream. */
LN_API int ln_stream_inject_error(int device, const char *message);
/* Enqueue a task that holds device's stream until *gate is nonzero (set by
 * the caller later; *gate must outlive the task): specs order work across
 * streams deterministically instead of by timing. */
LN_API int ln_stream_inject_gate(int device, const int *gate);
/* Enqueue a task that sleeps `seconds`, then sets *gate to 1: a gate opened
 * from another stream, for specs that check a host wait. */
LN_API int ln_stream_inject_opener(int device, int *gate, double seconds);
/* The threads of the CPU devices whose compute stream has work queued or
 * running now: past the cores, an early rank of a local collective sleeps
 * at once instead of spinning (c/comm/local.c). */
LN_API int ln_cpu_busy_threads(void);

/* oneDNN weight-gradient passes asked for in bfloat16 (float32 matmul
 * precision "medium", c/cpu/conv_dnnl.c) since the process started, by the
 * OpenMP threads they were created and run with: one, or more (which must
 * stay 0: oneDNN 2.6's bf16 weight-gradient kernel spin-waits per image when
 * its threads share one image, see conv_dnnl.c). Counters for the specs. */
typedef struct ln_dnnl_stats {
  int64_t bf16_bwd_w_1t, bf16_bwd_w_mt;
} ln_dnnl_stats;
LN_API int ln_test_dnnl_stats(ln_dnnl_stats *out);

/* The benches' reference GEMM: OpenBLAS's cblas_sgemm called directly, row
 * major, C[MxN] = A[MxK] B[KxN] (c/cpu/gemm.c). */
LN_API void ln_cblas_sgemm_direct(int64_t m, int64_t n, int64_t k, const float *a,
                                  const float *b, float *c);

#endif
