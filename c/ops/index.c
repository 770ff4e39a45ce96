/* index.c -- front ends of index_select, gather, scatter_add_, scatter_reduce_, cat
 * and stack.
 *
 * Indices are 0-based int64 (or int32) tensors on the input's device. Their
 * values are checked by the kernel (the host does not read device memory):
 * a bad one fails the op there, or at the next sync on a virtual device. */
#include "../core/backend.h"
#include "../core/checked.h"
#include <stdio.h>

static int check_index(const char *fn, const ln_tensor *a, const ln_tensor *index) {
  if (ln_check_tensor(fn, index, "index") != 0 || ln_check_same_device(fn, a, index) != 0) return -1;
  if (index->dtype_id != LN_INT64 && index->dtype_id != LN_INT32)
    return ln_error("%s: index must be an int64 (or int32) tensor, got %s", fn,
                    ln_dtype_name(index->dtype_id));
  return 0;
}

static ln_index_args index_args(int dim, const ln_tensor *out, const ln_tensor *a,
                                const ln_tensor *index, const ln_tensor *src) {
  ln_index_args args;
  memset(&args, 0, sizeof args);
  args.dim = dim;
  args.out = ln_kview_of(out);
  if (a) args.a = ln_kview_of(a);
  args.index = ln_kview_of(index);
  if (src) args.src = ln_kview_of(src);
  return args;
}

static int launch(const char *fn, ln_task_fn kernel, ln_index_args *args, const ln_tensor *out,
                  const ln_tensor *a, const ln_tensor *index, const ln_tensor *src) {
  const ln_tensor *keep[4] = {out, a, index, src};
  return ln_launch(out->device_id, fn, kernel, args, sizeof *args, keep, 4);
}

ln_tensor *ln_index_select(const ln_tensor *a, int dim, const ln_tensor *index) {
  const char *fn = "index_select";
  if (ln_check_tensor(fn, a, "input") != 0 || check_index(fn, a, index) != 0 ||
      ln_check_dim(fn, a, dim) != 0)
    return NULL;
  if (index->ndim > 1) return ln_error_null("index_select: index must be 1-d, got %d-d", index->ndim);
  int64_t shape[LN_MAX_DIMS];
  for (int i = 0; i < a->ndim; i++) shape[i] = a->shape[i];
  shape[dim] = ln_numel(index);
  ln_tensor *out = ln_tensor_new_named(fn, a->ndim, shape, a->dtype_id, a->device_id);
  if (!out) return NULL;
  ln_index_args args = index_args(dim, out, a, index, NULL);
  if (index->ndim == 0) { args.index.ndim = 1; args.index.shape[0] = 1; args.index.stride[0] = 0; }
  if (launch(fn, ln_backend_of(a->device_id)->index_select, &args, out, a, index, NULL) != 0) {
    ln_tensor_free(out);
    return NULL;
  }
  return out;
}

/* index (and src) have a's number of dims and fit inside it off dim */
static int check_fits(const char *fn, const ln_tensor *a, int dim, const ln_tensor *index,
                      const ln_tensor *src) {
  char b1[160], b2[160];
  if (index->ndim != a->ndim)
    return ln_error("%s: index has %d dims but the input has %d; they must match", fn, index->ndim,
                    a->ndim);
  for (int d = 0; d < a->ndim; d++)
    if (d != dim && index->shape[d] > a->shape[d])
      return ln_error("%s: index shape %s does not fit the input shape %s off dim %d", fn,
                      ln_shape_str(b1, sizeof b1, index->ndim, index->shape),
                      ln_shape_str(b2, sizeof b2, a->ndim, a->shape), dim + 1);
  if (src) {
    if (src->ndim != a->ndim)
      return ln_error("%s: src has %d dims but the input has %d; they must match", fn, src->ndim, a->ndim);
    for (int d = 0; d < a->ndim; d++)
      if (index->shape[d] > src->shape[d])
        return ln_error("%s: index shape %s is larger than the src shape %s", fn,
                        ln_shape_str(b1, sizeof b1, index->ndim, index->shape),
                        ln_shape_str(b2, sizeof b2, src->ndim, src->shape));
  }
  return 0;
}

