/* fuzz_stubs.h -- host-memory stand-ins for the tensor functions the file
 * readers call, for the libFuzzer targets tools/fuzz_idx.c and
 * tools/fuzz_cifar.c (which link the readers alone, not the library).
 * ln_empty refuses more than 256 MB, as a device memory limit would, so
 * that a header promising terabytes is an error, not a fuzzer OOM. */
#include "internal.h"
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int64_t ln_shape_numel(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  return n;
}
void ln_contiguous_strides(int ndim, const int64_t *shape, int64_t *stride) {
  int64_t s = 1;
  for (int i = ndim - 1; i >= 0; i--) { stride[i] = s; s *= shape[i]; }
}
ln_tensor *ln_empty(int ndim, const int64_t *shape, int dtype, int device) {
  int64_t n = ln_shape_numel(ndim, shape);
  if (n < 0 || n > ((int64_t)1 << 28) / ln_dtype_size(dtype))
    return ln_error_null("empty: out of memory (fuzzer limit 256 MB)");
  ln_tensor *t = calloc(1, sizeof *t);
  ln_storage *s = calloc(1, sizeof *s);
  s->nbytes = (size_t)n * (size_t)ln_dtype_size(dtype);
  s->data = malloc(s->nbytes ? s->nbytes : 1);
  t->storage = s; t->ndim = ndim; t->dtype_id = dtype; t->device_id = device;
  for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
  ln_contiguous_strides(ndim, shape, t->stride);
  return t;
}
int64_t ln_numel(const ln_tensor *t) { return ln_shape_numel(t->ndim, t->shape); }
void *ln_data_ptr(const ln_tensor *t) { return t->storage->data; }
void ln_tensor_free(ln_tensor *t) { if (t) { free(t->storage->data); free(t->storage); free(t); } }
int ln_tensor_sync(const ln_tensor *t) { return 0; }
int ln_is_contiguous(const ln_tensor *t) { return 1; }
int ln_check_tensor(const char *fn, const ln_tensor *t, const char *argname) { return t ? 0 : -1; }
/* (as c/cpu/cpu.h declares it: the readers' batch code runs its rows through it) */
typedef void (*ln_range_fn)(void *ctx, int64_t begin, int64_t end);
void ln_parallel_for(int64_t n, int64_t grain, ln_range_fn fn, void *ctx) { if (n > 0) fn(ctx, 0, n); }

/* the input as a file (the readers take paths): one per process */
static const char *fuzz_file(const char *tag, int k, const uint8_t *data, size_t size) {
  static char path[4][96];
  snprintf(path[k], sizeof path[k], "/tmp/fuzz_%s_%d_%d", tag, (int)getpid(), k);
  FILE *f = fopen(path[k], "wb");
  if (!f) abort();
  fwrite(data, 1, size, f);
  fclose(f);
  return path[k];
}

/* every byte of t read (so ASan sees any out-of-bounds extent) */
static void touch(const ln_tensor *t) {
  volatile uint8_t sink = 0;
  const uint8_t *p = ln_data_ptr(t);
  size_t n = (size_t)ln_numel(t) * (size_t)ln_dtype_size(t->dtype_id);
  for (size_t i = 0; i < n; i++) sink ^= p[i];
  (void)sink;
}
