/* tensor.c -- tensor headers, creation, views (no copy), reading out. */
#include "internal.h"
#include "backend.h"
#include "checked.h"
#include <stdio.h>
#include <stdlib.h>

/* -1 when the product overflows (a tensor's own shape never does: every
 * header passes check_shape) */
int64_t ln_shape_numel(int ndim, const int64_t *shape) {
  int64_t n;
  return ln_numel_ovf(ndim, shape, &n) ? -1 : n;
}

int64_t ln_numel(const ln_tensor *t) { return t ? ln_shape_numel(t->ndim, t->shape) : 0; }  /* (NULL: 0, no crash) */

/* (check_shape bounds the product of the sizes taken as at least 1, so the
 * strides of a checked shape do not overflow; saturating all the same) */
void ln_contiguous_strides(int ndim, const int64_t *shape, int64_t *stride) {
  int64_t s = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    stride[i] = s;
    if (shape[i] > 1 && ln_mul_ovf(s, shape[i], &s)) s = INT64_MAX;
  }
}

int ln_is_contiguous(const ln_tensor *t) {
  if (!t) return 0;
  int64_t s = 1;
  for (int i = t->ndim - 1; i >= 0; i--) {
    if (t->shape[i] == 1) continue;
    if (t->stride[i] != s) return 0;
    s *= t->shape[i];
  }
  return 1;
}

ln_tensor *ln_tensor_header(void) {
  ln_tensor *t = calloc(1, sizeof *t);
  if (!t) return ln_error_null("out of memory for a tensor header");
  return t;
}

void ln_tensor_free(ln_tensor *t) {
  if (!t) return;
  ln_storage_release(t->storage);
  free(t);
}

int ln_check_tensor(const char *fn, const ln_tensor *t, const char *argname) {
  if (!t) return ln_error("%s: %s is nil, expected a tensor", fn, argname);
  if (!t->storage) return ln_error("%s: %s is an invalid tensor", fn, argname);
  return 0;
}

int ln_check_dim(const char *fn, const ln_tensor *t, int dim) {
  if (dim < 0 || dim >= t->ndim)
    return ln_error("%s: dim %d out of range for a %d-d tensor (1..%d)", fn, dim + 1, t->ndim,
                    t->ndim);
  return 0;
}

/* Checks the dims and sizes, and that neither the byte count nor the
 * contiguous strides (the product of the sizes taken as at least 1: an empty
 * {0, 2^62, 2^62} has strides too) pass LN_MAX_BYTES. */
static int check_shape(const char *fn, int ndim, const int64_t *shape, int dtype, size_t *nbytes) {
  if (ndim < 0 || ndim > LN_MAX_DIMS)
    return ln_error("%s: %d dims given, at most %d supported", fn, ndim, LN_MAX_DIMS);
  if (dtype < 0 || dtype >= LN_NDTYPES) return ln_error("%s: invalid dtype %d", fn, dtype);
  int64_t es = ln_dtype_size(dtype), n = es, span = es;
  char b[160];
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0)
      return ln_error("%s: negative size %lld in shape %s", fn, (long long)shape[i],
                      ln_shape_str(b, sizeof b, ndim, shape));
    if (ln_mul_ovf(n, shape[i], &n) || n > LN_MAX_BYTES)
      return ln_error("%s: shape %s is too large (element count overflows)", fn,
                      ln_shape_str(b, sizeof b, ndim, shape));
    if (ln_mul_ovf(span, shape[i] > 1 ? shape[i] : 1, &span) || span > LN_MAX_BYTES)
      return ln_error("%s: shape %s is too large (its strides overflow)", fn,
                      ln_shape_str(b, sizeof b, ndim, shape));
  }
  *nbytes = (size_t)n;
  return 0;
}

/* A view (shape, strides, element offset) of storage s holding elements of
 * dtype: the shape is checked as above, the offset is >= 0, and every element
 * a non-empty view reaches lies inside the storage -- all in checked
 * arithmetic, so a huge stride or offset cannot pass by wrapping. Every view
 * header goes through this, which keeps each index * stride a kernel forms
 * inside the storage. */
