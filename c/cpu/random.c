/* random.c -- Philox 4x32-10 fills. Element i of a draw uses counter
 * (offset + i), so any split of the range across threads gives the same bits. */
#include "cpu.h"
#include <math.h>

static inline void philox(uint64_t ctr, uint64_t key, uint32_t out[4]) {
  uint32_t c0 = (uint32_t)ctr, c1 = (uint32_t)(ctr >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
  for (int r = 0; r < 10; r++) {
    uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
    uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
    c1 = (uint32_t)p1; c3 = (uint32_t)p0; c0 = n0; c2 = n2;
    k0 += 0x9E3779B9u; k1 += 0xBB67AE85u;
  }
  out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

typedef struct { const ln_random_args *a; int es; } rnd_ctx;

static void rnd_range(void *p, int64_t begin, int64_t end) {
  rnd_ctx *c = p;
  const ln_random_args *a = c->a;
  for (int64_t i = begin; i < end; i++) {
    uint32_t r[4];
    philox(a->offset + (uint64_t)i, a->seed, r);
    double u = (double)(((uint64_t)r[0] << 21) | (r[1] >> 11)) * 0x1.0p-53;   /* [0, 1) */
    double v;
    switch (a->dist) {
      case 0: v = a->p0 + (a->p1 - a->p0) * u; break;
      case 1: {
        double u1 = ((double)r[2] + 1.0) * 0x1.0p-32;   /* (0, 1] */
        v = a->p0 + a->p1 * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u);
        break;
      }
      case 2: {   /* (the front end checked that [lo, hi) fits the dtype exactly) */
        uint64_t x = ((uint64_t)r[2] << 32) | r[3];
        int64_t iv = (int64_t)((uint64_t)a->ilo + x % a->irange);
        if (a->out.dtype == LN_INT64) { ((int64_t *)a->out.data)[i] = iv; continue; }
        v = (double)iv;
        break;
      }
      default: v = u < a->p0; break;
    }
    if (a->out.dtype == LN_FLOAT32) {
      float f = (float)v;
      if (a->dist == 0 && f >= (float)a->p1 && a->p1 > a->p0) f = nextafterf((float)a->p1, -INFINITY);
      ((float *)a->out.data)[i] = f;
    } else {
      ln_store_from_double(a->out.data + i * c->es, a->out.dtype, v);
    }
  }
}

int ln_cpu_random(void *p) {
  ln_random_args *a = p;
  int64_t n = 1;
  for (int d = 0; d < a->out.ndim; d++) n *= a->out.shape[d];
  rnd_ctx c = {a, ln_dtype_size(a->out.dtype)};
  ln_parallel_for(n, 4096, rnd_range, &c);
  return 0;
}
