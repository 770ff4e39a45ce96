/* gemm.c -- matrix products on cuBLAS, which is loaded with dlopen on the
 * first product (not when the backend loads: a process that never multiplies
 * on the GPU, or runs where there is no GPU, never maps it). One handle per
 * device, bound to the current stream before each call. Row-major C = op(A)
 * op(B) is column-major C^T = op(B)^T op(A)^T: cuBLAS gets B first. FP32 is
 * exact FP32 unless LUNET_CUDA_TF32=1 (tensor cores, 10-bit mantissa). */
#include "cuda.h"
#include <cublas_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

typedef cublasStatus_t (*create_fn)(cublasHandle_t *);
typedef cublasStatus_t (*set_stream_fn)(cublasHandle_t, cudaStream_t);
typedef cublasStatus_t (*set_math_fn)(cublasHandle_t, cublasMath_t);
typedef const char *(*status_str_fn)(cublasStatus_t);
typedef cublasStatus_t (*gemm_fn)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                  const void *, const void *, cudaDataType, int, long long, const void *,
                                  cudaDataType, int, long long, const void *, void *, cudaDataType, int,
                                  long long, int, cublasComputeType_t, cublasGemmAlgo_t);

static struct {
  pthread_once_t once;
  char why[512];
  create_fn create;
  set_stream_fn set_stream;
  set_math_fn set_math;
  status_str_fn status_str;
  gemm_fn gemm;
} blas = {PTHREAD_ONCE_INIT};
static cublasHandle_t handles[LN_MAX_TYPE_DEVICES];
static pthread_mutex_t handle_lock = PTHREAD_MUTEX_INITIALIZER;

static void load_blas(void) {
  void *h = dlopen("libcublas.so.13", RTLD_NOW | RTLD_LOCAL);
  if (!h) { snprintf(blas.why, sizeof blas.why, "cuBLAS did not load: %s", dlerror()); return; }
  *(void **)&blas.create = dlsym(h, "cublasCreate_v2");
  *(void **)&blas.set_stream = dlsym(h, "cublasSetStream_v2");
  *(void **)&blas.set_math = dlsym(h, "cublasSetMathMode");
  *(void **)&blas.status_str = dlsym(h, "cublasGetStatusString");
  *(void **)&blas.gemm = dlsym(h, "cublasGemmStridedBatchedEx");
  if (!blas.create || !blas.set_stream || !blas.set_math || !blas.status_str || !blas.gemm) {
    snprintf(blas.why, sizeof blas.why, "cuBLAS lacks a function lunet uses (%s)", dlerror());
    blas.gemm = NULL;
  }
}

static cublasHandle_t handle(int dev) {
  pthread_once(&blas.once, load_blas);
  if (!blas.gemm) { ln_error("gemm: %s", blas.why); return NULL; }
  pthread_mutex_lock(&handle_lock);
  if (!handles[dev]) {
    cublasStatus_t st = blas.create(&handles[dev]);
    if (st != CUBLAS_STATUS_SUCCESS) {
      handles[dev] = NULL;
      ln_error("gemm: cublasCreate: %s", blas.status_str(st));
    } else {
      const char *tf32 = getenv("LUNET_CUDA_TF32");
      blas.set_math(handles[dev], tf32 && strcmp(tf32, "1") == 0 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
    }
  }
  cublasHandle_t h = handles[dev];
  pthread_mutex_unlock(&handle_lock);
  return h;
}

int lnc_gemm(void *p) {
  ln_gemm_args *g = p;
  if (g->m == 0 || g->n == 0 || g->batch == 0) return 0;
  if (g->m > INT32_MAX || g->n > INT32_MAX || g->k > INT32_MAX || g->batch > INT32_MAX ||
      g->lda > INT32_MAX || g->ldb > INT32_MAX || g->ldc > INT32_MAX)
    return ln_error("gemm: a dimension over 2^31 is not supported by cuBLAS's 32-bit interface");
  cublasHandle_t h = handle(lnc_current_device());
  if (!h) return -1;
  cublasStatus_t st = blas.set_stream(h, lnc_current_stream());
  bool f64 = g->dtype == LN_FLOAT64;
  cudaDataType t = f64 ? CUDA_R_64F : CUDA_R_32F;
  cublasComputeType_t ct = f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
  double a64 = g->alpha, b64 = g->beta;
  float a32 = (float)g->alpha, b32 = (float)g->beta;
  const void *alpha = f64 ? (const void *)&a64 : (const void *)&a32, *beta = f64 ? (const void *)&b64 : (const void *)&b32;
  if (st == CUBLAS_STATUS_SUCCESS)
    st = blas.gemm(h, g->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, g->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, (int)g->n,
                   (int)g->m, (int)g->k, alpha, g->b, t, (int)g->ldb, g->batch_stride_b, g->a, t, (int)g->lda,
                   g->batch_stride_a, beta, g->c, t, (int)g->ldc, g->batch_stride_c, (int)g->batch, ct,
                   CUBLAS_GEMM_DEFAULT);
  if (st != CUBLAS_STATUS_SUCCESS) return ln_error("gemm: cuBLAS: %s", blas.status_str(st));
  return 0;
}
