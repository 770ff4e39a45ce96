/* internal.h -- what the C files of lunet share and the API does not show:
 * storage layout, kernel views, the launch interface, error helpers. */
#ifndef LN_INTERNAL_H
#define LN_INTERNAL_H

#include "lunet.h"
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define LN_ALIGN 64
#define LN_MIN(a, b) ((a) < (b) ? (a) : (b))
#define LN_MAX(a, b) ((a) > (b) ? (a) : (b))

/* ---- errors -------------------------------------------------------------- */
/* ln_error("add: shapes %s and %s cannot broadcast", ...) sets the thread-local
 * message and returns -1, so `return ln_error(...)` reads naturally. */
int ln_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void *ln_error_null(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "{2,3}" into buf */
const char *ln_shape_str(char *buf, size_t n, int ndim, const int64_t *shape);
const char *ln_dtype_name(int dtype);

/* ---- files (file.c) --------------------------------------------------------- */
/* Opens path for reading only if it is a regular file (a FIFO, directory or
 * device node is refused at once, never read or waited on). Returns the
 * descriptor and the file's size in *size, or -1 (cannot open) or -2 (not a
 * regular file) with the reason in why ("No such file or directory", "not a
 * regular file (it is a FIFO (named pipe))"); the caller sets the error. */
int ln_open_regular(const char *path, uint64_t *size, char *why, size_t n);
/* "a directory", "a FIFO (named pipe)", "a character device", ... for st_mode m */
const char *ln_file_kind(unsigned m);

/* ---- storage --------------------------------------------------------------- */
struct ln_storage {
  void *data;
  size_t nbytes;        /* requested */
  size_t capacity;      /* size class actually held */
  int device;
  atomic_int refcount;
  ln_storage *next_free; /* allocator's free list of headers */
  uint64_t version;     /* in-place writes the Lua layer knows of: autograd's saved-tensor check */
  uint64_t unrecorded;  /* those of them no autograd history records (ln_storage_bump_unrecorded) */
};

ln_storage *ln_storage_new(int device, size_t nbytes);  /* NULL + error on OOM */
/* whether the device's compute stream has work queued or running now */
bool ln_device_busy(int id);
void ln_storage_retain(ln_storage *s);
void ln_storage_release(ln_storage *s);

/* ---- tensors --------------------------------------------------------------- */
ln_tensor *ln_tensor_header(void);                 /* zeroed, from a pool */
ln_tensor *ln_tensor_new_like_shape(int ndim, const int64_t *shape, int dtype,
                                    int device);     /* contiguous, uninit */
/* the same, a size error naming fn (the op whose output it is) */
ln_tensor *ln_tensor_new_named(const char *fn, int ndim, const int64_t *shape, int dtype, int device);
void ln_contiguous_strides(int ndim, const int64_t *shape, int64_t *stride);
int ln_check_tensor(const char *fn, const ln_tensor *t, const char *argname);
int ln_check_dim(const char *fn, const ln_tensor *t, int dim);
int64_t ln_shape_numel(int ndim, const int64_t *shape);   /* -1 on overflow */
/* Memory overlap of two tensors (ln_overlap) and the checks every in-place or
 * out= front end makes: its output must not overlap an input partly (exact
 * aliasing, x:add_(x), is fine), nor itself (an expanded view). */
enum { LN_OVERLAP_NO, LN_OVERLAP_FULL, LN_OVERLAP_PARTIAL };
int ln_overlap(const ln_tensor *a, const ln_tensor *b);
int ln_check_no_partial_overlap(const char *fn, const ln_tensor *out, const ln_tensor *in, const char *what);
int ln_check_no_internal_overlap(const char *fn, const ln_tensor *t);
static inline int ln_is_float(int dt) {
  return dt == LN_FLOAT32 || dt == LN_FLOAT64 || dt == LN_FLOAT16 || dt == LN_BFLOAT16;
}
int ln_promote(int a, int b);

/* ---- kernel views ---------------------------------------------------------- */
/* What a kernel sees of a tensor: resolved data pointer, dtype, shape, strides.
 * Copied by value into the queued task, so the kernel never touches the
 * (possibly freed) ln_tensor header. */
typedef struct ln_kview {
  char *data;
  int32_t dtype, ndim;
  int64_t shape[LN_MAX_DIMS];
  int64_t stride[LN_MAX_DIMS];
} ln_kview;

ln_kview ln_kview_of(const ln_tensor *t);
/* t's view with its dims other than dim first (in t's order) and dim last,
 * that last dim's size given (a kernel of rows along dim, e.g. sort's k of
 * them); a 0-d t is one row of one */
ln_kview ln_kview_dim_last(const ln_tensor *t, int dim, int64_t last);

/* ---- devices, streams, launch ---------------------------------------------- */
typedef int (*ln_task_fn)(void *args);

enum { LN_TASK_ARGS = 2048, LN_TASK_KEEP = 10 };

/* Run fn(args) on the device's stream: inline for the default single CPU
 * device, queued for virtual devices. args are copied (argsize bytes, at most
 * LN_TASK_ARGS). The storages of `keep` tensors (NULL entries skipped) are held
 * until fn has run. op names the op in a deferred error. */
int ln_launch(int device, const char *op, ln_task_fn fn, const void *args,
              size_t argsize, const ln_tensor *const *keep, int nkeep);

/* ln_launch with flags. LN_TASK_ALWAYS: run fn even when the device holds an
 * earlier error (later work is otherwise skipped), so a collective can abort
 * its peers instead of leaving them waiting; inside such a task
 * ln_stream_failed() says whether the device has failed, ln_stream_failure()
 * gives its message. */
enum { LN_TASK_ALWAYS = 1 };
int ln_launch_flags(int device, const char *op, ln_task_fn fn, const void *args,
                    size_t argsize, const ln_tensor *const *keep, int nkeep, int flags);
/* ln_launch_flags that also gives the task's position on the device's stream
 * (*seq; -1 when it ran inline), for ln_stream_wait_started. */
int ln_launch_seq(int device, const char *op, ln_task_fn fn, const void *args, size_t argsize,
                  const ln_tensor *const *keep, int nkeep, int flags, int64_t *seq);
/* Block until the device's stream has begun task seq (every task before it
 * done); returns at once for an inline device or seq < 0. */
void ln_stream_wait_started(int device, int64_t seq);
bool ln_stream_failed(void);
const char *ln_stream_failure(void);
/* The failure of the stream an LN_TASK_ALWAYS task runs on, as an id (0:
 * none). A task that fails because of another stream's failure (a collective
 * a failed rank aborted) calls ln_stream_fail_from(that id) before returning
 * its error: the two are then one failure, raised in Lua once. */
int64_t ln_stream_failure_root(void);
void ln_stream_fail_from(int64_t root);
/* The device's second (communication) stream, started on first use (not for
 * an inline device: ln_device_has_comm_stream says). ln_launch_comm enqueues
 * there; ln_comm_stream_wait_compute makes the comm stream wait for the work
 * queued so far on the compute stream (ln_stream_wait_comm, in lunet.h, the
 * other way round). */
int ln_device_has_comm_stream(int device);
int ln_launch_comm(int device, const char *op, ln_task_fn fn, const void *args,
                   size_t argsize, const ln_tensor *const *keep, int nkeep, int flags);
int ln_comm_stream_wait_compute(int device);
/* Events on the comm stream, for backends whose streams are host streams
 * (an error otherwise): ln_comm_event_record records its current point (an
 * ln_event with stream 1, which ln_event_wait/_synchronize/_query take);
 * ln_comm_event_wait makes it wait for ev. */
int ln_comm_event_record(int device, ln_event *ev);
int ln_comm_event_wait(int device, const ln_event *ev);
/* ln_copy_into that runs as a transfer (ln_transfer_, lunet.h): on dst's
 * device's comm stream; falls back to ln_copy_into where that cannot be. */
int ln_transfer_into(ln_tensor *dst, const ln_tensor *src, ln_event *done);

int ln_device_is_inline(int device);   /* no thread serves its stream: work runs in the caller */

/* Work in host memory (gathering a batch, a local collective's reduction)
 * split over the threads of the calling task, through the host (cpu)
 * backend's runtime entry parallel_for (backend.h); on the calling thread
 * alone without one. Layers above core call this, not the CPU backend's own
 * ln_parallel_for: only c/cpu/ includes c/cpu/ (stream.c). */
typedef void (*ln_range_fn)(void *ctx, int64_t begin, int64_t end);   /* one part [begin, end) */
void ln_host_parallel_for(int64_t n, int64_t grain, ln_range_fn fn, void *ctx);

/* ---- half types ------------------------------------------------------------- */
float ln_half_to_float(uint16_t h);
uint16_t ln_float_to_half(float f);
static inline float ln_bf16_to_float(uint16_t b) {
  uint32_t u = (uint32_t)b << 16; float f; memcpy(&f, &u, 4); return f;
}
/* round to nearest even; NaN stays NaN, made quiet. A select, not an early
 * return, so that loops over it vectorise (casts, compressed all-reduces). */
static inline uint16_t ln_float_to_bf16(float f) {
  uint32_t u; memcpy(&u, &f, 4);
  uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  uint32_t quiet_nan = (u >> 16) | 0x40u;
  return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

/* generic element read/write as double (slow paths, small tensors) */
double ln_load_as_double(const char *p, int dtype);
void ln_store_from_double(char *p, int dtype, double v);

#endif
