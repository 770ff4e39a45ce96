/* fuzz_safetensors.c -- libFuzzer target for the safetensors reader
 * (c/core/safetensors.c): any byte string as a file must open with an error
 * or load every tensor, never crash or read out of bounds. Build and run:
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -Ic/include -Ic/core \
 *     tools/fuzz_safetensors.c c/core/safetensors.c c/core/error.c c/core/dtype.c c/core/file.c -lz -lm -o /tmp/fuzz_st
 *   /tmp/fuzz_st -max_total_time=60 -max_len=4096 [corpus dir, e.g. a copy of spec/fixtures]
 * The tensor functions the reader calls are stubbed here with host memory. */
#include "internal.h"
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

ln_tensor *ln_empty(int ndim, const int64_t *shape, int dtype, int device) {
  int64_t n = ln_shape_numel(ndim, shape);
  ln_tensor *t = calloc(1, sizeof *t);
  ln_storage *s = calloc(1, sizeof *s);
  s->nbytes = (size_t)n * (size_t)ln_dtype_size(dtype);
  s->data = malloc(s->nbytes ? s->nbytes : 1);
  t->storage = s; t->ndim = ndim; t->dtype_id = dtype; t->device_id = device;
  for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
  return t;
}
int64_t ln_shape_numel(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  return n;
}
int64_t ln_numel(const ln_tensor *t) { return ln_shape_numel(t->ndim, t->shape); }
void *ln_data_ptr(const ln_tensor *t) { return t->storage->data; }
void ln_tensor_free(ln_tensor *t) { if (t) { free(t->storage->data); free(t->storage); free(t); } }
ln_tensor *ln_from_buffer(const void *src, int ndim, const int64_t *shape, int dtype, int device) {
  ln_tensor *t = ln_empty(ndim, shape, dtype, device);
  memcpy(t->storage->data, src, t->storage->nbytes);
  return t;
}
int ln_sync(int device) { return 0; }
int ln_is_contiguous(const ln_tensor *t) { return 1; }
int ln_tensor_read(const ln_tensor *t, void *dst) { memcpy(dst, t->storage->data, t->storage->nbytes); return 0; }
int ln_check_tensor(const char *fn, const ln_tensor *t, const char *argname) { return t ? 0 : -1; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static char path[64];
  if (!path[0]) snprintf(path, sizeof path, "/tmp/fuzz_st_%d.safetensors", (int)getpid());
  FILE *f = fopen(path, "wb");
  fwrite(data, 1, size, f);
  fclose(f);
  ln_st_file *st = ln_st_open(path);
  if (!st) return 0;
  for (int i = 0; i < ln_st_count(st); i++) {
    ln_tensor *t = ln_st_tensor(st, i, 0);
    if (!t) abort();   /* a validated file must load */
    ln_tensor_free(t);
  }
  for (int i = 0; i < ln_st_meta_count(st); i++)
    if (!ln_st_meta_key(st, i) || !ln_st_meta_value(st, i)) abort();
  ln_st_close(st);
  return 0;
}
