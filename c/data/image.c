/* image.c -- JPEG (libjpeg-turbo, through the libjpeg API) and PNG (libpng)
 * decoding into uint8 (C, H, W) tensors, as torchvision 0.14's
 * io.read_image(path, mode): the same library calls for each mode, so the
 * pixels agree bit for bit; mode RGB is also PIL's Image.open(p).convert('RGB').
 *
 * Both libraries report errors through a callback that must not return:
 * it keeps the message and longjmps back to the decode call, which frees
 * what it allocated and sets a Lua-visible error naming the file. Warnings
 * (recoverable corruption) are ignored: the image decodes as the library
 * decodes it: libjpeg's corrupt-data warnings (the damaged blocks decode as
 * it guesses them), libpng's CRC errors in ancillary chunks (dropped) and
 * its benign errors (extra compressed data). Data that ends before the last
 * pixel is an error (as torchvision and PIL), not an image padded with grey;
 * so is a JPEG without EOI (as torchvision, whose source also errors at the
 * end of data), while a PNG's chunks after its image data are not read. */
#include "data.h"
#include "../core/checked.h"
#include <stdio.h>   /* (before jpeglib.h, which uses FILE) */
#include <jpeglib.h>
#include <png.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* PIL's decompression-bomb limit (2 x Image.MAX_IMAGE_PIXELS), and JPEG's
 * own 65535 per side for both formats. (tools/fuzz_image.c lowers the first.)
 * The limit stays PIL's although a tiny file can declare that many pixels
 * and so make the decoder allocate about 1 GB before its data runs out (the
 * output, h*w*c bytes, and for a progressive JPEG libjpeg's coefficients, 2
 * bytes a sample): every image PIL and torchvision open must open here too,
 * the memory is bounded (and given back at once), and a tighter cap would
 * refuse real photographs and scans. What is not bounded by the size, the
 * number of progressive scans (each one a pass over the whole image, a CPU
 * denial of service), is capped below. */
#ifndef IMG_MAX_PIXELS
#define IMG_MAX_PIXELS ((int64_t)178956970)
#endif
#define IMG_MAX_SIDE 65535
/* a progressive JPEG's scans, as libjpeg-turbo's TurboJPEG API with
 * TJFLAG_LIMITSCANS (real encoders write about 10; a crafted file can repeat
 * a refinement scan without end, each as costly as the first) */
#define IMG_MAX_SCANS 500
/* files larger than this are refused before they are read */
#define IMG_MAX_FILE ((int64_t)1 << 30)

static const char *const mode_names[] = {"UNCHANGED", "GRAY", "GRAY_ALPHA", "RGB", "RGB_ALPHA"};

static int check_size(const char *fn, const char *name, int64_t h, int64_t w) {
  if (h < 1 || w < 1) return ln_error("%s: '%s' has an empty image (%lldx%lld)", fn, name, (long long)h, (long long)w);
  if (h > IMG_MAX_SIDE || w > IMG_MAX_SIDE || h * w > IMG_MAX_PIXELS)
    return ln_error("%s: '%s' is %lldx%lld pixels, more than the limit (%d per side, %lld pixels in all)", fn, name,
                    (long long)h, (long long)w, IMG_MAX_SIDE, (long long)IMG_MAX_PIXELS);
  return 0;
}

/* ---- JPEG ------------------------------------------------------------------ */

typedef struct {
  struct jpeg_error_mgr pub;
  jmp_buf jb;
  char msg[JMSG_LENGTH_MAX + 32];
} jerr_t;

static void j_error_exit(j_common_ptr ci) {
  jerr_t *e = (jerr_t *)ci->err;
  ci->err->format_message(ci, e->msg);
  longjmp(e->jb, 1);
}
static void j_output_message(j_common_ptr ci) { (void)ci; }   /* warnings: no stderr */

/* A memory source whose end is an error: libjpeg's jpeg_mem_src would invent
 * an EOI and return a partly grey image. */
