/* nn_kernels.h -- the CPU backend's neural-network kernels (each takes its
 * argument block, core/nn_args.h), the convolution implementations they
 * choose between (im2col + OpenBLAS in conv2d.c, direct AVX-512 kernels in
 * conv_direct.c, oneDNN in conv_dnnl.c) and the host-side planner that sizes
 * their scratch (ln_cpu_nn_planner, registered in backend.c). */
#ifndef LN_CPU_NN_KERNELS_H
#define LN_CPU_NN_KERNELS_H
#include "cpu.h"

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
/* depthwise weight gradient (+ bias) of kernels over 3x3, stride 1 or 2 */
bool nn_conv_direct_dw_wgrad_ok(const ln_conv2d_args *a);
void nn_conv_direct_dw_wgrad(const ln_conv2d_args *a, int nthreads);
/* float32 (any groups) through oneDNN (conv_dnnl.c); 0, or -1 when oneDNN
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
int ln_cpu_interp_fwd(void *args);   /* interp.c */
int ln_cpu_interp_bwd(void *args);
int ln_cpu_batchnorm_fwd(void *args);
int ln_cpu_batchnorm_bwd(void *args);
int ln_cpu_softmax_fwd(void *args);
int ln_cpu_softmax_bwd(void *args);
int ln_cpu_nll_loss_fwd(void *args);
int ln_cpu_nll_loss_bwd(void *args);
int ln_cpu_relu_bwd(void *args);
int ln_cpu_grid_sample_fwd(void *args);
int ln_cpu_grid_sample_bwd(void *args);

/* The planner: scratch sizes and thread tiles for the front ends (conv2d.c). */
extern const ln_nn_planner ln_cpu_nn_planner;
/* Threads a kernel on `device` may use (at least 1). */
int ln_cpu_device_threads(int device);

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
