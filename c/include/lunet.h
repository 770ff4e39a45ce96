/*
 * lunet.h -- the lunet C API, and its manual.
 *
 * Example (examples/c/tiny.c; spec/header_spec.lua checks this copy is that
 * file, and builds and runs it): a convolution trained five SGD steps on
 * 0.5 * sum(conv(x)^2), every call checked.
 *   cc -Ic/include examples/c/tiny.c -Lbuild -llunet -Wl,-rpath,build -o tiny
 *
 * #include <stdio.h>
 * #include "lunet.h"
 *
 * #define CHECK(x) do { if (!(x)) { fprintf(stderr, "%s\n", ln_last_error()); return 1; } } while (0)
 *
 * // 0.5 * sum(out^2), read back to the host
 * static double loss_of(ln_tensor *out) {
 *   float v[2 * 4 * 6 * 6];
 *   if (ln_tensor_read(out, v) != 0) return -1;
 *   double s = 0;
 *   for (int i = 0; i < 2 * 4 * 6 * 6; i++) s += 0.5 * v[i] * v[i];
 *   return s;
 * }
 *
 * int main(void) {
 *   int64_t xs[4] = {2, 3, 8, 8}, ws[4] = {4, 3, 3, 3}, bs[1] = {4}, os[4] = {2, 4, 6, 6};
 *   ln_tensor *x = ln_empty(4, xs, LN_FLOAT32, 0), *w = ln_empty(4, ws, LN_FLOAT32, 0);
 *   ln_tensor *b = ln_empty(1, bs, LN_FLOAT32, 0), *out = ln_empty(4, os, LN_FLOAT32, 0);
 *   ln_tensor *dw = ln_empty(4, ws, LN_FLOAT32, 0), *db = ln_empty(1, bs, LN_FLOAT32, 0);
 *   CHECK(x && w && b && out && dw && db);
 *   ln_manual_seed(0);
 *   CHECK(ln_normal_(x, 0, 1) == 0 && ln_uniform_(w, -0.2, 0.2) == 0 && ln_fill_(b, 0.1) == 0);
 *
 *   ln_conv2d_params p = {1, 1, 0, 0, 1, 1, 1};   // stride 1, padding 0, dilation 1, groups 1
 *   ln_sgd_params sgd = {.lr = 0.01};
 *   double first = 0, last = 0;
 *   for (int step = 0; step < 5; step++) {
 *     CHECK(ln_conv2d_forward(out, x, w, b, &p) == 0);   // out (2,4,6,6)
 *     last = loss_of(out);
 *     CHECK(last >= 0);
 *     if (step == 0) first = last;
 *     // d loss / d out = out; no input gradient wanted (din NULL)
 *     CHECK(ln_conv2d_backward(NULL, dw, db, out, x, w, &p) == 0);
 *     CHECK(ln_sgd_step_(w, dw, NULL, &sgd) == 0 && ln_sgd_step_(b, db, NULL, &sgd) == 0);
 *   }
 *   printf("loss %.4f -> %.4f\n", first, last);
 *
 *   // a wrong call fails where it is made, with a message naming the problem
 *   if (ln_conv2d_forward(out, w, x, b, &p) == 0) return 1;
 *   printf("error: %s\n", ln_last_error());
 *
 *   ln_tensor *all[] = {x, w, b, out, dw, db};
 *   for (int i = 0; i < 6; i++) ln_tensor_free(all[i]);
 *   return last < first ? 0 : 1;
 * }
 *
 * This is the only declaration of the API. The LuaJIT binding's cdef text is
 * generated from it at build time (cc -E -P -DLN_CDEF), so everything below
 * LN_CDEF must stay plain C that LuaJIT's cdef parser accepts: no #define
 * constants (use enums), no static asserts, no inline functions.
 *
 * Conventions
 *  - Every name carries the ln_ prefix.
 *  - Functions that make a tensor return a new ln_tensor* (free it with
 *    ln_tensor_free) or NULL on error. Other functions return 0 on success and
 *    a negative value on error. On error a message naming the function and the
 *    problem is left in a thread-local buffer: ln_last_error().
 *  - All dims and indices in this C API are 0-based (Lua adds 1).
 *  - Argument and shape checks happen on the calling thread before any work is
 *    enqueued, so a wrong call fails where it was made.
 *
 * Devices and streams
 *  - A device id is an int: cpu:k is k, cuda:k is LN_CUDA_BASE + k.
 *  - Each device runs its work in order on one stream. With one CPU device
 *    (the default) kernels run inline on the calling thread and use all cores.
 *    With N virtual CPU devices (LUNET_CPU_DEVICES=N or ln_set_cpu_devices(N)
 *    before first use) each device has a worker thread and its share of the
 *    cores; ops return as soon as their kernel is queued.
 *  - Queued work holds references to the storages it touches until it has run.
 *  - An error inside a stream is kept on the device (first error wins, later
 *    work on that device is skipped) and returned by the next synchronisation
 *    on it (ln_sync, ln_tensor_read, ...), naming the op. Devices that fail
 *    because of it (waiting on its events, in a collective with it) share
 *    it: it is returned once, by whichever is synchronised first; the work
 *    queued before that is skipped, the work queued after runs.
 *  - Events order work across devices: ln_event_record on the producer,
 *    ln_event_wait on the consumer.
 *
 * Dtypes and promotion
 *  - float32 (default), float64, int32, int64, uint8, bool; float16 and
 *    bfloat16 exist as storage formats (casts, copies, communication).
 *  - Binary ops promote to the higher category, then the wider type:
 *    bool < uint8 < int32 < int64 < float32 < float64.
 *    A Lua number does not widen a tensor of its category: int32 + 2 is int32,
 *    float32 * 0.5 is float32; an integer tensor with a fractional number gives
 *    float32. Division of integer tensors gives float32 (true division).
 *    Comparisons give bool. Reductions keep the dtype, except that sum and
 *    prod of bool/uint8/int32 give int64 and mean/var/std need a float.
 */
#ifndef LUNET_H
#define LUNET_H

#ifndef LN_CDEF
#include <stddef.h>
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif
#define LN_API __attribute__((visibility("default")))
#else
#define LN_API
#endif

/* ------------------------------------------------------------------------ */
/* Types                                                                      */

typedef enum ln_dtype {
  LN_FLOAT32 = 0, LN_FLOAT64, LN_INT32, LN_INT64, LN_UINT8, LN_BOOL,
  LN_FLOAT16, LN_BFLOAT16, LN_NDTYPES
} ln_dtype;

enum { LN_MAX_DIMS = 8, LN_CUDA_BASE = 256, LN_MAX_CPU_DEVICES = 64 };

typedef struct ln_storage ln_storage;   /* opaque, refcounted */

/* A tensor is a strided view of a storage. Fields are read-only from Lua:
 * shape and stride in elements; offset in elements from the storage start.
 * (Lua shows dtype_id and device_id as t.dtype and t.device names.) */
typedef struct ln_tensor {
  ln_storage *storage;
  int64_t offset;
  int64_t shape[LN_MAX_DIMS];
  int64_t stride[LN_MAX_DIMS];
  int32_t ndim;
  int32_t dtype_id;       /* ln_dtype */
  int32_t device_id;
  int32_t grad_flag;      /* requires_grad, owned by the Lua autograd layer */
} ln_tensor;

/* A point in a device's stream (stream 0: its compute stream, 1: its comm
 * stream). Value type: no allocation. */
typedef struct ln_event { int32_t device; int32_t stream; int64_t seq; } ln_event;

/* ------------------------------------------------------------------------ */
/* Errors, version, library info                                              */

LN_API const char *ln_last_error(void);
LN_API void ln_clear_error(void);
LN_API const char *ln_version(void);
LN_API const char *ln_cpu_features(void);     /* e.g. "avx2 fma avx512f" */
LN_API int ln_num_cores(void);

/* ------------------------------------------------------------------------ */
/* Devices, streams, events, memory                                           */

LN_API int ln_set_cpu_devices(int n);          /* before first use; 0 ok */
LN_API int ln_cpu_device_count(void);
LN_API int ln_cuda_device_count(void);         /* 0 without a CUDA backend */
/* Why there are no cuda devices ("" when there are): the CUDA backend library
 * missing (dlopen's message), no driver (the CUDA error string), no GPU. */
LN_API const char *ln_cuda_reason(void);
LN_API int ln_device_threads(int device);
LN_API int ln_set_device_threads(int device, int nthreads);
/* Denormal floats flushed to zero (MXCSR FTZ + DAZ) in every thread that runs
 * kernels, from now on (as torch.set_flush_denormal): 1 where supported
 * (x86), else 0 and nothing changes. ln_flush_denormal: the mode now. */
LN_API int ln_set_flush_denormal(int on);
LN_API int ln_flush_denormal(void);
/* Float32 matmul precision, as torch.set_float32_matmul_precision: "highest"
 * (default), "high" (= highest on CPUs) or "medium" (float32 convolutions on
 * oneDNN and matrix products take bfloat16 inputs, float32 accumulation,
 * where the CPU has AVX512_BF16). Waits for queued work first; -1 with an
 * error for other strings. ln_cpu_bf16_supported: 1 where medium takes the
 * bfloat16 path. */
LN_API int ln_set_float32_matmul_precision(const char *precision);
LN_API const char *ln_float32_matmul_precision(void);
LN_API int ln_cpu_bf16_supported(void);
LN_API int ln_device_valid(int device);        /* 1 if the id names a device */
/* Devices by type name: the id of type:index ("cpu", 1 -> 1), or -1 with an
 * error; the type name of a device id (NULL if no backend has that type). */
