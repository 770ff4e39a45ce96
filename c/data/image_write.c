/* image_write.c -- PNG (libpng) and JPEG (libjpeg-turbo) encoding of uint8
 * (C, H, W) tensors into memory, as torchvision 0.14's io.encode_png /
 * io.encode_jpeg: the same library calls in the same order, so the bytes are
 * the same as theirs with the same libraries. PNG also takes 2 (gray+alpha)
 * and 4 (RGBA) channels, which torchvision 0.14 refuses. Writing the bytes to
 * a file (atomically) is lunet.data.write_png / write_jpeg's, in Lua. */
#include "data.h"
#include <stdio.h>   /* (before jpeglib.h, which uses FILE) */
#include <jpeglib.h>
#include <png.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

/* (C, H, W) uint8 checks shared by both; *hwc: a malloc'd interleaved copy */
static int to_hwc(const char *fn, const ln_tensor *img, int maxc, int c3only, unsigned char **hwc, int *pc,
                  int *ph, int *pw) {
  *hwc = NULL;
  if (ln_check_tensor(fn, img, "image") != 0) return -1;
  if (img->dtype_id != LN_UINT8)
    return ln_error("%s: image must be a uint8 tensor, got %s", fn, ln_dtype_name(img->dtype_id));
  if (img->ndim != 3) return ln_error("%s: image must be a 3-d (C, H, W) tensor, got %d-d", fn, img->ndim);
  int64_t c = img->shape[0], h = img->shape[1], w = img->shape[2];
  if (c < 1 || c > maxc || (c3only && c == 2))
    return ln_error("%s: image must have %s channels, got %lld", fn, c3only ? "1 or 3" : "1, 2, 3 or 4", (long long)c);
  if (h < 1 || w < 1 || h > 65535 || w > 65535)
    return ln_error("%s: image height and width must be 1..65535, got %lldx%lld", fn, (long long)h, (long long)w);
  if (!ln_is_contiguous(img) || img->device_id >= LN_CUDA_BASE)
    return ln_error("%s: image must be a contiguous cpu tensor", fn);
  if (ln_tensor_sync(img) != 0) return -1;
  size_t n = (size_t)h * (size_t)w;
  unsigned char *o = malloc(n * (size_t)c);
  if (!o) return ln_error("%s: out of memory for %lldx%lldx%lld pixels", fn, (long long)c, (long long)h, (long long)w);
  const uint8_t *s = ln_data_ptr(img);
  for (int64_t k = 0; k < c; k++)
    for (size_t q = 0; q < n; q++) o[q * (size_t)c + (size_t)k] = s[(size_t)k * n + q];
  *hwc = o; *pc = (int)c; *ph = (int)h; *pw = (int)w;
  return 0;
}

static ln_tensor *bytes_tensor(const unsigned char *b, size_t n) {
  int64_t shape[1] = {(int64_t)n};
  ln_tensor *t = ln_empty(1, shape, LN_UINT8, 0);
  if (t && n) memcpy(ln_data_ptr(t), b, n);
  return t;
}

/* ---- PNG ------------------------------------------------------------------- */

typedef struct {
  unsigned char *buf;
  size_t n, cap;
  char msg[256];
} pwrite_t;

static void pw_error(png_structp png, png_const_charp msg) {
  pwrite_t *w = png_get_error_ptr(png);
  if (w->msg[0] == 0) snprintf(w->msg, sizeof w->msg, "%s", msg);
  png_longjmp(png, 1);
}
static void pw_warning(png_structp png, png_const_charp msg) { (void)png; (void)msg; }
static void pw_write(png_structp png, png_bytep data, size_t len) {
  pwrite_t *w = png_get_io_ptr(png);
  if (w->n + len > w->cap) {
    size_t cap = w->cap ? w->cap : 4096;
    while (cap < w->n + len) cap *= 2;
    unsigned char *nb = realloc(w->buf, cap);
    if (!nb) png_error(png, "out of memory");
    w->buf = nb; w->cap = cap;
  }
  memcpy(w->buf + w->n, data, len);
  w->n += len;
}
static void pw_flush(png_structp png) { (void)png; }

