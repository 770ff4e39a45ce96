/* nn.h -- what the neural-network front ends (c/nn/: the
 * ln_*_forward/backward functions of lunet.h) share: input and output
 * preparation, checks and scratch memory (common.c). A front end checks its
 * arguments on the host, allocates outputs, fills an argument block
 * (core/nn_args.h) and makes one launch on the device's backend; it never
 * knows which backend runs it. */
#ifndef LN_NN_H
#define LN_NN_H
#include "../core/backend.h"

/* An input made contiguous: t itself when it already is, else a copy that
 * nn_in_free releases. */
typedef struct { const ln_tensor *t; ln_tensor *owned; } nn_in;
int nn_input(const char *fn, const char *name, const ln_tensor *t, nn_in *in);
void nn_in_free(nn_in *in);

/* An output the kernel writes densely: t itself when contiguous, else a
 * temporary copied into t by nn_out_finish (queued after the kernel). */
typedef struct { ln_tensor *user, *t; } nn_out;
int nn_output(const char *fn, const char *name, ln_tensor *t, nn_out *out);
int nn_out_finish(nn_out *out, int rc);   /* copies back on rc == 0, frees */

/* Checks: a float32/float64 tensor of dtype `dtype` (or any float when
 * dtype < 0) on `device`, with ndim dims and, where shape[i] >= 0, that size. */
int nn_check(const char *fn, const char *name, const ln_tensor *t, int dtype, int device,
             int ndim, const int64_t *shape);
/* "{2,3,4}" of a tensor's shape */
const char *nn_shape(char *buf, size_t n, const ln_tensor *t);
/* Scratch memory from the device's caching allocator, held by the launched
 * kernel (pass nn_scratch_keep's tensor in keep) and released after it. */
typedef struct { ln_tensor hold; char *data; } nn_scratch;
int nn_scratch_new(const char *fn, int device, size_t nbytes, nn_scratch *s);
void nn_scratch_free(nn_scratch *s);
/* Char pointer to a (contiguous) tensor's first element, NULL for NULL. */
static inline char *nn_ptr(const ln_tensor *t) { return t ? (char *)ln_data_ptr(t) : NULL; }

#endif
