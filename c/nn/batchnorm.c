/* batchnorm.c -- batch normalisation over dim 1 of (N,C) or (N,C,*):
 * front ends and CPU kernels. The kernels run one channel per work item over
 * its N planes of S contiguous elements: two passes for the statistics
 * (mean, then the centred sum of squares, accumulated in double per plane),
 * one fused scale-and-shift pass for the output. The _relu variants apply a
 * ReLU in that pass and mask the incoming gradient by its zeros in the
 * backward: BatchNorm -> ReLU in training without the ReLU's two passes over
 * memory (its forward, and its backward before this backward's). The
 * _add_relu variants add a residual before the ReLU (a ResNet block's
 * relu(bn2(conv2(.)) + shortcut)) and give its gradient, the masked one,
 * from the backward's first pass: no add pass, no ReLU passes. */
#include "nn.h"
#include <math.h>
#include <omp.h>

static int bn_threads(int64_t n, int64_t C) {
  int nt = ln_kernel_threads();
  if (n < 32768) nt = 1;
  if (nt > C) nt = (int)LN_MAX(C, 1);
  return nt;
}

/* each channel's work is a function compiled for AVX-512, AVX2 and baseline
 * x86-64 (picked at load time), called from the OpenMP loop over channels */
#if defined(__x86_64__) && !defined(__clang__) && !defined(LN_NO_CLONES)
#define BN_SIMD __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define BN_SIMD
#endif