ln_tensor *ln_image_encode_png(const ln_tensor *img, int level) {
  const char *fn = "encode_png";
  if (level < 0 || level > 9) return ln_error_null("%s: compression_level must be 0..9, got %d", fn, level);
  unsigned char *hwc;
  int c, h, w;
  if (to_hwc(fn, img, 4, 0, &hwc, &c, &h, &w) != 0) return NULL;
  pwrite_t out = {NULL, 0, 0, {0}};
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &out, pw_error, pw_warning);
  png_infop info = png ? png_create_info_struct(png) : NULL;
  if (!info) {
    png_destroy_write_struct(png ? &png : NULL, NULL);
    free(hwc);
    return ln_error_null("%s: out of memory", fn);
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    free(hwc);
    free(out.buf);
    return ln_error_null("%s: libpng failed: %s", fn, out.msg);
  }
  static const int types[5] = {0, PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA, PNG_COLOR_TYPE_RGB,
                               PNG_COLOR_TYPE_RGB_ALPHA};
  png_set_write_fn(png, &out, pw_write, pw_flush);
  png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, 8, types[c], PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_set_compression_level(png, level);
  png_write_info(png, info);
  for (int y = 0; y < h; y++) png_write_row(png, hwc + (size_t)y * (size_t)w * (size_t)c);
  png_write_end(png, info);
  png_destroy_write_struct(&png, &info);
  free(hwc);
  ln_tensor *t = bytes_tensor(out.buf, out.n);
  free(out.buf);
  return t;
}

/* ---- JPEG ------------------------------------------------------------------ */

typedef struct {
  struct jpeg_error_mgr pub;
  jmp_buf jb;
  char msg[JMSG_LENGTH_MAX];
} jwerr_t;

static void jw_error_exit(j_common_ptr ci) {
  jwerr_t *e = (jwerr_t *)ci->err;
  ci->err->format_message(ci, e->msg);
  longjmp(e->jb, 1);
}
static void jw_output_message(j_common_ptr ci) { (void)ci; }

ln_tensor *ln_image_encode_jpeg(const ln_tensor *img, int quality) {
  const char *fn = "encode_jpeg";
  if (quality < 1 || quality > 100) return ln_error_null("%s: quality must be 1..100, got %d", fn, quality);
  unsigned char *hwc;
  int c, h, w;
  if (to_hwc(fn, img, 3, 1, &hwc, &c, &h, &w) != 0) return NULL;
  struct jpeg_compress_struct ci;
  jwerr_t err;
  unsigned char *volatile mem = NULL;
  unsigned long size = 0;
  ci.err = jpeg_std_error(&err.pub);
  err.pub.error_exit = jw_error_exit;
  err.pub.output_message = jw_output_message;
  err.msg[0] = 0;
  if (setjmp(err.jb)) {
    jpeg_destroy_compress(&ci);
    free(hwc);
    free(mem);
    return ln_error_null("%s: libjpeg failed: %s", fn, err.msg);
  }
  jpeg_create_compress(&ci);
  jpeg_mem_dest(&ci, (unsigned char **)&mem, &size);
  ci.image_width = (JDIMENSION)w;
  ci.image_height = (JDIMENSION)h;
  ci.input_components = c;
  ci.in_color_space = c == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&ci);
  jpeg_set_quality(&ci, quality, TRUE);
  jpeg_start_compress(&ci, TRUE);
  while (ci.next_scanline < ci.image_height) {
    JSAMPROW row = hwc + (size_t)ci.next_scanline * (size_t)w * (size_t)c;
    jpeg_write_scanlines(&ci, &row, 1);
  }
  jpeg_finish_compress(&ci);
  jpeg_destroy_compress(&ci);
  free(hwc);
  ln_tensor *t = bytes_tensor(mem, size);
  free(mem);
  return t;
}
