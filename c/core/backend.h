/* backend.h -- a device type is a backend: its runtime (memory, streams,
 * events) and its kernel table; and the argument blocks that op front ends
 * (c/ops/, c/nn/) pass to kernels.
 *
 * A front end checks arguments, computes shapes, allocates outputs and calls
 * ln_launch(device, op, ln_backend_of(device)->kernel, &args, ...). The CPU
 * backend (c/cpu/) fills the table; a CUDA backend fills the same table with
 * kernels that launch asynchronously on the device's stream. Argument blocks
 * hold kernel views (ln_kview), never tensor headers, so they can be copied
 * into a queue. */
#ifndef LN_BACKEND_H
#define LN_BACKEND_H
#include "internal.h"
#include "nn_args.h"
#include "philox.h"

enum { LN_AXPY = LN_NBINARY };     /* internal binary op: a + alpha*b */
enum { LN_CLAMP = LN_NUNARY };     /* internal unary op with p0, p1 bounds */

/* alpha, p1, p2: an activation backward's parameters (LN_ELU_BWD, LN_SOFTPLUS_BWD) */
typedef struct { int op; int scalar_side; double alpha; ln_kview out, a, b; _Alignas(8) char scalar[8]; double p1, p2; } ln_binary_args;
typedef struct { int op; double p0, p1; ln_kview out, a; double p2; } ln_unary_args;
typedef struct { ln_kview dst, src; } ln_copy_args;
typedef struct { ln_kview out, cond, a, b; } ln_where_args;
typedef struct { double value, step; ln_kview out; } ln_fill_args;
/* randint: ilo + (bits mod irange), in uint64 (irange = hi - lo, wrapped) */
typedef struct {
  uint64_t seed, offset; int dist; double p0, p1; int64_t ilo; uint64_t irange;
  ln_rng_params prm;   /* (philox.h: the stream) */
  ln_kview out;
} ln_random_args;
typedef struct {
  int trans_a, trans_b; int64_t batch, m, n, k;
  int64_t batch_stride_a, batch_stride_b, batch_stride_c;
  int64_t lda, ldb, ldc; double alpha, beta; int dtype;
  char *a, *b, *c;
} ln_gemm_args;

/* optimizers: contiguous buffers of n elements of dtype; NULL state when unused */
typedef struct {
  int dtype; int64_t n;
  char *param, *grad, *s0, *s1, *s2;   /* sgd: s0 momentum; adam: s0 exp_avg, s1 exp_avg_sq,
                                          s2 max_exp_avg_sq; rmsprop: s0 square_avg, s1 buf, s2 grad_avg;
                                          adagrad: s0 sum; adamax: s0 exp_avg, s1 exp_inf;
                                          nadam, radam: s0 exp_avg, s1 exp_avg_sq;
                                          adadelta: s0 square_avg, s1 acc_delta */
  union {
    ln_sgd_params sgd; ln_adam_params adam; ln_rmsprop_params rmsprop; ln_adagrad_params adagrad;
    ln_adamax_params adamax; ln_nadam_params nadam; ln_radam_params radam; ln_adadelta_params adadelta;
  } hp;
} ln_optim_args;
typedef struct { double p; int64_t n; ln_kview in, out; } ln_norm_args;

/* reductions (c/ops/reduce.c): a's last dim is the reduced one (size r), its
 * leading dims the kept ones; out (and idx, int64, or data NULL) contiguous */
typedef struct { int op; double p; int64_t r; ln_kview out, idx, a; } ln_reduce_args;
/* sort (c/ops/sort.c): a's last dim is the sorted one (size r > 0), its
 * leading dims the kept ones (any strides); out (int64) is viewed the same
 * way, its last dim of size k <= r: the 0-based positions of a row's k
 * smallest (descending: largest) elements in order, equal ones in their
 * input order, NaN above every number */
typedef struct { int descending; int64_t r, k; ln_kview out, a; } ln_sort_args;
/* scan (c/ops/scan.c): the cumulative sum or product (op: LN_SCAN_SUM,
 * LN_SCAN_PROD) along a's last dim (size r > 0), its leading dims the kept
 * ones (any strides); out (a's dtype: float32, float64, int32, int64 or
 * uint8) is viewed the same way. Floats accumulate in double, integers in
 * int64 wrapping around. */
typedef struct { int op; int64_t r; ln_kview out, a; } ln_scan_args;
/* index_select / gather (out, a, index), scatter_add_ (out += src at index)
 * and scatter_reduce_ (op: ln_scatter_op; include_self as lunet.h says) */
typedef struct { int dim, op, include_self; ln_kview out, a, index, src; } ln_index_args;

/* ---- device types ----------------------------------------------------------
 * A device id is type * LN_CUDA_BASE + index: cpu:k is k, cuda:k is 256 + k.
 * Each type is one backend, registered with core by the code that implements
 * it (c/cpu/ registers "cpu" when the library loads; core includes nothing of
 * it). LN_TYPE_TEST: the spec-only "rec" backend (c/cpu/rec_backend.c). */
