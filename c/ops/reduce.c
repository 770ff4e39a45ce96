/* reduce.c -- front end of reductions: ln_reduce(op, a, dim, keepdim, p, indices).
 *
 * Checks the op, dim and dtype, allocates the output (and the int64 indices
 * of max/min), and hands the kernel a view of a whose last dim is the reduced
 * one. Output dtypes: sum/prod of bool/uint8/int32/int64 give int64; mean,
 * var, std and norm need a float tensor; argmax/argmin give int64; any/all
 * give bool; the rest keep the input dtype. float16/bfloat16 are reduced in
 * float32 and the result cast back. */
#include "../core/backend.h"
#include <math.h>

static const char *reduce_names[] = {"sum", "mean", "prod", "max", "min", "argmax", "argmin",
                                     "var", "std", "norm", "any", "all"};

/* Full reduction of a non-contiguous tensor whose elements can be visited in
 * any order: a permutation of its dims may be contiguous (a transpose). */
static int permuted_contiguous(const ln_tensor *a) {
  int64_t st[LN_MAX_DIMS], sh[LN_MAX_DIMS];
  int n = 0;
  for (int i = 0; i < a->ndim; i++)
    if (a->shape[i] != 1) { sh[n] = a->shape[i]; st[n] = a->stride[i]; n++; }
  for (int i = 1; i < n; i++)   /* insertion sort, strides descending */
    for (int j = i; j > 0 && st[j] > st[j - 1]; j--) {
      int64_t t = st[j]; st[j] = st[j - 1]; st[j - 1] = t;
      t = sh[j]; sh[j] = sh[j - 1]; sh[j - 1] = t;
    }
  int64_t s = 1;
  for (int i = n - 1; i >= 0; i--) { if (st[i] != s) return 0; s *= sh[i]; }
  return 1;
}

static ln_tensor *reduce_impl(int op, const ln_tensor *a, int dim, int keepdim, double p,
                              ln_tensor **indices) {
  const char *fn = reduce_names[op];
  int dt = a->dtype_id;
  bool fl = ln_is_float(dt);
  if ((op == LN_RMEAN || op == LN_RVAR || op == LN_RSTD || op == LN_RNORM) && !fl)
    return ln_error_null("%s: needs a floating-point tensor, got %s; cast it first (e.g. :float())",
                         fn, ln_dtype_name(dt));
  if (op == LN_RNORM && isnan(p)) return ln_error_null("norm: order p must not be NaN");
  if ((op == LN_RVAR || op == LN_RSTD) && (isnan(p) || p < 0))
    return ln_error_null("%s: correction must be >= 0, got %g", fn, p);
  if (a->ndim == 0 && dim == 0) dim = -1;
  if (dim >= 0 && ln_check_dim(fn, a, dim) != 0) return NULL;
  int64_t r = dim >= 0 ? a->shape[dim] : ln_numel(a);
  bool arg = op == LN_RMAX || op == LN_RMIN || op == LN_RARGMAX || op == LN_RARGMIN;
  if (arg && r == 0) {
    char b[160];
    if (dim >= 0)
      return ln_error_null("%s: cannot reduce over dim %d of size 0 (input shape %s)", fn, dim + 1,
                           ln_shape_str(b, sizeof b, a->ndim, a->shape));
    return ln_error_null("%s: cannot reduce an empty tensor (shape %s); it has no %s", fn,
                         ln_shape_str(b, sizeof b, a->ndim, a->shape),
                         op == LN_RMAX || op == LN_RARGMAX ? "maximum" : "minimum");
  }

  /* output dtype, and a float32 copy for half types */
  int odt = dt;
  if (op == LN_RSUM || op == LN_RPROD) odt = fl ? dt : LN_INT64;
  if (op == LN_RARGMAX || op == LN_RARGMIN) odt = LN_INT64;
  if (op == LN_RANY || op == LN_RALL) odt = LN_BOOL;
  ln_tensor *half = NULL;
  const ln_tensor *x = a;
  bool cast_back = false;
  if (dt == LN_FLOAT16 || dt == LN_BFLOAT16) {
    if (!(x = half = ln_cast(a, LN_FLOAT32))) return NULL;
    if (odt == dt) { odt = LN_FLOAT32; cast_back = true; }
  }

  /* output shape; the kernel's view: kept dims, then the reduced one */
  int ond = 0;
  int64_t oshape[LN_MAX_DIMS];
  ln_tensor *contig = NULL;
  ln_kview kv;
  if (dim >= 0) {
    kv = ln_kview_of(x);
    int k = 0;
    for (int i = 0; i < x->ndim; i++) {
      if (i == dim) { if (keepdim) oshape[ond++] = 1; continue; }
      oshape[ond++] = x->shape[i];
      kv.shape[k] = x->shape[i]; kv.stride[k] = x->stride[i]; k++;
    }
    kv.shape[k] = x->shape[dim]; kv.stride[k] = x->stride[dim];
    kv.ndim = k + 1;
  } else {
    if (keepdim) for (int i = 0; i < x->ndim; i++) oshape[ond++] = 1;
    if (!ln_is_contiguous(x) && (arg || !permuted_contiguous(x))) {
      if (!(x = contig = ln_contiguous(x))) { ln_tensor_free(half); return NULL; }
    }
    kv = ln_kview_of(x);   /* contiguous, or a permutation of contiguous dims */
    kv.ndim = 1; kv.shape[0] = r; kv.stride[0] = 1;
  }

  ln_tensor *out = ln_tensor_new_named(fn, ond, oshape, odt, a->device_id);
  ln_tensor *idx = NULL;
  bool want_idx = indices && (op == LN_RMAX || op == LN_RMIN);
  if (out && want_idx) idx = ln_tensor_new_named(fn, ond, oshape, LN_INT64, a->device_id);
  if (!out || (want_idx && !idx)) goto fail;
  if (ln_numel(out) > 0) {
    ln_reduce_args args;
    memset(&args, 0, sizeof args);
    args.op = op; args.p = p; args.r = r;
    args.out = ln_kview_of(out);
    if (idx) args.idx = ln_kview_of(idx);
    args.a = kv;
    const ln_tensor *keep[3] = {out, idx, x};
    if (ln_launch(a->device_id, fn, ln_backend_of(a->device_id)->reduce, &args, sizeof args, keep, 3) != 0)
      goto fail;
  }
  if (cast_back) {
    ln_tensor *back = ln_cast(out, dt);
    ln_tensor_free(out);
    if (!(out = back)) goto fail;
  }
  ln_tensor_free(half);
  ln_tensor_free(contig);
  if (indices) *indices = idx;
  return out;
fail:
  ln_tensor_free(out);
  ln_tensor_free(idx);
  ln_tensor_free(half);
  ln_tensor_free(contig);
  return NULL;
}

ln_tensor *ln_reduce(int op, const ln_tensor *a, int dim, int keepdim, double p, ln_tensor **indices) {
  if (indices) *indices = NULL;
  if (op < 0 || op >= LN_NREDUCE) return ln_error_null("reduce: invalid op %d", op);
  if (ln_check_tensor(reduce_names[op], a, "input") != 0) return NULL;
  return reduce_impl(op, a, dim, keepdim, p, indices);
}