static void j_init_source(j_decompress_ptr ci) { (void)ci; }
static boolean j_fill_input(j_decompress_ptr ci) {
  jerr_t *e = (jerr_t *)ci->err;
  snprintf(e->msg, sizeof e->msg, "the data ends early (truncated)");
  longjmp(e->jb, 1);
}
static void j_skip_input(j_decompress_ptr ci, long n) {
  if (n <= 0) return;
  if ((size_t)n > ci->src->bytes_in_buffer) j_fill_input(ci);
  ci->src->next_input_byte += n;
  ci->src->bytes_in_buffer -= (size_t)n;
}
static void j_term_source(j_decompress_ptr ci) { (void)ci; }

/* libjpeg calls this before each step of its input pass (jpeg_start_decompress
 * absorbs a progressive file scan by scan); past the limit it errors through
 * the same longjmp as libjpeg's own errors. */
static void j_progress(j_common_ptr c) {
  j_decompress_ptr ci = (j_decompress_ptr)c;
  if (ci->input_scan_number > IMG_MAX_SCANS) {
    jerr_t *e = (jerr_t *)c->err;
    snprintf(e->msg, sizeof e->msg, "!a progressive JPEG with more than %d scans (refused: each scan is "
             "a pass over the whole image)", IMG_MAX_SCANS);
    longjmp(e->jb, 1);
  }
}

static int decode_jpeg(const char *fn, const char *name, const unsigned char *data, size_t n, int mode,
                       unsigned char **px, int *pc, int *ph, int *pw) {
  struct jpeg_decompress_struct ci;
  jerr_t err;
  struct jpeg_source_mgr src;
  struct jpeg_progress_mgr progress = {0};
  unsigned char *volatile buf = NULL;
  ci.err = jpeg_std_error(&err.pub);
  err.pub.error_exit = j_error_exit;
  err.pub.output_message = j_output_message;
  err.msg[0] = 0;
  if (setjmp(err.jb)) {
    jpeg_destroy_decompress(&ci);
    free(buf);
    if (err.msg[0] == '!') return ln_error("%s: '%s': %s", fn, name, err.msg + 1);
    return ln_error("%s: '%s' is not a valid JPEG: %s", fn, name, err.msg);
  }
  jpeg_create_decompress(&ci);
  src.init_source = j_init_source;
  src.fill_input_buffer = j_fill_input;
  src.skip_input_data = j_skip_input;
  src.resync_to_restart = jpeg_resync_to_restart;
  src.term_source = j_term_source;
  src.next_input_byte = data;
  src.bytes_in_buffer = n;
  ci.src = &src;
  progress.progress_monitor = j_progress;
  ci.progress = &progress;
  jpeg_read_header(&ci, TRUE);
  switch (mode) {   /* torchvision 0.14's decode_jpeg */
  case LN_IMAGE_UNCHANGED: break;   /* (CMYK/YCCK: the 4 stored CMYK channels, as there) */
  case LN_IMAGE_GRAY: case LN_IMAGE_RGB:
    if (ci.jpeg_color_space == JCS_CMYK || ci.jpeg_color_space == JCS_YCCK) {
      snprintf(err.msg, sizeof err.msg, "!a CMYK/YCCK JPEG, which read_image decodes only in mode UNCHANGED "
               "(as torchvision 0.14); convert it to RGB first");
      longjmp(err.jb, 1);
    }
    if (mode == LN_IMAGE_GRAY && ci.jpeg_color_space != JCS_GRAYSCALE) ci.out_color_space = JCS_GRAYSCALE;
    if (mode == LN_IMAGE_RGB && ci.jpeg_color_space != JCS_RGB) ci.out_color_space = JCS_RGB;
    break;
  default:
    snprintf(err.msg, sizeof err.msg, "!mode %s is not supported for JPEG files (no alpha channel)", mode_names[mode]);
    longjmp(err.jb, 1);
  }
  jpeg_calc_output_dimensions(&ci);
  if (check_size(fn, name, ci.output_height, ci.output_width) != 0) {
    jpeg_destroy_decompress(&ci);
    return -1;
  }
  int c = ci.output_components, w = (int)ci.output_width, h = (int)ci.output_height;
  buf = malloc((size_t)h * (size_t)w * (size_t)c);
  if (!buf) {
    snprintf(err.msg, sizeof err.msg, "!out of memory for %dx%dx%d pixels", h, w, c);
    longjmp(err.jb, 1);
  }
  jpeg_start_decompress(&ci);
  while (ci.output_scanline < ci.output_height) {
    JSAMPROW row = buf + (size_t)ci.output_scanline * (size_t)w * (size_t)c;
    jpeg_read_scanlines(&ci, &row, 1);
  }
  jpeg_finish_decompress(&ci);
  jpeg_destroy_decompress(&ci);
  *px = buf; *pc = c; *ph = h; *pw = w;
  return 0;
}

