/* idx.c -- dataset file readers: IDX (MNIST, Fashion-MNIST) and CIFAR-10
 * binary batches. zlib's gzread reads gzip and plain files alike. Every
 * failure names the file and what is wrong with it. */
#include "data.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <zlib.h>

/* Only regular files: a FIFO, directory or device node (/dev/zero would be
 * read until memory runs out) is an error at once. *size: the file's size. */
static gzFile open_file(const char *fn, const char *path, int64_t *size) {
  if (!path) { ln_error("%s: path is NULL", fn); return NULL; }
  uint64_t sz = 0;
  char why[160];
  int fd = ln_open_regular(path, &sz, why, sizeof why);
  if (fd < 0) {
    if (fd == -2) ln_error("%s: '%s' is %s", fn, path, why);
    else ln_error("%s: cannot open '%s': %s", fn, path, why);
    return NULL;
  }
  gzFile f = gzdopen(fd, "rb");   /* owns fd from here */
  if (!f) { close(fd); ln_error("%s: cannot open '%s': out of memory", fn, path); return NULL; }
  gzbuffer(f, 1 << 17);
  if (size) *size = (int64_t)LN_MIN(sz, (uint64_t)INT64_MAX);
  return f;
}

/* Read up to n bytes; returns the count read, or -1 with the error set. */
static int64_t read_bytes(const char *fn, const char *path, gzFile f, void *dst, int64_t n) {
  int64_t got = 0;
  while (got < n) {
    int64_t want = LN_MIN(n - got, (int64_t)1 << 30);
    int r = gzread(f, (char *)dst + got, (unsigned)want);
    if (r < 0) {
      int code; const char *msg = gzerror(f, &code);
      if (code == Z_BUF_ERROR) break;   /* gzip stream cut short: the caller reports truncation */
      ln_error("%s: '%s' is corrupt (%s)", fn, path, msg ? msg : "read error");
      return -1;
    }
    if (r == 0) break;
    got += r;
  }
  return got;
}

/* Whether anything follows the expected end of the file. */
static int has_trailing(gzFile f) {
  char c;
  return gzread(f, &c, 1) == 1;
}

