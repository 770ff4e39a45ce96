/* sort.c -- front end of sort, argsort and topk: ln_argsort(a, dim, descending, k).
 *
 * Gives the int64 0-based positions along dim that sort a (stable: equal
 * elements keep their order; NaN above every number, so last ascending and
 * first descending; -0.0 equals 0.0), the first k of them per row (topk);
 * the values are a gathered at them (the Lua side does that, so that they
 * carry autograd through gather's backward). The kernel gets views of a and
 * of the output whose last dim is dim, kept dims first. float16/bfloat16 are
 * compared as float32 (a copy). A 0-d tensor sorts as itself (dim 0 or -1,
 * k 0 or 1 as in PyTorch, a 0-d result). */
#include "../core/backend.h"

ln_tensor *ln_argsort(const ln_tensor *a, int dim, int descending, int64_t k) {
  const char *fn = k < 0 ? "argsort" : "topk";
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
  int64_t r = nd == 0 ? 1 : a->shape[dim];
  if (k < 0) k = r;
  if (k > r) {
    char b[160];
    return ln_error_null("topk: k %lld is larger than dim %d's size %lld (input shape %s)", (long long)k,
                         dim + 1, (long long)r, ln_shape_str(b, sizeof b, nd, a->shape));
  }

  int64_t oshape[LN_MAX_DIMS];
  for (int i = 0; i < nd; i++) oshape[i] = i == dim ? k : a->shape[i];
  ln_tensor *out = ln_tensor_new_named(fn, nd, oshape, LN_INT64, a->device_id);
  if (!out) return NULL;
  if (ln_numel(out) == 0) return out;   /* k = 0, or an empty kept dim */

  ln_tensor *half = NULL;
  const ln_tensor *x = a;
  if (a->dtype_id == LN_FLOAT16 || a->dtype_id == LN_BFLOAT16) {
    if (!(x = half = ln_cast(a, LN_FLOAT32))) { ln_tensor_free(out); return NULL; }
  }
  /* kernel views: kept dims, then dim (a 0-d tensor is one row of one) */
  ln_sort_args args;
  memset(&args, 0, sizeof args);
  args.descending = descending != 0;
  args.r = r; args.k = nd == 0 ? 1 : k;   /* a 0-d result holds its one position */
  args.a = ln_kview_dim_last(x, dim, r);
  args.out = ln_kview_dim_last(out, dim, k);
  const ln_tensor *keep[2] = {out, x};
  int rc = ln_launch(a->device_id, fn, ln_backend_of(a->device_id)->sort, &args, sizeof args, keep, 2);
  ln_tensor_free(half);
  if (rc != 0) { ln_tensor_free(out); return NULL; }
  return out;
}