/* ---- PNG ------------------------------------------------------------------- */

typedef struct {
  const unsigned char *data;
  size_t n, at;
  char msg[256];
} pread_t;

static void p_error(png_structp png, png_const_charp msg) {
  pread_t *r = png_get_error_ptr(png);
  if (r->msg[0] == 0) snprintf(r->msg, sizeof r->msg, "%s", msg);
  png_longjmp(png, 1);
}
static void p_warning(png_structp png, png_const_charp msg) { (void)png; (void)msg; }
static void p_read(png_structp png, png_bytep out, size_t len) {
  pread_t *r = png_get_io_ptr(png);
  if (len > r->n - r->at) {
    snprintf(r->msg, sizeof r->msg, "the data ends early (truncated)");
    png_error(png, r->msg);
  }
  memcpy(out, r->data + r->at, len);
  r->at += len;
}

static int decode_png(const char *fn, const char *name, const unsigned char *data, size_t n, int mode,
                      unsigned char **px, int *pc, int *ph, int *pw) {
  pread_t rd = {data, n, 0, {0}};
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &rd, p_error, p_warning);
  png_infop info = png ? png_create_info_struct(png) : NULL;
  if (!info) {
    png_destroy_read_struct(png ? &png : NULL, NULL, NULL);
    return ln_error("%s: '%s': out of memory", fn, name);
  }
  unsigned char *volatile buf = NULL;
  png_bytep *volatile rows = NULL;
  volatile int toobig = 0;
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, NULL);
    free(buf);
    free(rows);
    if (toobig) return -1;
    if (rd.msg[0] == '!') return ln_error("%s: '%s': %s", fn, name, rd.msg + 1);
    return ln_error("%s: '%s' is not a valid PNG: %s", fn, name, rd.msg);
  }
  png_set_read_fn(png, &rd, p_read);
  png_read_info(png, info);
  png_uint_32 w, h;
  int depth, ctype, interlace;
  png_get_IHDR(png, info, &w, &h, &depth, &ctype, &interlace, NULL, NULL);
  if (check_size(fn, name, h, w) != 0) { toobig = 1; png_longjmp(png, 1); }
  /* torchvision 0.14 refuses 16 bits; lunet keeps the high byte, as PIL
     does for RGB(A) and gray+alpha */
  if (depth == 16) png_set_strip_16(png);
  if (ctype == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (ctype == PNG_COLOR_TYPE_PALETTE && depth < 8) png_set_packing(png);   /* (indices, one a byte) */
  int passes = png_set_interlace_handling(png);
  (void)passes;   /* (png_read_image runs them) */
  int is_pal = (ctype & PNG_COLOR_MASK_PALETTE) != 0, color = (ctype & PNG_COLOR_MASK_COLOR) != 0,
      alpha = (ctype & PNG_COLOR_MASK_ALPHA) != 0, pal_alpha = is_pal && png_get_valid(png, info, PNG_INFO_tRNS),
      fill = depth == 16 ? 0xffff : 0xff;   /* (an opaque alpha after the expansion to 8 bits: torchvision's
                                               (1 << depth) - 1 makes 1/2/4-bit gray's alpha 1, 3 or 15) */
  /* torchvision 0.14's decode_png, mode by mode (tRNS of a palette becomes
     the alpha channel; of gray/RGB it is ignored, as there). A palette
     without tRNS gets an opaque alpha where the mode has one (torchvision
     assumes it has one and returns misread rows). */
  switch (mode) {
  case LN_IMAGE_UNCHANGED: break;
  case LN_IMAGE_GRAY:
    if (ctype == PNG_COLOR_TYPE_GRAY) break;
    if (is_pal) { png_set_palette_to_rgb(png); alpha = pal_alpha; }
    if (alpha) png_set_strip_alpha(png);
    if (color) png_set_rgb_to_gray(png, 1, 0.2989, 0.587);
    break;
  case LN_IMAGE_GRAY_ALPHA:
    if (ctype == PNG_COLOR_TYPE_GRAY_ALPHA) break;
    if (is_pal) { png_set_palette_to_rgb(png); alpha = pal_alpha; }
    if (!alpha) png_set_add_alpha(png, (png_uint_32)fill, PNG_FILLER_AFTER);
    if (color) png_set_rgb_to_gray(png, 1, 0.2989, 0.587);
    break;
  case LN_IMAGE_RGB:
    if (ctype == PNG_COLOR_TYPE_RGB) break;
    if (is_pal) { png_set_palette_to_rgb(png); alpha = pal_alpha; }
    else if (!color) png_set_gray_to_rgb(png);
    if (alpha) png_set_strip_alpha(png);
    break;
  case LN_IMAGE_RGB_ALPHA:
    if (ctype == PNG_COLOR_TYPE_RGB_ALPHA) break;
    if (is_pal) { png_set_palette_to_rgb(png); alpha = pal_alpha; }
    else if (!color) png_set_gray_to_rgb(png);
    if (!alpha) png_set_add_alpha(png, (png_uint_32)fill, PNG_FILLER_AFTER);
    break;
  }
  png_read_update_info(png, info);
  int c = png_get_channels(png, info);
  size_t rowbytes = png_get_rowbytes(png, info);
  if (rowbytes != (size_t)w * (size_t)c) {
    snprintf(rd.msg, sizeof rd.msg, "!unexpected row layout (%zu bytes for %u pixels of %d channels)", rowbytes,
             (unsigned)w, c);
    png_longjmp(png, 1);
  }
  buf = malloc((size_t)h * rowbytes);
  rows = malloc(sizeof(png_bytep) * (size_t)h);
  if (!buf || !rows) {
    snprintf(rd.msg, sizeof rd.msg, "!out of memory for %ux%ux%d pixels", (unsigned)h, (unsigned)w, c);
    png_longjmp(png, 1);
  }
  for (png_uint_32 y = 0; y < h; y++) rows[y] = buf + (size_t)y * rowbytes;
  png_read_image(png, rows);
  /* (no png_read_end: as torchvision 0.14, the chunks after the image data
     are not read, so a file without IEND or with a damaged trailer whose
     pixels are all there decodes) */
  png_destroy_read_struct(&png, &info, NULL);
  free(rows);
  *px = buf; *pc = c; *ph = (int)h; *pw = (int)w;
  return 0;
}

