/* fuzz_idx.c -- libFuzzer target for the IDX reader (c/data/idx.c): any byte
 * string as a file (plain, or gzip when it starts with 1f 8b) must load a
 * tensor whose shape matches its header, or fail with an error message;
 * never crash, leak, or read out of bounds. Build and run (CI: tools/ci-reliability.sh):
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -Ic/include -Ic/core \
 *     tools/fuzz_idx.c c/data/idx.c c/core/error.c c/core/dtype.c c/core/file.c -lz -lm -o /tmp/fuzz_idx
 *   /tmp/fuzz_idx -max_total_time=60 -max_len=4096 /tmp/idx_corpus tools/corpus/idx */
#include "fuzz_stubs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = fuzz_file("idx", 0, data, size);
  ln_tensor *t = ln_idx_read(path);
  if (!t) {
    if (!ln_last_error()[0]) abort();   /* a failure always says why */
    return 0;
  }
  /* a plain file: the shape is the header's, the data exactly the rest */
  if (size >= 4 && data[0] == 0 && data[1] == 0) {
    int nd = data[3];
    if (t->ndim != nd || size < (size_t)(4 + 4 * nd)) abort();
    for (int d = 0; d < nd; d++) {
      const uint8_t *p = data + 4 + 4 * d;
      if (t->shape[d] != ((int64_t)p[0] << 24 | p[1] << 16 | p[2] << 8 | p[3])) abort();
    }
  }
  touch(t);
  ln_tensor_free(t);
  return 0;
}
