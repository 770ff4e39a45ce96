/* kern.h -- the interface between the CUDA backend's C side (runtime.c,
 * backend.c: argument blocks, streams, errors) and its kernels (*.cu, C++):
 * plain C types only, since core's headers are C11. lnc_view has ln_kview's
 * layout (backend.c checks that at compile time). Each launcher queues its
 * kernels on stream s and returns a cudaError_t (0: queued). */
#ifndef LNC_KERN_H
#define LNC_KERN_H
#include <stdint.h>
#include "../core/philox.h"
#ifdef __cplusplus
extern "C" {
#endif

enum { LNC_MAX_DIMS = 8 };
typedef struct lnc_view {
  char *data;
  int32_t dtype, ndim;
  int64_t shape[LNC_MAX_DIMS];
  int64_t stride[LNC_MAX_DIMS];   /* in elements */
} lnc_view;

typedef struct CUstream_st *lnc_stream;

/* the nccl backend's wire formats (nccl_wire.cu): o <- x rounded to float16
 * (bf16 0) or bfloat16 (1); o <- h as float32, divided by div and rounded to
 * the wire again when div > 0 (an average) */
int lnc_to_wire(lnc_stream s, uint16_t *o, const float *x, int64_t n, int bf16);
int lnc_from_wire(lnc_stream s, float *o, const uint16_t *h, int64_t n, int bf16, float div);

/* out = a op b, each broadcast to out's shape; scalar_side 1 or 2: that
 * operand is the scalar whose bytes (a's dtype) are in scalar */
int lnc_binary(lnc_stream s, int op, double alpha, double p1, double p2, const lnc_view *out,
               const lnc_view *a, const lnc_view *b, int scalar_side, uint64_t scalar);
int lnc_unary(lnc_stream s, int op, double p0, double p1, double p2, const lnc_view *out, const lnc_view *a);
/* dst <- src (broadcast, cast); both in device memory */
int lnc_copy(lnc_stream s, const lnc_view *dst, const lnc_view *src);
int lnc_where(lnc_stream s, const lnc_view *out, const lnc_view *cond, const lnc_view *a, const lnc_view *b);
/* every element of out <- the bytes of value (out's dtype, 1/2/4/8 bytes) */
int lnc_fill(lnc_stream s, const lnc_view *out, uint64_t value);
/* contiguous out[i] <- start + i*step, converted to out's dtype */
int lnc_arange(lnc_stream s, const lnc_view *out, double start, double step);
/* a's last dim (size r) reduced into contiguous out (and idx, int64, when
 * its data is not NULL) */
int lnc_reduce(lnc_stream s, int op, double p, int64_t r, const lnc_view *out, const lnc_view *idx,
               const lnc_view *a);
/* SGD over n contiguous elements (float32 or float64), PyTorch 1.13's
 * arithmetic as c/cpu/optim.c; mom NULL: no momentum; first: mom <- d */
typedef struct { double lr, momentum, dampening, weight_decay; int nesterov, maximize, first; } lnc_sgd;
int lnc_sgd_step(lnc_stream s, int dtype, int64_t n, char *param, const char *grad, char *mom, const lnc_sgd *h);
/* Adam/AdamW (decoupled), amsgrad when vmax is not NULL; step is 1-based */
typedef struct { double lr, beta1, beta2, eps, weight_decay; int64_t step; int decoupled, maximize; } lnc_adam;
int lnc_adam_step(lnc_stream s, int dtype, int64_t n, char *param, const char *grad, char *m, char *v, char *vmax,
                  const lnc_adam *h);

/* RMSprop: sq square_avg, buf momentum (momentum > 0), ga grad_avg (centered) */
typedef struct { double lr, alpha, eps, weight_decay, momentum; int centered, maximize; } lnc_rmsprop;
int lnc_rmsprop_step(lnc_stream s, int dtype, int64_t n, char *param, const char *grad, char *sq, char *buf, char *ga,
                     const lnc_rmsprop *h);
/* out[0] (float64, device) <- sum |x|^p (max |x| for p = inf) over n contiguous elements of in */
int lnc_norm_pow_sum(lnc_stream s, double p, int64_t n, const lnc_view *in, const lnc_view *out);

/* random.cu: c/cpu/random.c's Philox draws into n contiguous elements of dtype
 * (dist 0 uniform [p0,p1), 1 normal (p0, p1), 2 integers ilo + bits % irange, 3 bernoulli p0;
 * the stream and prm: c/core/philox.h) */
typedef struct { uint64_t seed, offset; int dist; double p0, p1; int64_t ilo; uint64_t irange; ln_rng_params prm; } lnc_random_args;
int lnc_random(lnc_stream s, const lnc_random_args *a, char *out, int dtype, int64_t n);

/* index.cu: the index check (synchronous: *bad_pos -1, or the first bad
 * index's position in index order, its value in *bad); index_select / gather
 * over es-byte elements; scatter_add (out += src at index along dim) */
int lnc_index_check(lnc_stream s, const lnc_view *ix, int64_t size, int64_t *bad_pos, int64_t *bad);
int lnc_index_select(lnc_stream s, int gather, int dim, const lnc_view *out, const lnc_view *a, const lnc_view *index,
                     int es);
int lnc_scatter_add(lnc_stream s, int dim, const lnc_view *out, const lnc_view *index, const lnc_view *src);
/* scatter_reduce_ (op: ln_scatter_op) as the CPU's, each fiber on one thread */
int lnc_scatter_reduce(lnc_stream s, int op, int include_self, int dim, const lnc_view *out, const lnc_view *index,
                       const lnc_view *src);

/* nn.cu: float32/float64 over dense arrays (c/core/nn_args.h) */
struct ln_pool2d_params;
int lnc_relu_bwd(lnc_stream s, int dtype, int64_t n, char *dx, const char *dy, const char *y);
/* forward (dx NULL): y <- softmax(x); backward: dx from dy and the forward's y */
int lnc_softmax(lnc_stream s, int dtype, int log, int64_t outer, int64_t D, int64_t inner, char *y, const char *x,
                char *dx, const char *dy);
/* synchronous: *bad_sample -1, or the first sample whose target is out of range (and that target) */
int lnc_nll_check(lnc_stream s, int64_t N, int64_t C, int64_t base, int64_t ignore, const int64_t *t,
                  int64_t *bad_sample, int64_t *bad_target);
/* forward (dlp NULL) into out, else backward into dlp */
int lnc_nll(lnc_stream s, int dtype, int reduction, int64_t N, int64_t C, int64_t base, int64_t ignore,
            const char *lp, const char *w, const int64_t *t, char *out, char *dlp, const char *dout);
/* kind 0 max (idx), 1 average; bwd 0/1. Max backward is synchronous and sets
 * bad[0] = 1, bad[1] = the index when an index is outside its plane */
int lnc_pool(lnc_stream s, int kind, int bwd, int dtype, const struct ln_pool2d_params *p, int64_t planes, int64_t H,
             int64_t W, int64_t OH, int64_t OW, char *out, const char *in, char *din, const char *dout, int64_t *idx,
             int64_t bad[2]);
/* adaptive average pooling (torch's bins), forward or backward */
int lnc_adaptive_pool(lnc_stream s, int bwd, int dtype, int64_t planes, int64_t H, int64_t W, int64_t OH, int64_t OW,
                      char *out, const char *in, char *din, const char *dout);
/* interpolate (interp.cu): mode LN_INTERP_*, sd spatial dims isz -> osz,
 * forward (out from in) or backward (din from dout) */
int lnc_interp(lnc_stream s, int bwd, int dtype, int mode, int sd, int align, int64_t planes, const int64_t *isz,
               const int64_t *osz, const double *scale, char *out, const char *in, char *din, const char *dout);

/* grid.cu: grid_sample forward (bwd 0) or backward (din, dgrid each NULL
 * when not wanted); lnc_grid has c/core/nn_args.h's ln_grid_args layout */
typedef struct lnc_grid {
  int dtype, mode, padding, align, sd;
  int64_t N, C, P, PI;
  int64_t size[3];
  char *out, *in, *grid, *din, *dgrid, *dout;
} lnc_grid;
int lnc_grid_sample(lnc_stream s, int bwd, const lnc_grid *a);
/* conv_ep.cu: around cuDNN's convolution (conv_cudnn.c). bn_fold: eval batch
 * norm folded into (O,K) weights wf and O biases bf (g, be, b NULL: 1, 0, 0;
 * m NULL: a plain copy); epilogue: out = relu?((zero ? 0 : out) + b + res)
 * over (N,O,S); bias_grad: db = dout summed over N and S */
int lnc_bn_fold(lnc_stream s, int dtype, int64_t O, int64_t K, const char *w, const char *b, const char *g,
                const char *be, const char *m, const char *v, double eps, char *wf, char *bf);
int lnc_conv_epilogue(lnc_stream s, int dtype, int64_t N, int64_t O, int64_t S, char *out, const char *b,
                      const char *res, int relu, int zero);
int lnc_bias_grad(lnc_stream s, int dtype, int64_t N, int64_t O, int64_t S, const char *dout, char *db);
/* bn.cu: ln_batchnorm_args's layout (c/core/nn_args.h; backend.c checks it) */
typedef struct lnc_bn {
  int dtype, training, relu;
  int64_t N, C, S;
  double momentum, eps;
  char *out, *in, *weight, *bias, *save_mean, *save_invstd, *running_mean, *running_var;
  char *res;
  char *din, *dweight, *dbias, *dout;
  char *dres;
} lnc_bn;
int lnc_batchnorm(lnc_stream s, int bwd, const lnc_bn *a);

#ifdef __cplusplus
}
#endif
#endif
