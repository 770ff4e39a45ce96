/* scan.c -- front end of cumsum and cumprod: ln_scan(op, a, dim, dtype).
 *
 * The result has a's shape; element i along dim is the sum (product) of a's
 * elements 0..i along dim. Dtypes as PyTorch 1.13: a float a keeps its
 * dtype, an integer or bool a gives int64; a dtype asked for is a's dtype
 * cast to it before the scan (a.to(dtype).cumsum(dim)), never bool (PyTorch
 * has no bool kernel either). The kernel scans in its output's dtype, so a
 * is cast first when the dtypes differ (as PyTorch's self.to(result dtype));
 * float16/bfloat16 are scanned in float32 and the result cast back. The
 * kernel gets views of a and of the output whose last dim is dim, kept dims
 * first (in a's order). A 0-d tensor is one row of one (dim 0 or -1). The
 * output has a's shape (ln_tensor_new_named checks its size); the kernel's
 * counts are at most a's element count. */
#include "../core/backend.h"

static const char *const scan_names[LN_NSCAN] = {"cumsum", "cumprod"};

ln_tensor *ln_scan(int op, const ln_tensor *a, int dim, int dtype) {
  if (op < 0 || op >= LN_NSCAN)
    return ln_error_null("scan: unknown op %d (LN_SCAN_SUM %d or LN_SCAN_PROD %d)", op, LN_SCAN_SUM, LN_SCAN_PROD);
  const char *fn = scan_names[op];
  if (ln_check_tensor(fn, a, "input") != 0) return NULL;
  int nd = a->ndim;
  if (nd == 0) {
    if (dim != 0 && dim != -1)
      return ln_error_null("%s: dim %d out of range for a 0-d tensor (0 or -1)", fn, dim);
    dim = 0;
  } else {
    /* (messages count dims from 1, as the API's others; a negative dim reads the same) */
    if (dim < -nd) return ln_error_null("%s: dim %d out of range for a %d-d tensor (1..%d)", fn, dim, nd, nd);
    if (dim < 0) dim += nd;
    if (ln_check_dim(fn, a, dim) != 0) return NULL;
  }
  if (dtype >= LN_NDTYPES) return ln_error_null("%s: invalid dtype %d", fn, dtype);

  /* odt: the result's dtype; kdt: the dtype the kernel scans in */
  int dt = a->dtype_id;
  int odt = dtype >= 0 ? dtype : ln_is_float(dt) ? dt : LN_INT64;
  if (odt == LN_BOOL)
    return ln_error_null("%s: a bool result is not supported (the %s of bools is a count); ask for an integer "
                         "or float dtype, or leave dtype out for int64", fn, op == LN_SCAN_SUM ? "sum" : "product");
  bool half = odt == LN_FLOAT16 || odt == LN_BFLOAT16;
  int kdt = half ? LN_FLOAT32 : odt;

  ln_tensor *out = ln_tensor_new_named(fn, nd, a->shape, kdt, a->device_id);
  if (!out) return NULL;
  ln_tensor *cast = NULL, *cast2 = NULL;
  if (ln_numel(out) > 0) {
    /* a in the kernel's dtype: rounded to a half result's dtype first, as PyTorch's cast */
    const ln_tensor *x = a;
    if (dt != odt && !(x = cast = ln_cast(a, odt))) goto fail;
    if (x->dtype_id != kdt && !(x = cast2 = ln_cast(x, kdt))) goto fail;

    /* kernel views: kept dims, then dim (a 0-d tensor is one row of one) */
    ln_scan_args args;
    memset(&args, 0, sizeof args);
    args.op = op;
    args.r = nd == 0 ? 1 : a->shape[dim];
    args.a = ln_kview_dim_last(x, dim, args.r);
    args.out = ln_kview_dim_last(out, dim, args.r);
    const ln_tensor *keep[2] = {out, x};
    if (ln_launch(a->device_id, fn, ln_backend_of(a->device_id)->scan, &args, sizeof args, keep, 2) != 0)
      goto fail;
  }
  ln_tensor_free(cast);
  ln_tensor_free(cast2);
  if (kdt != odt) {   /* a half result: the float32 scan rounded back */
    ln_tensor *back = ln_cast(out, odt);
    ln_tensor_free(out);
    out = back;
  }
  return out;
fail:
  ln_tensor_free(cast);
  ln_tensor_free(cast2);
  ln_tensor_free(out);
  return NULL;
}