static int check_view(const char *fn, const ln_storage *s, int dtype, int ndim, const int64_t *shape,
                      const int64_t *stride, int64_t offset) {
  size_t nb;
  if (check_shape(fn, ndim, shape, dtype, &nb) != 0) return -1;
  int64_t es = ln_dtype_size(dtype), lo, hi, end;
  if (offset < 0 || ln_mul_ovf(offset, es, &end) || end > LN_MAX_BYTES)
    return ln_error("%s: storage offset %lld is out of range", fn, (long long)offset);
  if (nb == 0) {
    /* an empty view reaches no element, but kernels still scale its strides
     * and sizes into bytes: those products stay under LN_MAX_BYTES too (each
     * size taken as at least 1, as check_shape does) */
    int64_t one[LN_MAX_DIMS], neg;
    for (int d = 0; d < ndim; d++) one[d] = shape[d] > 1 ? shape[d] : 1;
    if (ln_extent_ovf(ndim, one, stride, offset, &lo, &hi) || ln_mul_ovf(lo, es, &neg) || neg < -LN_MAX_BYTES ||
        ln_muladd_ovf(hi, es, es, &end) || end > LN_MAX_BYTES)
      return ln_error("%s: the strides of this empty view overflow", fn);
    for (int d = 0; d < ndim; d++)
      if (ln_mul_ovf(stride[d], es, &neg) || neg > LN_MAX_BYTES || neg < -LN_MAX_BYTES)
        return ln_error("%s: the strides of this empty view overflow", fn);
    return 0;
  }
  if (ln_extent_ovf(ndim, shape, stride, offset, &lo, &hi) || lo < 0 ||
      ln_muladd_ovf(hi, es, es, &end) || end > (int64_t)s->nbytes)
    return ln_error("%s: view reaches outside the storage (%zu bytes)", fn, s->nbytes);
  return 0;
}

/* Check the view v (a new header) made by fn; frees it when it fails. */
static ln_tensor *checked_view(const char *fn, ln_tensor *v) {
  if (v && check_view(fn, v->storage, v->dtype_id, v->ndim, v->shape, v->stride, v->offset) != 0) {
    ln_tensor_free(v);
    return NULL;
  }
  return v;
}

ln_tensor *ln_tensor_new_like_shape(int ndim, const int64_t *shape, int dtype, int device) {
  return ln_tensor_new_named("empty", ndim, shape, dtype, device);
}

ln_tensor *ln_tensor_new_named(const char *fn, int ndim, const int64_t *shape, int dtype, int device) {
  size_t nbytes;
  if (check_shape(fn, ndim, shape, dtype, &nbytes) != 0) return NULL;
  ln_storage *s = ln_storage_new(device, nbytes);
  if (!s) return NULL;
  ln_tensor *t = ln_tensor_header();
  if (!t) { ln_storage_release(s); return NULL; }
  t->storage = s;
  t->ndim = ndim;
  t->dtype_id = dtype;
  t->device_id = device;
  for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
  ln_contiguous_strides(ndim, shape, t->stride);
  return t;
}

ln_tensor *ln_empty(int ndim, const int64_t *shape, int dtype, int device) {
  return ln_tensor_new_like_shape(ndim, shape, dtype, device);
}

ln_kview ln_kview_of(const ln_tensor *t) {
  ln_kview v;
  v.data = (char *)t->storage->data + t->offset * ln_dtype_size(t->dtype_id);
  v.dtype = t->dtype_id;
  v.ndim = t->ndim;
  for (int i = 0; i < LN_MAX_DIMS; i++) {
    v.shape[i] = i < t->ndim ? t->shape[i] : 1;
    v.stride[i] = i < t->ndim ? t->stride[i] : 0;
  }
  return v;
}

ln_kview ln_kview_dim_last(const ln_tensor *t, int dim, int64_t last) {
  ln_kview v = ln_kview_of(t);
  if (t->ndim == 0) {
    v.ndim = 1;
    v.shape[0] = 1;
    v.stride[0] = 1;
    return v;
  }
  int j = 0;
  for (int i = 0; i < t->ndim; i++) {
    if (i == dim) continue;
    v.shape[j] = t->shape[i]; v.stride[j] = t->stride[i];
    j++;
  }
  v.shape[j] = last; v.stride[j] = t->stride[dim];
  return v;
}

void *ln_data_ptr(const ln_tensor *t) {
  if (!t || !t->storage) return NULL;
  return (char *)t->storage->data + t->offset * ln_dtype_size(t->dtype_id);
}

