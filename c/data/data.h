/* data.h -- what the dataset readers, the batch assembler and the prefetch
 * loader share: the counter-based random numbers that key every random
 * choice by (seed, epoch, sample index), and the assembly entry point the
 * loader's worker threads call. */
#ifndef LN_DATA_H
#define LN_DATA_H
#include "../core/internal.h"

/* What a random draw is for: separate streams of the same (seed, epoch, i). */
enum { LN_RNG_TRANSFORM = 1, LN_RNG_SHUFFLE = 2, LN_RNG_SPLIT = 3, LN_RNG_SAMPLE = 4 };

/* Philox 4x32-10 (Salmon et al. 2011) on counter (i, epoch, purpose), key
 * seed: four independent 32-bit words. */
static inline void ln_data_philox(uint64_t seed, uint64_t epoch, uint64_t i, uint32_t purpose,
                                  uint32_t out[4]) {
  uint32_t c0 = (uint32_t)i, c1 = (uint32_t)(i >> 32), c2 = (uint32_t)epoch,
           c3 = (uint32_t)(epoch >> 32) ^ (purpose << 24);
  uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
  for (int r = 0; r < 10; r++) {
    uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
    uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
    c1 = (uint32_t)p1; c3 = (uint32_t)p0; c0 = n0; c2 = n2;
    k0 += 0x9E3779B9u; k1 += 0xBB67AE85u;
  }
  out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

/* Batch assembly without checks (the loader checked once at creation):
 * rows idx[0..b) of x into the contiguous host buffers out / out_y.
 * threaded = 1 spreads the rows of a large batch over the kernel threads. */
typedef struct ln_gather_plan {
  const char *x, *y;         /* dataset data (contiguous host memory) */
  int xdtype, image;         /* image: 4-D uint8/float32 through tf */
  int64_t xrow, yrow;        /* bytes per row (raw path) */
  int64_t C, H, W, OH, OW;   /* image geometry */
  ln_transform tf;
  /* tf.ops: each op's input height and width, and the floats one sample's
   * two ping-pong buffers need (0: the fixed path, no scratch) */
  int64_t op_h[LN_TF_MAX_OPS], op_w[LN_TF_MAX_OPS], scratch;
  int64_t op_c[LN_TF_MAX_OPS], out_h[LN_TF_MAX_OPS], out_w[LN_TF_MAX_OPS];   /* input channels, output size */
  int64_t OC, half;          /* output channels (GRAY may make 1); one buffer's floats
                                (scratch also holds a blur's kernels after the two) */
} ln_gather_plan;

int ln_gather_plan_make(const char *fn, ln_gather_plan *p, const ln_tensor *x, const ln_tensor *y,
                        const ln_transform *tf, int64_t b, int *ndim, int64_t *shape, int *dtype,
                        int *yndim, int64_t *yshape);
/* The image part alone: a (C, H, W) image of p->xdtype through tf (p zeroed
 * or from an earlier plan_make; p->x is the caller's to set). */
int ln_gather_plan_image(const char *fn, ln_gather_plan *p, int64_t C, int64_t H, int64_t W,
                         const ln_transform *tf);
/* scratch: p->scratch floats for the rows run on one thread (the loader's
 * per-slot buffer), or NULL: each run allocates its own, and a failed
 * allocation returns -1 with the error set (else 0). */
int ln_gather_run(const ln_gather_plan *p, char *out, char *out_y, const int64_t *idx,
                  const int64_t *keys, int64_t b, uint64_t seed, uint64_t epoch, int threaded,
                  float *scratch);

/* augment.c: the AutoAugment family's pixel ops on float images (n: all the
 * floats, or one channel's with C channels) */
void ln_aug_posterize(float *im, int64_t n, int bits);
void ln_aug_solarize(float *im, int64_t n, double threshold, int u8);
void ln_aug_invert(float *im, int64_t n);
void ln_aug_autocontrast(float *im, int64_t C, int64_t n);
void ln_aug_equalize(float *im, int64_t C, int64_t n);
int ln_aug_sharpness(const float *src, float *dst, int64_t C, int64_t h, int64_t w, float f);

/* image.c: decode a JPEG/PNG (data or the file at path) into a malloc'd
 * HWC uint8 buffer *px of *c channels; errors name fn and the file (name). */
int ln_image_decode_hwc(const char *fn, const char *name, const unsigned char *data, size_t n, int mode,
                        unsigned char **px, int *c, int *h, int *w);
int ln_image_file_hwc(const char *fn, const char *path, int mode, unsigned char **px, int *c, int *h, int *w);

/* files.c: the loader's files source, image files decoded and transformed
 * one by one (each at its own size) by the worker that makes the batch. */
typedef struct ln_files ln_files;
typedef struct {          /* one worker's buffers, grown as images need */
  uint8_t *chw; size_t chw_cap;
  float *scratch; int64_t scratch_cap;
} ln_files_buf;
ln_files *ln_files_new(const char *fn, int64_t n, const char *const *paths, const int64_t *labels, int mode,
                       const ln_transform *tf);
void ln_files_free(ln_files *f);
int64_t ln_files_count(const ln_files *f);
/* Samples rows[0..m) into *slot (float32 (cap_rows, C, H, W), replaced when
 * the batch's size differs) and their labels into y (or NULL); stops early
 * (an error) once *stop is set. -1 with the error set, naming the file. */
int ln_files_batch(const ln_files *f, ln_files_buf *wb, const int64_t *rows, int64_t m, int64_t cap_rows,
                   ln_tensor **slot, int64_t *y, uint64_t seed, uint64_t epoch, const int *stop);

#endif
