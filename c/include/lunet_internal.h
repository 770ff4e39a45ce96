/* lunet_internal.h -- declarations for the specs and benches, not part of the
 * public API (lunet.h): test-support backends and their counters. The specs
 * load it through lua/lunet/cdef_internal.lua, generated from this file as
 * cdef.lua is from lunet.h; it may change with any commit. */
#ifndef LUNET_INTERNAL_H
#define LUNET_INTERNAL_H

#ifndef LN_CDEF
#include "lunet.h"
#else
#define LN_API
#endif

/* The "rec" device type (c/cpu/rec_backend.c): n devices (1..4) rec:0..,
 * host memory, CPU kernels less conv2d and float64 binary ops; threaded: each
 * device's stream has a worker thread (else work runs inline). Registered
 * once per process (again with the same n: nothing happens). 0 ok. */
typedef struct ln_rec_stats {
  int64_t allocs, frees, alloc_bytes, free_bytes, launches;
  int64_t event_records, event_waits, event_queries, event_syncs, syncs;
  int64_t copies_to_host, copies_from_host;
} ln_rec_stats;
LN_API int ln_test_rec_register(int n, int threaded);
LN_API int ln_test_rec_stats(ln_rec_stats *out);
/* the op of the i-th launch on a rec device (0-based; "" once out of the log) */
LN_API const char *ln_test_rec_op(int64_t i);

#endif
