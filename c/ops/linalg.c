/* linalg.c -- matmul (torch.matmul semantics), bmm, addmm front ends. */
#include "../core/backend.h"

/* A batched matrix operand: data, batch stride, transpose flag, leading dim. */
typedef struct { const ln_tensor *t; ln_tensor *owned; int64_t bstride, ld; int trans; } operand;

/* t is 3-D (batch, r, c). Use it in place when its matrices are row- or
 * column-major, else make it contiguous. */
static int prepare(operand *o, const ln_tensor *t) {
  o->owned = NULL;
  o->t = t;
  for (int attempt = 0; attempt < 2; attempt++) {
    int64_t r = o->t->shape[1], c = o->t->shape[2];
    int64_t sr = r == 1 ? (c > 1 ? c : 1) : o->t->stride[1];
    int64_t sc = c == 1 ? 1 : o->t->stride[2];
    o->bstride = o->t->shape[0] == 1 ? 0 : o->t->stride[0];
    if (sc == 1 && sr >= (c > 1 ? c : 1)) { o->trans = 0; o->ld = sr; return 0; }
    int64_t sc2 = c == 1 ? (r > 1 ? r : 1) : o->t->stride[2], sr2 = r == 1 ? 1 : o->t->stride[1];
    if (sr2 == 1 && sc2 >= (r > 1 ? r : 1)) { o->trans = 1; o->ld = sc2; return 0; }
    o->owned = ln_contiguous(t);
    if (!o->owned) return -1;
    o->t = o->owned;
  }
  return ln_error("matmul: internal: cannot lay out operand");
}

static int check_float(const char *fn, const ln_tensor *a, const ln_tensor *b) {
  if (a->dtype_id != b->dtype_id)
    return ln_error("%s: dtypes differ (%s and %s); cast one first", fn, ln_dtype_name(a->dtype_id),
                    ln_dtype_name(b->dtype_id));
  if (a->dtype_id != LN_FLOAT32 && a->dtype_id != LN_FLOAT64)
    return ln_error("%s: needs float32 or float64 tensors, got %s", fn, ln_dtype_name(a->dtype_id));
  return 0;
}

/* out[b] = beta*out[b] + alpha*a[b] @ b[b]; a3 (B|1, m, k), b3 (B|1, k, n), out (B, m, n) contiguous */
static int launch_gemm(const char *fn, ln_tensor *out, const ln_tensor *a3, const ln_tensor *b3,
                       double alpha, double beta) {
  operand A, B;
  if (prepare(&A, a3) != 0) return -1;
  if (prepare(&B, b3) != 0) { ln_tensor_free(A.owned); return -1; }
  ln_gemm_args g = {A.trans, B.trans, out->shape[0], out->shape[1], out->shape[2], a3->shape[2],
                    A.bstride, B.bstride, out->shape[1] * out->shape[2], A.ld, B.ld, out->shape[2],
                    alpha, beta, out->dtype_id, ln_data_ptr(A.t), ln_data_ptr(B.t), ln_data_ptr(out)};
  const ln_tensor *keep[3] = {out, A.t, B.t};
  int rc = ln_launch(out->device_id, fn, ln_kernel(fn, out->device_id, LN_K_gemm, out->dtype_id), &g, sizeof g, keep, 3);
  ln_tensor_free(A.owned);
  ln_tensor_free(B.owned);
  return rc;
}

/* View t (..., r, c) expanded to batch shape bs as (B, r, c). */
static ln_tensor *batched3(const ln_tensor *t, int nb, const int64_t *bs, int64_t B) {
  int64_t shape[LN_MAX_DIMS];
  for (int i = 0; i < nb; i++) shape[i] = bs[i];
  shape[nb] = t->shape[t->ndim - 2];
  shape[nb + 1] = t->shape[t->ndim - 1];
  ln_tensor *e = ln_expand(t, nb + 2, shape);
  if (!e) return NULL;
  int64_t s3[3] = {B, shape[nb], shape[nb + 1]};
  ln_tensor *r = ln_reshape(e, 3, s3);
  ln_tensor_free(e);
  return r;
}

