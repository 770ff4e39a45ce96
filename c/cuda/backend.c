/* backend.c -- the CUDA backend's kernel table: each entry reads its argument
 * block (c/core/backend.h) and queues the kernels of *.cu (kern.h) on the
 * current stream. Slots left NULL, and dtypes supports() refuses, are named
 * errors at the front end ("conv2d: cuda:0 has no kernel for conv2d_fwd"). */
#include "cuda.h"
#include <stdio.h>
#include <stdlib.h>

_Static_assert(sizeof(lnc_view) == sizeof(ln_kview), "lnc_view must have ln_kview's layout");
_Static_assert(offsetof(lnc_view, stride) == offsetof(ln_kview, stride), "lnc_view must have ln_kview's layout");

#define V(x) ((const lnc_view *)&(x))
#define S() ((lnc_stream)lnc_current_stream())

static int done(const char *op, int e) { return e ? lnc_fail(op, e) : 0; }

static const char *ln_dtype_name_(int dt) {   /* (core's ln_dtype_name is not ours to call) */
  static const char *const names[] = {"float32", "float64", "int32", "int64", "uint8", "bool", "float16", "bfloat16"};
  return dt >= 0 && dt < 8 ? names[dt] : "?";
}

/* whether the memory at p is the host's (a CPU tensor's): cross-device copies
 * run here (c/core/copy.c) with one side in host memory */
static bool is_host(const void *p) {
  struct cudaPointerAttributes at;
  if (cudaPointerGetAttributes(&at, p) != cudaSuccess) { cudaGetLastError(); return true; }
  return at.type != cudaMemoryTypeDevice && at.type != cudaMemoryTypeManaged;
}

static bool contiguous(const ln_kview *v) {
  int64_t expect = 1;
  for (int d = v->ndim - 1; d >= 0; d--) {
    if (v->shape[d] == 1) continue;
    if (v->stride[d] != expect) return false;
    expect *= v->shape[d];
  }
  return true;
}

static int64_t numel(const ln_kview *v) {
  int64_t n = 1;
  for (int d = 0; d < v->ndim; d++) n *= v->shape[d];
  return n;
}

static int dtype_size(int dt) {
  switch (dt) {
    case LN_FLOAT64: case LN_INT64: return 8;
    case LN_FLOAT32: case LN_INT32: return 4;
    case LN_FLOAT16: case LN_BFLOAT16: return 2;
    default: return 1;
  }
}

/* dense row-major view of shape like v over data */
static ln_kview dense_like(const ln_kview *v, int dtype, char *data) {
  ln_kview d = *v;
  d.dtype = dtype;
  d.data = data;
  int64_t s = 1;
  for (int i = v->ndim - 1; i >= 0; i--) { d.stride[i] = s; s *= v->shape[i]; }
  return d;
}

/* host-side strided walk: contiguous dst <- v's elements (or the reverse) */
static void host_pack(char *dst, const ln_kview *v, int es, bool unpack) {
  int64_t n = numel(v), idx[LN_MAX_DIMS] = {0};
  for (int64_t i = 0; i < n; i++) {
    int64_t off = 0;
    for (int d = 0; d < v->ndim; d++) off += idx[d] * v->stride[d];
    if (unpack) memcpy(v->data + off * es, dst + i * es, (size_t)es);
    else memcpy(dst + i * es, v->data + off * es, (size_t)es);
    for (int d = v->ndim - 1; d >= 0; d--) {
      if (++idx[d] < v->shape[d]) break;
      idx[d] = 0;
    }
  }
}

/* ---- copy: device<->device on the stream; with a host side, done before
 * returning (the host buffer is free once the launch returns) ------------------ */

