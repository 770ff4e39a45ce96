/* nn.h -- neural-network kernels: the argument blocks that the front ends
 * (c/nn/ files: the ln_*_forward/backward functions of lunet.h) pass to the
 * backend's kernels, the CPU kernels themselves, and helpers the front ends
 * share (c/nn/common.c).
 *
 * Front ends make every input contiguous (ln_contiguous) and write into a
 * contiguous temporary when a caller's output is a non-contiguous view, so
 * kernels see plain pointers to dense row-major arrays plus sizes: nothing
 * that refers to an ln_tensor header, so the block can be queued on a virtual
 * device and run later. A NULL pointer means "not given / not wanted". */
#ifndef LN_NN_H
#define LN_NN_H
#include "../core/backend.h"

/* ---- argument blocks -------------------------------------------------------- */

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

/* ---- CPU kernels (c/nn/) ----------------------------------------------------- */

int ln_cpu_conv2d_fwd(void *args);
int ln_cpu_conv2d_bwd(void *args);
/* direct float32 forward for small stride-1 convolutions (conv_direct.c):
 * ok says whether it applies (and fits the planned scratch slices) */
bool nn_conv_direct_ok(const ln_conv2d_args *a);
int nn_conv_direct_fwd(const ln_conv2d_args *a);
bool nn_conv_direct_bwd_data_ok(const ln_conv2d_args *a);
void nn_conv_direct_bwd_data(const ln_conv2d_args *a, int nthreads);
bool nn_conv_direct_narrow_data_ok(const ln_conv2d_args *a);
/* weight gradient (+ bias gradient when a->db) for 1-2 input channels, and 3
 * for 3x3 kernels over rows of whole 16-column vectors on AVX-512 */
bool nn_conv_direct_wgrad_ok(const ln_conv2d_args *a);
void nn_conv_direct_wgrad(const ln_conv2d_args *a, int nthreads);
bool nn_conv_direct_wgrad16_ok(const ln_conv2d_args *a);
void nn_conv_direct_wgrad16(const ln_conv2d_args *a, int nthreads);
/* float32, one group, through oneDNN (conv_dnnl.c); 0, or -1 when oneDNN
 * cannot (the caller falls back to im2col + GEMM) */
bool nn_conv_dnnl_ok(const ln_conv2d_args *a);
/* ... and its backward passes too (no negative right padding) */
bool nn_conv_dnnl_bwd_ok(const ln_conv2d_args *a);
/* forward; a->res and a->relu run as oneDNN post-ops (sum, relu) */
int nn_conv_dnnl_fwd(const ln_conv2d_args *a, int nthreads);
/* a->in to a->saved (blocked), then the forward from it: 0; -1 oneDNN cannot
 * run this forward (saved is written: run another one); -2 the copy failed */
int nn_conv_dnnl_fwd_saving(const ln_conv2d_args *a, int nthreads);
int nn_conv_dnnl_block(const ln_conv2d_args *c1, const ln_conv2d_args *c2, const ln_conv2d_args *cs,
                       char *in, char *out, char *xb, char *hb, char *rb, bool in_blk, bool out_blk,
                       int nthreads);
size_t nn_conv_dnnl_blocked_bytes(int64_t N, int64_t C, int64_t H, int64_t W);
int nn_conv_dnnl_bwd_data(const ln_conv2d_args *a, int nthreads);
int nn_conv_dnnl_bwd_weights(const ln_conv2d_args *a, int nthreads, bool with_bias);
/* both gradients (dw, db when with_bias, din), grad_output reordered once */
int nn_conv_dnnl_bwd(const ln_conv2d_args *a, int nthreads, bool with_bias);
int ln_cpu_maxpool2d_fwd(void *args);
int ln_cpu_maxpool2d_bwd(void *args);
int ln_cpu_avgpool2d_fwd(void *args);
int ln_cpu_avgpool2d_bwd(void *args);
int ln_cpu_adaptive_avgpool2d_fwd(void *args);
int ln_cpu_adaptive_avgpool2d_bwd(void *args);
int ln_cpu_batchnorm_fwd(void *args);
int ln_cpu_batchnorm_bwd(void *args);
int ln_cpu_softmax_fwd(void *args);
int ln_cpu_softmax_bwd(void *args);
int ln_cpu_nll_loss_fwd(void *args);
int ln_cpu_nll_loss_bwd(void *args);
int ln_cpu_relu_bwd(void *args);

/* ---- front-end helpers (c/nn/common.c) ---------------------------------------- */

/* An input made contiguous: t itself when it already is, else a copy that
 * nn_in_free releases. */
typedef struct { const ln_tensor *t; ln_tensor *owned; } nn_in;
int nn_input(const char *fn, const char *name, const ln_tensor *t, nn_in *in);
void nn_in_free(nn_in *in);

/* An output the kernel writes densely: t itself when contiguous, else a
 * temporary copied into t by nn_out_finish (queued after the kernel). */
typedef struct { ln_tensor *user, *t; } nn_out;
int nn_output(const char *fn, const char *name, ln_tensor *t, nn_out *out);
int nn_out_finish(nn_out *out, int rc);   /* copies back on rc == 0, frees */

/* Checks: a float32/float64 tensor of dtype `dtype` (or any float when
 * dtype < 0) on `device`, with ndim dims and, where shape[i] >= 0, that size. */
int nn_check(const char *fn, const char *name, const ln_tensor *t, int dtype, int device,
             int ndim, const int64_t *shape);
/* "{2,3,4}" of a tensor's shape */
const char *nn_shape(char *buf, size_t n, const ln_tensor *t);
/* Scratch memory from the device's caching allocator, held by the launched
 * kernel (pass nn_scratch_keep's tensor in keep) and released after it. */
typedef struct { ln_tensor hold; char *data; } nn_scratch;
int nn_scratch_new(const char *fn, int device, size_t nbytes, nn_scratch *s);
void nn_scratch_free(nn_scratch *s);
/* Char pointer to a (contiguous) tensor's first element, NULL for NULL. */
static inline char *nn_ptr(const ln_tensor *t) { return t ? (char *)ln_data_ptr(t) : NULL; }
/* Threads a kernel on `device` may use. */
int nn_device_threads(int device);

/* Output columns [lo, hi) of OW whose input column iw = ow*stride + off
 * lies in 0 <= iw < W (im2col, pooling). */
static inline void nn_valid_range(int64_t off, int64_t stride, int64_t W, int64_t OW, int64_t *lo,
                                  int64_t *hi) {
  int64_t l = off >= 0 ? 0 : (-off + stride - 1) / stride;
  int64_t h = (W - 1 - off) < 0 ? 0 : (W - 1 - off) / stride + 1;
  if (h > OW) h = OW;
  if (l > h) l = h;
  *lo = l;
  *hi = h;
}

#endif
