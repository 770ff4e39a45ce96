/* cuda.h -- the CUDA backend's C side (runtime.c, backend.c, gemm.c). It
 * is built into liblunet_cuda.so, which sees none of liblunet.so's internal
 * symbols: core's services come through the table core hands over at load
 * (lnc, cuda_api.h), so this file maps the names the C side uses onto it. */
#ifndef LNC_CUDA_H
#define LNC_CUDA_H
#include "../core/cuda_api.h"
#include "kern.h"
#include <cuda_runtime_api.h>

extern const ln_core_api *lnc;
#define ln_error lnc->error

/* the stream a kernel launched by the runtime queues on (set around each call) */
cudaStream_t lnc_current_stream(void);
int lnc_current_device(void);
/* an error naming what failed and CUDA's message; returns -1 */
int lnc_fail(const char *what, int cuda_error);
static inline int lnc_fail_if(const char *what, int cuda_error) { return cuda_error ? lnc_fail(what, cuda_error) : 0; }
/* cuda:index's compute (which 0) or copy (1) stream, the device made current */
int lnc_device_stream(int index, int which, cudaStream_t *s);
/* set the device this thread last chose again (NCCL's calls may change it) */
void lnc_restore_device(void);
/* keep the storages of keep until stream s has passed the work queued so far */
int lnc_hold_until_done(cudaStream_t s, const ln_tensor *const *keep, int nkeep);
/* the nccl collective backend's entry points (nccl.c), for core */
const struct ln_nccl_hooks *lnc_nccl_hooks(void);
/* the kernel table (backend.c) over the runtime (runtime.c) */
void lnc_fill_kernels(ln_backend *b);
/* cuBLAS, loaded on first use (gemm.c) */
int lnc_gemm(void *args);
/* cuDNN convolution, loaded on first use (conv_cudnn.c) */
int ln_cuda_conv2d_fwd(void *args);
int ln_cuda_conv2d_bwd(void *args);
#endif