LN_API int ln_device_lookup(const char *type, int index);
LN_API const char *ln_device_type_name(int device);
LN_API int ln_sync(int device);                /* wait for the stream; raise its error */
LN_API int ln_sync_all(void);
/* Every stream runs what is queued, waiting at most timeout_s (then -1);
 * stream errors are left in place. lunet calls it when its Lua state closes,
 * so that no worker runs while the process exits. */
LN_API int ln_drain(double timeout_s);
LN_API int ln_event_record(int device, ln_event *ev);
LN_API int ln_event_wait(int device, const ln_event *ev);  /* device waits on ev */
LN_API int ln_event_synchronize(const ln_event *ev);       /* host waits on ev */
LN_API int ln_event_query(const ln_event *ev);             /* 1 done, 0 pending */
/* Enqueue a task that writes the monotonic clock (seconds) to *out when the
 * stream reaches it (per-device step timing; *out must outlive the task). */
LN_API int ln_stream_timestamp(int device, double *out);
/* The device's communication stream (a second in-order stream; see
 * ln_comm_allreduce_async): the compute stream waits for the work queued so
 * far there; a timestamp taken on it. No-op / error on an inline device. */
LN_API int ln_stream_wait_comm(int device);
LN_API int ln_comm_stream_timestamp(int device, double *out);
LN_API int64_t ln_memory_allocated(int device);  /* bytes in live storages */
LN_API int64_t ln_memory_cached(int device);     /* bytes held by the cache */
LN_API int64_t ln_memory_peak(int device);
LN_API int ln_memory_reset_peak(int device);     /* peak = bytes allocated now */
/* The largest block handed out since the limit was set or the peak reset,
 * and the bytes of all blocks handed out so far (never decreasing): under a
 * limit, lunet.tensor keeps room for twice the one, and reads from the other
 * how much garbage there can be since it last looked. */
LN_API int64_t ln_memory_largest_block(int device);
LN_API int64_t ln_memory_handed_out(int device);
/* Lets the device's streams run queued work (the oldest first; their errors
 * left in place for ln_sync) until at most `target` bytes are allocated or
 * nothing is queued: queued work holds the blocks of tensors already freed.
 * Returns the bytes allocated then. (From a stream worker: waits for nothing.) */
LN_API int64_t ln_memory_settle(int device, int64_t target);
LN_API int ln_memory_set_limit(int device, int64_t bytes);  /* 0 = none */
LN_API int64_t ln_memory_limit(int device);      /* the limit set; 0 = none, -1 = bad device */
LN_API int ln_empty_cache(int device);

/* ------------------------------------------------------------------------ */
/* Tensor lifecycle and views                                                 */

LN_API ln_tensor *ln_empty(int ndim, const int64_t *shape, int dtype, int device);
LN_API ln_tensor *ln_from_buffer(const void *src, int ndim, const int64_t *shape,
                                 int dtype, int device);  /* copies src (trusted to hold the shape) */
/* ln_from_buffer from src of src_nbytes bytes: an error when the shape needs more */
LN_API ln_tensor *ln_from_buffer_n(const void *src, size_t src_nbytes, int ndim, const int64_t *shape,
                                   int dtype, int device);
LN_API void ln_tensor_free(ln_tensor *t);
LN_API ln_tensor *ln_alias(const ln_tensor *t);      /* new header, same view */
LN_API int ln_tensor_read(const ln_tensor *t, void *dst);  /* sync, copy out
                                              contiguous, in t's dtype */
LN_API int ln_tensor_sync(const ln_tensor *t);
LN_API int64_t ln_numel(const ln_tensor *t);
LN_API int ln_is_contiguous(const ln_tensor *t);
LN_API int ln_same_storage(const ln_tensor *a, const ln_tensor *b);
/* How many times the storage under t was written in place by a write the
 * Lua layer knows of (shared by every view of it). The autograd layer
 * stamps each tensor it saves for a backward with it and refuses the
 * backward when it moved: the gradient would use the new values.
 * ln_storage_bump counts a write autograd records (an in-place op while
 * recording); ln_storage_bump_unrecorded one no history records (under
 * no_grad, an optimizer step, a collective, a loader's refill), which the
 * history version leaves out: a tensor's history is stamped with that one,
 * and such a write leaves the history as it was, as in PyTorch.
 * (Doubles, exact to 2^53 writes: LuaJIT boxes a 64-bit integer in an
 * allocation each call, and autograd reads these for every op it records.) */
LN_API double ln_storage_version(const ln_tensor *t);
LN_API double ln_storage_history_version(const ln_tensor *t);
LN_API void ln_storage_bump(ln_tensor *t);
LN_API void ln_storage_bump_unrecorded(ln_tensor *t);
LN_API int64_t ln_storage_nbytes(const ln_tensor *t);
LN_API void *ln_data_ptr(const ln_tensor *t);  /* host pointer; CPU only, no sync */
LN_API int ln_dtype_size(int dtype);

LN_API ln_tensor *ln_view(const ln_tensor *t, int ndim, const int64_t *shape); /* -1 infers */
LN_API ln_tensor *ln_reshape(const ln_tensor *t, int ndim, const int64_t *shape);
LN_API ln_tensor *ln_as_strided(const ln_tensor *t, int ndim, const int64_t *shape,
                                const int64_t *stride, int64_t offset);
LN_API ln_tensor *ln_narrow(const ln_tensor *t, int dim, int64_t start, int64_t length);
LN_API ln_tensor *ln_select(const ln_tensor *t, int dim, int64_t index);
LN_API ln_tensor *ln_transpose(const ln_tensor *t, int d0, int d1);
LN_API ln_tensor *ln_permute(const ln_tensor *t, int ndim, const int *perm);
LN_API ln_tensor *ln_squeeze(const ln_tensor *t, int dim);   /* dim -1: all */
LN_API ln_tensor *ln_unsqueeze(const ln_tensor *t, int dim);
LN_API ln_tensor *ln_expand(const ln_tensor *t, int ndim, const int64_t *shape);
LN_API ln_tensor *ln_contiguous(const ln_tensor *t);  /* alias when already so */
LN_API ln_tensor *ln_clone(const ln_tensor *t);

/* ------------------------------------------------------------------------ */
/* Creation and random numbers                                                */
/* The RNG is counter-based (Philox 4x32-10): element i of a draw uses counter
 * (draw offset + i), so numbers do not depend on thread or device count. */

LN_API int ln_fill_(ln_tensor *t, double value);
LN_API int ln_arange_(ln_tensor *t, double start, double step);  /* t[i] = start + i*step */
LN_API int ln_eye_(ln_tensor *t);                                 /* 2-D */
LN_API void ln_manual_seed(uint64_t seed);
LN_API uint64_t ln_rng_get_state(uint64_t *offset);  /* returns seed */
LN_API void ln_rng_set_state(uint64_t seed, uint64_t offset);
LN_API int ln_uniform_(ln_tensor *t, double lo, double hi);
LN_API int ln_normal_(ln_tensor *t, double mean, double std);
LN_API int ln_randint_(ln_tensor *t, int64_t lo, int64_t hi);  /* [lo, hi) */
LN_API int ln_bernoulli_(ln_tensor *t, double p);

/* ------------------------------------------------------------------------ */
/* Elementwise                                                                */

typedef enum ln_unary_op {
  LN_NEG = 0, LN_ABS, LN_EXP, LN_LOG, LN_SQRT, LN_TANH, LN_SIGMOID, LN_RELU,
  LN_SIN, LN_COS, LN_RSQRT, LN_SIGN, LN_FLOOR, LN_CEIL, LN_ROUND, LN_RECIPROCAL,
  LN_LOG1P, LN_EXPM1, LN_SQUARE, LN_LOGICAL_NOT, LN_ISNAN, LN_ISINF, LN_ERF,
  LN_SINH, LN_COSH, LN_ASINH, LN_ACOSH, LN_ATANH, LN_ASIN, LN_ACOS, LN_ATAN,
  LN_LOG2, LN_LOG10, LN_EXP2, LN_TRUNC, LN_FRAC,
  LN_LGAMMA, LN_DIGAMMA, LN_TRIGAMMA, LN_ERFC, LN_ERFINV, LN_SIGNBIT,
  LN_BITWISE_NOT,
  /* activations as one kernel (float only; nn.functional's silu, gelu, mish) */
  LN_SILU, LN_GELU, LN_GELU_TANH, LN_MISH,
  /* with parameters (ln_unary_p): elu p0 alpha, p1 scale, p2 input_scale
   * (celu, selu too); softplus p0 beta, p1 threshold */
  LN_HARDSWISH, LN_HARDSIGMOID, LN_ELU, LN_SOFTPLUS,
  LN_NUNARY
} ln_unary_op;