static int copy_with_host(ln_copy_args *a, bool src_host, bool dst_host) {
  cudaStream_t s = lnc_current_stream();
  int64_t n = numel(&a->dst);
  int ses = dtype_size(a->src.dtype), des = dtype_size(a->dst.dtype);
  if (src_host && dst_host) return ln_error("copy_: neither side is in CUDA memory");
  cudaError_t e = cudaSuccess;
  if (src_host) {
    /* pack the (broadcast) source on the host, upload, cast/scatter on the device */
    char *h = malloc((size_t)n * (size_t)ses), *dtmp = NULL;
    if (!h) return ln_error("copy_: out of host memory (%lld elements)", (long long)n);
    host_pack(h, &a->src, ses, false);
    if (a->src.dtype == a->dst.dtype && contiguous(&a->dst)) {
      e = cudaMemcpyAsync(a->dst.data, h, (size_t)n * (size_t)ses, cudaMemcpyHostToDevice, s);
    } else {
      e = cudaMallocAsync((void **)&dtmp, (size_t)n * (size_t)ses, s);
      if (e == cudaSuccess) e = cudaMemcpyAsync(dtmp, h, (size_t)n * (size_t)ses, cudaMemcpyHostToDevice, s);
      ln_kview src = dense_like(&a->dst, a->src.dtype, dtmp);
      if (e == cudaSuccess) e = (cudaError_t)lnc_copy((lnc_stream)s, V(a->dst), V(src));
      if (dtmp) cudaFreeAsync(dtmp, s);
    }
    if (e == cudaSuccess) e = cudaStreamSynchronize(s);   /* h is freed next */
    free(h);
    return done("copy_ to cuda", e);
  }
  /* device source, host destination: cast/pack on the device, download, scatter on the host */
  char *h = malloc((size_t)n * (size_t)des), *dtmp = NULL;
  if (!h) return ln_error("copy_: out of host memory (%lld elements)", (long long)n);
  e = cudaMallocAsync((void **)&dtmp, (size_t)n * (size_t)des, s);
  ln_kview tmp = dense_like(&a->dst, a->dst.dtype, dtmp);
  if (e == cudaSuccess) e = (cudaError_t)lnc_copy((lnc_stream)s, V(tmp), V(a->src));
  if (e == cudaSuccess) e = cudaMemcpyAsync(h, dtmp, (size_t)n * (size_t)des, cudaMemcpyDeviceToHost, s);
  if (dtmp) cudaFreeAsync(dtmp, s);
  if (e == cudaSuccess) e = cudaStreamSynchronize(s);
  if (e == cudaSuccess) host_pack(h, &a->dst, des, true);
  free(h);
  return done("copy_ from cuda", e);
}

static int k_copy(void *p) {
  ln_copy_args *a = p;
  if (numel(&a->dst) == 0) return 0;
  bool sh = is_host(a->src.data), dh = is_host(a->dst.data);
  if (sh || dh) return copy_with_host(a, sh, dh);
  int me = lnc_current_device();
  struct cudaPointerAttributes at;
  if (cudaPointerGetAttributes(&at, a->src.data) == cudaSuccess && at.device != me) {
    /* another GPU's memory: contiguous same-dtype only, for now */
    if (a->src.dtype != a->dst.dtype || !contiguous(&a->src) || !contiguous(&a->dst))
      return ln_error("copy_: between two GPUs only contiguous tensors of one dtype are copied yet");
    return done("copy_ between GPUs", cudaMemcpyPeerAsync(a->dst.data, me, a->src.data, at.device,
                                                          (size_t)numel(&a->dst) * (size_t)dtype_size(a->dst.dtype),
                                                          lnc_current_stream()));
  }
  cudaGetLastError();
  return done("copy_", lnc_copy(S(), V(a->dst), V(a->src)));
}

/* ---- elementwise ------------------------------------------------------------------- */

static int k_binary(void *p) {
  ln_binary_args *a = p;
  int dt = a->a.dtype;
  if (a->op == LN_FMOD && dt != LN_FLOAT32 && dt != LN_FLOAT64)   /* (the CPU refuses a zero divisor first) */
    return ln_error("fmod: integer fmod has no cuda kernel yet");
  uint64_t sc = 0;
  memcpy(&sc, a->scalar, sizeof sc);
  return done("binary", lnc_binary(S(), a->op, a->alpha, a->p1, a->p2, V(a->out), V(a->a), V(a->b), a->scalar_side, sc));
}

static int k_unary(void *p) {
  ln_unary_args *a = p;
  return done("unary", lnc_unary(S(), a->op, a->p0, a->p1, a->p2, V(a->out), V(a->a)));
}

static int k_where(void *p) {
  ln_where_args *a = p;
  return done("where", lnc_where(S(), V(a->out), V(a->cond), V(a->a), V(a->b)));
}

static int k_fill(void *p) {
  ln_fill_args *a = p;
  _Alignas(8) char bytes[8] = {0};
  lnc->store_from_double(bytes, a->out.dtype, a->value);
  uint64_t v;
  memcpy(&v, bytes, sizeof v);
  return done("fill", lnc_fill(S(), V(a->out), v));
}

static int k_arange(void *p) {
  ln_fill_args *a = p;
  return done("arange", lnc_arange(S(), V(a->out), a->value, a->step));
}

static int k_random(void *p) {
  ln_random_args *a = p;
  lnc_random_args r = {a->seed, a->offset, a->dist, a->p0, a->p1, a->ilo, a->irange, a->prm};
  return done("random", lnc_random(S(), &r, a->out.data, a->out.dtype, numel(&a->out)));
}