#define DEF_BN(T, SFX)                                                                       \
  BN_SIMD static void bn_fwd_ch_##SFX(const ln_batchnorm_args *a, int64_t c) {              \
    const int64_t N = a->N, C = a->C, S = a->S, M = N * S;                                   \
    const T *w = (const T *)a->weight, *b = (const T *)a->bias;                              \
    T *sm = (T *)a->save_mean, *si = (T *)a->save_invstd;                                    \
    T *rm = (T *)a->running_mean, *rv = (T *)a->running_var;                                 \
    double mean, invstd;                                                                     \
    if (a->training) {                                                                       \
      double s = 0;                                                                          \
      for (int64_t n = 0; n < N; n++) {                                                      \
        const T *x = (const T *)a->in + (n * C + c) * S;                                     \
        double part = 0;                                                                     \
        _Pragma("omp simd reduction(+:part)")                                                \
        for (int64_t j = 0; j < S; j++) part += x[j];                                        \
        s += part;                                                                           \
      }                                                                                      \
      mean = s / (double)M;                                                                  \
      double ss = 0;                                                                         \
      T mu = (T)mean;                                                                        \
      for (int64_t n = 0; n < N; n++) {                                                      \
        const T *x = (const T *)a->in + (n * C + c) * S;                                     \
        double part = 0;                                                                     \
        _Pragma("omp simd reduction(+:part)")                                                \
        for (int64_t j = 0; j < S; j++) { T d = x[j] - mu; part += d * d; }                  \
        ss += part;                                                                          \
      }                                                                                      \
      double var = ss / (double)M;                                                           \
      invstd = 1.0 / sqrt(var + a->eps);                                                     \
      if (rm) rm[c] = (T)((1 - a->momentum) * rm[c] + a->momentum * mean);                   \
      if (rv) rv[c] = (T)((1 - a->momentum) * rv[c] + a->momentum * var * (double)M / (double)(M - 1)); \
    } else {                                                                                 \
      mean = rm[c];                                                                          \
      invstd = 1.0 / sqrt((double)rv[c] + a->eps);                                           \
    }                                                                                        \
    if (sm) sm[c] = (T)mean;                                                                 \
    if (si) si[c] = (T)invstd;                                                               \
    double scale = (w ? (double)w[c] : 1.0) * invstd;                                        \
    T k = (T)scale, sh = (T)((b ? (double)b[c] : 0.0) - mean * scale);                       \
    for (int64_t n = 0; n < N; n++) {                                                        \
      const T *x = (const T *)a->in + (n * C + c) * S;                                       \
      T *y = (T *)a->out + (n * C + c) * S;                                                  \
      if (a->relu && a->res) {                                                               \
        const T *r = (const T *)a->res + (n * C + c) * S;                                    \
        _Pragma("omp simd")                                                                  \
        for (int64_t j = 0; j < S; j++) { T v = x[j] * k + sh + r[j]; y[j] = v < 0 ? (T)0 : v; } \
      } else if (a->relu) {   /* (as the relu kernel: NaN stays NaN) */                      \
        _Pragma("omp simd")                                                                  \
        for (int64_t j = 0; j < S; j++) { T v = x[j] * k + sh; y[j] = v < 0 ? (T)0 : v; }    \
      } else {                                                                               \
        _Pragma("omp simd")                                                                  \
        for (int64_t j = 0; j < S; j++) y[j] = x[j] * k + sh;                                \
      }                                                                                      \
    }                                                                                        \
  }                                                                                          \
  static void bn_fwd_##SFX(const ln_batchnorm_args *a, int nt) {                            \
    _Pragma("omp parallel for num_threads(nt) schedule(static) if (nt > 1)")                 \
    for (int64_t c = 0; c < a->C; c++) bn_fwd_ch_##SFX(a, c);                                \
  }                                                                                          \
  BN_SIMD static void bn_bwd_ch_##SFX(const ln_batchnorm_args *a, int64_t c) {              \
    const int64_t N = a->N, C = a->C, S = a->S, M = N * S;                                   \
    const T *w = (const T *)a->weight, *sm = (const T *)a->save_mean;                        \
    const T *si = (const T *)a->save_invstd;                                                 \
    T mu = sm[c];                                                                            \
    double invstd = si[c], sdy = 0, dot = 0;                                                 \
    for (int64_t n = 0; n < N; n++) {                                                        \
      const T *x = (const T *)a->in + (n * C + c) * S;                                       \
      const T *dy = (const T *)a->dout + (n * C + c) * S;                                    \
      const T *fy = a->relu ? (const T *)a->out + (n * C + c) * S : NULL;                    \
      double p1 = 0, p2 = 0;                                                                 \
      if (a->relu && a->dres) {                                                              \
        T *dr = (T *)a->dres + (n * C + c) * S;                                              \
        _Pragma("omp simd reduction(+:p1,p2)")                                               \
        for (int64_t j = 0; j < S; j++) {                                                    \
          T d = dy[j], g = fy[j] > 0 ? d : (T)0;                                             \
          dr[j] = g; p1 += g; p2 += g * (x[j] - mu);                                         \
        }                                                                                    \
      } else if (a->relu) {                                                                  \
        _Pragma("omp simd reduction(+:p1,p2)")                                               \
        for (int64_t j = 0; j < S; j++) {                                                    \
          T d = dy[j], g = fy[j] > 0 ? d : (T)0;                                             \
          p1 += g; p2 += g * (x[j] - mu);                                                    \
        }                                                                                    \
      } else {                                                                               \
        _Pragma("omp simd reduction(+:p1,p2)")                                               \
        for (int64_t j = 0; j < S; j++) { p1 += dy[j]; p2 += dy[j] * (x[j] - mu); }          \
      }                                                                                      \
      sdy += p1; dot += p2;                                                                  \
    }                                                                                        \
    if (a->dbias) ((T *)a->dbias)[c] = (T)sdy;                                               \
    if (a->dweight) ((T *)a->dweight)[c] = (T)(dot * invstd);                                \
    if (!a->din) return;                                                                     \
    double wc = w ? (double)w[c] : 1.0;                                                      \
    T k = (T)(wc * invstd);                                                                  \
    T km = 0, kx = 0;                                                                        \
    if (a->training) {                                                                       \
      km = (T)(sdy / (double)M);                                                             \
      kx = (T)(invstd * invstd * dot / (double)M);                                           \
    }                                                                                        \
    for (int64_t n = 0; n < N; n++) {                                                        \
      const T *x = (const T *)a->in + (n * C + c) * S;                                       \
      const T *dy = (const T *)a->dout + (n * C + c) * S;                                    \
      T *dx = (T *)a->din + (n * C + c) * S;                                                 \
      const T *fy = a->relu ? (const T *)a->out + (n * C + c) * S : NULL;                    \
      if (a->training && a->relu) {                                                          \
        _Pragma("omp simd")                                                                  \
        for (int64_t j = 0; j < S; j++) {                                                    \
          T d = dy[j], g = fy[j] > 0 ? d : (T)0;                                             \
          dx[j] = k * (g - km - (x[j] - mu) * kx);                                           \
        }                                                                                    \
      } else if (a->relu) {                                                                  \
        _Pragma("omp simd")                                                                  \
        for (int64_t j = 0; j < S; j++) { T d = dy[j]; dx[j] = fy[j] > 0 ? k * d : (T)0; }   \
      } else if (a->training) {                                                              \
        _Pragma("omp simd")                                                                  \
        for (int64_t j = 0; j < S; j++) dx[j] = k * (dy[j] - km - (x[j] - mu) * kx);         \
      } else {                                                                               \
        _Pragma("omp simd")                                                                  \
        for (int64_t j = 0; j < S; j++) dx[j] = k * dy[j];                                   \
      }                                                                                      \
    }                                                                                        \
  }                                                                                          \
  static void bn_bwd_##SFX(const ln_batchnorm_args *a, int nt) {                            \
    _Pragma("omp parallel for num_threads(nt) schedule(static) if (nt > 1)")                 \
    for (int64_t c = 0; c < a->C; c++) bn_bwd_ch_##SFX(a, c);                                \
  }

