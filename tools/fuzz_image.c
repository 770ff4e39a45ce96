/* fuzz_image.c -- libFuzzer target for the JPEG/PNG decoder (c/data/image.c):
 * any byte string, decoded from memory in every mode (UNCHANGED, GRAY,
 * GRAY_ALPHA, RGB, RGB_ALPHA) and read as a file in one of them, must give a
 * uint8 (C, H, W) tensor of the header's size (PNG's IHDR, JPEG's first SOF)
 * and the mode's channels (UNCHANGED: the file's own), the file read equal
 * to the memory decode, or fail with an error message; never crash, leak,
 * hang or read out of bounds. The pixel limit is lowered to 4M here (the
 * library's is PIL's 179M) so that a small file promising a large image
 * cannot time the fuzzer out. Build and run (CI: tools/ci-reliability.sh):
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -Ic/include -Ic/core -DIMG_MAX_PIXELS='((int64_t)1<<22)' \
 *     tools/fuzz_image.c c/data/image.c c/core/error.c c/core/dtype.c c/core/file.c -ljpeg -lpng -lz -lm -o /tmp/fuzz_image
 *   /tmp/fuzz_image -max_total_time=60 -max_len=8192 /tmp/image_corpus tools/corpus/image
 * (libjpeg and libpng themselves are the system's, not instrumented: libFuzzer
 * has no coverage inside them and ASan sees our buffers' bounds only where our
 * code touches them, hence touch(). For a deeper run, build both from source
 * (apt-get source libjpeg-turbo libpng1.6) with -fsanitize=fuzzer-no-link,
 * address,undefined, libjpeg-turbo with -DWITH_SIMD=0, and link their static
 * libraries instead of -ljpeg -lpng: coverage goes from ~190 to ~10,000.) */
#include "fuzz_stubs.h"
#include "../c/data/data.h"
#include <string.h>

static unsigned be16(const uint8_t *p) { return (unsigned)p[0] << 8 | p[1]; }
static uint32_t be32(const uint8_t *p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }

/* JPEG: the first SOFn's height, width and components, walking the markers
 * as libjpeg's next_marker does (garbage and stuffed FF 00 pairs before a
 * marker skipped; RSTn/TEM have no length).
 * 0 when there is none before SOS/EOI or the data's end. */
static int jpeg_sof(const uint8_t *d, size_t n, unsigned *h, unsigned *w, unsigned *nc) {
  size_t i = 2;
  for (;;) {
    while (i < n && d[i] != 0xff) i++;
    while (i < n && d[i] == 0xff) i++;
    if (i >= n) return 0;
    unsigned m = d[i++];
    if (m == 0x00 || m == 0x01 || (m >= 0xd0 && m <= 0xd7)) continue;
    if (m == 0xd9 || m == 0xda || m == 0xd8) return 0;
    if (i + 2 > n) return 0;
    unsigned len = be16(d + i);
    if (m >= 0xc0 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc) {
      if (i + 8 > n) return 0;
      *h = be16(d + i + 3); *w = be16(d + i + 5); *nc = d[i + 7];
      return 1;
    }
    i += len < 2 ? 2 : len;   /* (libjpeg skips length - 2 bytes, none when that is negative) */
  }
}

static const int mode_channels[5] = {0, 1, 2, 3, 4};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  int64_t n = (int64_t)size;
  ln_tensor *bytes = ln_empty(1, &n, LN_UINT8, 0);
  if (size) memcpy(ln_data_ptr(bytes), data, size);
  int is_png = size >= 8 && data[0] == 0x89 && data[1] == 'P';
  int is_jpeg = size >= 3 && data[0] == 0xff && data[1] == 0xd8 && data[2] == 0xff;
  ln_tensor *got[5] = {0};
  for (int mode = 0; mode < 5; mode++) {
    ln_clear_error();
    ln_tensor *t = got[mode] = ln_image_decode(bytes, mode);
    if (!t) {
      if (!ln_last_error()[0]) abort();   /* a failure always says why */
      continue;
    }
    if (!is_png && !is_jpeg) abort();
    if (t->ndim != 3 || t->dtype_id != LN_UINT8) abort();
    int64_t c = t->shape[0], h = t->shape[1], w = t->shape[2];
    if (h < 1 || w < 1 || c < 1) abort();
    if (mode > 0 && c != mode_channels[mode]) abort();
    if (is_png) {   /* IHDR is the first chunk, at 8 */
      if (size < 24 || (int64_t)be32(data + 16) != w || (int64_t)be32(data + 20) != h) abort();
      if (mode == 0 && c > 4) abort();
    } else {
      unsigned sh, sw, nc;
      if (!jpeg_sof(data, size, &sh, &sw, &nc) || sh != h || sw != w) abort();
      if (mode == 0 && c != nc) abort();
    }
    touch(t);
  }
  /* the file path: the same pixels (or the same failure) as the bytes */
  int mode = size ? data[size - 1] % 5 : 0;
  ln_clear_error();
  ln_tensor *f = ln_image_read(fuzz_file("image", 0, data, size), mode);
  if (!f != !got[mode] || (!f && !ln_last_error()[0])) abort();
  if (f) {
    for (int d = 0; d < 3; d++)
      if (f->shape[d] != got[mode]->shape[d]) abort();
    if (memcmp(ln_data_ptr(f), ln_data_ptr(got[mode]), (size_t)ln_numel(f)) != 0) abort();
    ln_tensor_free(f);
  }
  /* a mode out of range is an error, not an index into the mode names */
  ln_clear_error();
  if (ln_image_decode(bytes, 5) || !ln_last_error()[0] || ln_image_decode(bytes, -1)) abort();
  for (int m = 0; m < 5; m++) ln_tensor_free(got[m]);
  ln_tensor_free(bytes);
  return 0;
}