enum { LN_TYPE_CPU = 0, LN_TYPE_CUDA = 1, LN_TYPE_TEST = 2, LN_NTYPES = 4,
       LN_MAX_TYPE_DEVICES = LN_MAX_CPU_DEVICES };
static inline int ln_device_type(int id) { return (int)((unsigned)id / LN_CUDA_BASE); }
static inline int ln_device_index(int id) { return (int)((unsigned)id % LN_CUDA_BASE); }

/* ---- runtime ----------------------------------------------------------------
 * What core needs from a device type to hold memory and run work; index is
 * the device's index within its type. Entries left NULL get core's generic
 * version over the backend's host streams (c/core/stream.h): a backend whose
 * work a host thread runs (cpu, and the spec-only test backend) fills
 * `stream` and leaves launch/events/synchronize NULL; a GPU backend fills
 * them with its own streams and events. */
struct ln_stream;
typedef struct ln_runtime {
  int (*device_count)(void);
  /* raw device memory, aligned to LN_ALIGN; NULL when there is none left */
  void *(*alloc)(int index, size_t nbytes);
  void (*free)(int index, void *p, size_t nbytes);
  /* page-locked host memory for fast transfers (NULL: plain host memory is as good) */
  void *(*host_alloc)(size_t nbytes);
  void (*host_free)(void *p);
  /* copies between host and device memory (ln_tensor_read, from_buffer) and
   * between two devices of the type (ln_copy_'s byte copies, copy.c); NULL:
   * the device's memory is host memory, and a copy kernel does it */
  int (*copy_to_host)(int index, void *dst, const void *src, size_t nbytes);
  int (*copy_from_host)(int index, void *dst, const void *src, size_t nbytes);
  int (*copy_peer)(int dst_index, void *dst, int src_index, const void *src, size_t nbytes);
  /* the device's host stream `which` (0 compute, 1 comm); start: create it
   * when it is not running yet (else NULL for a stream never started) */
  struct ln_stream *(*stream)(int index, int which, bool start);
  int (*launch)(int index, int which, const char *op, ln_task_fn fn, const void *args, size_t argsize,
                const ln_tensor *const *keep, int nkeep, int flags, int64_t *seq);
  int (*event_record)(int index, ln_event *ev);
  int (*event_wait)(int index, const ln_event *ev);   /* device index waits for ev */
  int (*event_query)(const ln_event *ev);
  int (*event_synchronize)(const ln_event *ev);
  int (*synchronize)(int index);
  /* scratch bytes kernel slot k needs for its argument block (NULL: none);
   * conv2d's front ends ask it when the backend has no nn planner entry */
  size_t (*workspace_size)(int kernel, const void *args);
  /* host work over [0, n) in parts of at least grain on the threads the
   * calling task may use (a backend whose tasks run on host threads; NULL:
   * the caller runs it alone); see ln_host_parallel_for */
  void (*parallel_for)(int64_t n, int64_t grain, ln_range_fn fn, void *ctx);
} ln_runtime;

/* ---- kernel table ------------------------------------------------------------
 * One slot per kernel; a backend leaves the ones it lacks NULL, or refuses a
 * dtype in supports(): ln_kernel then gives a named error ("conv2d: cuda:0 has
 * no float64 kernel for conv2d_fwd"), and ln_launch refuses a NULL kernel
 * ("...has no kernel for ..."), so no NULL is ever called. */
#define LN_KERNEL_SLOTS(X)                                                                          \
  X(binary) X(unary) X(copy) X(where) X(fill) X(arange) X(random) X(gemm)                           \
  X(reduce) X(index_select) X(gather) X(scatter_add) X(scatter_reduce) /* c/ops/reduce.c, index.c */ \
  X(sort) X(scan)                                                  /* c/ops/sort.c, c/ops/scan.c */   \
  X(sgd_step) X(adam_step) X(rmsprop_step) X(norm_pow_sum)         /* c/ops/optim.c */                \
  X(adagrad_step) X(adamax_step) X(nadam_step) X(radam_step) X(adadelta_step)                      \
  X(conv2d_fwd) X(conv2d_bwd) X(maxpool2d_fwd) X(maxpool2d_bwd)    /* c/nn: argument blocks in nn.h */ \
  X(avgpool2d_fwd) X(avgpool2d_bwd) X(adaptive_avgpool2d_fwd) X(adaptive_avgpool2d_bwd)            \
  X(batchnorm_fwd) X(batchnorm_bwd) X(softmax_fwd) X(softmax_bwd) X(nll_loss_fwd) X(nll_loss_bwd)  \
  X(relu_bwd) X(interp_fwd) X(interp_bwd) X(grid_sample_fwd) X(grid_sample_bwd)   /* c/nn/interp.c, grid.c */