typedef enum ln_binary_op {
  LN_ADD = 0, LN_SUB, LN_MUL, LN_DIV, LN_POW, LN_MAXIMUM, LN_MINIMUM,
  LN_EQ, LN_NE, LN_LT, LN_LE, LN_GT, LN_GE, LN_LOGICAL_AND, LN_LOGICAL_OR,
  LN_FMOD, LN_ATAN2, LN_HYPOT, LN_LOGADDEXP, LN_LOGADDEXP2,
  LN_IGAMMA, LN_IGAMMAC,   /* regularized incomplete gamma P(a, x), Q(a, x): float only */
  /* integer and bool only (shifts, gcd, lcm: integer only); shift counts
   * are taken modulo the bit width (32 for uint8), as torch 1.13's CPU gives */
  LN_BITWISE_AND, LN_BITWISE_OR, LN_BITWISE_XOR, LN_BITWISE_LSHIFT, LN_BITWISE_RSHIFT,
  LN_GCD, LN_LCM,
  /* the activations' gradients from their input: a = x, b = grad_output,
   * out = grad_output * f'(x) (float only; PyTorch's backward kernels) */
  LN_SILU_BWD, LN_GELU_BWD, LN_GELU_TANH_BWD, LN_MISH_BWD,
  LN_HARDSWISH_BWD, LN_HARDSIGMOID_BWD,
  LN_ELU_BWD, LN_SOFTPLUS_BWD,            /* parameters as LN_ELU, LN_SOFTPLUS (ln_binary_p) */
  LN_TANH_BWD, LN_SIGMOID_BWD,            /* from the output: a = tanh(x) / sigmoid(x) */
  LN_NBINARY
} ln_binary_op;

LN_API ln_tensor *ln_unary(int op, const ln_tensor *a);
LN_API int ln_unary_(int op, ln_tensor *a);                      /* in place */
LN_API ln_tensor *ln_binary(int op, const ln_tensor *a, const ln_tensor *b);
/* the activation ops with parameters p0, p1, p2 (their enums say which) */
LN_API ln_tensor *ln_unary_p(int op, const ln_tensor *a, double p0, double p1, double p2);
LN_API ln_tensor *ln_binary_p(int op, const ln_tensor *a, const ln_tensor *b, double p0, double p1, double p2);
/* a op s (reversed = 0) or s op a (reversed = 1) for a Lua number s */
LN_API ln_tensor *ln_binary_scalar(int op, const ln_tensor *a, double s, int reversed);
LN_API int ln_binary_(int op, ln_tensor *a, const ln_tensor *b);  /* a = a op b */
LN_API int ln_binary_scalar_(int op, ln_tensor *a, double s);
LN_API int ln_add_scaled_(ln_tensor *a, const ln_tensor *b, double alpha); /* a += alpha*b */
LN_API ln_tensor *ln_clamp(const ln_tensor *a, double lo, double hi);  /* +-inf: open */
LN_API int ln_clamp_(ln_tensor *a, double lo, double hi);
LN_API ln_tensor *ln_where(const ln_tensor *cond, const ln_tensor *a, const ln_tensor *b);
LN_API ln_tensor *ln_cast(const ln_tensor *a, int dtype);
LN_API int ln_copy_(ln_tensor *dst, const ln_tensor *src);  /* broadcasts, casts,
                                                   crosses devices */
/* ln_copy_ as a transfer between two devices (a pipeline's stage boundary):
 * queued on dst's device's comm stream after the work queued so far on both
 * devices; *done is the point after it, which dst's device must wait for
 * (ln_event_wait) before its work reads dst. Neither device's compute waits
 * for the other's. Same device, or no comm stream: ln_copy_ (*done is then
 * already in order on dst's device). */
LN_API int ln_transfer_(ln_tensor *dst, const ln_tensor *src, ln_event *done);
LN_API ln_tensor *ln_to_device(const ln_tensor *a, int device);
LN_API int ln_result_dtype(const ln_tensor *a, const ln_tensor *b);
LN_API int ln_result_dtype_scalar(const ln_tensor *a, double s);

/* ------------------------------------------------------------------------ */
/* Reductions                                                                 */

typedef enum ln_reduce_op {
  LN_RSUM = 0, LN_RMEAN, LN_RPROD, LN_RMAX, LN_RMIN, LN_RARGMAX, LN_RARGMIN,
  LN_RVAR, LN_RSTD, LN_RNORM, LN_RANY, LN_RALL, LN_NREDUCE
} ln_reduce_op;

/* Reduce over dim (0-based), or over all elements when dim < 0.
 * indices (may be NULL) receives int64 positions for max/min.
 * p: correction for var/std (1 = unbiased), order for norm. */
LN_API ln_tensor *ln_reduce(int op, const ln_tensor *a, int dim, int keepdim,
                            double p, ln_tensor **indices);

/* ------------------------------------------------------------------------ */
/* Linear algebra (OpenBLAS on CPU)                                           */

/* matmul follows torch.matmul: 1-D.1-D dot, 2-D mm, batched with broadcast. */
LN_API ln_tensor *ln_matmul(const ln_tensor *a, const ln_tensor *b);
LN_API ln_tensor *ln_bmm(const ln_tensor *a, const ln_tensor *b);
/* out = beta*c + alpha*(a @ b); c broadcasts to {n, m} */
LN_API ln_tensor *ln_addmm(const ln_tensor *c, const ln_tensor *a, const ln_tensor *b,
                           double beta, double alpha);
/* Plain float32 row-major GEMM through the lunet thread pool (bench, kernels):
 * C[MxN] = alpha*op(A)*op(B) + beta*C, lda/ldb/ldc in elements. */
LN_API void ln_sgemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
                     float alpha, const float *a, int64_t lda, const float *b,
                     int64_t ldb, float beta, float *c, int64_t ldc);

/* ------------------------------------------------------------------------ */
/* Indexing, joining, splitting                                               */

LN_API ln_tensor *ln_index_select(const ln_tensor *a, int dim, const ln_tensor *index);
LN_API ln_tensor *ln_gather(const ln_tensor *a, int dim, const ln_tensor *index);
LN_API int ln_scatter_add_(ln_tensor *a, int dim, const ln_tensor *index,
                           const ln_tensor *src);
/* scatter_reduce_ (in place): for each position m of index (0-based values),
 * a[m with m[dim] = index[m]] = op(that, src[m]); index and src have a's
 * number of dims, index no larger than src, nor than a off dim (shapes as
 * scatter_add_'s). op: sum, prod, amax, amin (NaN wins, as torch's). With
 * include_self = 0 the positions index names start from op's identity, so
 * a's old values there do not count. Deterministic: each fiber (all dims but
 * dim) runs in index order on one thread. */
typedef enum { LN_SCATTER_SUM = 0, LN_SCATTER_PROD, LN_SCATTER_AMAX, LN_SCATTER_AMIN } ln_scatter_op;
LN_API int ln_scatter_reduce_(ln_tensor *a, int dim, const ln_tensor *index, const ln_tensor *src,
                              int op, int include_self);
/* The int64 0-based positions along dim (negative counts from the end) that
 * sort a: ascending, or descending when descending != 0; stable (equal
 * elements keep their order); NaN above every number; -0.0 equals 0.0.
 * k < 0: all of them (argsort); else the first k (topk: the k smallest, or
 * largest when descending), 0 <= k <= dim's size. The result has a's shape
 * with dim's size replaced by k. Gather a at them for the values. A 0-d a
 * gives 0-d 0 (dim 0 or -1, k 0 or 1). */
LN_API ln_tensor *ln_argsort(const ln_tensor *a, int dim, int descending, int64_t k);
/* Cumulative sum (op LN_SCAN_SUM: cumsum) or product (LN_SCAN_PROD: cumprod)
 * along dim (0-based; negative counts from the end): the result has a's
 * shape, and its element i along dim is the sum (product) of a's elements
 * 0..i along dim. dtype < 0: the result is a's dtype for a float a, int64
 * for int32/int64/uint8/bool (as PyTorch); dtype >= 0: a is cast to dtype
 * first and scanned in it (bool refused). float32 and float64 accumulate in
 * double (float16/bfloat16 are scanned as float32 and rounded back),
 * integers in int64, wrapping around on overflow; NaN and inf propagate as
 * in a running sum (product). A 0-d a gives a 0-d result (dim 0 or -1), an
 * empty a an empty one. */
typedef enum ln_scan_op { LN_SCAN_SUM = 0, LN_SCAN_PROD, LN_NSCAN } ln_scan_op;
LN_API ln_tensor *ln_scan(int op, const ln_tensor *a, int dim, int dtype);
LN_API ln_tensor *ln_cat(int n, ln_tensor *const *ts, int dim);
LN_API ln_tensor *ln_stack(int n, ln_tensor *const *ts, int dim);

/* ------------------------------------------------------------------------ */
/* Atomic file writes (c/core/file.c): every file lunet writes goes through
 * these. A temporary file beside the target (TARGET.tmp.HOST.PID.XXXXXX,
 * mkstemp), fsync, rename over the target, fsync of the directory;
 * symbolic links are followed (the link kept), a directory or device node is
 * never replaced. On failure the temporary file is removed and an existing
 * target is untouched. Errors read "FN: cannot write 'PATH': WHY" (WHY the
 * OS error, after "fsync: "/"rename: " for those steps). ln_afile_open ->
 * NULL on error; ln_afile_write -> 0, or -1 (the file then only takes
 * abort); ln_afile_fail marks it failed with the caller's reason;
 * ln_afile_commit and ln_afile_abort always free it (abort takes NULL). */
typedef struct ln_afile ln_afile;
LN_API ln_afile *ln_afile_open(const char *fn, const char *path);
LN_API int ln_afile_write(ln_afile *f, const void *bytes, size_t n);
LN_API int ln_afile_fail(ln_afile *f, const char *why);
LN_API int ln_afile_commit(ln_afile *f);
LN_API void ln_afile_abort(ln_afile *f);
/* the three at once: n bytes into path, atomically. 0 ok. */
LN_API int ln_file_write_atomic(const char *fn, const char *path, const void *bytes, size_t n);

