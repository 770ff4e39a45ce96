/* rng.c -- the default random generator: a seed and a counter offset.
 * Each draw reserves its counters (ceil(numel / k), k elements per counter:
 * c/core/philox.h) on the calling thread, so the numbers a tensor gets depend
 * only on the seed and the order of draws, never on the number of threads or
 * devices (Philox 4x32-10, Salmon et al. 2011). */
#include "backend.h"
#include "philox.h"
#include <math.h>
#include <pthread.h>

static uint64_t rng_seed = 0x5eed, rng_offset = 0;
static pthread_mutex_t rng_lock = PTHREAD_MUTEX_INITIALIZER;

void ln_manual_seed(uint64_t seed) {
  pthread_mutex_lock(&rng_lock);
  rng_seed = seed; rng_offset = 0;
  pthread_mutex_unlock(&rng_lock);
}

uint64_t ln_rng_get_state(uint64_t *offset) {
  pthread_mutex_lock(&rng_lock);
  uint64_t s = rng_seed;
  if (offset) *offset = rng_offset;
  pthread_mutex_unlock(&rng_lock);
  return s;
}

void ln_rng_set_state(uint64_t seed, uint64_t offset) {
  pthread_mutex_lock(&rng_lock);
  rng_seed = seed; rng_offset = offset;
  pthread_mutex_unlock(&rng_lock);
}

static uint64_t reserve(uint64_t n) {
  pthread_mutex_lock(&rng_lock);
  uint64_t o = rng_offset;
  rng_offset += n;
  pthread_mutex_unlock(&rng_lock);
  return o;
}

/* the float dtypes' value in float: x rounded to dt */
static float round_to(int dt, float x) {
  if (dt == LN_FLOAT16) return ln_half_to_float(ln_float_to_half(x));
  if (dt == LN_BFLOAT16) return ln_bf16_to_float(ln_float_to_bf16(x));
  return x;
}

/* the number of dt next below x (a number of dt) */
static float below_in(int dt, float x) {
  if (dt != LN_FLOAT16 && dt != LN_BFLOAT16) return nextafterf(x, -INFINITY);
  uint16_t h = dt == LN_FLOAT16 ? ln_float_to_half(x) : ln_float_to_bf16(x);   /* (sign-magnitude) */
  h = (h & 0x7fff) == 0 ? 0x8001 : (h & 0x8000) ? (uint16_t)(h + 1) : (uint16_t)(h - 1);
  return dt == LN_FLOAT16 ? ln_half_to_float(h) : ln_bf16_to_float(h);
}

/* what the kernels need of (dist, dtype, p0, p1), computed once (philox.h) */
static ln_rng_params params_of(int dist, int dt, double p0, double p1) {
  ln_rng_params q;
  memset(&q, 0, sizeof q);
  bool narrow = dt == LN_FLOAT32 || dt == LN_FLOAT16 || dt == LN_BFLOAT16;
  q.per_counter = dist == LN_RNG_BERNOULLI || (narrow && dist != LN_RNG_RANDINT) ? 4 : 2;
  if (dist == LN_RNG_UNIFORM) {
    int bits = dt == LN_FLOAT16 ? 11 : dt == LN_BFLOAT16 ? 8 : 24;   /* (the dtype's precision, as torch) */
    q.shift = 32 - bits;
    q.scale = ldexpf(1.0f, -bits);
    q.lo = (float)p0; q.range = (float)(p1 - p0);
    /* a value rounding to hi in the dtype (q.hi: the least float that does)
     * becomes the dtype's number next below hi */
    float hi = round_to(dt, (float)p1), below = below_in(dt, hi), thr = hi;
    if (dt != LN_FLOAT32) {
      thr = (float)(((double)below + hi) / 2);
      if (round_to(dt, thr) < hi) thr = nextafterf(thr, INFINITY);
    }
    q.hi = hi > round_to(dt, q.lo) ? thr : INFINITY;
    q.below = below;
    q.dlo = p0; q.drange = p1 - p0; q.dhi = p1 > p0 ? p1 : INFINITY; q.dbelow = nextafter(p1, -INFINITY);
  } else if (dist == LN_RNG_NORMAL) {
    q.mean = (float)p0; q.std = (float)p1; q.dmean = p0; q.dstd = p1;
  } else if (dist == LN_RNG_BERNOULLI) {
    q.thresh = p0 >= 1 ? (uint64_t)1 << 32 : (uint64_t)ceil(p0 * 4294967296.0);   /* word < p 2^32 */
  }
  return q;
}

