/* nn_args.h -- the argument blocks that the neural-network front ends
 * (c/nn/: the ln_*_forward/backward functions of lunet.h) pass to a backend's
 * kernels (slots conv2d_fwd .. relu_bwd of backend.h).
 *
 * Front ends make every input contiguous and write into a contiguous
 * temporary when a caller's output is a non-contiguous view, so kernels see
 * plain pointers to dense row-major arrays plus sizes: nothing that refers to
 * an ln_tensor header, so a block can be queued on a device and run later.
 * A NULL pointer means "not given / not wanted". Fields marked "plan" belong
 * to the backend: its nn planner (backend.h) fills them on the host. */
#ifndef LN_NN_ARGS_H
#define LN_NN_ARGS_H
#include "internal.h"

/* conv2d. in (N,C,H,W), w (O,C/G,KH,KW), b (O), out (N,O,OH,OW).
 * scratch: nthreads slices of `slice` elements (im2col columns), then for the
 * weight gradient nthreads-1 private (O,C/G,KH,KW) accumulators. */
typedef struct {
  int dtype, nthreads;
  int64_t N, C, H, W, O, KH, KW, OH, OW;
  ln_conv2d_params p;
  int64_t tile;        /* output positions per im2col tile */
  int64_t chunk;       /* input channels per backward-data work item */
  int64_t slice;       /* elements of one thread's column scratch */
  char *out, *in, *w, *b;
  char *din, *dw, *db, *dout;
  char *scratch;
  /* forward only (ln_conv2d_forward_fused): out = relu?(bn?(conv + b) + res?).
   * bn_m/bn_v (O) non-NULL: eval batch norm folded into w and b at
   * scratch + fold_off (O*C/G*KH*KW weights, then O biases) */
  char *res, *bn_w, *bn_b, *bn_m, *bn_v;
  double bn_eps;
  int relu;
  int64_t fold_off;
  int fold_only;       /* the fold launch: folded w/b to scratch + fold_off, nothing else */
  int raw;             /* conv_dnnl.c: src/dst already in its blocked layout */
  int block;           /* this is the first member of an ln_block_args */
  /* training (ln_conv2d_forward_saving / _backward_saved): the input in
   * conv_dnnl.c's blocked layout, written by the forward (always, whichever
   * implementation runs the convolution) and read by the weight gradient */
  char *saved;
} ln_conv2d_args;

/* ln_basicblock_forward_fused: c[0] conv1, c[1] conv2, c[2] the shortcut conv
 * (when has_sc), each with folded weights/bias; xb, hb, rb blocked or NCHW
 * intermediates in scratch. c[0].block = 1 tells ln_cpu_conv2d_fwd. */
typedef struct {
  ln_conv2d_args c[3];
  int has_sc;
  int in_blk, out_blk;   /* in / out in oneDNN's blocked layout (a run of blocks) */
  char *in, *out, *xb, *hb, *rb;
} ln_block_args;

/* max/avg/adaptive pools over planes = N*C of (H,W) -> (OH,OW);
 * idx int64 (planes,OH,OW) for max pooling. */
typedef struct {
  int dtype;
  int64_t planes, H, W, OH, OW;
  ln_pool2d_params p;
  char *out, *in, *din, *dout;
  int64_t *idx;
} ln_pool2d_args;

/* grid_sample over sd = 2 or 3 spatial dims: in (N,C,planes of PI =
 * size[0]*size[1]*size[2] elements: W, H, D with D 1 for sd 2), grid
 * (N,P,sd), out/dout (N,C,P); mode/padding as c/core/grid_taps.h's GS_* */
typedef struct {
  int dtype, mode, padding, align, sd;
  int64_t N, C, P, PI;
  int64_t size[3];
  char *out, *in, *grid, *din, *dgrid, *dout;
} ln_grid_args;

/* batch norm over in (N,C,S); mean/invstd/running/weight/bias (C) */
typedef struct {
  int dtype, training;
  int relu;   /* out = relu(bn(in)); backward: out is the forward's, its zeros mask dout */
  int64_t N, C, S;
  double momentum, eps;
  char *out, *in, *weight, *bias, *save_mean, *save_invstd, *running_mean, *running_var;
  char *res;  /* relu only: out = relu(bn(in) + res) (NULL: none) */
  char *din, *dweight, *dbias, *dout;
  char *dres; /* relu only: the gradient of res, dout masked by out's zeros (NULL: none) */
} ln_batchnorm_args;

/* softmax over D of (outer, D, inner) */
typedef struct {
  int dtype, log;
  int64_t outer, D, inner;
  char *out, *in, *din, *dout;
} ln_softmax_args;

/* nll loss of logp (N,C) at target (N) */
typedef struct {
  int dtype, reduction;
  int64_t N, C, ignore_index, base;
  char *out, *logp, *weight, *dlogp, *dout;
  const int64_t *target;
} ln_nll_args;

/* din = dout * (out > 0), n elements */
typedef struct {
  int dtype;
  int64_t n;
  char *din, *dout, *out;
} ln_relu_bwd_args;

/* interpolate (c/nn/interp.c) over planes = N*C of sd (1 to 3) spatial dims
 * isz -> osz; mode LN_INTERP_*; scale[d] the scale_factor of dim d (0: none);
 * source indices and weights from interp_index.h */
typedef struct {
  int dtype, mode, sd, align_corners;
  int64_t planes, isz[3], osz[3];
  double scale[3];
  char *out, *in, *din, *dout;
  /* backward on host kernels: dout read through its strides (elements; N, C,
   * then the spatial dims) when gstrided, C its channels (else dense) */
  int gstrided;
  int64_t C, gst[5];
} ln_interp_args;

#endif