int64_t ln_storage_nbytes(const ln_tensor *t) { return t && t->storage ? (int64_t)t->storage->nbytes : 0; }
int ln_same_storage(const ln_tensor *a, const ln_tensor *b) {
  return a && b && a->storage && a->storage == b->storage;
}

double ln_storage_version(const ln_tensor *t) { return t && t->storage ? (double)t->storage->version : 0; }
void ln_storage_bump(ln_tensor *t) {
  if (t && t->storage) t->storage->version++;
}
double ln_storage_history_version(const ln_tensor *t) {
  return t && t->storage ? (double)(t->storage->version - t->storage->unrecorded) : 0;
}
void ln_storage_bump_unrecorded(ln_tensor *t) {
  if (t && t->storage) { t->storage->version++; t->storage->unrecorded++; }
}

int ln_tensor_sync(const ln_tensor *t) {
  if (ln_check_tensor("sync", t, "tensor") != 0) return -1;
  return ln_sync(t->device_id);
}

/* Copy a strided view out to contiguous memory (host side, after sync). */
static void gather_strided(char *dst, const ln_tensor *t) {
  int es = ln_dtype_size(t->dtype_id);
  int64_t n = ln_numel(t);
  if (n == 0) return;
  const char *base = ln_data_ptr(t);
  if (ln_is_contiguous(t)) { memcpy(dst, base, (size_t)(n * es)); return; }
  int64_t idx[LN_MAX_DIMS] = {0};
  for (int64_t i = 0; i < n; i++) {
    int64_t off = 0;
    for (int d = 0; d < t->ndim; d++) off += idx[d] * t->stride[d];
    memcpy(dst + i * es, base + off * es, (size_t)es);
    for (int d = t->ndim - 1; d >= 0; d--) {
      if (++idx[d] < t->shape[d]) break;
      idx[d] = 0;
    }
  }
}

/* a device whose memory the host cannot read (its runtime has copy_to_host):
 * made contiguous there, then copied out by the runtime */
static int read_via_runtime(const ln_backend *b, const ln_tensor *t, void *dst) {
  ln_tensor *c = ln_contiguous(t);
  if (!c) return -1;
  int rc = ln_sync(c->device_id);
  size_t nbytes = (size_t)ln_numel(c) * (size_t)ln_dtype_size(c->dtype_id);
  if (rc == 0 && nbytes) rc = b->rt.copy_to_host(ln_device_index(c->device_id), dst, ln_data_ptr(c), nbytes);
  ln_tensor_free(c);
  return rc;
}

int ln_tensor_read(const ln_tensor *t, void *dst) {
  if (ln_check_tensor("read", t, "tensor") != 0) return -1;
  const ln_backend *b = ln_backend_of(t->device_id);
  if (b->rt.copy_to_host) return read_via_runtime(b, t, dst);
  if (ln_sync(t->device_id) != 0) return -1;
  gather_strided(dst, t);
  return 0;
}

typedef struct { ln_kview dst; const void *src; size_t nbytes; } upload_args;
static int upload_task(void *p) {
  upload_args *a = p;
  memcpy(a->dst.data, a->src, a->nbytes);
  return 0;
}

ln_tensor *ln_from_buffer_n(const void *src, size_t src_nbytes, int ndim, const int64_t *shape,
                            int dtype, int device) {
  size_t nbytes;
  if (check_shape("from_buffer", ndim, shape, dtype, &nbytes) != 0) return NULL;
  if (nbytes && !src) return ln_error_null("from_buffer: source is NULL");
  if (nbytes > src_nbytes) {
    char b[160];
    return ln_error_null("from_buffer: the buffer holds %zu bytes, shape %s of %s needs %zu", src_nbytes,
                         ln_shape_str(b, sizeof b, ndim, shape), ln_dtype_name(dtype), nbytes);
  }
  ln_tensor *t = ln_tensor_new_like_shape(ndim, shape, dtype, device);
  if (!t) return NULL;
  /* the source belongs to the caller: copy synchronously, then the tensor is
   * ordinary device memory (the device stream is idle for this new storage) */
  const ln_backend *b = ln_backend_of(device);
  if (nbytes && b->rt.copy_from_host) {   /* memory the host cannot write: the runtime copies */
    if (b->rt.copy_from_host(ln_device_index(device), ln_data_ptr(t), src, nbytes) != 0) {
      ln_tensor_free(t);
      return NULL;
    }
    return t;
  }
  upload_args a = {ln_kview_of(t), src, nbytes};
  if (nbytes) upload_task(&a);
  return t;
}