static int draw(const char *fn, ln_tensor *t, int dist, double p0, double p1, int64_t ilo, uint64_t irange) {
  if (ln_check_tensor(fn, t, "tensor") != 0) return -1;
  int64_t n = ln_numel(t);
  if (n == 0) return 0;
  if (ln_check_no_internal_overlap(fn, t) != 0) return -1;
  bool direct = ln_is_contiguous(t);
  ln_tensor *target = t;
  if (!direct && !(target = ln_tensor_new_like_shape(t->ndim, t->shape, t->dtype_id, t->device_id))) return -1;
  uint64_t seed = ln_rng_get_state(NULL);
  ln_rng_params q = params_of(dist, t->dtype_id, p0, p1);
  uint64_t counters = ((uint64_t)n + (uint64_t)q.per_counter - 1) / (uint64_t)q.per_counter;
  ln_random_args args = {seed, reserve(counters), dist, p0, p1, ilo, irange, q, ln_kview_of(target)};
  const ln_tensor *keep[1] = {target};
  int rc = ln_launch(t->device_id, fn, ln_backend_of(t->device_id)->random, &args, sizeof args, keep, 1);
  if (!direct) {
    if (rc == 0) rc = ln_copy_into(t, target, false);
    ln_tensor_free(target);
  }
  return rc;
}

int ln_uniform_(ln_tensor *t, double lo, double hi) {
  if (ln_check_tensor("rand", t, "tensor") != 0) return -1;
  if (!ln_is_float(t->dtype_id)) return ln_error("rand: needs a float tensor, got %s", ln_dtype_name(t->dtype_id));
  /* (an initializer's bounds for a zero-element weight are inf: nothing to draw) */
  if (ln_numel(t) == 0) return 0;
  if (!isfinite(lo) || !isfinite(hi) || !isfinite(hi - lo))
    return ln_error("rand: bounds must be finite numbers (and hi - lo too), got [%g, %g)", lo, hi);
  if (!(lo <= hi)) return ln_error("rand: low %g must not exceed high %g", lo, hi);
  int dt = t->dtype_id;   /* (the narrow dtypes' draws compute in float) */
  if (dt != LN_FLOAT64 && (!isfinite(round_to(dt, (float)lo)) || !isfinite(round_to(dt, (float)hi)) ||
                           !isfinite((float)(hi - lo))))
    return ln_error("rand: bounds [%g, %g) do not fit %s (nor may hi - lo exceed float32's largest)", lo, hi,
                    ln_dtype_name(dt));
  return draw("rand", t, LN_RNG_UNIFORM, lo, hi, 0, 0);
}

int ln_normal_(ln_tensor *t, double mean, double std) {
  if (ln_check_tensor("randn", t, "tensor") != 0) return -1;
  if (!ln_is_float(t->dtype_id)) return ln_error("randn: needs a float tensor, got %s", ln_dtype_name(t->dtype_id));
  if (ln_numel(t) == 0) return 0;
  if (!(std >= 0) || !isfinite(std)) return ln_error("randn: std must be a finite number >= 0, got %g", std);
  if (!isfinite(mean)) return ln_error("randn: mean must be a finite number, got %g", mean);
  return draw("randn", t, LN_RNG_NORMAL, mean, std, 0, 0);
}

/* The integers a dtype holds exactly: [*lo, *hi]. */
static void exact_range(int dt, int64_t *lo, int64_t *hi) {
  switch (dt) {
    case LN_INT32: *lo = INT32_MIN; *hi = INT32_MAX; break;
    case LN_UINT8: *lo = 0; *hi = 255; break;
    case LN_BOOL: *lo = 0; *hi = 1; break;
    case LN_FLOAT32: *hi = (int64_t)1 << 24; *lo = -*hi; break;
    case LN_FLOAT64: *hi = (int64_t)1 << 53; *lo = -*hi; break;
    case LN_FLOAT16: *hi = (int64_t)1 << 11; *lo = -*hi; break;
    case LN_BFLOAT16: *hi = (int64_t)1 << 8; *lo = -*hi; break;
    default: *lo = INT64_MIN; *hi = INT64_MAX; break;
  }
}

/* The range is hi - lo computed in uint64 (it may exceed INT64_MAX: the
 * whole int64 range but a few is fine); the dtype must hold lo and hi - 1. */
int ln_randint_(ln_tensor *t, int64_t lo, int64_t hi) {
  if (ln_check_tensor("randint", t, "tensor") != 0) return -1;
  if (hi <= lo) return ln_error("randint: empty range [%lld, %lld): low must be below high", (long long)lo, (long long)hi);
  int64_t dlo, dhi;
  exact_range(t->dtype_id, &dlo, &dhi);
  if (lo < dlo || hi - 1 > dhi)
    return ln_error("randint: range [%lld, %lld) does not fit %s (integers %lld..%lld)", (long long)lo,
                    (long long)hi, ln_dtype_name(t->dtype_id), (long long)dlo, (long long)dhi);
  return draw("randint", t, LN_RNG_RANDINT, 0, 0, lo, (uint64_t)hi - (uint64_t)lo);
}

int ln_bernoulli_(ln_tensor *t, double p) {
  if (ln_check_tensor("bernoulli", t, "tensor") != 0) return -1;
  if (!(p >= 0 && p <= 1)) return ln_error("bernoulli: p must be in [0, 1], got %g", p);
  return draw("bernoulli", t, LN_RNG_BERNOULLI, p, 0, 0, 0);
}