/* ------------------------------------------------------------------------ */
/* Safetensors I/O (atomic writes: ln_afile above)                            */
/* Saving syncs each tensor's device and writes it contiguous (any view is
 * fine). Tensors go in the file widest dtype first, then by name. Metadata
 * is a string -> string map (the format's "__metadata__"). Opening a file
 * validates the whole header against the file size before anything is
 * allocated; errors name the file and the problem. Tensors are indexed in
 * file order, 0-based. Messages start "save: " / "load: ". */

typedef struct ln_st_file ln_st_file;   /* opaque: an opened safetensors file */
LN_API int ln_st_save(const char *path, int n, const char *const *names,
                      ln_tensor *const *tensors, int nmeta,
                      const char *const *meta_keys, const char *const *meta_values);
LN_API ln_st_file *ln_st_open(const char *path);
LN_API int ln_st_count(const ln_st_file *f);
LN_API const char *ln_st_name(const ln_st_file *f, int i);
LN_API int ln_st_info(const ln_st_file *f, int i, int *dtype, int *ndim, int64_t *shape);
LN_API const char *ln_st_metadata(const ln_st_file *f);  /* JSON object text or NULL */
LN_API int ln_st_meta_count(const ln_st_file *f);
LN_API const char *ln_st_meta_key(const ln_st_file *f, int i);
LN_API const char *ln_st_meta_value(const ln_st_file *f, int i);
LN_API ln_tensor *ln_st_tensor(ln_st_file *f, int i, int device);  /* reads the bytes */
LN_API void ln_st_close(ln_st_file *f);
/* crc32 (zlib's) of t's bytes in row-major order, continuing crc (start
 * with 0); syncs t's device. Checkpoints keep it in their metadata. */
LN_API int ln_tensor_crc32(const ln_tensor *t, uint32_t crc, uint32_t *out);
/* SIGINT as a flag, for lunet.fit: ln_sigint_catch(1) installs a handler that
 * only sets it (a second Ctrl-C before it is cleared goes to the previous
 * handler), ln_sigint_catch(0) restores the previous one (calls nest);
 * ln_sigint_pending(clear) reads it. */
LN_API int ln_sigint_catch(int on);
LN_API int ln_sigint_pending(int clear);

/* ------------------------------------------------------------------------ */
/* Neural-network kernels (forward/backward pairs)                            */
/* Outputs are allocated by the caller with the documented shapes; backward
 * functions overwrite (never accumulate) din/dw/db, and any of them may be NULL
 * when not needed. Float32 and float64; all tensors of one call share dtype and
 * device (indices/targets: int64). Inputs and outputs may be non-contiguous
 * views (outputs must not be expanded). Front ends in c/nn/, kernels in each
 * backend (CPU: c/cpu/). */

typedef struct ln_conv2d_params {
  int32_t stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, groups;
} ln_conv2d_params;

/* in (N,C,H,W), w (O,C/groups,KH,KW), b (O) or NULL -> out (N,O,OH,OW),
 * OH = (H + 2*pad_h - dil_h*(KH-1) - 1) / stride_h + 1 (likewise OW) */
LN_API int ln_conv2d_forward(ln_tensor *out, const ln_tensor *in, const ln_tensor *w,
                             const ln_tensor *b, const ln_conv2d_params *p);
LN_API int ln_conv2d_backward(ln_tensor *din, ln_tensor *dw, ln_tensor *db,
                              const ln_tensor *dout, const ln_tensor *in, const ln_tensor *w,
                              const ln_conv2d_params *p);
/* Training with saved state: a device's backend may keep, from a training
 * forward, state that the backward reads instead of recomputing it (the CPU
 * backend: the input in the layout its weight gradient uses, for
 * convolutions that run on oneDNN). ln_conv2d_saved_numel(in, w, p) = n > 0
 * says it does: pass a float32 tensor of n elements as saved to
 * ln_conv2d_forward_saving, then to ln_conv2d_backward_saved. */
LN_API int64_t ln_conv2d_saved_numel(const ln_tensor *in, const ln_tensor *w, const ln_conv2d_params *p);
LN_API int ln_conv2d_forward_saving(ln_tensor *out, ln_tensor *saved, const ln_tensor *in,
                                    const ln_tensor *w, const ln_tensor *b, const ln_conv2d_params *p);
LN_API int ln_conv2d_backward_saved(ln_tensor *din, ln_tensor *dw, ln_tensor *db,
                                    const ln_tensor *dout, const ln_tensor *in, const ln_tensor *w,
                                    const ln_tensor *saved, const ln_conv2d_params *p);

/* Inference-time fusion of conv -> batch norm (eval) -> + residual -> relu:
 *   out = relu?(bn?(conv(in, w) + b) + residual?)
 * bn: eval-mode batch norm with the running statistics (bn_mean and bn_var
 * (O), both given or both NULL; bn_weight/bn_bias (O) may be NULL), folded
 * into the convolution's weights and bias inside the kernel (the tensors are
 * only read). residual: (N,O,OH,OW) or NULL. No backward: for forwards that
 * record no gradient. Float32 on oneDNN runs it as one call with post-ops;
 * other cases run the same passes in sequence. */
typedef struct ln_conv2d_fuse {
  const ln_tensor *bn_weight, *bn_bias, *bn_mean, *bn_var;
  double bn_eps;
  const ln_tensor *residual;
  int32_t relu;
} ln_conv2d_fuse;
LN_API int ln_conv2d_forward_fused(ln_tensor *out, const ln_tensor *in, const ln_tensor *w,
                                   const ln_tensor *b, const ln_conv2d_fuse *f,
                                   const ln_conv2d_params *p);

/* Inference-time ResNet basic block in one call:
 *   h = relu(bn1(conv1(in))), out = relu(bn2(conv2(h)) + shortcut),
 *   shortcut = bn_s(conv_s(in)) (shortcut given) or in (NULL).
 * Each ln_conv_bn: weight, bias (or NULL), params, and an optional eval-mode
 * batch norm as in ln_conv2d_fuse (bn_mean/bn_var NULL: none). out is
 * conv2's output shape (N,O,OH,OW), which must be the shortcut's. Float32 on
 * oneDNN keeps h and the shortcut in oneDNN's blocked layout (in and out
 * stay NCHW). No backward. */
typedef struct ln_conv_bn {
  const ln_tensor *weight, *bias, *bn_weight, *bn_bias, *bn_mean, *bn_var;
  double bn_eps;
  ln_conv2d_params p;
} ln_conv_bn;
LN_API int ln_basicblock_forward_fused(ln_tensor *out, const ln_tensor *in, const ln_conv_bn *conv1,
                                       const ln_conv_bn *conv2, const ln_conv_bn *shortcut);
/* stem (or NULL: none) = relu(bn(conv(in))), then nblocks (1-16) basic
 * blocks in a row, block i = convs[3i] (conv1), convs[3i+1] (conv2),
 * convs[3i+2] (shortcut; weight NULL: identity): on oneDNN with channels in
 * multiples of 16 the activations also stay blocked between the stem and
 * the blocks. */
LN_API int ln_basicblocks_forward_fused(ln_tensor *out, const ln_tensor *in, const ln_conv_bn *stem,
                                        const ln_conv_bn *convs, int nblocks);

typedef struct ln_pool2d_params {
  int32_t kh, kw, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, ceil_mode, count_include_pad;
} ln_pool2d_params;

/* in (N,C,H,W) or (C,H,W) -> out (N,C,OH,OW); indices int64 (N,C,OH,OW): the
 * argmax's position within its input plane (h*W + w), 0-based. OH as torch:
 * (H + 2*pad_h - dil_h*(kh-1) - 1) / stride_h + 1, rounded up with ceil_mode
 * (a last window starting in the right padding is dropped); pad <= k/2.
 * Average pooling needs dil_h = dil_w = 1 (count_include_pad as torch). */
LN_API int ln_maxpool2d_forward(ln_tensor *out, ln_tensor *indices, const ln_tensor *in,
                                const ln_pool2d_params *p);
LN_API int ln_maxpool2d_backward(ln_tensor *din, const ln_tensor *dout, const ln_tensor *indices,
                                 const ln_pool2d_params *p);
LN_API int ln_avgpool2d_forward(ln_tensor *out, const ln_tensor *in, const ln_pool2d_params *p);
LN_API int ln_avgpool2d_backward(ln_tensor *din, const ln_tensor *dout, const ln_pool2d_params *p);
/* out (N,C,OH,OW) sized by the caller; bins as torch's adaptive_avg_pool2d */
LN_API int ln_adaptive_avgpool2d_forward(ln_tensor *out, const ln_tensor *in);
LN_API int ln_adaptive_avgpool2d_backward(ln_tensor *din, const ln_tensor *dout);

/* Interpolation as torch 1.13's F.interpolate (no antialias, no 'area'): in
 * (N,C,*S) with 1 to 3 spatial dims S -> out (N,C,*OS), OS sized by the
 * caller. scales (NULL: none) holds one scale_factor per spatial dim, 0 where
 * none: the source index steps by 1/scale there, else by S/OS (torch's rule;
 * recompute_scale_factor passes none). align_corners for LINEAR and CUBIC
 * (LINEAR is linear, bilinear or trilinear; CUBIC needs 2 spatial dims). A
 * dim whose size is kept is copied, as torch's, except by CUBIC with a scale
 * other than 1. The backward (din (N,C,*S) from dout (N,C,*OS)) is the
 * adjoint: each output's gradient added to its sources by their weights. */