ln_tensor *ln_from_buffer(const void *src, int ndim, const int64_t *shape, int dtype, int device) {
  return ln_from_buffer_n(src, SIZE_MAX, ndim, shape, dtype, device);
}

/* ---- views ------------------------------------------------------------------ */

static ln_tensor *view_header(const ln_tensor *t) {
  ln_tensor *v = ln_tensor_header();
  if (!v) return NULL;
  *v = *t;
  v->grad_flag = 0;
  ln_storage_retain(v->storage);
  return v;
}

ln_tensor *ln_alias(const ln_tensor *t) {
  if (ln_check_tensor("alias", t, "tensor") != 0) return NULL;
  return view_header(t);
}

ln_tensor *ln_as_strided(const ln_tensor *t, int ndim, const int64_t *shape,
                         const int64_t *stride, int64_t offset) {
  if (ln_check_tensor("as_strided", t, "tensor") != 0) return NULL;
  if (check_view("as_strided", t->storage, t->dtype_id, ndim, shape, stride, offset) != 0) return NULL;
  ln_tensor *v = view_header(t);
  if (!v) return NULL;
  v->ndim = ndim;
  v->offset = offset;
  for (int i = 0; i < LN_MAX_DIMS; i++) {
    v->shape[i] = i < ndim ? shape[i] : 0;
    v->stride[i] = i < ndim ? stride[i] : 0;
  }
  return v;
}

/* Infer a -1 and check the element count. */
static int infer_shape(const char *fn, const ln_tensor *t, int ndim, const int64_t *in, int64_t *out) {
  if (ndim < 0 || ndim > LN_MAX_DIMS) return ln_error("%s: %d dims given, at most %d", fn, ndim, LN_MAX_DIMS);
  int infer = -1;
  int64_t known = 1;
  for (int i = 0; i < ndim; i++) {
    out[i] = in[i];
    if (in[i] == -1) {
      if (infer >= 0) return ln_error("%s: only one dimension can be -1", fn);
      infer = i;
    } else if (in[i] < 0) {
      return ln_error("%s: invalid size %lld", fn, (long long)in[i]);
    } else if (__builtin_mul_overflow(known, in[i], &known)) {
      char b0[160];
      return ln_error("%s: shape %s is too large (element count overflows)", fn, ln_shape_str(b0, sizeof b0, ndim, in));
    }
  }
  int64_t n = ln_numel(t);
  char b1[160], b2[160];
  if (infer >= 0) {
    if (known == 0 || n % known != 0)
      return ln_error("%s: shape %s is invalid for a tensor of %lld elements", fn,
                      ln_shape_str(b1, sizeof b1, ndim, in), (long long)n);
    out[infer] = n / known;
  } else if (known != n) {
    return ln_error("%s: shape %s is invalid for a tensor of shape %s (%lld elements)", fn,
                    ln_shape_str(b1, sizeof b1, ndim, in),
                    ln_shape_str(b2, sizeof b2, t->ndim, t->shape), (long long)n);
  }
  return 0;
}

/* Strides for viewing t with a new shape without copying, if possible
 * (the algorithm of torch's computeStride: merge dims into contiguous chunks). */
static int view_strides(const ln_tensor *t, int ndim, const int64_t *shape, int64_t *stride) {
  if (ln_numel(t) == 0 || t->ndim == 0) { ln_contiguous_strides(ndim, shape, stride); return 1; }
  int view_d = ndim - 1;
  int64_t chunk_base_stride = t->stride[t->ndim - 1];
  int64_t tensor_numel = 1, view_numel = 1;
  for (int d = t->ndim - 1; d >= 0; d--) {
    int64_t chunk_stride;   /* (a size-1 dim's stride may be anything: checked) */
    tensor_numel *= t->shape[d];
    if (ln_mul_ovf(tensor_numel, chunk_base_stride, &chunk_stride)) return 0;
    if (d == 0 || (t->shape[d - 1] != 1 && t->stride[d - 1] != chunk_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        if (ln_mul_ovf(view_numel, chunk_base_stride, &stride[view_d])) return 0;
        view_numel *= shape[view_d];
        view_d--;
      }
      if (view_numel != tensor_numel) return 0;
      if (d > 0) { chunk_base_stride = t->stride[d - 1]; tensor_numel = 1; view_numel = 1; }
    }
  }
  return view_d == -1;
}

