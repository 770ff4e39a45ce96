/* files.c -- the DataLoader's files source (ImageFolder): the paths and
 * labels are copied once; a worker making a batch reads and decodes each
 * file (image.c), plans the transform for that image's own size, runs it
 * keyed by (seed, epoch, row) as the in-memory path does, and writes the
 * row. The first sample's final size fixes the batch's; another size is an
 * error naming both files, as the Lua path's collate. */
#include "data.h"
#include "../core/checked.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ln_files {
  int64_t n;
  char **paths;      /* into buf */
  char *buf;
  int64_t *labels;   /* NULL: no targets */
  int mode, has_tf;
  ln_transform tf;
};

ln_files *ln_files_new(const char *fn, int64_t n, const char *const *paths, const int64_t *labels, int mode,
                       const ln_transform *tf) {
  if (n < 1) return ln_error_null("%s: no files given", fn);
  if (!paths) return ln_error_null("%s: paths are NULL", fn);
  if (mode < LN_IMAGE_UNCHANGED || mode > LN_IMAGE_RGB_ALPHA)
    return ln_error_null("%s: image mode must be 0..4, got %d", fn, mode);
  size_t total = 0;
  for (int64_t i = 0; i < n; i++) {
    if (!paths[i]) return ln_error_null("%s: path %lld is NULL", fn, (long long)i + 1);
    total += strlen(paths[i]) + 1;
  }
  ln_files *f = calloc(1, sizeof *f);
  if (!f) return ln_error_null("%s: out of memory", fn);
  f->n = n;
  f->mode = mode;
  f->paths = malloc(sizeof(char *) * (size_t)n);
  f->buf = malloc(total);
  if (labels) f->labels = malloc(sizeof(int64_t) * (size_t)n);
  if (!f->paths || !f->buf || (labels && !f->labels)) {
    ln_files_free(f);
    return ln_error_null("%s: out of memory for %lld paths", fn, (long long)n);
  }
  char *at = f->buf;
  for (int64_t i = 0; i < n; i++) {
    size_t len = strlen(paths[i]) + 1;
    memcpy(at, paths[i], len);
    f->paths[i] = at;
    at += len;
  }
  if (labels) memcpy(f->labels, labels, sizeof(int64_t) * (size_t)n);
  if (tf) { f->tf = *tf; f->has_tf = 1; }
  return f;
}

void ln_files_free(ln_files *f) {
  if (!f) return;
  free(f->paths); free(f->buf); free(f->labels); free(f);
}

int64_t ln_files_count(const ln_files *f) { return f->n; }

static int grow(void **p, size_t *cap, size_t need) {
  if (need <= *cap) return 0;
  void *q = realloc(*p, need);
  if (!q) return -1;
  *p = q;
  *cap = need;
  return 0;
}

/* a float32 (rows, c, h, w) slot, kept when it has that shape */
static int fit_slot(ln_tensor **slot, int64_t rows, int64_t c, int64_t h, int64_t w) {
  ln_tensor *t = *slot;
  if (t && t->shape[0] == rows && t->shape[1] == c && t->shape[2] == h && t->shape[3] == w) return 0;
  int64_t shape[4] = {rows, c, h, w};
  ln_tensor *nt = ln_empty(4, shape, LN_FLOAT32, 0);
  if (!nt) return -1;
  ln_tensor_free(t);   /* (a batch handed out earlier keeps its own reference) */
  *slot = nt;
  return 0;
}

int ln_files_batch(const ln_files *f, ln_files_buf *wb, const int64_t *rows, int64_t m, int64_t cap_rows,
                   ln_tensor **slot, int64_t *y, uint64_t seed, uint64_t epoch, const int *stop) {
  const char *fn = "DataLoader";
  int64_t s0[3] = {0, 0, 0}, zero = 0;
  const char *first = NULL;
  float *out = NULL;
  for (int64_t k = 0; k < m; k++) {
    if (stop && __atomic_load_n(stop, __ATOMIC_RELAXED)) return ln_error("%s: closed while a batch was made", fn);
    int64_t row = rows[k];
    const char *path = f->paths[row];
    unsigned char *px;
    int c, h, w;
    if (ln_image_file_hwc(fn, path, f->mode, &px, &c, &h, &w) != 0) return -1;
    size_t plane = (size_t)h * (size_t)w;
    if (grow((void **)&wb->chw, &wb->chw_cap, plane * (size_t)c) != 0) {
      free(px);
      return ln_error("%s: '%s': out of memory for %dx%dx%d pixels", fn, path, c, h, w);
    }
    for (int ch = 0; ch < c; ch++)   /* HWC -> CHW */
      for (size_t q = 0; q < plane; q++) wb->chw[(size_t)ch * plane + q] = px[q * (size_t)c + (size_t)ch];
    free(px);
    ln_gather_plan p;
    int64_t oc = c, oh = h, ow = w;
    if (f->has_tf) {
      char where[600];
      snprintf(where, sizeof where, "%s: '%s'", fn, path);
      memset(&p, 0, sizeof p);
      p.xdtype = LN_UINT8;
      if (ln_gather_plan_image(where, &p, c, h, w, &f->tf) != 0) return -1;
      oc = p.OC; oh = p.OH; ow = p.OW;
    }
    if (k == 0) {
      if (fit_slot(slot, cap_rows, oc, oh, ow) != 0) return -1;
      out = ln_data_ptr(*slot);
      s0[0] = oc; s0[1] = oh; s0[2] = ow;
      first = path;
    } else if (oc != s0[0] || oh != s0[1] || ow != s0[2]) {   /* (the Lua path's words, and the files) */
      return ln_error("%s: sample %lld input has shape {%lld,%lld,%lld}, sample 1 {%lld,%lld,%lld} ('%s', '%s')", fn,
                      (long long)k + 1, (long long)oc, (long long)oh, (long long)ow, (long long)s0[0],
                      (long long)s0[1], (long long)s0[2], path, first);
    }
    float *o = out + k * oc * oh * ow;
    if (f->has_tf) {
      if (p.scratch > 0) {
        size_t cap = (size_t)wb->scratch_cap * sizeof(float);
        if (grow((void **)&wb->scratch, &cap, (size_t)p.scratch * sizeof(float)) != 0)
          return ln_error("%s: '%s': out of memory for the transforms' buffers (%lld floats)", fn, path,
                          (long long)p.scratch);
        wb->scratch_cap = (int64_t)(cap / sizeof(float));
      }
      p.x = (const char *)wb->chw;
      /* (one thread, scratch given: cannot fail) */
      (void)ln_gather_run(&p, (char *)o, NULL, &zero, &row, 1, seed, epoch, 0, wb->scratch);
    } else {   /* ToTensor: x / 255, as the Lua path's x:float():div(255) */
      for (size_t q = 0; q < plane * (size_t)c; q++) o[q] = (float)wb->chw[q] / 255.0f;
    }
    if (y) y[k] = f->labels[row];
  }
  return 0;
}
