/* fuzz_data.c -- libFuzzer target for the dataset readers and the batch
 * assembler (c/data/idx.c, c/data/batch.c). The input is used three ways:
 *  - as an IDX file (plain, or gzip when it starts with 1f 8b): it must load
 *    or fail with an error, never crash or read out of bounds;
 *  - as a CIFAR-10 batch file, likewise;
 *  - its first bytes as image and transform geometry (C, H, W, crop, pad,
 *    flip, normalize) for gathering a batch of random rows: a plan that
 *    passes the checks must assemble in bounds.
 * Build and run:
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -Ic/include -Ic/core \
 *     tools/fuzz_data.c c/data/idx.c c/data/batch.c c/data/augment.c c/core/error.c c/core/dtype.c c/core/file.c -lz -lm -o /tmp/fuzz_data
 *   /tmp/fuzz_data -max_total_time=60 -max_len=8192
 * The tensor functions the data code calls are stubbed here with host memory. */
#include "internal.h"
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int64_t ln_shape_numel(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  return n;
}
ln_tensor *ln_empty(int ndim, const int64_t *shape, int dtype, int device) {
  int64_t n = ln_shape_numel(ndim, shape);
  if (n > ((int64_t)1 << 26)) return ln_error_null("empty: too large for the fuzzer");
  ln_tensor *t = calloc(1, sizeof *t);
  ln_storage *s = calloc(1, sizeof *s);
  s->nbytes = (size_t)n * (size_t)ln_dtype_size(dtype);
  s->data = malloc(s->nbytes ? s->nbytes : 1);
  t->storage = s; t->ndim = ndim; t->dtype_id = dtype; t->device_id = device;
  for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
  ln_contiguous_strides(ndim, shape, t->stride);
  return t;
}
void ln_contiguous_strides(int ndim, const int64_t *shape, int64_t *stride) {
  int64_t s = 1;
  for (int i = ndim - 1; i >= 0; i--) { stride[i] = s; s *= shape[i]; }
}
int64_t ln_numel(const ln_tensor *t) { return ln_shape_numel(t->ndim, t->shape); }
void *ln_data_ptr(const ln_tensor *t) { return t->storage->data; }
void ln_tensor_free(ln_tensor *t) { if (t) { free(t->storage->data); free(t->storage); free(t); } }
int ln_tensor_sync(const ln_tensor *t) { return 0; }
int ln_is_contiguous(const ln_tensor *t) { return 1; }
int ln_check_tensor(const char *fn, const ln_tensor *t, const char *argname) { return t ? 0 : -1; }
typedef void (*ln_range_fn)(void *ctx, int64_t begin, int64_t end);   /* (c/core/internal.h's) */
/* core's way to the CPU threads (c/core/stream.c), run serially here as it
 * does when no CPU backend is registered */
void ln_host_parallel_for(int64_t n, int64_t grain, ln_range_fn fn, void *ctx) { if (n > 0) fn(ctx, 0, n); }

static void check_reader(const uint8_t *data, size_t size) {
  static char path[64];
  if (!path[0]) snprintf(path, sizeof path, "/tmp/fuzz_data_%d", (int)getpid());
  FILE *f = fopen(path, "wb");
  fwrite(data, 1, size, f);
  fclose(f);
  ln_tensor *t = ln_idx_read(path);
  if (t) {
    volatile uint8_t sink = 0;   /* touch every byte */
    const uint8_t *p = ln_data_ptr(t);
    for (int64_t i = 0; i < ln_numel(t) * ln_dtype_size(t->dtype_id); i++) sink ^= p[i];
    ln_tensor_free(t);
  }
  const char *paths[1] = {path};
  ln_tensor *img = NULL, *lab = NULL;
  if (ln_cifar10_read(1, paths, &img, &lab) == 0) {
    if (!img || !lab || img->shape[0] != lab->shape[0]) abort();
    ln_tensor_free(img);
    ln_tensor_free(lab);
  }
}

static void check_gather(const uint8_t *d, size_t size) {
  if (size < 12) return;
  int64_t shape[4] = {1 + d[0] % 4, 1 + d[1] % 4, 1 + d[2] % 12, 1 + d[3] % 12};
  ln_transform tf;
  memset(&tf, 0, sizeof tf);
  tf.crop = d[4] % 4;                     /* 3 is invalid on purpose */
  tf.out_h = d[5] % 16; tf.out_w = d[6] % 16;
  tf.pad = (int8_t)d[7] % 8;              /* negative is invalid */
  tf.flip_p = d[8] / 200.0f;              /* > 1 is invalid */
  tf.scale = 1 / 255.0f;
  tf.normalize = d[9] & 1;
  tf.nchannels = d[10] % 6;
  for (int c = 0; c < LN_DATA_MAX_CHANNELS; c++) { tf.mean[c] = 0.5f; tf.std[c] = (d[11] >> (c % 8)) & 1 ? 0.25f : 0; }
  int dtype = d[9] & 2 ? LN_FLOAT32 : LN_UINT8;
  ln_tensor *x = ln_empty(4, shape, dtype, 0);
  memset(ln_data_ptr(x), 1, (size_t)(ln_numel(x) * ln_dtype_size(dtype)));
  ln_tensor *y = ln_empty(1, shape, LN_INT64, 0);
  int64_t b = 1 + d[11] % 5, idx[5], oshape[LN_MAX_DIMS];
  for (int64_t k = 0; k < b; k++) idx[k] = (size > 12 + (size_t)k ? d[12 + k] : 0) % shape[0];
  int odt, nd = ln_batch_shape(x, d[9] & 4 ? NULL : &tf, b, oshape, &odt);
  if (nd > 0) {
    ln_tensor *out = ln_empty(nd, oshape, odt, 0);
    int64_t yshape[1] = {b};
    ln_tensor *oy = ln_empty(1, yshape, LN_INT64, 0);
    if (ln_batch_gather(out, oy, x, y, idx, NULL, b, d[9] & 4 ? NULL : &tf, d[10], d[11]) != 0) abort();
    ln_tensor_free(out);
    ln_tensor_free(oy);
  }
  ln_tensor_free(x);
  ln_tensor_free(y);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  check_reader(data, size);
  check_gather(data, size);
  return 0;
}