enum { LN_INTERP_NEAREST = 0, LN_INTERP_NEAREST_EXACT = 1, LN_INTERP_LINEAR = 2, LN_INTERP_CUBIC = 3 };
LN_API int ln_interpolate_forward(ln_tensor *out, const ln_tensor *in, int mode, int align_corners,
                                  const double *scales);
LN_API int ln_interpolate_backward(ln_tensor *din, const ln_tensor *dout, int mode, int align_corners,
                                   const double *scales);

/* grid_sample as PyTorch 1.13's: in (N,C,H,W) with grid (N,OH,OW,2) ->
 * out (N,C,OH,OW), or in (N,C,D,H,W) with grid (N,OD,OH,OW,3) -> out
 * (N,C,OD,OH,OW); grid[...,0] is x (along W), [...,1] y, [...,2] z, in
 * [-1, 1]. mode LN_GRID_BILINEAR (trilinear for 5-d), LN_GRID_NEAREST or
 * LN_GRID_BICUBIC (4-d only); padding LN_GRID_ZEROS, LN_GRID_BORDER or
 * LN_GRID_REFLECTION. The backward gives din (in's shape) and dgrid (grid's;
 * zeros for nearest), each NULL when not wanted; in is read for dgrid. */
enum { LN_GRID_BILINEAR = 0, LN_GRID_NEAREST = 1, LN_GRID_BICUBIC = 2 };
enum { LN_GRID_ZEROS = 0, LN_GRID_BORDER = 1, LN_GRID_REFLECTION = 2 };
LN_API int ln_grid_sample_forward(ln_tensor *out, const ln_tensor *in, const ln_tensor *grid, int mode,
                                  int padding, int align_corners);
LN_API int ln_grid_sample_backward(ln_tensor *din, ln_tensor *dgrid, const ln_tensor *dout, const ln_tensor *in,
                                   const ln_tensor *grid, int mode, int padding, int align_corners);

/* Batch norm over dim 1 of in (N,C) or (N,C,*). training: normalise with the
 * batch statistics, write save_mean/save_invstd (C), update running_mean/var
 * (unbiased var) with momentum when they are not NULL; eval: use the running
 * statistics. weight/bias (C) may be NULL (affine = false). save_mean/
 * save_invstd may be NULL when no backward follows; eval needs the running
 * statistics; training needs more than one value per channel. */
LN_API int ln_batchnorm_forward(ln_tensor *out, ln_tensor *save_mean, ln_tensor *save_invstd,
                                const ln_tensor *in, const ln_tensor *weight, const ln_tensor *bias,
                                ln_tensor *running_mean, ln_tensor *running_var, int training,
                                double momentum, double eps);
/* training = 0: save_mean/save_invstd hold the running mean and 1/sqrt(var+eps) */
LN_API int ln_batchnorm_backward(ln_tensor *din, ln_tensor *dweight, ln_tensor *dbias,
                                 const ln_tensor *dout, const ln_tensor *in, const ln_tensor *weight,
                                 const ln_tensor *save_mean, const ln_tensor *save_invstd,
                                 int training);
/* out = relu(batch_norm(in)) in one pass; the backward takes the forward's
 * out and returns the gradients of relu(batch_norm(in)) (arguments as above) */
LN_API int ln_batchnorm_relu_forward(ln_tensor *out, ln_tensor *save_mean, ln_tensor *save_invstd,
                                     const ln_tensor *in, const ln_tensor *weight, const ln_tensor *bias,
                                     ln_tensor *running_mean, ln_tensor *running_var, int training,
                                     double momentum, double eps);
LN_API int ln_batchnorm_relu_backward(ln_tensor *din, ln_tensor *dweight, ln_tensor *dbias,
                                      const ln_tensor *dout, const ln_tensor *out, const ln_tensor *in,
                                      const ln_tensor *weight, const ln_tensor *save_mean,
                                      const ln_tensor *save_invstd, int training);
/* out = relu(batch_norm(in) + residual) in one pass (residual: in's shape);
 * the backward also gives dresidual (dout masked by out's zeros; NULL: not
 * wanted) */
LN_API int ln_batchnorm_add_relu_forward(ln_tensor *out, ln_tensor *save_mean, ln_tensor *save_invstd,
                                         const ln_tensor *in, const ln_tensor *residual,
                                         const ln_tensor *weight, const ln_tensor *bias,
                                         ln_tensor *running_mean, ln_tensor *running_var, int training,
                                         double momentum, double eps);
LN_API int ln_batchnorm_add_relu_backward(ln_tensor *din, ln_tensor *dweight, ln_tensor *dbias,
                                          ln_tensor *dresidual, const ln_tensor *dout, const ln_tensor *out,
                                          const ln_tensor *in, const ln_tensor *weight,
                                          const ln_tensor *save_mean, const ln_tensor *save_invstd,
                                          int training);

/* softmax or log-softmax (log = 1) along dim (0-based); backward takes the
 * forward's output */
LN_API int ln_softmax_forward(ln_tensor *out, const ln_tensor *in, int dim, int log);
LN_API int ln_softmax_backward(ln_tensor *din, const ln_tensor *dout, const ln_tensor *out,
                               int dim, int log);

/* Negative log-likelihood of logp (N,C) at int64 targets (N) holding class
 * ids base..base+C-1 (Lua passes base 1). weight (C) or NULL. reduction:
 * 0 none -> out (N), 1 mean -> out 0-d (divided by the summed target weights),
 * 2 sum -> out 0-d. Targets equal to ignore_index contribute nothing. A target
 * out of range is an error naming it; the kernel finds it, so on a queued
 * device it is raised by the next synchronisation (inline: by this call). */
LN_API int ln_nll_loss_forward(ln_tensor *out, const ln_tensor *logp, const ln_tensor *target,
                               const ln_tensor *weight, int reduction, int64_t ignore_index,
                               int64_t base);
/* dlogp (N,C) from dout (same shape as out) */
LN_API int ln_nll_loss_backward(ln_tensor *dlogp, const ln_tensor *dout, const ln_tensor *target,
                                const ln_tensor *weight, int reduction, int64_t ignore_index,
                                int64_t base);

/* din = dout where out > 0, else 0 (ReLU backward from its output) */
LN_API int ln_relu_backward(ln_tensor *din, const ln_tensor *dout, const ln_tensor *out);

/* ------------------------------------------------------------------------ */
/* Optimizer kernels                                                          */
/* Fused in-place updates: one pass over param, grad and the state buffers,
 * queued on the param's device like every op. float32 and float64; grad is
 * cast to the param's dtype when it differs; state buffers must be contiguous
 * with the param's shape, dtype and device. The arithmetic follows PyTorch
 * 1.13's single-tensor optimizers step by step (torch/optim/{sgd,adam,adamw,
 * rmsprop,adagrad,adamax,nadam,radam,adadelta}.py); the elementwise math runs in the param's dtype. */

typedef struct ln_sgd_params {
  double lr, momentum, dampening, weight_decay;
  int32_t nesterov, maximize;
  int32_t init_buf;   /* 1: momentum_buf is new, set it to the gradient (first step) */
  int32_t pad_;
} ln_sgd_params;
/* momentum_buf may be NULL when momentum == 0 */
LN_API int ln_sgd_step_(ln_tensor *param, const ln_tensor *grad, ln_tensor *momentum_buf,
                        const ln_sgd_params *p);

typedef struct ln_adam_params {
  double lr, beta1, beta2, eps, weight_decay;
  int64_t step;       /* the step being taken, 1-based (bias correction) */
  int32_t amsgrad, decoupled, maximize, pad_;  /* decoupled = 1: AdamW */
} ln_adam_params;
/* max_exp_avg_sq may be NULL unless amsgrad */
LN_API int ln_adam_step_(ln_tensor *param, const ln_tensor *grad, ln_tensor *exp_avg,
                         ln_tensor *exp_avg_sq, ln_tensor *max_exp_avg_sq, const ln_adam_params *p);

typedef struct ln_rmsprop_params {
  double lr, alpha, eps, weight_decay, momentum;
  int32_t centered, maximize;
} ln_rmsprop_params;
/* momentum_buf may be NULL unless momentum > 0, grad_avg unless centered */
LN_API int ln_rmsprop_step_(ln_tensor *param, const ln_tensor *grad, ln_tensor *square_avg,
                            ln_tensor *momentum_buf, ln_tensor *grad_avg,
                            const ln_rmsprop_params *p);

/* Adagrad: sum += g^2 (sum starts at initial_accumulator_value, the caller's
 * fill), p -= lr / (1 + (step - 1) lr_decay) * g / (sqrt(sum) + eps) */
typedef struct ln_adagrad_params {
  double lr, lr_decay, eps, weight_decay;
  int64_t step;       /* the step being taken, 1-based (the lr decay) */
  int32_t maximize, pad_;
} ln_adagrad_params;
LN_API int ln_adagrad_step_(ln_tensor *param, const ln_tensor *grad, ln_tensor *sum,
                            const ln_adagrad_params *p);

/* Adamax: exp_avg as Adam's, exp_inf = max(beta2 exp_inf, |g| + eps),
 * p -= lr / (1 - beta1^step) * exp_avg / exp_inf */