ln_tensor *ln_view(const ln_tensor *t, int ndim, const int64_t *shape) {
  int64_t sh[LN_MAX_DIMS], st[LN_MAX_DIMS];
  if (ln_check_tensor("view", t, "tensor") != 0) return NULL;
  if (infer_shape("view", t, ndim, shape, sh) != 0) return NULL;
  if (!view_strides(t, ndim, sh, st))
    return ln_error_null("view: the tensor's strides are incompatible with the new shape; "
                         "use reshape (it copies) or contiguous() first");
  return ln_as_strided(t, ndim, sh, st, t->offset);
}

ln_tensor *ln_reshape(const ln_tensor *t, int ndim, const int64_t *shape) {
  int64_t sh[LN_MAX_DIMS], st[LN_MAX_DIMS];
  if (ln_check_tensor("reshape", t, "tensor") != 0) return NULL;
  if (infer_shape("reshape", t, ndim, shape, sh) != 0) return NULL;
  if (view_strides(t, ndim, sh, st)) return ln_as_strided(t, ndim, sh, st, t->offset);
  ln_tensor *c = ln_contiguous(t);
  if (!c) return NULL;
  ln_tensor *v = ln_view(c, ndim, sh);
  ln_tensor_free(c);
  return v;
}

/* x + 1 for a 1-based message, saturating (no overflow on hostile input) */
#define LN_SAT_ADD1(x) ((x) == INT64_MAX ? (x) : (x) + 1)
static inline int64_t sat_add(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_add_overflow(a, b, &r) ? (b > 0 ? INT64_MAX : INT64_MIN) : r;
}

ln_tensor *ln_narrow(const ln_tensor *t, int dim, int64_t start, int64_t length) {
  if (ln_check_tensor("narrow", t, "tensor") != 0 || ln_check_dim("narrow", t, dim) != 0) return NULL;
  if (start < 0 || length < 0 || start > t->shape[dim] || length > t->shape[dim] - start)
    return ln_error_null("narrow: range [%lld, %lld] out of bounds for dim %d of size %lld",
                         (long long)LN_SAT_ADD1(start), (long long)sat_add(start, length),
                         dim + 1, (long long)t->shape[dim]);
  ln_tensor *v = view_header(t);
  if (!v) return NULL;
  v->shape[dim] = length;
  if (length > 0 && ln_muladd_ovf(start, t->stride[dim], t->offset, &v->offset)) v->offset = -1;
  return checked_view("narrow", v);
}

ln_tensor *ln_select(const ln_tensor *t, int dim, int64_t index) {
  if (ln_check_tensor("select", t, "tensor") != 0 || ln_check_dim("select", t, dim) != 0) return NULL;
  if (index < 0 || index >= t->shape[dim])
    return ln_error_null("select: index %lld out of range for dim %d of size %lld",
                         (long long)LN_SAT_ADD1(index), dim + 1, (long long)t->shape[dim]);
  ln_tensor *v = view_header(t);
  if (!v) return NULL;
  if (ln_muladd_ovf(index, t->stride[dim], t->offset, &v->offset)) v->offset = -1;
  for (int i = dim; i < t->ndim - 1; i++) { v->shape[i] = t->shape[i + 1]; v->stride[i] = t->stride[i + 1]; }
  v->ndim--;
  v->shape[v->ndim] = 0; v->stride[v->ndim] = 0;
  return checked_view("select", v);
}

ln_tensor *ln_transpose(const ln_tensor *t, int d0, int d1) {
  if (ln_check_tensor("transpose", t, "tensor") != 0 || ln_check_dim("transpose", t, d0) != 0 ||
      ln_check_dim("transpose", t, d1) != 0) return NULL;
  ln_tensor *v = view_header(t);
  if (!v) return NULL;
  v->shape[d0] = t->shape[d1]; v->shape[d1] = t->shape[d0];
  v->stride[d0] = t->stride[d1]; v->stride[d1] = t->stride[d0];
  return v;
}

