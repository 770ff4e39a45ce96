/* backend.h -- the kernel table of a device type, and the argument blocks
 * that op front ends (c/ops/) pass to kernels.
 *
 * A front end checks arguments, computes shapes, allocates outputs and calls
 * ln_launch(device, op, backend->kernel, &args, ...). The CPU backend
 * (c/cpu/) fills the table now; a CUDA backend fills the same table with
 * kernels that launch asynchronously on the device's stream. Argument blocks
 * hold kernel views (ln_kview), never tensor headers, so they can be copied
 * into a queue. */
#ifndef LN_BACKEND_H
#define LN_BACKEND_H
#include "internal.h"

enum { LN_AXPY = LN_NBINARY };     /* internal binary op: a + alpha*b */
enum { LN_CLAMP = LN_NUNARY };     /* internal unary op with p0, p1 bounds */

typedef struct { int op; int scalar_side; double alpha; ln_kview out, a, b; _Alignas(8) char scalar[8]; } ln_binary_args;
typedef struct { int op; double p0, p1; ln_kview out, a; } ln_unary_args;
typedef struct { ln_kview dst, src; } ln_copy_args;
typedef struct { ln_kview out, cond, a, b; } ln_where_args;
typedef struct { double value, step; ln_kview out; } ln_fill_args;
/* randint: ilo + (bits mod irange), in uint64 (irange = hi - lo, wrapped) */
typedef struct { uint64_t seed, offset; int dist; double p0, p1; int64_t ilo; uint64_t irange; ln_kview out; } ln_random_args;
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
                                          s2 max_exp_avg_sq; rmsprop: s0 square_avg, s1 buf, s2 grad_avg */
  union { ln_sgd_params sgd; ln_adam_params adam; ln_rmsprop_params rmsprop; } hp;
} ln_optim_args;
typedef struct { double p; int64_t n; ln_kview in, out; } ln_norm_args;

/* reductions (c/ops/reduce.c): a's last dim is the reduced one (size r), its
 * leading dims the kept ones; out (and idx, int64, or data NULL) contiguous */
typedef struct { int op; double p; int64_t r; ln_kview out, idx, a; } ln_reduce_args;
/* index_select / gather (out, a, index) and scatter_add_ (out += src at index) */
typedef struct { int dim; ln_kview out, a, index, src; } ln_index_args;

typedef struct ln_backend {
  const char *name;
  ln_task_fn binary, unary, copy, where, fill, arange, random, gemm;
  /* later issues add entries here: reduce, index ops, nn kernels, optimizers */
  ln_task_fn reduce, index_select, gather, scatter_add;   /* c/ops/reduce.c, c/ops/index.c */
  ln_task_fn sgd_step, adam_step, rmsprop_step, norm_pow_sum;   /* optimizers (c/ops/optim.c) */
  /* nn kernels: argument blocks in c/nn/nn.h */
  ln_task_fn conv2d_fwd, conv2d_bwd, maxpool2d_fwd, maxpool2d_bwd, avgpool2d_fwd, avgpool2d_bwd,
      adaptive_avgpool2d_fwd, adaptive_avgpool2d_bwd, batchnorm_fwd, batchnorm_bwd, softmax_fwd,
      softmax_bwd, nll_loss_fwd, nll_loss_bwd, relu_bwd;
} ln_backend;

const ln_backend *ln_backend_of(int device);
extern const ln_backend ln_cpu_backend;

/* Broadcast view of t against out_shape (stride 0 on broadcast dims). */
ln_kview ln_kview_broadcast(const ln_tensor *t, int ndim, const int64_t *shape);
/* Shape that a and b broadcast to; error names fn. */
int ln_broadcast_shapes(const char *fn, int na, const int64_t *sa, int nb, const int64_t *sb,
                        int *nout, int64_t *out);
int ln_check_same_device(const char *fn, const ln_tensor *a, const ln_tensor *b);

#endif