DEF_BN(float, f32)
DEF_BN(double, f64)

int ln_cpu_batchnorm_fwd(void *args) {
  const ln_batchnorm_args *a = args;
  int nt = bn_threads(a->N * a->C * a->S, a->C);
  if (a->dtype == LN_FLOAT64) bn_fwd_f64(a, nt); else bn_fwd_f32(a, nt);
  return 0;
}

int ln_cpu_batchnorm_bwd(void *args) {
  const ln_batchnorm_args *a = args;
  int nt = bn_threads(a->N * a->C * a->S, a->C);
  if (a->dtype == LN_FLOAT64) bn_bwd_f64(a, nt); else bn_bwd_f32(a, nt);
  return 0;
}

/* ---- front ends -------------------------------------------------------------- */

static int bn_input(const char *fn, const char *name, const ln_tensor *in, ln_batchnorm_args *a) {
  char s[160];
  if (nn_check(fn, name, in, -1, -1, -1, NULL) != 0) return -1;
  if (in->ndim < 2)
    return ln_error("%s: %s must be (N,C) or (N,C,*), got shape %s", fn, name, nn_shape(s, sizeof s, in));
  a->dtype = in->dtype_id;
  a->N = in->shape[0];
  a->C = in->shape[1];
  a->S = 1;
  for (int i = 2; i < in->ndim; i++) a->S *= in->shape[i];
  return 0;
}

static int check_vec(const char *fn, const char *name, const ln_tensor *t, const ln_tensor *in, int64_t C) {
  int64_t shape[1] = {C};
  return t ? nn_check(fn, name, t, in->dtype_id, in->device_id, 1, shape) : 0;
}

static int bn_forward(const char *fn, int relu, ln_tensor *out, ln_tensor *save_mean, ln_tensor *save_invstd,
                      const ln_tensor *in, const ln_tensor *residual, const ln_tensor *weight,
                      const ln_tensor *bias, ln_tensor *running_mean, ln_tensor *running_var, int training,
                      double momentum, double eps) {
  ln_batchnorm_args a = {0};
  a.relu = relu;
  char s[160];
  if (bn_input(fn, "input", in, &a) != 0) return -1;
  if (nn_check(fn, "out", out, in->dtype_id, in->device_id, in->ndim, in->shape) != 0 ||
      (residual && nn_check(fn, "residual", residual, in->dtype_id, in->device_id, in->ndim, in->shape) != 0) ||
      check_vec(fn, "save_mean", save_mean, in, a.C) != 0 ||
      check_vec(fn, "save_invstd", save_invstd, in, a.C) != 0 || check_vec(fn, "weight", weight, in, a.C) != 0 ||
      check_vec(fn, "bias", bias, in, a.C) != 0 || check_vec(fn, "running_mean", running_mean, in, a.C) != 0 ||
      check_vec(fn, "running_var", running_var, in, a.C) != 0)
    return -1;
  if (!(eps > 0) && eps != 0) return ln_error("%s: eps must be >= 0, got %g", fn, eps);
  if (training && a.N * a.S <= 1)
    return ln_error("%s: expected more than 1 value per channel when training, got input of shape %s", fn,
                    nn_shape(s, sizeof s, in));
  if (!training && (!running_mean || !running_var))
    return ln_error("%s: running_mean and running_var are needed in evaluation mode", fn);
  if (training && (!running_mean) != (!running_var))
    return ln_error("%s: give both running_mean and running_var, or neither", fn);
  a.training = training != 0;
  a.momentum = momentum;
  a.eps = eps;
  int dev = in->device_id, rc = -1;
  nn_in xi = {0}, wi = {0}, bi = {0}, ri = {0};
  nn_out o = {0}, om = {0}, oi = {0}, orm = {0}, orv = {0};
  if (nn_input(fn, "input", in, &xi) != 0 || nn_input(fn, "weight", weight, &wi) != 0 ||
      nn_input(fn, "residual", residual, &ri) != 0 ||
      nn_input(fn, "bias", bias, &bi) != 0 || nn_output(fn, "out", out, &o) != 0 ||
      nn_output(fn, "save_mean", save_mean, &om) != 0 || nn_output(fn, "save_invstd", save_invstd, &oi) != 0)
    goto done;
  /* running stats are read and updated: a strided view is used through a
   * contiguous copy that is copied back */
  if (running_mean && !ln_is_contiguous(running_mean)) {
    if (nn_output(fn, "running_mean", running_mean, &orm) != 0 || ln_copy_(orm.t, running_mean) != 0) goto done;
  } else orm.t = orm.user = running_mean;
  if (running_var && !ln_is_contiguous(running_var)) {
    if (nn_output(fn, "running_var", running_var, &orv) != 0 || ln_copy_(orv.t, running_var) != 0) goto done;
  } else orv.t = orv.user = running_var;
  a.out = nn_ptr(o.t); a.in = nn_ptr(xi.t); a.weight = nn_ptr(wi.t); a.bias = nn_ptr(bi.t);
  a.save_mean = nn_ptr(om.t); a.save_invstd = nn_ptr(oi.t);
  a.running_mean = nn_ptr(orm.t); a.running_var = nn_ptr(orv.t); a.res = nn_ptr(ri.t);
  const ln_tensor *keep[9] = {o.t, om.t, oi.t, xi.t, wi.t, bi.t, orm.t, orv.t, ri.t};
  rc = ln_launch(dev, fn, ln_backend_of(dev)->batchnorm_fwd, &a, sizeof a, keep, 9);
done:
  rc = nn_out_finish(&o, rc);
  rc = nn_out_finish(&om, rc);
  rc = nn_out_finish(&oi, rc);
  rc = nn_out_finish(&orm, rc);
  rc = nn_out_finish(&orv, rc);
  nn_in_free(&xi); nn_in_free(&wi); nn_in_free(&bi); nn_in_free(&ri);
  return rc;
}