/* ---- entry points -------------------------------------------------------------- */

int ln_image_decode_hwc(const char *fn, const char *name, const unsigned char *data, size_t n, int mode,
                        unsigned char **px, int *c, int *h, int *w) {
  *px = NULL;
  if (mode < LN_IMAGE_UNCHANGED || mode > LN_IMAGE_RGB_ALPHA)
    return ln_error("%s: mode must be 0..4 (UNCHANGED, GRAY, GRAY_ALPHA, RGB, RGB_ALPHA), got %d", fn, mode);
  static const unsigned char png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (n >= 3 && data[0] == 0xff && data[1] == 0xd8 && data[2] == 0xff)
    return decode_jpeg(fn, name, data, n, mode, px, c, h, w);
  if (n >= 8 && memcmp(data, png_sig, 8) == 0) return decode_png(fn, name, data, n, mode, px, c, h, w);
  return ln_error("%s: '%s' is not a JPEG or PNG image (%zu bytes; unknown signature)", fn, name, n);
}

int ln_image_file_hwc(const char *fn, const char *path, int mode, unsigned char **px, int *c, int *h, int *w) {
  *px = NULL;
  if (!path) return ln_error("%s: path is NULL", fn);
  uint64_t sz = 0;
  char why[160];
  int fd = ln_open_regular(path, &sz, why, sizeof why);
  if (fd < 0) {
    if (fd == -2) return ln_error("%s: '%s' is %s", fn, path, why);
    return ln_error("%s: cannot open '%s': %s", fn, path, why);
  }
  if (sz > (uint64_t)IMG_MAX_FILE) {
    close(fd);
    return ln_error("%s: '%s' is %llu bytes, larger than the %lld-byte limit for an image file", fn, path,
                    (unsigned long long)sz, (long long)IMG_MAX_FILE);
  }
  unsigned char *data = malloc(sz ? (size_t)sz : 1);
  if (!data) { close(fd); return ln_error("%s: '%s': out of memory for %llu bytes", fn, path, (unsigned long long)sz); }
  size_t got = 0;
  while (got < sz) {
    ssize_t r = read(fd, data + got, (size_t)sz - got);
    if (r <= 0) break;
    got += (size_t)r;
  }
  close(fd);
  int rc = ln_image_decode_hwc(fn, path, data, got, mode, px, c, h, w);
  free(data);
  return rc;
}