static uint32_t be32(const unsigned char *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

ln_tensor *ln_idx_read(const char *path) {
  const char *fn = "idx_read";
  int64_t fsize = 0;
  gzFile f = open_file(fn, path, &fsize);
  if (!f) return NULL;
  ln_tensor *t = NULL;
  void *raw = NULL;
  unsigned char hdr[4 + 4 * LN_MAX_DIMS];
  int64_t got = read_bytes(fn, path, f, hdr, 4);
  if (got < 0) goto fail;
  if (got < 4) { ln_error("%s: '%s' is truncated: %lld bytes, too short for an IDX header", fn, path, (long long)got); goto fail; }
  int type = hdr[2], ndim = hdr[3], es, dtype;
  switch (type) {
    case 0x08: es = 1; dtype = LN_UINT8; break;
    case 0x09: es = 1; dtype = LN_INT32; break;
    case 0x0B: es = 2; dtype = LN_INT32; break;
    case 0x0C: es = 4; dtype = LN_INT32; break;
    case 0x0D: es = 4; dtype = LN_FLOAT32; break;
    case 0x0E: es = 8; dtype = LN_FLOAT64; break;
    default: es = 0; dtype = -1;
  }
  if (hdr[0] != 0 || hdr[1] != 0 || dtype < 0 || ndim < 1 || ndim > LN_MAX_DIMS) {
    ln_error("%s: '%s' is not an IDX file (bad magic 0x%02x%02x%02x%02x; expected 00 00, a type "
             "08/09/0B/0C/0D/0E and 1..%d dims)", fn, path, hdr[0], hdr[1], hdr[2], hdr[3], LN_MAX_DIMS);
    goto fail;
  }
  got = read_bytes(fn, path, f, hdr + 4, 4 * ndim);
  if (got < 0) goto fail;
  if (got < 4 * ndim) {
    ln_error("%s: '%s' is truncated inside its header (%d dims need %d bytes, found %lld)", fn, path,
             ndim, 4 + 4 * ndim, (long long)(4 + got));
    goto fail;
  }
  int64_t shape[LN_MAX_DIMS], numel = 1, nonzero = 1;   /* product of the non-zero dims <= 2^40 */
  for (int d = 0; d < ndim; d++) {
    shape[d] = be32(hdr + 4 + 4 * d);
    if (shape[d] > ((int64_t)1 << 31) || (shape[d] && nonzero > ((int64_t)1 << 40) / shape[d])) {
      ln_error("%s: '%s' has an implausible size %lld in dim %d", fn, path, (long long)shape[d], d + 1);
      goto fail;
    }
    numel *= shape[d];
    if (shape[d]) nonzero *= shape[d];
  }
  int64_t nbytes = numel * es;
  /* an uncompressed file shorter than its header says: an error before the
   * (possibly huge) allocation, so a hostile header costs no memory */
  if (gzdirect(f) && fsize - (4 + 4 * ndim) < nbytes) {
    char sb[128];
    ln_error("%s: '%s' is truncated: its header promises %lld bytes of data (shape %s), the file has %lld",
             fn, path, (long long)nbytes, ln_shape_str(sb, sizeof sb, ndim, shape),
             (long long)LN_MAX(fsize - (4 + 4 * ndim), 0));
    goto fail;
  }
  /* deflate expands at most 1032:1, so a gzip file's size bounds the data it
   * can hold: a hostile header in a small .gz is refused before allocating */
  if (!gzdirect(f) && nbytes / 1032 > fsize + 1024) {
    char sb[128];
    ln_error("%s: '%s' is truncated: its header promises %lld bytes of data (shape %s), more than a "
             "gzip file of %lld bytes can hold", fn, path, (long long)nbytes,
             ln_shape_str(sb, sizeof sb, ndim, shape), (long long)fsize);
    goto fail;
  }
  t = ln_empty(ndim, shape, dtype, 0);
  if (!t) goto fail;
  char *dst = ln_data_ptr(t);
  raw = es == ln_dtype_size(dtype) ? (void *)dst : malloc((size_t)LN_MAX(nbytes, 1));
  if (!raw) { ln_error("%s: out of memory reading '%s'", fn, path); goto fail; }
  got = read_bytes(fn, path, f, raw, nbytes);
  if (got < 0) goto fail;
  if (got < nbytes) {
    char sb[128];
    ln_error("%s: '%s' is truncated: its header promises %lld bytes of data (shape %s), the file has %lld",
             fn, path, (long long)nbytes, ln_shape_str(sb, sizeof sb, ndim, shape), (long long)got);
    goto fail;
  }
  if (has_trailing(f)) {
    char sb[128];
    ln_error("%s: '%s' is longer than its header says (shape %s needs %lld data bytes)", fn, path,
             ln_shape_str(sb, sizeof sb, ndim, shape), (long long)nbytes);
    goto fail;
  }
  /* big-endian on disk -> host order, widening sbyte/short to int32 */
  const unsigned char *s = raw;
  if (type == 0x09) {
    for (int64_t i = 0; i < numel; i++) ((int32_t *)dst)[i] = (int8_t)s[i];
  } else if (type == 0x0B) {
    for (int64_t i = 0; i < numel; i++) ((int32_t *)dst)[i] = (int16_t)(s[2 * i] << 8 | s[2 * i + 1]);
  } else if (es == 4) {
    for (int64_t i = 0; i < numel; i++) { uint32_t v = be32(s + 4 * i); memcpy(dst + 4 * i, &v, 4); }
  } else if (es == 8) {
    for (int64_t i = 0; i < numel; i++) {
      uint64_t v = (uint64_t)be32(s + 8 * i) << 32 | be32(s + 8 * i + 4);
      memcpy(dst + 8 * i, &v, 8);
    }
  }
  if (raw != dst) free(raw);
  gzclose(f);
  return t;
fail:
  if (t && raw && raw != ln_data_ptr(t)) free(raw);
  if (t) ln_tensor_free(t);
  gzclose(f);
  return NULL;
}

/* ---- CIFAR-10 ----------------------------------------------------------------- */

enum { CIFAR_PIXELS = 3072 };

/* Whole file into a growing buffer (gzip sizes are unknown up front). */
static char *slurp(const char *fn, const char *path, int64_t *len) {
  int64_t fsize = 0;
  gzFile f = open_file(fn, path, &fsize);
  if (!f) return NULL;
  /* a plain file is read up to its size (plus a byte to notice one that
   * grows meanwhile); a gzip file's decompressed size is not known up front */
  int direct = gzdirect(f);
  int64_t cap = direct ? fsize + 1 : 1 << 20, n = 0;
  char *buf = malloc((size_t)cap);
  for (;;) {
    if (!buf) { gzclose(f); ln_error("%s: out of memory reading '%s'", fn, path); return NULL; }
    int64_t got = read_bytes(fn, path, f, buf + n, cap - n);
    if (got < 0) { free(buf); gzclose(f); return NULL; }
    n += got;
    if (n < cap) break;
    if (direct) {
      free(buf); gzclose(f);
      ln_error("%s: '%s' grew while it was read (more than its %lld bytes)", fn, path, (long long)fsize);
      return NULL;
    }
    cap *= 2;
    char *nb = realloc(buf, (size_t)cap);
    if (!nb) free(buf);
    buf = nb;
  }
  gzclose(f);
  *len = n;
  return buf;
}

/* CIFAR-10 (one label byte a record) and CIFAR-100 (coarse, then fine)
 * binary batches: nlab label bytes, each below lim[j], then the pixels. */
static int cifar_read(const char *fn, const char *what, int nlab, const int *lim, int nfiles,
                      const char *const *paths, ln_tensor **images, ln_tensor **labels) {
  const int64_t record = CIFAR_PIXELS + nlab;
  if (!images || !labels) return ln_error("%s: output pointers are NULL", fn);
  *images = NULL;
  for (int j = 0; j < nlab; j++) labels[j] = NULL;
  if (nfiles < 1 || !paths) return ln_error("%s: no files given", fn);
  char **bufs = calloc((size_t)nfiles, sizeof *bufs);
  int64_t *lens = calloc((size_t)nfiles, sizeof *lens), total = 0;
  int rc = -1;
  if (!bufs || !lens) { ln_error("%s: out of memory", fn); goto done; }
  for (int i = 0; i < nfiles; i++) {
    if (!(bufs[i] = slurp(fn, paths[i], &lens[i]))) goto done;
    if (lens[i] == 0 || lens[i] % record != 0) {
      ln_error("%s: '%s' has %lld bytes, not a whole number of %lld-byte records (%s + 3x32x32 "
               "pixels)%s%s", fn, paths[i], (long long)lens[i], (long long)record,
               nlab == 1 ? "label byte" : "coarse and fine label bytes",
               lens[i] % record ? ": truncated or not a " : "", lens[i] % record ? what : "");
      goto done;
    }
    for (int64_t r = 0; r < lens[i] / record; r++) {
      for (int j = 0; j < nlab; j++) {
        unsigned char lab = (unsigned char)bufs[i][r * record + j];
        if (lab >= lim[j]) {
          ln_error("%s: '%s' record %lld has %slabel %d, expected 0..%d (not a %s?)", fn, paths[i],
                   (long long)r, nlab == 1 ? "" : j == 0 ? "coarse " : "fine ", lab, lim[j] - 1, what);
          goto done;
        }
      }
    }
    total += lens[i] / record;
  }
  int64_t ishape[4] = {total, 3, 32, 32};
  if (!(*images = ln_empty(4, ishape, LN_UINT8, 0))) goto done;
  for (int j = 0; j < nlab; j++)
    if (!(labels[j] = ln_empty(1, &total, LN_INT64, 0))) goto done;
  unsigned char *img = ln_data_ptr(*images);
  int64_t k = 0;
  for (int i = 0; i < nfiles; i++) {
    for (int64_t r = 0; r < lens[i] / record; r++, k++) {
      const char *rec = bufs[i] + r * record;
      for (int j = 0; j < nlab; j++) ((int64_t *)ln_data_ptr(labels[j]))[k] = (unsigned char)rec[j];
      memcpy(img + k * CIFAR_PIXELS, rec + nlab, CIFAR_PIXELS);
    }
  }
  rc = 0;
done:
  if (rc != 0) {
    if (*images) ln_tensor_free(*images);
    *images = NULL;
    for (int j = 0; j < nlab; j++) {
      if (labels[j]) ln_tensor_free(labels[j]);
      labels[j] = NULL;
    }
  }
  if (bufs) for (int i = 0; i < nfiles; i++) free(bufs[i]);
  free(bufs); free(lens);
  return rc;
}

int ln_cifar10_read(int nfiles, const char *const *paths, ln_tensor **images, ln_tensor **labels) {
  static const int lim[1] = {10};
  return cifar_read("cifar10_read", "CIFAR-10 batch", 1, lim, nfiles, paths, images, labels);
}

int ln_cifar100_read(int nfiles, const char *const *paths, ln_tensor **images, ln_tensor **coarse,
                     ln_tensor **fine) {
  static const int lim[2] = {20, 100};
  ln_tensor *labs[2] = {NULL, NULL};
  if (!coarse || !fine) return ln_error("cifar100_read: output pointers are NULL");
  int rc = cifar_read("cifar100_read", "CIFAR-100 file", 2, lim, nfiles, paths, images, labs);
  *coarse = labs[0];
  *fine = labs[1];
  return rc;
}