int ln_batchnorm_forward(ln_tensor *out, ln_tensor *save_mean, ln_tensor *save_invstd, const ln_tensor *in,
                         const ln_tensor *weight, const ln_tensor *bias, ln_tensor *running_mean,
                         ln_tensor *running_var, int training, double momentum, double eps) {
  return bn_forward("batch_norm", 0, out, save_mean, save_invstd, in, NULL, weight, bias, running_mean,
                    running_var, training, momentum, eps);
}

int ln_batchnorm_relu_forward(ln_tensor *out, ln_tensor *save_mean, ln_tensor *save_invstd, const ln_tensor *in,
                              const ln_tensor *weight, const ln_tensor *bias, ln_tensor *running_mean,
                              ln_tensor *running_var, int training, double momentum, double eps) {
  return bn_forward("batch_norm_relu", 1, out, save_mean, save_invstd, in, NULL, weight, bias, running_mean,
                    running_var, training, momentum, eps);
}

int ln_batchnorm_add_relu_forward(ln_tensor *out, ln_tensor *save_mean, ln_tensor *save_invstd,
                                  const ln_tensor *in, const ln_tensor *residual, const ln_tensor *weight,
                                  const ln_tensor *bias, ln_tensor *running_mean, ln_tensor *running_var,
                                  int training, double momentum, double eps) {
  if (!residual) return ln_error("batch_norm_add_relu: residual is required");
  return bn_forward("batch_norm_add_relu", 1, out, save_mean, save_invstd, in, residual, weight, bias,
                    running_mean, running_var, training, momentum, eps);
}

/* out: the relu variant's forward output (NULL: plain batch norm); dres: the
 * add_relu variant's residual gradient (NULL: none) */