enum {
#define LN_SLOT_ENUM(n) LN_K_##n,
  LN_KERNEL_SLOTS(LN_SLOT_ENUM)
#undef LN_SLOT_ENUM
  LN_NKERNELS
};

/* ---- nn planner ----------------------------------------------------------------
 * Host-side planning a backend's NN kernels need before a front end launches
 * them: scratch sizes and thread tiles, the state a training forward saves
 * for its backward, the layout of fused blocks' activations. A backend with
 * no planner (or a NULL entry) gets: the scratch its runtime's
 * workspace_size asks (or none), no saved state, dense NCHW activations. */
typedef struct ln_nn_planner {
  /* fills a's plan fields (threads, tiles) for the device of index `index`
   * and returns the scratch bytes its conv2d kernel needs for a forward, or
   * for the backward passes asked (want_din, want_dw) */
  size_t (*conv2d)(int index, ln_conv2d_args *a, bool want_din, bool want_dw);
  /* float32 elements of the state a training forward can save for the
   * backward of the convolution of geometry a (0: it saves none) */
  int64_t (*conv2d_saved_numel)(const ln_conv2d_args *a);
  /* whether a run of nb fused blocks (after stem, or NULL) keeps its
   * activations in the backend's own layout between blocks */
  bool (*blocks_native)(const ln_block_args *b, int nb, const ln_conv2d_args *stem);
  /* bytes of one (N,C,H,W) activation of dtype in the backend's layout (at
   * least its dense size) */
  size_t (*activation_bytes)(const int64_t shape[4], int dtype);
} ln_nn_planner;

typedef struct ln_backend {
  const char *name;     /* the device type: "cpu", "cuda" */
  int type;             /* LN_TYPE_* */
  ln_runtime rt;
  const ln_nn_planner *nn;   /* NULL: the defaults above */
  /* whether kernel slot k runs dtype (NULL: every dtype of a non-NULL slot) */
  bool (*supports)(int kernel, int dtype);
  union {
    struct {
#define LN_SLOT_FIELD(n) ln_task_fn n;
      LN_KERNEL_SLOTS(LN_SLOT_FIELD)
#undef LN_SLOT_FIELD
    };
    ln_task_fn kernel[LN_NKERNELS];
  };
} ln_backend;

/* Registers backend b for its type (a later call replaces it; the devices
 * of the type must hold no memory then). 0 ok. */
int ln_backend_register(const ln_backend *b);
extern const ln_backend *ln_backends[LN_NTYPES];
extern const ln_backend ln_no_backend;   /* every slot NULL: ln_launch names the device */
/* The backend of a device id: one load, no check (ids come from tensors and
 * checked calls; an unknown type gets ln_no_backend, whose kernels are NULL). */
static inline const ln_backend *ln_backend_of(int device) {
  unsigned t = (unsigned)device / LN_CUDA_BASE;
  const ln_backend *b = t < LN_NTYPES ? ln_backends[t] : NULL;
  return b ? b : &ln_no_backend;
}
/* Kernel slot k of device's backend for dtype; where the backend lacks it,
 * ln_no_kernel with a named error set, which ln_launch then returns (so
 * `ln_launch(dev, fn, ln_kernel(fn, dev, LN_K_binary, dtype), ...)` reads). */
ln_task_fn ln_kernel(const char *fn, int device, int k, int dtype);
int ln_no_kernel(void *args);
const char *ln_kernel_name(int k);
/* "cpu:1", "cuda:0" into buf */
const char *ln_device_str(char *buf, size_t n, int device);

/* The generic runtime over host streams (what a NULL launch/event/
 * synchronize entry gets; a backend that wraps them calls these). */
int ln_host_sync(int device);
int ln_host_event_record(int device, ln_event *ev);
int ln_host_event_wait(int device, const ln_event *ev);
int ln_host_event_query(const ln_event *ev);
int ln_host_event_synchronize(const ln_event *ev);
/* a device's memory limit, set by its runtime while it configures (no checks) */
void ln_pool_set_limit(int device, int64_t bytes);

/* Broadcast view of t against out_shape (stride 0 on broadcast dims). */
ln_kview ln_kview_broadcast(const ln_tensor *t, int ndim, const int64_t *shape);
/* Shape that a and b broadcast to; error names fn. */
int ln_broadcast_shapes(const char *fn, int na, const int64_t *sa, int nb, const int64_t *sb,
                        int *nout, int64_t *out);
int ln_check_same_device(const char *fn, const ln_tensor *a, const ln_tensor *b);
/* dst <- src, src broadcast to dst's shape and cast to its dtype, across
 * devices through events: ln_copy_'s checks and the backend's copy kernel, in
 * core (copy.c) so that contiguous/clone and random draws need not call c/ops.
 * dst_fresh: dst's storage was just allocated (see copy.c). */
int ln_copy_into(ln_tensor *dst, const ln_tensor *src, bool dst_fresh);

#endif