/* indices outside [0, size) are refused before anything is written, as on the CPU */
static int check_index(const char *fn, const ln_index_args *a, int64_t size) {
  int64_t pos = -1, bad = 0;
  int e = lnc_index_check(S(), V(a->index), size, &pos, &bad);
  if (e) return lnc_fail(fn, e);
  if (pos >= 0)
    return ln_error("%s: index %.0f is out of range for dim %d of size %lld (valid: 1..%lld)", fn, (double)bad + 1,
                    a->dim + 1, (long long)size, (long long)size);
  return 0;
}
static int k_select(void *p, int gather, const char *fn) {
  ln_index_args *a = p;
  if (check_index(fn, a, a->a.shape[a->dim]) != 0) return -1;
  return done(fn, lnc_index_select(S(), gather, a->dim, V(a->out), V(a->a), V(a->index), dtype_size(a->out.dtype)));
}
static int k_index_select(void *p) { return k_select(p, 0, "index_select"); }
static int k_gather(void *p) { return k_select(p, 1, "gather"); }
static int k_scatter_add(void *p) {
  ln_index_args *a = p;
  if (check_index("scatter_add_", a, a->out.shape[a->dim]) != 0) return -1;
  return done("scatter_add_", lnc_scatter_add(S(), a->dim, V(a->out), V(a->index), V(a->src)));
}
static int k_scatter_reduce(void *p) {
  ln_index_args *a = p;
  if (check_index("scatter_reduce_", a, a->out.shape[a->dim]) != 0) return -1;
  return done("scatter_reduce_", lnc_scatter_reduce(S(), a->op, a->include_self, a->dim, V(a->out), V(a->index), V(a->src)));
}

static int k_reduce(void *p) {
  ln_reduce_args *a = p;
  return done("reduce", lnc_reduce(S(), a->op, a->p, a->r, V(a->out), V(a->idx), V(a->a)));
}

static int k_sgd(void *p) {
  ln_optim_args *a = p;
  const ln_sgd_params *h = &a->hp.sgd;
  lnc_sgd s = {h->lr, h->momentum, h->dampening, h->weight_decay, h->nesterov, h->maximize, h->init_buf};
  return done("sgd_step", lnc_sgd_step(S(), a->dtype, a->n, a->param, a->grad, a->s0, &s));
}

static int k_adam(void *p) {
  ln_optim_args *a = p;
  const ln_adam_params *h = &a->hp.adam;
  lnc_adam q = {h->lr, h->beta1, h->beta2, h->eps, h->weight_decay, h->step, h->decoupled, h->maximize};
  return done("adam_step", lnc_adam_step(S(), a->dtype, a->n, a->param, a->grad, a->s0, a->s1, a->s2, &q));
}

static int k_rmsprop(void *p) {
  ln_optim_args *a = p;
  const ln_rmsprop_params *h = &a->hp.rmsprop;
  lnc_rmsprop q = {h->lr, h->alpha, h->eps, h->weight_decay, h->momentum, h->centered, h->maximize};
  return done("rmsprop_step", lnc_rmsprop_step(S(), a->dtype, a->n, a->param, a->grad, a->s0, a->s1, a->s2, &q));
}

static int k_norm_pow_sum(void *p) {
  ln_norm_args *a = p;
  return done("clip_grad_norm", lnc_norm_pow_sum(S(), a->p, a->n, V(a->in), V(a->out)));
}

/* ---- NN kernels (nn.cu): dense float32/float64 arrays ------------------------------ */

static int need_float(const char *fn, int dt) {
  if (dt == LN_FLOAT32 || dt == LN_FLOAT64) return 0;
  return ln_error("%s: cuda has no %s kernel yet (float32 and float64 only)", fn, ln_dtype_name_(dt));
}

static int k_relu_bwd(void *p) {
  ln_relu_bwd_args *a = p;
  if (need_float("relu_backward", a->dtype)) return -1;
  return done("relu_backward", lnc_relu_bwd(S(), a->dtype, a->n, a->din, a->dout, a->out));
}

static int k_softmax_fwd(void *p) {
  ln_softmax_args *a = p;
  if (need_float("softmax", a->dtype)) return -1;
  return done("softmax", lnc_softmax(S(), a->dtype, a->log, a->outer, a->D, a->inner, a->out, a->in, NULL, NULL));
}