typedef struct ln_adamax_params {
  double lr, beta1, beta2, eps, weight_decay;
  int64_t step;       /* 1-based (bias correction) */
  int32_t maximize, pad_;
} ln_adamax_params;
LN_API int ln_adamax_step_(ln_tensor *param, const ln_tensor *grad, ln_tensor *exp_avg,
                           ln_tensor *exp_inf, const ln_adamax_params *p);

/* NAdam (Dozat): Adam's moments with the momentum schedule
 * mu_t = beta1 (1 - 0.5 * 0.96^(t momentum_decay)); denom = sqrt(exp_avg_sq /
 * (1 - beta2^t)) + eps, p -= lr (1 - mu_t) / (1 - mu_product) * g / denom,
 * then p -= lr mu_{t+1} / (1 - mu_product mu_t mu_{t+1}) * exp_avg / denom.
 * mu_product is the caller's state: mu_1 ... mu_t, this step's included,
 * rounded to float32 after each product as PyTorch 1.13 keeps it (a float32
 * tensor), and the product with mu_t mu_{t+1} is rounded the same way.
 * PyTorch 1.13's NAdam has no maximize. */
typedef struct ln_nadam_params {
  double lr, beta1, beta2, eps, weight_decay, momentum_decay, mu_product;
  int64_t step;       /* 1-based */
} ln_nadam_params;
LN_API int ln_nadam_step_(ln_tensor *param, const ln_tensor *grad, ln_tensor *exp_avg,
                          ln_tensor *exp_avg_sq, const ln_nadam_params *p);

/* RAdam (Liu et al.): Adam's moments; while the variance's SMA length
 * rho_t = rho_inf - 2 t beta2^t / (1 - beta2^t) (rho_inf = 2 / (1 - beta2) - 1)
 * is <= 5 the step is p -= lr exp_avg / (1 - beta1^t), after it the Adam step
 * scaled by the rectification term. PyTorch 1.13's RAdam has no maximize. */
typedef struct ln_radam_params {
  double lr, beta1, beta2, eps, weight_decay;
  int64_t step;       /* 1-based */
} ln_radam_params;
LN_API int ln_radam_step_(ln_tensor *param, const ln_tensor *grad, ln_tensor *exp_avg,
                          ln_tensor *exp_avg_sq, const ln_radam_params *p);

/* Adadelta: square_avg = rho square_avg + (1 - rho) g^2, delta = sqrt(acc_delta
 * + eps) / sqrt(square_avg + eps) * g, acc_delta = rho acc_delta + (1 - rho)
 * delta^2, p -= lr delta */
typedef struct ln_adadelta_params {
  double lr, rho, eps, weight_decay;
  int32_t maximize, pad_;
} ln_adadelta_params;
LN_API int ln_adadelta_step_(ln_tensor *param, const ln_tensor *grad, ln_tensor *square_avg,
                             ln_tensor *acc_delta, const ln_adadelta_params *p);

/* sum |t|^p over all elements (p > 0), or max |t| (p = +inf), accumulated in
 * float64 in a fixed order (the same for any thread count): a new 0-d float64
 * tensor on t's device. clip_grad_norm builds the total norm from these. */
LN_API ln_tensor *ln_norm_pow_sum(const ln_tensor *t, double p);

/* ------------------------------------------------------------------------ */
/* Datasets and loaders                                                       */
/* Host-side data: results live on cpu:0 and are ready when the call returns.
 * Readers name the file and the problem on error (missing, truncated, bad
 * magic, sizes that disagree with the file's length). */

/* IDX (MNIST, Fashion-MNIST), plain or gzip: a tensor of the file's shape and
 * type (ubyte -> uint8, sbyte/short/int -> int32, float -> float32, double ->
 * float64; big-endian on disk). */
LN_API ln_tensor *ln_idx_read(const char *path);
/* CIFAR-10 binary batches (plain or gzip), each a whole number of 3073-byte
 * records (label byte 0..9, then 3x32x32 pixels): images uint8 (N,3,32,32)
 * and labels int64 (N) holding 0..9, N summed over the files. 0 ok. */
LN_API int ln_cifar10_read(int nfiles, const char *const *paths, ln_tensor **images,
                           ln_tensor **labels);
/* CIFAR-100 binary files (train.bin, test.bin; plain or gzip), 3074-byte
 * records (coarse label 0..19, fine label 0..99, then 3x32x32 pixels): images
 * uint8 (N,3,32,32), coarse and fine int64 (N). 0 ok. */
LN_API int ln_cifar100_read(int nfiles, const char *const *paths, ln_tensor **images, ln_tensor **coarse,
                            ln_tensor **fine);
/* JPEG or PNG images (by their signature) as uint8 (C, H, W) tensors, as
 * torchvision 0.14's io.read_image(path, mode): modes are its ImageReadMode
 * values. Errors name the file (missing, not an image, truncated, corrupt,
 * over 65535 per side or 178956970 pixels). decode: a 1-D uint8 tensor of a
 * file's bytes. */
enum { LN_IMAGE_UNCHANGED = 0, LN_IMAGE_GRAY = 1, LN_IMAGE_GRAY_ALPHA = 2, LN_IMAGE_RGB = 3, LN_IMAGE_RGB_ALPHA = 4 };
LN_API ln_tensor *ln_image_read(const char *path, int mode);
LN_API ln_tensor *ln_image_decode(const ln_tensor *bytes, int mode);
/* A contiguous uint8 (C, H, W) cpu image as a file's bytes (a 1-D uint8
 * tensor), as torchvision 0.14's io.encode_png / encode_jpeg: PNG of 1..4
 * channels (gray, gray+alpha, RGB, RGBA) at zlib level 0..9; JPEG of 1 or 3
 * channels at quality 1..100. */
LN_API ln_tensor *ln_image_encode_png(const ln_tensor *img, int level);
LN_API ln_tensor *ln_image_encode_jpeg(const ln_tensor *img, int quality);
/* The entries of folder path (not . and ..) as "<k><name>\0" records, k 'd'
 * for a directory (symlinks followed) else 'f', into buf when they fit in
 * cap bytes; returns the bytes they take (call again when more than cap), -1. */
LN_API int64_t ln_dir_list(const char *path, char *buf, int64_t cap);

/* Random permutation of 0..n-1 into out, a function of (seed, epoch) only. */
LN_API int ln_data_permutation(int64_t *out, int64_t n, uint64_t seed, uint64_t epoch);
/* n draws from 0..m-1 into out, a function of (seed, epoch) only. weights
 * NULL: uniform; replacement 0 then gives whole permutations of 0..m-1 one
 * after another, the last cut (as torch's RandomSampler; n may exceed m).
 * weights (m finite values >= 0, positive sum): draws proportional to them;
 * replacement 0 needs n <= the non-zero weights (as torch.multinomial). */
LN_API int ln_data_sample(int64_t *out, int64_t n, int64_t m, const double *weights, int replacement,
                          uint64_t seed, uint64_t epoch);

enum { LN_DATA_MAX_CHANNELS = 16 };
enum { LN_CROP_NONE = 0, LN_CROP_RANDOM = 1, LN_CROP_CENTER = 2 };

/* Image transforms applied while a batch is gathered, per sample, in this
 * order: pad with zeros (pad on each side) and crop out_h x out_w (random or
 * centred offset), flip horizontally with probability flip_p, multiply by
 * scale (1/255 turns uint8 pixels into [0,1]), then (v - mean[c]) / std[c]
 * when normalize. Padded pixels become fill[c] (the zero pixel after the
 * transforms that follow the crop). nchannels entries of mean/std/fill are
 * used; 1 means the same for every channel. Random choices come from
 * Philox keyed by (seed, epoch, sample key), so a batch does not depend on
 * the number of worker threads. */