/* HWC -> a new (C, H, W) uint8 tensor; frees px */
static ln_tensor *to_chw(unsigned char *px, int c, int h, int w) {
  int64_t shape[3] = {c, h, w};
  ln_tensor *t = ln_empty(3, shape, LN_UINT8, 0);
  if (!t) { free(px); return NULL; }
  uint8_t *o = ln_data_ptr(t);
  size_t n = (size_t)h * (size_t)w;
  for (int k = 0; k < c; k++)
    for (size_t q = 0; q < n; q++) o[(size_t)k * n + q] = px[q * (size_t)c + (size_t)k];
  free(px);
  return t;
}

ln_tensor *ln_image_read(const char *path, int mode) {
  unsigned char *px;
  int c, h, w;
  if (ln_image_file_hwc("read_image", path, mode, &px, &c, &h, &w) != 0) return NULL;
  return to_chw(px, c, h, w);
}

ln_tensor *ln_image_decode(const ln_tensor *bytes, int mode) {
  const char *fn = "decode_image";
  if (ln_check_tensor(fn, bytes, "data") != 0) return NULL;
  if (bytes->dtype_id != LN_UINT8 || bytes->ndim != 1 || !ln_is_contiguous(bytes) || bytes->device_id >= LN_CUDA_BASE)
    return ln_error_null("%s: data must be a contiguous 1-D uint8 cpu tensor (the file's bytes), got a %d-d %s tensor",
                         fn, bytes->ndim, ln_dtype_name(bytes->dtype_id));
  if (ln_tensor_sync(bytes) != 0) return NULL;
  unsigned char *px;
  int c, h, w;
  if (ln_image_decode_hwc(fn, "<bytes>", ln_data_ptr(bytes), (size_t)bytes->shape[0], mode, &px, &c, &h, &w) != 0)
    return NULL;
  return to_chw(px, c, h, w);
}