static int k_softmax_bwd(void *p) {
  ln_softmax_args *a = p;
  if (need_float("softmax_backward", a->dtype)) return -1;
  return done("softmax_backward", lnc_softmax(S(), a->dtype, a->log, a->outer, a->D, a->inner, a->out, NULL, a->din, a->dout));
}

/* targets out of range are refused before anything is written, as on the
 * CPU (this reads a flag back: a synchronisation per loss) */
static int nll(const char *fn, ln_nll_args *a, bool bwd) {
  if (need_float(fn, a->dtype)) return -1;
  int64_t bad = -1, target = 0;
  int e = lnc_nll_check(S(), a->N, a->C, a->base, a->ignore_index, a->target, &bad, &target);
  if (e) return lnc_fail(fn, e);
  if (bad >= 0)
    return ln_error("%s: target %lld (sample %lld) is out of range: classes are %lld..%lld", fn, (long long)target,
                    (long long)(bad + a->base), (long long)a->base, (long long)(a->base + a->C - 1));
  return done(fn, lnc_nll(S(), a->dtype, a->reduction, a->N, a->C, a->base, a->ignore_index, a->logp, a->weight,
                          a->target, a->out, bwd ? a->dlogp : NULL, a->dout));
}
static int k_nll_fwd(void *p) { return nll("nll_loss", p, false); }
static int k_nll_bwd(void *p) { return nll("nll_loss_backward", p, true); }

static int pool(const char *fn, ln_pool2d_args *a, int kind, int bwd) {
  if (need_float(fn, a->dtype)) return -1;
  int64_t bad[2] = {0, 0};
  int e = lnc_pool(S(), kind, bwd, a->dtype, &a->p, a->planes, a->H, a->W, a->OH, a->OW, a->out, a->in, a->din,
                   a->dout, a->idx, bad);
  if (e) return lnc_fail(fn, e);
  if (bad[0])
    return ln_error("max_pool2d_backward: index %lld out of range for a %lldx%lld plane", (long long)bad[1],
                    (long long)a->H, (long long)a->W);
  return 0;
}
static int k_maxpool_fwd(void *p) { return pool("max_pool2d", p, 0, 0); }
static int k_maxpool_bwd(void *p) { return pool("max_pool2d_backward", p, 0, 1); }
static int k_avgpool_fwd(void *p) { return pool("avg_pool2d", p, 1, 0); }
static int k_avgpool_bwd(void *p) { return pool("avg_pool2d_backward", p, 1, 1); }
static int adaptive(const char *fn, ln_pool2d_args *a, int bwd) {
  if (need_float(fn, a->dtype)) return -1;
  return done(fn, lnc_adaptive_pool(S(), bwd, a->dtype, a->planes, a->H, a->W, a->OH, a->OW, a->out, a->in, a->din,
                                    a->dout));
}
static int k_adaptive_fwd(void *p) { return adaptive("adaptive_avg_pool2d", p, 0); }
static int k_adaptive_bwd(void *p) { return adaptive("adaptive_avg_pool2d_backward", p, 1); }
static int interp(const char *fn, ln_interp_args *a, int bwd) {
  if (need_float(fn, a->dtype)) return -1;
  return done(fn, lnc_interp(S(), bwd, a->dtype, a->mode, a->sd, a->align_corners, a->planes, a->isz, a->osz,
                             a->scale, a->out, a->in, a->din, a->dout));
}
static int k_interp_fwd(void *p) { return interp("interpolate", p, 0); }
static int k_interp_bwd(void *p) { return interp("interpolate_backward", p, 1); }

_Static_assert(sizeof(lnc_bn) == sizeof(ln_batchnorm_args), "lnc_bn must have ln_batchnorm_args's layout");
_Static_assert(offsetof(lnc_bn, dres) == offsetof(ln_batchnorm_args, dres), "lnc_bn must have ln_batchnorm_args's layout");
_Static_assert(offsetof(lnc_bn, momentum) == offsetof(ln_batchnorm_args, momentum), "lnc_bn must have ln_batchnorm_args's layout");

static int k_bn_fwd(void *p) {
  ln_batchnorm_args *a = p;
  if (need_float("batch_norm", a->dtype)) return -1;
  return done("batch_norm", lnc_batchnorm(S(), 0, (const lnc_bn *)a));
}
static int k_bn_bwd(void *p) {
  ln_batchnorm_args *a = p;
  if (need_float("batch_norm_backward", a->dtype)) return -1;
  return done("batch_norm_backward", lnc_batchnorm(S(), 1, (const lnc_bn *)a));
}