/* When nops > 0 the fixed fields crop/pad/flip_p/normalize must be unset
 * and ops[0..nops) run instead, in order, on the float image (uint8 pixels
 * times scale first); padding is zero in the value space the crop sees. The
 * kinds and what their fields mean:
 *   CROP           mode (LN_CROP_RANDOM/_CENTER), h x w, pad (zeros each side);
 *                  a center crop larger than the image zero-pads it first
 *                  (torchvision's center_crop)
 *   HFLIP / VFLIP  p: the probability
 *   NORMALIZE      mean/std/nchannels above
 *   RESIZE         h x w, or w == 0: the shorter side becomes h (aspect kept,
 *                  the longer truncated as torchvision); bilinear,
 *                  align_corners false, no antialias
 *   RESIZED_CROP   h x w output; a box of area share in [a[0], a[1]] and
 *                  aspect ratio w/h in [a[2], a[3]] (log-uniform), 10 tries,
 *                  then the central fallback (torchvision's RandomResizedCrop);
 *                  mode 1: the box is fixed: top i, left j, size bh x bw
 *   JITTER         factors uniform in [a[0],a[1]] (brightness), [a[2],a[3]]
 *                  (contrast), [a[4],a[5]] (saturation), a range of a[k] < 0 is
 *                  off; applied in a random order; mode 1: the factors are
 *                  a[0], a[2], a[4] (< 0: off) and run in that order
 *                  (brightness, contrast, saturation)
 *   ERASE          with probability p, a box of area share in [a[0], a[1]],
 *                  aspect h/w in [a[2], a[3]] (10 tries, else nothing) set to
 *                  value v[c] (nv entries: 1 or C); mode 1: the box is fixed
 *                  (i, j, bh, bw)
 *   JITTER hue     flags & LN_TF_HUE: also a hue shift uniform in [a[6], a[7]]
 *                  (within [-0.5, 0.5]; torchvision's RGB->HSV->RGB on 3
 *                  channels, 1 channel unchanged), the four in a random
 *                  order; mode 1: the shift a[6], applied last
 *   GRAY           with probability p, rgb_to_grayscale (1 or 3 channels in);
 *                  mode 1: one channel out (p must be 1), else as many as in
 *   AFFINE         torchvision's affine on the inverse matrix and
 *                  grid_sample (align_corners false, zeros): angle uniform in
 *                  [a[0], a[1]] degrees, translation round(uniform(+-a[2]*W)),
 *                  round(uniform(+-a[3]*H)) pixels, scale in [a[4], a[5]],
 *                  shear x in [a[6], a[7]], y in [a[8], a[9]] degrees;
 *                  mode 1: fixed angle a[0], translation a[2], a[3], scale
 *                  a[4], shears a[6], a[8]. interp 0 nearest, 1 bilinear;
 *                  flags & LN_TF_CENTER: centre (a[10], a[11]) in pixels (else
 *                  the image centre); LN_TF_FILL: outside pixels are v[c]
 *                  (nv: 1 or C; torchvision's mask blend), else zero;
 *                  LN_TF_EXPAND (mode 1 only): the output grows to hold the
 *                  whole turned image, as torchvision's rotate(expand=True)
 *   BLUR           Gaussian blur, kernel w (x) by h (y), both odd, reflect
 *                  padding; sigma uniform in [a[0], a[1]] for both axes;
 *                  mode 1: sigma a[0] along x, a[1] along y
 *   PAD            left i, top j, right bw, bottom bh pixels; mode 0 constant
 *                  (v[0]), 1 edge, 2 reflect, 3 symmetric (torchvision's)
 * The AutoAugment family (1 or 3 channels; "uint8 pixel": round(255 v),
 * torchvision's uint8 result coming back as pixel / 255):
 *   POSTERIZE      with probability p, keep the high i (0..8) bits of the
 *                  uint8 pixel
 *   SOLARIZE       with probability p, v >= a[0] becomes 1 - v; mode 1: the
 *                  uint8 pixel >= a[0] (a 0..255 threshold)
 *   AUTOCONTRAST   with probability p, per channel (v - min) / (max - min)
 *   EQUALIZE       with probability p, torchvision's uint8 histogram
 *                  equalisation per channel
 *   SHARPNESS      with probability p, blend factor a[0] (>= 0) with the 3x3
 *                  smoothed image (torchvision's adjust_sharpness)
 *   INVERT         with probability p, 1 - v
 *   AUTOAUG        mode 0 AutoAugment (policy i: 0 imagenet, 1 cifar10,
 *                  2 svhn), 1 RandAugment (i ops at magnitude bin j of bh),
 *                  i <= LN_AUG_MAX_NUM_OPS, 2 TrivialAugmentWide (bh bins), 3 one op j (LN_AUG_*) at
 *                  magnitude a[0] (torchvision's _apply_op); interp, fill
 *                  (flags & LN_TF_FILL, v, nv) as AFFINE
 *   GROUP          the next w ops form i items (an item: one op, or a GROUP
 *                  with its own w ops): mode 0 with probability p all the
 *                  items in order (RandomApply), 1 one item drawn with
 *                  weights a[0..i-1] (RandomChoice), 2 every item in a
 *                  random order (RandomOrder), 3 all in order (a Compose in
 *                  a group). Items that may be skipped or reordered must keep
 *                  the size; RandomChoice's items must all give one size
 *   PERSPECTIVE    torchvision's perspective (grid_sample, interp and fill as
 *                  AFFINE): mode 0 RandomPerspective, with probability p,
 *                  distortion_scale a[0]; mode 1 the fixed coefficients a[0..7]
 *                  (ln_perspective_coeffs)
 *   ELASTIC        torchvision's ElasticTransform: uniform [-1, 1) noise per
 *                  pixel and axis, Gaussian-blurred (sigma a[2] (x), a[3] (y),
 *                  kernel int(8 sigma + 1) made odd) and scaled by a[0] / H
 *                  (x) and a[1] / W (y) as torchvision; interp and fill as
 *                  AFFINE
 * Each op draws its random numbers from its own Philox stream of the key. */
enum { LN_TF_MAX_OPS = 12 };
enum { LN_OP_CROP = 1, LN_OP_HFLIP, LN_OP_VFLIP, LN_OP_NORMALIZE, LN_OP_RESIZE, LN_OP_RESIZED_CROP,
       LN_OP_JITTER, LN_OP_ERASE, LN_OP_GRAY, LN_OP_AFFINE, LN_OP_BLUR, LN_OP_PAD, LN_OP_POSTERIZE,
       LN_OP_SOLARIZE, LN_OP_AUTOCONTRAST, LN_OP_EQUALIZE, LN_OP_SHARPNESS, LN_OP_INVERT, LN_OP_AUTOAUG,
       LN_OP_GROUP, LN_OP_PERSPECTIVE, LN_OP_ELASTIC };
/* the AUTOAUG ops, in torchvision's order of RandAugment's space (Invert last) */
enum { LN_AUG_IDENTITY = 0, LN_AUG_SHEAR_X, LN_AUG_SHEAR_Y, LN_AUG_TRANSLATE_X, LN_AUG_TRANSLATE_Y,
       LN_AUG_ROTATE, LN_AUG_BRIGHTNESS, LN_AUG_COLOR, LN_AUG_CONTRAST, LN_AUG_SHARPNESS, LN_AUG_POSTERIZE,
       LN_AUG_SOLARIZE, LN_AUG_AUTOCONTRAST, LN_AUG_EQUALIZE, LN_AUG_INVERT, LN_AUG_NOPS };
enum { LN_AUG_MAX_NUM_OPS = 64 };   /* RandAugment's num_ops at most */
enum { LN_TF_HUE = 1, LN_TF_CENTER = 2, LN_TF_FILL = 4, LN_TF_EXPAND = 8 };
typedef struct ln_transform_op {
  int32_t kind, mode, h, w, pad;
  int32_t i, j, bh, bw, nv;
  int32_t interp, flags;
  float p;
  double a[12];
  float v[LN_DATA_MAX_CHANNELS];
} ln_transform_op;

typedef struct ln_transform {
  int32_t crop, out_h, out_w, pad;
  float flip_p, scale;
  int32_t normalize, nchannels;
  float mean[LN_DATA_MAX_CHANNELS], std[LN_DATA_MAX_CHANNELS], fill[LN_DATA_MAX_CHANNELS];
  int32_t nops;
  ln_transform_op ops[LN_TF_MAX_OPS];
} ln_transform;

/* The ops (LN_AUG_*) and signed magnitudes an AUTOAUG op o (the k-th of its
 * transform, 0-based) applies to the h x w sample keyed (seed, epoch, key),
 * in order: at most cap into ops/mags; returns how many it applies (-1 on
 * a bad op). */
LN_API int ln_autoaug_choices(const ln_transform_op *o, int k, int64_t h, int64_t w, uint64_t seed,
                              uint64_t epoch, uint64_t key, int32_t *ops, double *mags, int cap);

/* torchvision's _get_perspective_coeffs (in double): the 8 coefficients
 * mapping output pixels to input pixels for 4 point pairs (x, y each). */
LN_API int ln_perspective_coeffs(const double *startpoints, const double *endpoints, double *coeffs);
/* The displacement (h, w, 2) an ELASTIC op o (the k-th of its transform)
 * draws for the sample keyed (seed, epoch, key), and the uniform noise
 * (2, h, w) it blurred (noise may be NULL). */
LN_API int ln_elastic_displacement(const ln_transform_op *o, int k, int64_t h, int64_t w, uint64_t seed,
                                   uint64_t epoch, uint64_t key, float *disp, float *noise);

/* Shape (returns ndim, -1 on error) and dtype of a batch of b rows of x:
 * with tf, x is 4-D uint8 or float32 (N,C,H,W) and the batch is float32
 * (b,C,OH,OW); without tf it is (b, x's other dims) in x's dtype. */
LN_API int ln_batch_shape(const ln_tensor *x, const ln_transform *tf, int64_t b,
                          int64_t *shape, int *dtype);
/* Gather rows idx[0..b) (0-based) of x (N,...) into out and of y (N,...) into
 * out_y (y and out_y may be NULL): out/out_y contiguous cpu tensors of the
 * shapes ln_batch_shape gives (out_y: b then y's other dims, y's dtype).
 * keys[k] (NULL: idx[k]) with seed and epoch key sample k's random choices. */
LN_API int ln_batch_gather(ln_tensor *out, ln_tensor *out_y, const ln_tensor *x,
                           const ln_tensor *y, const int64_t *idx, const int64_t *keys,
                           int64_t b, const ln_transform *tf, uint64_t seed, uint64_t epoch);

/* Prefetching loader over tensors x (N,...) and y (N,...) or NULL. It owns a
 * ring of nslots pre-allocated batch buffers (slot tensors); batches of an
 * epoch are assembled into them in order, by `workers` threads running up to
 * `depth` (0..1024) batches ahead of the consumer (workers 0: on the calling thread
 * inside ln_loader_next). A batch handed out stays untouched until the
 * next-but-one batch is handed out; then its slot is refilled, once the work
 * queued on the CPU devices before that moment (which may read it) has run. */