ln_tensor *ln_permute(const ln_tensor *t, int ndim, const int *perm) {
  if (ln_check_tensor("permute", t, "tensor") != 0) return NULL;
  if (ndim != t->ndim)
    return ln_error_null("permute: %d dims given for a %d-d tensor", ndim, t->ndim);
  int seen[LN_MAX_DIMS] = {0};
  for (int i = 0; i < ndim; i++) {
    if (perm[i] < 0 || perm[i] >= ndim || seen[perm[i]]++)
      return ln_error_null("permute: dims must be a permutation of 1..%d", ndim);
  }
  ln_tensor *v = view_header(t);
  if (!v) return NULL;
  for (int i = 0; i < ndim; i++) { v->shape[i] = t->shape[perm[i]]; v->stride[i] = t->stride[perm[i]]; }
  return v;
}

ln_tensor *ln_squeeze(const ln_tensor *t, int dim) {
  if (ln_check_tensor("squeeze", t, "tensor") != 0) return NULL;
  if (dim >= 0 && ln_check_dim("squeeze", t, dim) != 0) return NULL;
  ln_tensor *v = view_header(t);
  if (!v) return NULL;
  int k = 0;
  for (int i = 0; i < t->ndim; i++) {
    if (t->shape[i] == 1 && (dim < 0 || dim == i)) continue;
    v->shape[k] = t->shape[i]; v->stride[k] = t->stride[i]; k++;
  }
  for (int i = k; i < LN_MAX_DIMS; i++) { v->shape[i] = 0; v->stride[i] = 0; }
  v->ndim = k;
  return v;
}

ln_tensor *ln_unsqueeze(const ln_tensor *t, int dim) {
  if (ln_check_tensor("unsqueeze", t, "tensor") != 0) return NULL;
  if (dim < 0 || dim > t->ndim)
    return ln_error_null("unsqueeze: dim %d out of range for a %d-d tensor (1..%d)", dim + 1,
                         t->ndim, t->ndim + 1);
  if (t->ndim >= LN_MAX_DIMS) return ln_error_null("unsqueeze: tensor already has %d dims", LN_MAX_DIMS);
  ln_tensor *v = view_header(t);
  if (!v) return NULL;
  for (int i = t->ndim; i > dim; i--) { v->shape[i] = t->shape[i - 1]; v->stride[i] = t->stride[i - 1]; }
  v->shape[dim] = 1;
  /* any stride suits a size-1 dim: 1 where the usual one would overflow */
  if (dim >= t->ndim || ln_mul_ovf(t->shape[dim], t->stride[dim], &v->stride[dim])) v->stride[dim] = 1;
  v->ndim++;
  return v;
}

ln_tensor *ln_expand(const ln_tensor *t, int ndim, const int64_t *shape) {
  if (ln_check_tensor("expand", t, "tensor") != 0) return NULL;
  char b1[160], b2[160];
  if (ndim < t->ndim || ndim > LN_MAX_DIMS)
    return ln_error_null("expand: cannot expand shape %s to %d dims",
                         ln_shape_str(b1, sizeof b1, t->ndim, t->shape), ndim);
  ln_tensor *v = view_header(t);
  if (!v) return NULL;
  int off = ndim - t->ndim;
  for (int i = ndim - 1; i >= 0; i--) {
    int j = i - off;
    int64_t want = shape[i];
    if (j >= 0) {
      if (want == -1) want = t->shape[j];
      if (t->shape[j] == want) { v->shape[i] = want; v->stride[i] = t->stride[j]; continue; }
      if (t->shape[j] != 1 || want < 0) {
        ln_tensor_free(v);
        return ln_error_null("expand: shape %s cannot expand to %s",
                             ln_shape_str(b1, sizeof b1, t->ndim, t->shape),
                             ln_shape_str(b2, sizeof b2, ndim, shape));
      }
    } else if (want < 0) {
      ln_tensor_free(v);
      return ln_error_null("expand: -1 is not allowed for a new leading dim");
    }
    v->shape[i] = want;
    v->stride[i] = 0;
  }
  v->ndim = ndim;
  return checked_view("expand", v);
}