ln_tensor *ln_gather(const ln_tensor *a, int dim, const ln_tensor *index) {
  const char *fn = "gather";
  if (ln_check_tensor(fn, a, "input") != 0 || check_index(fn, a, index) != 0 ||
      ln_check_dim(fn, a, dim) != 0 || check_fits(fn, a, dim, index, NULL) != 0)
    return NULL;
  ln_tensor *out = ln_tensor_new_named(fn, index->ndim, index->shape, a->dtype_id, a->device_id);
  if (!out) return NULL;
  ln_index_args args = index_args(dim, out, a, index, NULL);
  if (launch(fn, ln_backend_of(a->device_id)->gather, &args, out, a, index, NULL) != 0) {
    ln_tensor_free(out);
    return NULL;
  }
  return out;
}

/* the argument checks scatter_add_ and scatter_reduce_ share; fn names the caller in errors */
static int check_scatter(const char *fn, const ln_tensor *a, int dim, const ln_tensor *index,
                         const ln_tensor *src) {
  if (ln_check_tensor(fn, a, "input") != 0 || check_index(fn, a, index) != 0 ||
      ln_check_tensor(fn, src, "src") != 0 || ln_check_same_device(fn, a, src) != 0 ||
      ln_check_dim(fn, a, dim) != 0 || check_fits(fn, a, dim, index, src) != 0)
    return -1;
  if (ln_check_no_internal_overlap(fn, a) != 0 ||
      ln_check_no_partial_overlap(fn, a, src, "src") != 0 ||
      ln_check_no_partial_overlap(fn, a, index, "index") != 0)
    return -1;
  if (a->dtype_id != src->dtype_id)
    return ln_error("%s: src dtype %s differs from the input's %s; cast it first", fn,
                    ln_dtype_name(src->dtype_id), ln_dtype_name(a->dtype_id));
  int dt = a->dtype_id;
  if (dt == LN_BOOL || dt == LN_FLOAT16 || dt == LN_BFLOAT16)
    return ln_error("%s: %s tensors are not supported", fn, ln_dtype_name(dt));
  return 0;
}

int ln_scatter_add_(ln_tensor *a, int dim, const ln_tensor *index, const ln_tensor *src) {
  const char *fn = "scatter_add_";
  if (check_scatter(fn, a, dim, index, src) != 0) return -1;
  ln_index_args args = index_args(dim, a, NULL, index, src);
  return launch(fn, ln_backend_of(a->device_id)->scatter_add, &args, a, NULL, index, src);
}

int ln_scatter_reduce_(ln_tensor *a, int dim, const ln_tensor *index, const ln_tensor *src, int op,
                       int include_self) {
  const char *fn = "scatter_reduce_";
  if (op < LN_SCATTER_SUM || op > LN_SCATTER_AMIN) return ln_error("scatter_reduce_: invalid op %d", op);
  if (check_scatter(fn, a, dim, index, src) != 0) return -1;
  ln_index_args args = index_args(dim, a, NULL, index, src);
  args.op = op;
  args.include_self = include_self != 0;
  return launch(fn, ln_kernel(fn, a->device_id, LN_K_scatter_reduce, a->dtype_id), &args, a, NULL,
                index, src);
}

/* ---- cat, stack ---------------------------------------------------------------------- */

