/* conv_cudnn.c -- 2-D convolution on cuDNN 9's legacy convolution calls
 * (deprecated in favour of its graph API: kept behind this one file so that
 * they can be swapped). cuDNN is loaded with dlopen on the first convolution.
 * Forward: cuDNN's convolution, then one epilogue kernel (bias, residual,
 * ReLU: c/cpu/conv2d.c's order); eval batch norm is folded into the weights
 * by the front end's first launch (fold_only), as on the CPU. Backward: data
 * and filter gradients from cuDNN, the bias gradient by conv_ep.cu. FP32 is
 * exact FP32 (CUDNN_FMA_MATH) unless LUNET_CUDA_TF32=1. Descriptors are made
 * per call and the algorithm is cuDNN's first heuristic choice (no search,
 * no cache yet). Eval BasicBlocks run as three convolutions. There is no
 * saved state (no planner). */
#include "cuda.h"
#include <cudnn.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define DNN_FUNCS(X)                                                                                      \
  X(cudnnCreate, (cudnnHandle_t *))                                                                       \
  X(cudnnSetStream, (cudnnHandle_t, cudaStream_t))                                                        \
  X(cudnnCreateTensorDescriptor, (cudnnTensorDescriptor_t *))                                             \
  X(cudnnDestroyTensorDescriptor, (cudnnTensorDescriptor_t))                                              \
  X(cudnnSetTensor4dDescriptor, (cudnnTensorDescriptor_t, cudnnTensorFormat_t, cudnnDataType_t, int, int, int, int)) \
  X(cudnnCreateFilterDescriptor, (cudnnFilterDescriptor_t *))                                             \
  X(cudnnDestroyFilterDescriptor, (cudnnFilterDescriptor_t))                                              \
  X(cudnnSetFilter4dDescriptor, (cudnnFilterDescriptor_t, cudnnDataType_t, cudnnTensorFormat_t, int, int, int, int)) \
  X(cudnnCreateConvolutionDescriptor, (cudnnConvolutionDescriptor_t *))                                   \
  X(cudnnDestroyConvolutionDescriptor, (cudnnConvolutionDescriptor_t))                                    \
  X(cudnnSetConvolution2dDescriptor, (cudnnConvolutionDescriptor_t, int, int, int, int, int, int, cudnnConvolutionMode_t, cudnnDataType_t)) \
  X(cudnnSetConvolutionGroupCount, (cudnnConvolutionDescriptor_t, int))                                   \
  X(cudnnSetConvolutionMathType, (cudnnConvolutionDescriptor_t, cudnnMathType_t))                         \
  X(cudnnGetConvolutionForwardAlgorithm_v7, (cudnnHandle_t, cudnnTensorDescriptor_t, cudnnFilterDescriptor_t, \
      cudnnConvolutionDescriptor_t, cudnnTensorDescriptor_t, int, int *, cudnnConvolutionFwdAlgoPerf_t *)) \
  X(cudnnGetConvolutionForwardWorkspaceSize, (cudnnHandle_t, cudnnTensorDescriptor_t, cudnnFilterDescriptor_t, \
      cudnnConvolutionDescriptor_t, cudnnTensorDescriptor_t, cudnnConvolutionFwdAlgo_t, size_t *))        \
  X(cudnnConvolutionForward, (cudnnHandle_t, const void *, cudnnTensorDescriptor_t, const void *,         \
      cudnnFilterDescriptor_t, const void *, cudnnConvolutionDescriptor_t, cudnnConvolutionFwdAlgo_t, void *, \
      size_t, const void *, cudnnTensorDescriptor_t, void *))                                            \
  X(cudnnGetConvolutionBackwardDataAlgorithm_v7, (cudnnHandle_t, cudnnFilterDescriptor_t, cudnnTensorDescriptor_t, \
      cudnnConvolutionDescriptor_t, cudnnTensorDescriptor_t, int, int *, cudnnConvolutionBwdDataAlgoPerf_t *)) \
  X(cudnnGetConvolutionBackwardDataWorkspaceSize, (cudnnHandle_t, cudnnFilterDescriptor_t, cudnnTensorDescriptor_t, \
      cudnnConvolutionDescriptor_t, cudnnTensorDescriptor_t, cudnnConvolutionBwdDataAlgo_t, size_t *))    \
  X(cudnnConvolutionBackwardData, (cudnnHandle_t, const void *, cudnnFilterDescriptor_t, const void *,    \
      cudnnTensorDescriptor_t, const void *, cudnnConvolutionDescriptor_t, cudnnConvolutionBwdDataAlgo_t, \
      void *, size_t, const void *, cudnnTensorDescriptor_t, void *))                                    \
  X(cudnnGetConvolutionBackwardFilterAlgorithm_v7, (cudnnHandle_t, cudnnTensorDescriptor_t, cudnnTensorDescriptor_t, \
      cudnnConvolutionDescriptor_t, cudnnFilterDescriptor_t, int, int *, cudnnConvolutionBwdFilterAlgoPerf_t *)) \
  X(cudnnGetConvolutionBackwardFilterWorkspaceSize, (cudnnHandle_t, cudnnTensorDescriptor_t, cudnnTensorDescriptor_t, \
      cudnnConvolutionDescriptor_t, cudnnFilterDescriptor_t, cudnnConvolutionBwdFilterAlgo_t, size_t *))  \
  X(cudnnConvolutionBackwardFilter, (cudnnHandle_t, const void *, cudnnTensorDescriptor_t, const void *,  \
      cudnnTensorDescriptor_t, const void *, cudnnConvolutionDescriptor_t, cudnnConvolutionBwdFilterAlgo_t, \
      void *, size_t, const void *, cudnnFilterDescriptor_t, void *))