typedef struct ln_loader ln_loader;   /* opaque */
LN_API ln_loader *ln_loader_new(const ln_tensor *x, const ln_tensor *y, int64_t batch_size,
                                const ln_transform *tf, int workers, int depth);
/* The same over image files (ImageFolder): paths[0..n) (copied) with labels
 * (int64, copied; NULL: no targets), each read in `mode` (LN_IMAGE_*) and
 * put through tf (NULL: x / 255) by the worker that makes its batch, at its
 * own size; the first sample's final size fixes its batch's (float32
 * (batch_size, C, H, W) slots, remade when a batch's size differs). A file
 * that cannot be read or decoded, or a size that differs within a batch, is
 * that batch's error from ln_loader_next, naming the file(s). */
LN_API ln_loader *ln_loader_new_files(int64_t n, const char *const *paths, const int64_t *labels, int mode,
                                      int64_t batch_size, const ln_transform *tf, int workers, int depth);
LN_API void ln_loader_free(ln_loader *l);   /* joins the workers (closes first) */
/* Joins the workers and frees the slots now; the struct stays until
 * ln_loader_free, and every later call on it is the error
 * "DataLoader: used after close()". Calling it again does nothing. */
LN_API void ln_loader_close(ln_loader *l);
LN_API int ln_loader_nslots(const ln_loader *l);
/* A new header on slot s's batch tensor (which 0: inputs, 1: targets; NULL
 * and no error when there are no targets). Full batch_size rows. */
LN_API ln_tensor *ln_loader_slot(const ln_loader *l, int s, int which);
/* Begin an epoch over rows order[0..n) of x (copied), at batch first_batch
 * (0 from the start; > 0 resumes); drop_last drops a short last batch.
 * Returns the number of batches in the epoch, or -1. */
LN_API int64_t ln_loader_start(ln_loader *l, const int64_t *order, int64_t n, int64_t first_batch,
                               int drop_last, uint64_t seed, uint64_t epoch);
/* The same with batches of their own sizes (a batch sampler's): batch b is
 * rows order[offsets[b] .. offsets[b+1]), nb batches, offsets[0] = 0, each
 * 1..batch_size rows. */
LN_API int64_t ln_loader_start_batches(ln_loader *l, const int64_t *order, const int64_t *offsets, int64_t nb,
                                       int64_t first_batch, uint64_t seed, uint64_t epoch);
/* The next batch of the epoch: returns its slot (>= 0) and its row count in
 * *rows, or -1 (past the end of the epoch, or an error in a worker). */
LN_API int ln_loader_next(ln_loader *l, int64_t *rows);

/* ------------------------------------------------------------------------ */
/* Collectives                                                                */
/* A communicator is a process group: world ranks 0..world-1 over every
 * process of the job, of which this process holds nlocal, its local ranks
 * 0..nlocal-1, each on one of its devices. A collective is called in every
 * process with that process's own tensors: ts[i] is local rank i's tensor,
 * on local rank i's device (nlocal of them); it enqueues each local rank's
 * part on that device's stream and returns at once; results are read like
 * any op's (a later op, sync, item). The ranks' workers meet inside the
 * collective. Tensors are contiguous, with equal shapes and dtypes across
 * ranks. Roots, sources and destinations are global ranks.
 * Reductions (op: LN_COMM_SUM/AVG/MAX/MIN) need float32 or float64; wire is
 * the format data travel in: -1 (exact) or LN_FLOAT16 / LN_BFLOAT16 (float32
 * data rounded to 16 bits on the wire, summed in float32). If a rank's device
 * holds an earlier error the collective is aborted on every rank and each
 * device reports it at its next synchronisation. backend NULL or "local":
 * the device workers of this process over shared memory, every rank in this
 * process (so one call carries every rank's tensor); a table of entry points
 * (c/comm/comm.h, which says how) lets mpi/nccl span processes with the same
 * calls. */
typedef struct ln_comm ln_comm;   /* opaque, refcounted by queued work */
typedef enum ln_comm_op {
  LN_COMM_SUM = 0, LN_COMM_AVG, LN_COMM_MAX, LN_COMM_MIN, LN_NCOMM_OPS
} ln_comm_op;

typedef struct ln_comm_config {
  const char *backend;     /* NULL or "local"; "mpi"; "nccl" (cuda devices) */
  int world_size;          /* ranks over all processes; 0: nlocal (local) or the launcher's (mpi) */
  int nlocal;              /* ranks this process holds */
  const int *ranks;        /* their global ranks (NULL: 0..nlocal-1, or the backend's) */
  const int *devices;      /* their devices */
  /* how the group's parts find each other: nccl, the unique id; local, a
   * name shared by groups of this process that split one world's ranks
   * (NULL: this group holds every rank); mpi, the group's members as
   * process (MPI world) ranks in group rank order, "0,2,3" (NULL: all) */
  const char *rendezvous;
} ln_comm_config;

LN_API ln_comm *ln_comm_create(const ln_comm_config *cfg);
/* a local group: this process holds every rank, rank i on devices[i] */
LN_API ln_comm *ln_comm_new(int n, const int *devices, const char *backend);
LN_API void ln_comm_free(ln_comm *c);           /* queued collectives still finish */
LN_API int ln_comm_size(const ln_comm *c);      /* world size */
LN_API int ln_comm_local_size(const ln_comm *c);
LN_API int ln_comm_rank(const ln_comm *c, int local);     /* global rank of local rank i */
LN_API int ln_comm_device(const ln_comm *c, int local);   /* device of local rank i */
LN_API const char *ln_comm_backend_name(const ln_comm *c);
/* in place: every rank's tensor <- op over all ranks' tensors */
LN_API int ln_comm_allreduce(ln_comm *c, ln_tensor *const *ts, int op, int wire);
/* The same on the devices' communication streams: each starts after the work
 * queued so far on its compute stream, which goes on meanwhile; call
 * ln_comm_wait before the compute streams read the results. (Inline devices:
 * the same as ln_comm_allreduce.) */
LN_API int ln_comm_allreduce_async(ln_comm *c, ln_tensor *const *ts, int op, int wire);
LN_API int ln_comm_wait(ln_comm *c);  /* each compute stream waits for its comm stream */
/* every rank's tensor <- root's */
LN_API int ln_comm_broadcast(ln_comm *c, ln_tensor *const *ts, int root);
/* rank r: in (world*m elements) -> out (m) = op over ranks of their in[r*m .. r*m+m) */
LN_API int ln_comm_reduce_scatter(ln_comm *c, ln_tensor *const *out, ln_tensor *const *in,
                                  int op, int wire);
/* rank r: in (m elements) -> out (world*m) = rank 0's in, rank 1's, ... */
LN_API int ln_comm_allgather(ln_comm *c, ln_tensor *const *out, ln_tensor *const *in);
/* point to point: the sender's (receiver's) rank is the local rank on t's
 * device, dst_rank (src_rank) a global rank. The value is taken when
 * the send runs on its stream (it never waits for the receiver); a recv
 * takes the oldest unmatched send from src_rank to its rank and waits for it
 * on its stream. A recv with no posted send is an error at the call. */
LN_API int ln_comm_send(ln_comm *c, const ln_tensor *t, int dst_rank);
LN_API int ln_comm_recv(ln_comm *c, ln_tensor *t, int src_rank);
LN_API int ln_comm_barrier(ln_comm *c);  /* every stream waits for all the others */
/* How ranks early at a barrier of this communicator's collectives waited for
 * the last one: out[0] = times one slept (a thread wake-up, tens of
 * microseconds, then delays it); out[1] = times one woke as its late peers
 * neared the collective on their compute streams and met them awake
 * (local backend; other backends leave both 0). */
LN_API int ln_comm_meet_stats(ln_comm *c, int64_t out[2]);
/* NCCL (backend 'nccl', for cuda devices; in liblunet_cuda.so, NCCL loaded
 * with dlopen on first use): its version (22803 for 2.28.3), or -1 with the
 * reason (no CUDA backend, NCCL missing). ln_nccl_unique_id writes a new
 * ncclUniqueId as 256 hex digits and a NUL into hex (n >= 257): one rank
 * makes it and hands it to the others as ln_comm_config.rendezvous. */
LN_API int ln_nccl_version(void);
LN_API int ln_nccl_unique_id(char *hex, size_t n);
/* The caller's source location ("train.lua:42") for the next collective of
 * this communicator: the mpi backend names it when ranks call different
 * collectives. Optional (front ends set it). */
LN_API int ln_comm_set_site(ln_comm *c, const char *site);

/* Processes (lunet.distributed): MPI, loaded from liblunet_mpi.so next to
 * this library (or $LUNET_MPI_LIB) on first use. ln_dist_init initialises MPI
 * (MPI_THREAD_MULTIPLE), learns every process's host and pid, and sets how
 * long a collective waits for live peers (timeout_s; a lost peer is reported
 * at once). Idempotent; *rank, *size: this process's world rank and the
 * number of processes. */
LN_API int ln_dist_init(double timeout_s, int *rank, int *size);
LN_API int ln_dist_peer(int rank, char *host, int hostlen, int *pid);
LN_API int ln_dist_finalize(void);   /* at most once; MPI cannot start again */

#ifndef LN_CDEF
#ifdef __cplusplus
}
#endif
#endif
#endif /* LUNET_H */