ln_tensor *ln_matmul(const ln_tensor *a, const ln_tensor *b) {
  const char *fn = "matmul";
  if (ln_check_tensor(fn, a, "first argument") != 0 || ln_check_tensor(fn, b, "second argument") != 0 ||
      ln_check_same_device(fn, a, b) != 0 || check_float(fn, a, b) != 0)
    return NULL;
  if (a->ndim == 0 || b->ndim == 0) return ln_error_null("matmul: both arguments need at least 1 dim");
  /* promote 1-D operands to matrices, remember to drop the dims after */
  ln_tensor *a2 = a->ndim == 1 ? ln_unsqueeze(a, 0) : ln_alias(a);
  ln_tensor *b2 = b->ndim == 1 ? ln_unsqueeze(b, 1) : ln_alias(b);
  ln_tensor *out = NULL, *a3 = NULL, *b3 = NULL;
  if (!a2 || !b2) goto done;
  int64_t m = a2->shape[a2->ndim - 2], k = a2->shape[a2->ndim - 1];
  int64_t k2 = b2->shape[b2->ndim - 2], n = b2->shape[b2->ndim - 1];
  if (k != k2) {
    char s1[160], s2[160];
    ln_error("matmul: shapes %s and %s are not aligned (%lld vs %lld)",
             ln_shape_str(s1, sizeof s1, a->ndim, a->shape), ln_shape_str(s2, sizeof s2, b->ndim, b->shape),
             (long long)k, (long long)k2);
    goto done;
  }
  int nb; int64_t bs[LN_MAX_DIMS];
  if (ln_broadcast_shapes(fn, a2->ndim - 2, a2->shape, b2->ndim - 2, b2->shape, &nb, bs) != 0) goto done;
  if (nb + 2 > LN_MAX_DIMS) { ln_error("matmul: too many dims"); goto done; }
  int64_t B = ln_shape_numel(nb, bs);
  if (B < 0 || B > ((int64_t)1 << 62)) {
    char s1[160];
    ln_error("matmul: broadcast batch shape %s is too large (element count overflows)",
             ln_shape_str(s1, sizeof s1, nb, bs));
    goto done;
  }
  if (!(a3 = batched3(a2, nb, bs, B)) || !(b3 = batched3(b2, nb, bs, B))) goto done;
  int64_t oshape[LN_MAX_DIMS];
  int on = 0;
  for (int i = 0; i < nb; i++) oshape[on++] = bs[i];
  if (a->ndim > 1) oshape[on++] = m;
  if (b->ndim > 1) oshape[on++] = n;
  out = ln_tensor_new_named(fn, on, oshape, a->dtype_id, a->device_id);
  if (!out) goto done;
  /* a contiguous (B, m, n) header over the same storage for the kernel */
  ln_tensor o3 = *out;
  o3.ndim = 3; o3.shape[0] = B; o3.shape[1] = m; o3.shape[2] = n;
  ln_contiguous_strides(3, o3.shape, o3.stride);
  if (launch_gemm(fn, &o3, a3, b3, 1.0, 0.0) != 0) { ln_tensor_free(out); out = NULL; }
done:
  ln_tensor_free(a2); ln_tensor_free(b2); ln_tensor_free(a3); ln_tensor_free(b3);
  return out;
}

ln_tensor *ln_bmm(const ln_tensor *a, const ln_tensor *b) {
  const char *fn = "bmm";
  if (ln_check_tensor(fn, a, "first argument") != 0 || ln_check_tensor(fn, b, "second argument") != 0 ||
      ln_check_same_device(fn, a, b) != 0 || check_float(fn, a, b) != 0)
    return NULL;
  if (a->ndim != 3 || b->ndim != 3 || a->shape[0] != b->shape[0] || a->shape[2] != b->shape[1]) {
    char s1[160], s2[160];
    return ln_error_null("bmm: needs (b,n,k) and (b,k,m) tensors, got %s and %s",
                         ln_shape_str(s1, sizeof s1, a->ndim, a->shape), ln_shape_str(s2, sizeof s2, b->ndim, b->shape));
  }
  int64_t shape[3] = {a->shape[0], a->shape[1], b->shape[2]};
  ln_tensor *out = ln_tensor_new_named(fn, 3, shape, a->dtype_id, a->device_id);
  if (out && launch_gemm(fn, out, a, b, 1.0, 0.0) != 0) { ln_tensor_free(out); out = NULL; }
  return out;
}

ln_tensor *ln_addmm(const ln_tensor *c, const ln_tensor *a, const ln_tensor *b, double beta, double alpha) {
  const char *fn = "addmm";
  if (ln_check_tensor(fn, c, "input") != 0 || ln_check_tensor(fn, a, "mat1") != 0 ||
      ln_check_tensor(fn, b, "mat2") != 0 || ln_check_same_device(fn, a, b) != 0 ||
      ln_check_same_device(fn, c, a) != 0 || check_float(fn, a, b) != 0 || check_float(fn, c, a) != 0)
    return NULL;
  if (a->ndim != 2 || b->ndim != 2 || a->shape[1] != b->shape[0]) {
    char s1[160], s2[160];
    return ln_error_null("addmm: needs (n,k) and (k,m) matrices, got %s and %s",
                         ln_shape_str(s1, sizeof s1, a->ndim, a->shape), ln_shape_str(s2, sizeof s2, b->ndim, b->shape));
  }
  int64_t shape[3] = {1, a->shape[0], b->shape[1]};
  ln_tensor *out = ln_tensor_new_named(fn, 2, shape + 1, a->dtype_id, a->device_id);
  if (!out) return NULL;
  if (beta != 0 && ln_copy_(out, c) != 0) { ln_tensor_free(out); return NULL; }
  if (beta == 0) {   /* still check c's shape */
    int nd; int64_t bs[LN_MAX_DIMS];
    if (ln_broadcast_shapes(fn, c->ndim, c->shape, 2, shape + 1, &nd, bs) != 0 || nd != 2 ||
        bs[0] != shape[1] || bs[1] != shape[2]) { ln_tensor_free(out); return NULL; }
  }
  ln_tensor o3 = *out, a3 = *a, b3 = *b;
  o3.ndim = 3; o3.shape[0] = 1; o3.shape[1] = shape[1]; o3.shape[2] = shape[2];
  ln_contiguous_strides(3, o3.shape, o3.stride);
  a3.ndim = 3; a3.shape[0] = 1; a3.shape[1] = a->shape[0]; a3.shape[2] = a->shape[1];
  a3.stride[0] = 0; a3.stride[1] = a->stride[0]; a3.stride[2] = a->stride[1];
  b3.ndim = 3; b3.shape[0] = 1; b3.shape[1] = b->shape[0]; b3.shape[2] = b->shape[1];
  b3.stride[0] = 0; b3.stride[1] = b->stride[0]; b3.stride[2] = b->stride[1];
  if (launch_gemm(fn, &o3, &a3, &b3, alpha, beta) != 0) { ln_tensor_free(out); return NULL; }
  return out;
}
