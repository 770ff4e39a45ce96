/* rng.c -- the default random generator: a seed and a counter offset.
 * Each draw reserves numel counters on the calling thread, so the numbers a
 * tensor gets depend only on the seed and the order of draws, never on the
 * number of threads or devices (Philox 4x32-10, Salmon et al. 2011). */
#include "backend.h"
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

enum { DIST_UNIFORM, DIST_NORMAL, DIST_RANDINT, DIST_BERNOULLI };

static int draw(const char *fn, ln_tensor *t, int dist, double p0, double p1) {
  if (ln_check_tensor(fn, t, "tensor") != 0) return -1;
  int64_t n = ln_numel(t);
  if (n == 0) return 0;
  bool direct = ln_is_contiguous(t);
  ln_tensor *target = t;
  if (!direct && !(target = ln_tensor_new_like_shape(t->ndim, t->shape, t->dtype_id, t->device_id))) return -1;
  uint64_t seed = ln_rng_get_state(NULL);
  ln_random_args args = {seed, reserve((uint64_t)n), dist, p0, p1, ln_kview_of(target)};
  const ln_tensor *keep[1] = {target};
  int rc = ln_launch(t->device_id, fn, ln_backend_of(t->device_id)->random, &args, sizeof args, keep, 1);
  if (!direct) {
    if (rc == 0) rc = ln_copy_(t, target);
    ln_tensor_free(target);
  }
  return rc;
}

int ln_uniform_(ln_tensor *t, double lo, double hi) {
  if (t && !ln_is_float(t->dtype_id)) return ln_error("rand: needs a float tensor, got %s", ln_dtype_name(t->dtype_id));
  if (!(lo <= hi)) return ln_error("rand: low %g must not exceed high %g", lo, hi);
  return draw("rand", t, DIST_UNIFORM, lo, hi);
}

int ln_normal_(ln_tensor *t, double mean, double std) {
  if (t && !ln_is_float(t->dtype_id)) return ln_error("randn: needs a float tensor, got %s", ln_dtype_name(t->dtype_id));
  if (!(std >= 0)) return ln_error("randn: std must be >= 0, got %g", std);
  return draw("randn", t, DIST_NORMAL, mean, std);
}

int ln_randint_(ln_tensor *t, int64_t lo, int64_t hi) {
  if (hi <= lo) return ln_error("randint: empty range [%lld, %lld)", (long long)lo, (long long)hi);
  return draw("randint", t, DIST_RANDINT, (double)lo, (double)hi);
}

int ln_bernoulli_(ln_tensor *t, double p) {
  if (!(p >= 0 && p <= 1)) return ln_error("bernoulli: p must be in [0, 1], got %g", p);
  return draw("bernoulli", t, DIST_BERNOULLI, p, 0);
}