static int bn_backward(const char *fn, ln_tensor *din, ln_tensor *dweight, ln_tensor *dbias, ln_tensor *dres,
                       const ln_tensor *dout, const ln_tensor *out, const ln_tensor *in, const ln_tensor *weight,
                       const ln_tensor *save_mean, const ln_tensor *save_invstd, int training) {
  ln_batchnorm_args a = {0};
  if (bn_input(fn, "input", in, &a) != 0) return -1;
  if (out && nn_check(fn, "out", out, in->dtype_id, in->device_id, in->ndim, in->shape) != 0) return -1;
  a.relu = out != NULL;
  if (nn_check(fn, "grad_output", dout, in->dtype_id, in->device_id, in->ndim, in->shape) != 0 ||
      (din && nn_check(fn, "grad_input", din, in->dtype_id, in->device_id, in->ndim, in->shape) != 0) ||
      (dres && nn_check(fn, "grad_residual", dres, in->dtype_id, in->device_id, in->ndim, in->shape) != 0) ||
      check_vec(fn, "grad_weight", dweight, in, a.C) != 0 || check_vec(fn, "grad_bias", dbias, in, a.C) != 0 ||
      check_vec(fn, "weight", weight, in, a.C) != 0)
    return -1;
  if (!save_mean || !save_invstd)
    return ln_error("%s: save_mean and save_invstd (from the forward) are required", fn);
  if (check_vec(fn, "save_mean", save_mean, in, a.C) != 0 || check_vec(fn, "save_invstd", save_invstd, in, a.C) != 0)
    return -1;
  if (!din && !dweight && !dbias && !dres) return 0;
  a.training = training != 0;
  int dev = in->device_id, rc = -1;
  nn_in xi = {0}, wi = {0}, gi = {0}, mi = {0}, si = {0}, yi = {0};
  nn_out o = {0}, ow = {0}, ob = {0}, orr = {0};
  if (nn_input(fn, "input", in, &xi) != 0 || nn_input(fn, "weight", weight, &wi) != 0 ||
      nn_input(fn, "out", out, &yi) != 0 ||
      nn_input(fn, "grad_output", dout, &gi) != 0 || nn_input(fn, "save_mean", save_mean, &mi) != 0 ||
      nn_input(fn, "save_invstd", save_invstd, &si) != 0 || nn_output(fn, "grad_input", din, &o) != 0 ||
      nn_output(fn, "grad_weight", dweight, &ow) != 0 || nn_output(fn, "grad_bias", dbias, &ob) != 0 ||
      nn_output(fn, "grad_residual", dres, &orr) != 0)
    goto done;
  a.in = nn_ptr(xi.t); a.weight = nn_ptr(wi.t); a.dout = nn_ptr(gi.t);
  a.save_mean = nn_ptr(mi.t); a.save_invstd = nn_ptr(si.t);
  a.din = nn_ptr(o.t); a.dweight = nn_ptr(ow.t); a.dbias = nn_ptr(ob.t); a.out = nn_ptr(yi.t);
  a.dres = nn_ptr(orr.t);
  const ln_tensor *keep[10] = {o.t, ow.t, ob.t, xi.t, wi.t, gi.t, mi.t, si.t, yi.t, orr.t};
  rc = ln_launch(dev, fn, ln_backend_of(dev)->batchnorm_bwd, &a, sizeof a, keep, 10);
done:
  rc = nn_out_finish(&o, rc);
  rc = nn_out_finish(&ow, rc);
  rc = nn_out_finish(&ob, rc);
  rc = nn_out_finish(&orr, rc);
  nn_in_free(&xi); nn_in_free(&wi); nn_in_free(&gi); nn_in_free(&mi); nn_in_free(&si); nn_in_free(&yi);
  return rc;
}

int ln_batchnorm_backward(ln_tensor *din, ln_tensor *dweight, ln_tensor *dbias, const ln_tensor *dout,
                          const ln_tensor *in, const ln_tensor *weight, const ln_tensor *save_mean,
                          const ln_tensor *save_invstd, int training) {
  return bn_backward("batch_norm_backward", din, dweight, dbias, NULL, dout, NULL, in, weight, save_mean,
                     save_invstd, training);
}

int ln_batchnorm_relu_backward(ln_tensor *din, ln_tensor *dweight, ln_tensor *dbias, const ln_tensor *dout,
                               const ln_tensor *out, const ln_tensor *in, const ln_tensor *weight,
                               const ln_tensor *save_mean, const ln_tensor *save_invstd, int training) {
  if (!out) return ln_error("batch_norm_relu_backward: out (the forward's output) is required");
  return bn_backward("batch_norm_relu_backward", din, dweight, dbias, NULL, dout, out, in, weight, save_mean,
                     save_invstd, training);
}

int ln_batchnorm_add_relu_backward(ln_tensor *din, ln_tensor *dweight, ln_tensor *dbias, ln_tensor *dresidual,
                                   const ln_tensor *dout, const ln_tensor *out, const ln_tensor *in,
                                   const ln_tensor *weight, const ln_tensor *save_mean,
                                   const ln_tensor *save_invstd, int training) {
  if (!out) return ln_error("batch_norm_add_relu_backward: out (the forward's output) is required");
  return bn_backward("batch_norm_add_relu_backward", din, dweight, dbias, dresidual, dout, out, in, weight,
                     save_mean, save_invstd, training);
}
