/* fuzz_cifar.c -- libFuzzer target for the CIFAR-10 batch reader
 * (c/data/idx.c, ln_cifar10_read): the input, as one file or split in two
 * at a point its first byte picks (several batch files), must load with
 * images and labels of one count and labels 0..9, or fail with an error
 * message; never crash, leak, or read out of bounds. Build and run:
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -Ic/include -Ic/core \
 *     tools/fuzz_cifar.c c/data/idx.c c/core/error.c c/core/dtype.c c/core/file.c -lz -lm -o /tmp/fuzz_cifar
 *   /tmp/fuzz_cifar -max_total_time=60 -max_len=16384 /tmp/cifar_corpus tools/corpus/cifar */
#include "fuzz_stubs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *paths[2];
  int nfiles = 1;
  if (size > 0 && (data[0] & 0x80)) {   /* two files */
    size_t cut = size > 1 ? 1 + (size_t)(data[0] & 0x7f) * (size - 1) / 127 : 1;
    paths[0] = fuzz_file("cifar", 0, data + 1, cut - 1);
    paths[1] = fuzz_file("cifar", 1, data + cut, size - cut);
    nfiles = 2;
  } else {
    paths[0] = fuzz_file("cifar", 0, data, size);
  }
  ln_tensor *img = NULL, *lab = NULL;
  if (ln_cifar10_read(nfiles, paths, &img, &lab) != 0) {
    if (img || lab || !ln_last_error()[0]) abort();
    return 0;
  }
  if (!img || !lab || img->ndim != 4 || lab->ndim != 1 || img->shape[0] != lab->shape[0] ||
      img->shape[1] != 3 || img->shape[2] != 32 || img->shape[3] != 32)
    abort();
  const int64_t *l = ln_data_ptr(lab);
  for (int64_t i = 0; i < lab->shape[0]; i++) if (l[i] < 0 || l[i] > 9) abort();
  touch(img);
  ln_tensor_free(img);
  ln_tensor_free(lab);
  return 0;
}