ln_tensor *ln_cat(int n, ln_tensor *const *ts, int dim) {
  const char *fn = "cat";
  if (n < 1 || !ts) return ln_error_null("cat: expected a non-empty list of tensors");
  const ln_tensor *ref = NULL;
  int dt = -1;
  for (int i = 0; i < n; i++) {
    char name[32];
    snprintf(name, sizeof name, "tensor %d", i + 1);
    if (ln_check_tensor(fn, ts[i], name) != 0) return NULL;
    if (ts[i]->ndim == 0)
      return ln_error_null("cat: tensor %d is 0-d and cannot be concatenated (unsqueeze it)", i + 1);
    dt = dt < 0 ? ts[i]->dtype_id : ln_promote(dt, ts[i]->dtype_id);
    /* as in PyTorch, 1-d empty tensors are skipped whatever the others' shape */
    if (!ref && !(ts[i]->ndim == 1 && ts[i]->shape[0] == 0)) ref = ts[i];
  }
  if (!ref) ref = ts[0];
  if (ln_check_dim(fn, ref, dim) != 0) return NULL;
  int64_t shape[LN_MAX_DIMS];
  for (int d = 0; d < ref->ndim; d++) shape[d] = ref->shape[d];
  shape[dim] = 0;
  for (int i = 0; i < n; i++) {
    const ln_tensor *t = ts[i];
    if (t != ref && t->ndim == 1 && t->shape[0] == 0) continue;
    if (ln_check_same_device(fn, ref, t) != 0) return NULL;
    bool ok = t->ndim == ref->ndim;
    for (int d = 0; ok && d < t->ndim; d++) ok = d == dim || t->shape[d] == ref->shape[d];
    if (!ok) {
      char b1[160], b2[160];
      return ln_error_null("cat: shapes must match except in dim %d: %s and %s (tensor %d)", dim + 1,
                           ln_shape_str(b1, sizeof b1, ref->ndim, ref->shape),
                           ln_shape_str(b2, sizeof b2, t->ndim, t->shape), i + 1);
    }
    if (ln_add_ovf(shape[dim], t->shape[dim], &shape[dim]))
      return ln_error_null("cat: the concatenated size of dim %d overflows (tensor %d)", dim + 1, i + 1);
  }
  ln_tensor *out = ln_tensor_new_named(fn, ref->ndim, shape, dt, ref->device_id);
  if (!out) return NULL;
  int64_t off = 0;
  for (int i = 0; i < n; i++) {
    const ln_tensor *t = ts[i];
    if ((t != ref && t->ndim == 1 && t->shape[0] == 0) || t->shape[dim] == 0) continue;
    ln_tensor *v = ln_narrow(out, dim, off, t->shape[dim]);
    int rc = v ? ln_copy_(v, t) : -1;
    ln_tensor_free(v);
    if (rc != 0) { ln_tensor_free(out); return NULL; }
    off += t->shape[dim];
  }
  return out;
}

ln_tensor *ln_stack(int n, ln_tensor *const *ts, int dim) {
  const char *fn = "stack";
  if (n < 1 || !ts) return ln_error_null("stack: expected a non-empty list of tensors");
  int dt = -1;
  for (int i = 0; i < n; i++) {
    char name[32];
    snprintf(name, sizeof name, "tensor %d", i + 1);
    if (ln_check_tensor(fn, ts[i], name) != 0) return NULL;
    if (i > 0 && ln_check_same_device(fn, ts[0], ts[i]) != 0) return NULL;
    bool ok = ts[i]->ndim == ts[0]->ndim;
    for (int d = 0; ok && d < ts[0]->ndim; d++) ok = ts[i]->shape[d] == ts[0]->shape[d];
    if (!ok) {
      char b1[160], b2[160];
      return ln_error_null("stack: all tensors must have the same shape: %s (tensor 1) and %s (tensor %d)",
                           ln_shape_str(b1, sizeof b1, ts[0]->ndim, ts[0]->shape),
                           ln_shape_str(b2, sizeof b2, ts[i]->ndim, ts[i]->shape), i + 1);
    }
    dt = dt < 0 ? ts[i]->dtype_id : ln_promote(dt, ts[i]->dtype_id);
  }
  const ln_tensor *r = ts[0];
  if (dim < 0 || dim > r->ndim)
    return ln_error_null("stack: dim %d out of range for stacking %d-d tensors (1..%d)", dim + 1,
                         r->ndim, r->ndim + 1);
  if (r->ndim >= LN_MAX_DIMS) return ln_error_null("stack: tensors already have %d dims", LN_MAX_DIMS);
  int64_t shape[LN_MAX_DIMS];
  for (int d = 0, k = 0; d <= r->ndim; d++) shape[d] = d == dim ? n : r->shape[k++];
  ln_tensor *out = ln_tensor_new_named(fn, r->ndim + 1, shape, dt, r->device_id);
  if (!out) return NULL;
  if (ln_numel(out) == 0) return out;
  for (int i = 0; i < n; i++) {
    ln_tensor *v = ln_select(out, dim, i);
    int rc = v ? ln_copy_(v, ts[i]) : -1;
    ln_tensor_free(v);
    if (rc != 0) { ln_tensor_free(out); return NULL; }
  }
  return out;
}