_Static_assert(sizeof(lnc_grid) == sizeof(ln_grid_args), "lnc_grid must have ln_grid_args's layout");
_Static_assert(offsetof(lnc_grid, dout) == offsetof(ln_grid_args, dout), "lnc_grid must have ln_grid_args's layout");
_Static_assert(offsetof(lnc_grid, size) == offsetof(ln_grid_args, size), "lnc_grid must have ln_grid_args's layout");
static int k_grid_fwd(void *p) {
  ln_grid_args *a = p;
  if (need_float("grid_sample", a->dtype)) return -1;
  return done("grid_sample", lnc_grid_sample(S(), 0, (const lnc_grid *)a));
}
static int k_grid_bwd(void *p) {
  ln_grid_args *a = p;
  if (need_float("grid_sample_backward", a->dtype)) return -1;
  return done("grid_sample_backward", lnc_grid_sample(S(), 1, (const lnc_grid *)a));
}

/* what each slot runs: the float types everywhere, integers where the CPU
 * has them too; half types only in copies (casts) and fills */
static bool supports(int k, int dt) {
  bool f = dt == LN_FLOAT32 || dt == LN_FLOAT64;
  bool i = dt == LN_INT32 || dt == LN_INT64 || dt == LN_UINT8 || dt == LN_BOOL;
  switch (k) {
    case LN_K_copy: case LN_K_fill: case LN_K_where: case LN_K_random: case LN_K_index_select: case LN_K_gather:
      return true;
    case LN_K_scatter_add: return f || dt == LN_INT32 || dt == LN_INT64;
    case LN_K_scatter_reduce: return f || dt == LN_INT32 || dt == LN_INT64 || dt == LN_UINT8;
    case LN_K_arange: return true;
    case LN_K_binary: case LN_K_unary: case LN_K_reduce: return f || i;
    case LN_K_gemm: case LN_K_sgd_step: case LN_K_adam_step: case LN_K_rmsprop_step: case LN_K_norm_pow_sum: case LN_K_relu_bwd: case LN_K_softmax_fwd: case LN_K_softmax_bwd:
    case LN_K_nll_loss_fwd: case LN_K_nll_loss_bwd: case LN_K_maxpool2d_fwd: case LN_K_maxpool2d_bwd:
    case LN_K_avgpool2d_fwd: case LN_K_avgpool2d_bwd: case LN_K_conv2d_fwd: case LN_K_conv2d_bwd:
    case LN_K_batchnorm_fwd: case LN_K_batchnorm_bwd: case LN_K_adaptive_avgpool2d_fwd:
    case LN_K_adaptive_avgpool2d_bwd: case LN_K_interp_fwd: case LN_K_interp_bwd:
    case LN_K_grid_sample_fwd: case LN_K_grid_sample_bwd: return f;
    default: return false;
  }
}

void lnc_fill_kernels(ln_backend *b) {
  b->supports = supports;
  b->copy = k_copy;
  b->binary = k_binary;
  b->unary = k_unary;
  b->where = k_where;
  b->fill = k_fill;
  b->arange = k_arange;
  b->random = k_random;
  b->index_select = k_index_select;
  b->gather = k_gather;
  b->scatter_add = k_scatter_add;
  b->scatter_reduce = k_scatter_reduce;
  b->reduce = k_reduce;
  b->gemm = lnc_gemm;
  b->sgd_step = k_sgd;
  b->adam_step = k_adam;
  b->rmsprop_step = k_rmsprop;
  b->norm_pow_sum = k_norm_pow_sum;
  b->relu_bwd = k_relu_bwd;
  b->softmax_fwd = k_softmax_fwd;
  b->softmax_bwd = k_softmax_bwd;
  b->nll_loss_fwd = k_nll_fwd;
  b->nll_loss_bwd = k_nll_bwd;
  b->maxpool2d_fwd = k_maxpool_fwd;
  b->maxpool2d_bwd = k_maxpool_bwd;
  b->avgpool2d_fwd = k_avgpool_fwd;
  b->avgpool2d_bwd = k_avgpool_bwd;
  b->conv2d_fwd = ln_cuda_conv2d_fwd;
  b->conv2d_bwd = ln_cuda_conv2d_bwd;
  b->batchnorm_fwd = k_bn_fwd;
  b->batchnorm_bwd = k_bn_bwd;
  b->adaptive_avgpool2d_fwd = k_adaptive_fwd;
  b->adaptive_avgpool2d_bwd = k_adaptive_bwd;
  b->interp_fwd = k_interp_fwd;
  b->interp_bwd = k_interp_bwd;
  b->grid_sample_fwd = k_grid_fwd;
  b->grid_sample_bwd = k_grid_bwd;
}