ln_tensor *ln_contiguous(const ln_tensor *t) {
  if (ln_check_tensor("contiguous", t, "tensor") != 0) return NULL;
  if (ln_is_contiguous(t)) return view_header(t);
  return ln_clone(t);
}

ln_tensor *ln_clone(const ln_tensor *t) {
  if (ln_check_tensor("clone", t, "tensor") != 0) return NULL;
  ln_tensor *c = ln_tensor_new_like_shape(t->ndim, t->shape, t->dtype_id, t->device_id);
  if (!c) return NULL;
  if (ln_copy_into(c, t, false) != 0) { ln_tensor_free(c); return NULL; }
  return c;
}

/* ---- memory overlap (in-place ops and their inputs) ------------------------------ */

/* Whether a and b touch the same memory: LN_OVERLAP_NO, LN_OVERLAP_FULL (the
 * same elements in the same order: an elementwise op reading and writing each
 * element in place is then exact) or LN_OVERLAP_PARTIAL (anything else that
 * shares bytes, conservatively). A disjoint-range test comes first, so tensors
 * of different storages or disjoint slices cost a few compares. */
int ln_overlap(const ln_tensor *a, const ln_tensor *b) {
  if (!a || !b || !a->storage || a->storage != b->storage) return LN_OVERLAP_NO;
  int64_t na = ln_numel(a), nb = ln_numel(b);
  if (na == 0 || nb == 0) return LN_OVERLAP_NO;
  int64_t esa = ln_dtype_size(a->dtype_id), esb = ln_dtype_size(b->dtype_id);
  int64_t alo, ahi, blo, bhi;
  /* (views are checked on creation: their extents do not overflow) */
  if (ln_extent_ovf(a->ndim, a->shape, a->stride, a->offset, &alo, &ahi) ||
      ln_extent_ovf(b->ndim, b->shape, b->stride, b->offset, &blo, &bhi))
    return LN_OVERLAP_PARTIAL;
  if ((ahi + 1) * esa <= blo * esb || (bhi + 1) * esb <= alo * esa) return LN_OVERLAP_NO;
  bool same = esa == esb && a->offset == b->offset && a->ndim == b->ndim;
  for (int i = 0; same && i < a->ndim; i++)
    same = a->shape[i] == b->shape[i] && (a->shape[i] == 1 || a->stride[i] == b->stride[i]);
  return same ? LN_OVERLAP_FULL : LN_OVERLAP_PARTIAL;
}

int ln_check_no_partial_overlap(const char *fn, const ln_tensor *out, const ln_tensor *in, const char *what) {
  if (ln_overlap(out, in) != LN_OVERLAP_PARTIAL) return 0;
  return ln_error("%s: the output and %s overlap in memory (partly), so the result would depend on "
                  "the order elements are written; clone() the %s first", fn, what, what);
}

/* |x| without overflow (a size-1 dim may have stride INT64_MIN) */
static inline uint64_t abs_u64(int64_t x) { return x < 0 ? -(uint64_t)x : (uint64_t)x; }

/* Refuses writing through a view in which two indices reach one element: a
 * stride-0 dim of size > 1 (an expanded view), or two dims where one stride
 * is a small multiple of another's (as_strided {3,3} with strides {1,1}):
 * index 1 along the larger equals index k < size along the smaller. (Other
 * overlapping layouts are too costly to detect exactly; PyTorch lets them
 * pass as well.) */
int ln_check_no_internal_overlap(const char *fn, const ln_tensor *t) {
  for (int i = 0; i < t->ndim; i++) {
    if (t->shape[i] < 2) continue;
    uint64_t si = abs_u64(t->stride[i]);
    if (si == 0)
      return ln_error("%s: cannot write in place to an expanded tensor (dim %d has stride 0); "
                      "clone() it first", fn, i + 1);
    for (int j = 0; j < t->ndim; j++) {
      if (j == i || t->shape[j] < 2) continue;
      uint64_t sj = abs_u64(t->stride[j]);
      if (sj < si || sj % si != 0 || sj / si > (uint64_t)t->shape[i] - 1) continue;
      return ln_error("%s: cannot write in place to a tensor whose elements overlap (dims %d and %d "
                      "with strides %lld and %lld); clone() it first", fn, i + 1, j + 1,
                      (long long)t->stride[i], (long long)t->stride[j]);
    }
  }
  return 0;
}