static struct {
  pthread_once_t once;
  char why[512];
  const char *(*cudnnGetErrorString)(cudnnStatus_t);
#define DNN_FIELD(name, args) cudnnStatus_t(*name) args;
  DNN_FUNCS(DNN_FIELD)
#undef DNN_FIELD
} dnn = {PTHREAD_ONCE_INIT};
static cudnnHandle_t handles[LN_MAX_TYPE_DEVICES];
static pthread_mutex_t handle_lock = PTHREAD_MUTEX_INITIALIZER;

static void load_dnn(void) {
  void *h = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
  if (!h) { snprintf(dnn.why, sizeof dnn.why, "cuDNN 9 did not load: %s", dlerror()); return; }
  *(void **)&dnn.cudnnGetErrorString = dlsym(h, "cudnnGetErrorString");
  bool ok = dnn.cudnnGetErrorString != NULL;
#define DNN_LOAD(name, args) if (ok && !(*(void **)&dnn.name = dlsym(h, #name))) { ok = false; \
    snprintf(dnn.why, sizeof dnn.why, "cuDNN lacks %s, which lunet uses", #name); }
  DNN_FUNCS(DNN_LOAD)
#undef DNN_LOAD
  if (!ok) dnn.cudnnCreate = NULL;
}

static cudnnHandle_t handle(const char *fn) {
  pthread_once(&dnn.once, load_dnn);
  if (!dnn.cudnnCreate) { ln_error("%s: %s", fn, dnn.why); return NULL; }
  int dev = lnc_current_device();
  pthread_mutex_lock(&handle_lock);
  cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
  if (!handles[dev]) st = dnn.cudnnCreate(&handles[dev]);
  cudnnHandle_t h = st == CUDNN_STATUS_SUCCESS ? handles[dev] : NULL;
  if (!h) handles[dev] = NULL;
  pthread_mutex_unlock(&handle_lock);
  if (!h) { ln_error("%s: cudnnCreate: %s", fn, dnn.cudnnGetErrorString(st)); return NULL; }
  if ((st = dnn.cudnnSetStream(h, lnc_current_stream())) != CUDNN_STATUS_SUCCESS) {
    ln_error("%s: cudnnSetStream: %s", fn, dnn.cudnnGetErrorString(st));
    return NULL;
  }
  return h;
}

typedef struct {
  cudnnTensorDescriptor_t x, y;
  cudnnFilterDescriptor_t w;
  cudnnConvolutionDescriptor_t c;
} descs;

static void descs_free(descs *d) {
  if (d->x) dnn.cudnnDestroyTensorDescriptor(d->x);
  if (d->y) dnn.cudnnDestroyTensorDescriptor(d->y);
  if (d->w) dnn.cudnnDestroyFilterDescriptor(d->w);
  if (d->c) dnn.cudnnDestroyConvolutionDescriptor(d->c);
}

#define DNN_CHECK(fn, call) do { cudnnStatus_t st_ = (call); \
    if (st_ != CUDNN_STATUS_SUCCESS) { rc = ln_error("%s: %s: %s", fn, #call, dnn.cudnnGetErrorString(st_)); goto done; } } while (0)

static int make_descs(const char *fn, const ln_conv2d_args *a, descs *d) {
  int rc = 0;
  memset(d, 0, sizeof *d);
  if (a->N > INT32_MAX || a->C > INT32_MAX || a->H > INT32_MAX || a->W > INT32_MAX || a->O > INT32_MAX)
    return ln_error("%s: a size over 2^31 is beyond cuDNN's 32-bit descriptors", fn);
  cudnnDataType_t t = a->dtype == LN_FLOAT64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
  const ln_conv2d_params *p = &a->p;
  DNN_CHECK(fn, dnn.cudnnCreateTensorDescriptor(&d->x));
  DNN_CHECK(fn, dnn.cudnnCreateTensorDescriptor(&d->y));
  DNN_CHECK(fn, dnn.cudnnCreateFilterDescriptor(&d->w));
  DNN_CHECK(fn, dnn.cudnnCreateConvolutionDescriptor(&d->c));
  DNN_CHECK(fn, dnn.cudnnSetTensor4dDescriptor(d->x, CUDNN_TENSOR_NCHW, t, (int)a->N, (int)a->C, (int)a->H, (int)a->W));
  DNN_CHECK(fn, dnn.cudnnSetTensor4dDescriptor(d->y, CUDNN_TENSOR_NCHW, t, (int)a->N, (int)a->O, (int)a->OH, (int)a->OW));
  DNN_CHECK(fn, dnn.cudnnSetFilter4dDescriptor(d->w, t, CUDNN_TENSOR_NCHW, (int)a->O, (int)(a->C / p->groups),
                                               (int)a->KH, (int)a->KW));
  DNN_CHECK(fn, dnn.cudnnSetConvolution2dDescriptor(d->c, p->pad_h, p->pad_w, p->stride_h, p->stride_w, p->dil_h,
                                                    p->dil_w, CUDNN_CROSS_CORRELATION, t));
  DNN_CHECK(fn, dnn.cudnnSetConvolutionGroupCount(d->c, p->groups));
  const char *tf32 = getenv("LUNET_CUDA_TF32");
  DNN_CHECK(fn, dnn.cudnnSetConvolutionMathType(d->c, tf32 && strcmp(tf32, "1") == 0 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
  return 0;
done:
  descs_free(d);
  return rc;
}

/* stream-ordered scratch (freed on the stream after the call that uses it) */
static int workspace(const char *fn, size_t n, void **p) {
  *p = NULL;
  if (!n) return 0;
  cudaError_t e = cudaMallocAsync(p, n, lnc_current_stream());
  return e == cudaSuccess ? 0 : lnc_fail(fn, e);
}

int ln_cuda_conv2d_fwd(void *args);

/* an eval BasicBlock (c/nn/conv2d.c's blocks_forward, batch norms already
 * folded into each conv's w and b): conv1 + ReLU into hb, the shortcut conv
 * into rb, conv2 + residual + ReLU into out, as three convolutions (NCHW
 * throughout: this backend has no native layout) */
static int run_block(ln_block_args *B) {
  ln_conv2d_args c0 = B->c[0], c1 = B->c[1], c2 = B->c[2];
  c0.block = 0; c0.in = B->in; c0.out = B->hb; c0.res = NULL; c0.relu = 1; c0.raw = 0;
  if (ln_cuda_conv2d_fwd(&c0) != 0) return -1;
  const char *res = B->in;
  if (B->has_sc) {
    c2.block = 0; c2.in = B->in; c2.out = B->rb; c2.res = NULL; c2.relu = 0; c2.raw = 0;
    if (ln_cuda_conv2d_fwd(&c2) != 0) return -1;
    res = B->rb;
  }
  c1.block = 0; c1.in = B->hb; c1.out = B->out; c1.res = (char *)res; c1.relu = 1; c1.raw = 0;
  return ln_cuda_conv2d_fwd(&c1);
}

int ln_cuda_conv2d_fwd(void *args) {
  const char *fn = "conv2d";
  ln_conv2d_args *a = args;
  if (a->block) {
    ln_block_args *B = args;
    if (B->in_blk || B->out_blk) return ln_error("basicblock_fused: cuda has no blocked layout");
    return run_block(B);
  }
  if (a->raw) return ln_error("%s: cuda has no blocked layout", fn);
  if (a->dtype != LN_FLOAT32 && a->dtype != LN_FLOAT64)
    return ln_error("%s: cuda convolves float32 and float64 only", fn);
  cudaStream_t s = lnc_current_stream();
  int es = a->dtype == LN_FLOAT64 ? 8 : 4;
  int64_t K = a->C / a->p.groups * a->KH * a->KW;
  if (a->fold_only) {
    char *wf = a->scratch + a->fold_off;
    return lnc_fail_if(fn, lnc_bn_fold((lnc_stream)s, a->dtype, a->O, K, a->w, a->b, a->bn_w, a->bn_b, a->bn_m,
                                       a->bn_v, a->bn_eps, wf, wf + a->O * K * es));
  }
  int64_t nout = a->N * a->O * a->OH * a->OW;
  if (nout == 0) return 0;
  if (a->N * a->C * a->H * a->W == 0 || K == 0)   /* an empty reduction: out = epilogue(0) */
    return lnc_fail_if(fn, lnc_conv_epilogue((lnc_stream)s, a->dtype, a->N, a->O, a->OH * a->OW, a->out, a->b, a->res,
                                             a->relu, 1));
  cudnnHandle_t h = handle(fn);
  if (!h) return -1;
  descs d;
  if (make_descs(fn, a, &d) != 0) return -1;
  int rc = 0, n = 0;
  void *ws = NULL;
  cudnnConvolutionFwdAlgoPerf_t perf[8];
  DNN_CHECK(fn, dnn.cudnnGetConvolutionForwardAlgorithm_v7(h, d.x, d.w, d.c, d.y, 8, &n, perf));
  if (n < 1) { rc = ln_error("%s: cuDNN offers no algorithm", fn); goto done; }
  size_t bytes = 0;
  DNN_CHECK(fn, dnn.cudnnGetConvolutionForwardWorkspaceSize(h, d.x, d.w, d.c, d.y, perf[0].algo, &bytes));
  if ((rc = workspace(fn, bytes, &ws)) != 0) goto done;
  double one64 = 1, zero64 = 0;
  float one32 = 1, zero32 = 0;
  const void *one = es == 8 ? (const void *)&one64 : (const void *)&one32, *zero = es == 8 ? (const void *)&zero64 : (const void *)&zero32;
  DNN_CHECK(fn, dnn.cudnnConvolutionForward(h, one, d.x, a->in, d.w, a->w, d.c, perf[0].algo, ws, bytes, zero, d.y, a->out));
  if (a->b || a->res || a->relu)
    rc = lnc_fail_if(fn, lnc_conv_epilogue((lnc_stream)s, a->dtype, a->N, a->O, a->OH * a->OW, a->out, a->b, a->res,
                                           a->relu, 0));
done:
  if (ws) cudaFreeAsync(ws, s);
  descs_free(&d);
  return rc;
}

int ln_cuda_conv2d_bwd(void *args) {
  const char *fn = "conv2d_backward";
  ln_conv2d_args *a = args;
  if (a->dtype != LN_FLOAT32 && a->dtype != LN_FLOAT64)
    return ln_error("%s: cuda convolves float32 and float64 only", fn);
  cudaStream_t s = lnc_current_stream();
  int es = a->dtype == LN_FLOAT64 ? 8 : 4;
  int64_t K = a->C / a->p.groups * a->KH * a->KW;
  int64_t nin = a->N * a->C * a->H * a->W, nout = a->N * a->O * a->OH * a->OW;
  int rc = 0;
  if (a->db && (rc = lnc_fail_if(fn, lnc_bias_grad((lnc_stream)s, a->dtype, a->N, a->O, a->OH * a->OW, a->dout, a->db))))
    return rc;
  if (nout == 0 || nin == 0 || K == 0) {   /* nothing to convolve: zero gradients */
    if (a->din && nin) rc = lnc_fail_if(fn, cudaMemsetAsync(a->din, 0, (size_t)nin * es, s));
    if (a->dw && !rc) rc = lnc_fail_if(fn, cudaMemsetAsync(a->dw, 0, (size_t)(a->O * K) * es, s));
    return rc;
  }
  if (!a->din && !a->dw) return 0;
  cudnnHandle_t h = handle(fn);
  if (!h) return -1;
  descs d;
  if (make_descs(fn, a, &d) != 0) return -1;
  void *ws = NULL;
  int n = 0;
  double one64 = 1, zero64 = 0;
  float one32 = 1, zero32 = 0;
  const void *one = es == 8 ? (const void *)&one64 : (const void *)&one32, *zero = es == 8 ? (const void *)&zero64 : (const void *)&zero32;
  if (a->din) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[8];
    DNN_CHECK(fn, dnn.cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d.w, d.y, d.c, d.x, 8, &n, perf));
    if (n < 1) { rc = ln_error("%s: cuDNN offers no data-gradient algorithm", fn); goto done; }
    size_t bytes = 0;
    DNN_CHECK(fn, dnn.cudnnGetConvolutionBackwardDataWorkspaceSize(h, d.w, d.y, d.c, d.x, perf[0].algo, &bytes));
    if ((rc = workspace(fn, bytes, &ws)) != 0) goto done;
    DNN_CHECK(fn, dnn.cudnnConvolutionBackwardData(h, one, d.w, a->w, d.y, a->dout, d.c, perf[0].algo, ws, bytes, zero,
                                                   d.x, a->din));
    if (ws) { cudaFreeAsync(ws, s); ws = NULL; }
  }
  if (a->dw) {
    cudnnConvolutionBwdFilterAlgoPerf_t perf[8];
    DNN_CHECK(fn, dnn.cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d.x, d.y, d.c, d.w, 8, &n, perf));
    if (n < 1) { rc = ln_error("%s: cuDNN offers no filter-gradient algorithm", fn); goto done; }
    size_t bytes = 0;
    DNN_CHECK(fn, dnn.cudnnGetConvolutionBackwardFilterWorkspaceSize(h, d.x, d.y, d.c, d.w, perf[0].algo, &bytes));
    if ((rc = workspace(fn, bytes, &ws)) != 0) goto done;
    DNN_CHECK(fn, dnn.cudnnConvolutionBackwardFilter(h, one, d.x, a->in, d.y, a->dout, d.c, perf[0].algo, ws, bytes,
                                                     zero, d.w, a->dw));
  }
done:
  if (ws) cudaFreeAsync(ws, s);
  descs_free(&d);
  return rc;
}
