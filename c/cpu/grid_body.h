/* grid_body.h -- the CPU grid_sample kernels for one element type, included
 * by grid.c with T and SFX defined (taps_SFX from c/core/grid_taps.h). */
#define GK_CAT2(a, b) a##_##b
#define GK_CAT(a, b) GK_CAT2(a, b)
#define GK(name) GK_CAT(name, SFX)

/* (the float functions for float: no double round trip in the vector loop) */
#define GK_FL(FN, x) (sizeof(T) == 4 ? (T)FN##f((float)(x)) : (T)FN((double)(x)))

/* nearest's source index along one component (see GK(fill_nn)): every arm
 * computed, then selected (trapping math keeps a conditional operation from
 * being if-converted); *ok cleared outside, *far set to 2 beyond two spans */
static inline __attribute__((always_inline)) int32_t GK(nn_at)(T x, T sz, T hi, T lo, T span, int deg, int PAD,
                                                                int AL, int SD, int32_t *ok, T *far) {
  T c = AL ? ((x + 1) / 2) * hi : ((x + 1) * sz - 1) / 2;
  if (PAD == GS_REFLECTION) {
    T d = c - lo, nd = -d;
    d = d < 0 ? nd : d;
    T dm = d - span, q = d / span;
    *far = q >= (T)1.99 ? (T)2 : *far;
    T extra = d < span ? d : dm, flips = GK_FL(floor, q), half = GK_FL(floor, flips / 2);
    T par = flips - 2 * half, e0 = extra + lo, e1 = span - extra + lo;
    c = par == 0 ? e0 : e1;
    c = deg ? (T)0 : c;
  }
  if (PAD != GS_ZEROS) { c = c <= 0 ? (T)0 : c; c = c >= hi ? hi : c; }
  T r = GK_FL(nearbyint, c);
  if (SD == 3) {   /* (3-d rounds ties away from zero, see grid_taps.h: round(), from the tie's sign) */
    T h = c - r, up = r + 1, down = r - 1;   /* (exact) */
    r = (h == (T)0.5) & (c > 0) ? up : r;
    r = (h == (T)-0.5) & (c < 0) ? down : r;
  }
  int32_t in = (r >= 0) & (r <= hi);
  *ok &= in;
  return in ? (int32_t)r : 0;
}

/* nearest's taps of nb points (grid g), SD, PAD and AL constants: a loop
 * without branches or calls that vectorises (torch's vectorised nearest
 * computes its coordinates so too). Reflection's fmod is a subtraction
 * below 2 spans (exact, see grid_taps.h); a block with a point beyond
 * (flagged in w: an array, no reduction to stop the vectoriser) is redone
 * by the generic taps, so every value is theirs. */
static inline __attribute__((always_inline)) void GK(fill_nn)(const ln_grid_args *a, const T *g, int64_t nb, int SD,
                                                               int PAD, int AL, int64_t *off, T *w) {
  const int64_t *size = a->size;
  T sz[3] = {1, 1, 1}, hi[3] = {0, 0, 0}, lo[3] = {0, 0, 0}, span[3] = {1, 1, 1};
  int deg[3] = {0, 0, 0};   /* (reflection's degenerate span: size 1 aligned) */
  int32_t st[3] = {1, 1, 1};   /* (int32 offsets: a plane under 2^31, checked by the caller; they vectorise on AVX2) */
  for (int e = 0; e < SD; e++) {
    const T tlo = AL ? (T)0 : (T)-1, thi = AL ? (T)(2 * (size[e] - 1)) : (T)(2 * size[e] - 1);
    sz[e] = (T)size[e], hi[e] = (T)(size[e] - 1), lo[e] = tlo / 2, span[e] = (thi - tlo) / 2;
    deg[e] = tlo == thi, st[e] = e == 0 ? 1 : st[e - 1] * (int32_t)size[e - 1];
  }
  _Pragma("omp simd")
  for (int64_t j = 0; j < nb; j++) {
    int32_t ok = 1;
    T far = 0;
    int32_t o = GK(nn_at)(g[j * SD], sz[0], hi[0], lo[0], span[0], deg[0], PAD, AL, SD, &ok, &far);
    o += GK(nn_at)(g[j * SD + 1], sz[1], hi[1], lo[1], span[1], deg[1], PAD, AL, SD, &ok, &far) * st[1];
    if (SD == 3) o += GK(nn_at)(g[j * SD + 2], sz[2], hi[2], lo[2], span[2], deg[2], PAD, AL, SD, &ok, &far) * st[2];
    off[j] = ok ? (int64_t)o : -1;
    w[j] = far > 0 ? far : ok ? (T)1 : (T)0;
  }
  int redo = 0;
  if (PAD == GS_REFLECTION)
    for (int64_t j = 0; j < nb; j++) redo |= w[j] > 1;
  if (redo)
    for (int64_t j = 0; j < nb; j++) GK(taps)(g + j * SD, SD, size, GS_NEAREST, PAD, AL, off, w, NULL, GB, j);
}

/* the taps of points p0 .. p0+nb-1 of sample n (cloned: floor and
 * nearbyint are instructions from SSE4.1 on, calls before; no trapping
 * math: the values are the same, and selects may be if-converted) */
__attribute__((optimize("no-trapping-math"))) LN_SIMD static void GK(fill)(const ln_grid_args *a, int64_t n, int64_t p0, int64_t nb, int64_t *off, T *w, T *dw) {
  const T *g = (const T *)a->grid + (n * a->P + p0) * a->sd;
  const int pad = a->padding, al = a->align;
  const int64_t *size = a->size;
  /* (mode and sd constants in each loop: the taps' branches fold away) */
#define GK_FILL(MODE, SD) for (int64_t j = 0; j < nb; j++) GK(taps)(g + j * SD, SD, size, MODE, pad, al, off, w, dw, GB, j)
  switch (a->mode * 4 + a->sd) {
    case GS_BILINEAR * 4 + 2: GK_FILL(GS_BILINEAR, 2); break;
    case GS_BILINEAR * 4 + 3: GK_FILL(GS_BILINEAR, 3); break;
    case GS_NEAREST * 4 + 2:
    case GS_NEAREST * 4 + 3:
      if (dw || a->PI > INT32_MAX) { GK_FILL(GS_NEAREST, a->sd); break; }   /* (dw: nearest has none, never) */
#define GK_NN(SD, PAD) al ? GK(fill_nn)(a, g, nb, SD, PAD, 1, off, w) : GK(fill_nn)(a, g, nb, SD, PAD, 0, off, w)
      switch (pad * 4 + a->sd) {
        case GS_ZEROS * 4 + 2: GK_NN(2, GS_ZEROS); break;
        case GS_BORDER * 4 + 2: GK_NN(2, GS_BORDER); break;
        case GS_REFLECTION * 4 + 2: GK_NN(2, GS_REFLECTION); break;
        case GS_ZEROS * 4 + 3: GK_NN(3, GS_ZEROS); break;
        case GS_BORDER * 4 + 3: GK_NN(3, GS_BORDER); break;
        default: GK_NN(3, GS_REFLECTION); break;
      }
#undef GK_NN
      break;
    default: GK_FILL(GS_BICUBIC, 2); break;
  }
#undef GK_FILL
}

/* y[j] = sum_k w_k x[off_k] (K a constant after inlining) */
static inline __attribute__((always_inline)) void GK(combine)(int K, int64_t nb, const int64_t *off, const T *w,
                                                               const T *restrict x, T *restrict y) {
  for (int64_t j = 0; j < nb; j++) {
    T acc = 0;
    for (int k = 0; k < K; k++) {
      int64_t o = off[k * GB + j];
      acc += w[k * GB + j] * (o >= 0 ? x[o] : (T)0);
    }
    y[j] = acc;
  }
}

/* the block of nb points at p0 of sample n, every channel */
LN_SIMD static void GK(fwd_block)(const ln_grid_args *a, int K, int64_t n, int64_t p0, int64_t nb) {
    int64_t off[16 * GB];
    T w[16 * GB];
    GK(fill)(a, n, p0, nb, off, w, NULL);
    for (int64_t c = 0; c < a->C; c++) {
      const T *x = (const T *)a->in + (n * a->C + c) * a->PI;
      T *y = (T *)a->out + (n * a->C + c) * a->P + p0;
      switch (K) {
        case 1:   /* (nearest: the value itself, as torch copies it: -0 stays -0) */
          for (int64_t j = 0; j < nb; j++) y[j] = off[j] >= 0 ? x[off[j]] : (T)0;
          break;
        case 4: GK(combine)(4, nb, off, w, x, y); break;
        case 8: GK(combine)(8, nb, off, w, x, y); break;
        default: GK(combine)(16, nb, off, w, x, y); break;
      }
    }
}

static void GK(fwd)(const ln_grid_args *a, int nt) {
  const int64_t nblk = (a->P + GB - 1) / GB, items = a->N * nblk;
  const int K = taps_of(a);
  _Pragma("omp parallel for num_threads(nt) schedule(static) if (nt > 1)")
  for (int64_t it = 0; it < items; it++) {
    int64_t n = it / nblk, p0 = (it % nblk) * GB;
    GK(fwd_block)(a, K, n, p0, LN_MIN(GB, a->P - p0));
  }
}

/* The backward of sample n's channels [c0, c1) over points [pb, pe): din's
 * planes of those channels get their scatter (zeroed first when zero), and
 * dg (points pb.., sd per point) these channels' part of the grid gradient. */
static inline __attribute__((always_inline)) void GK(bwd_part)(const ln_grid_args *a, int K, int SD, int64_t n,
                                                                int64_t c0, int64_t c1, int64_t pb, int64_t pe, T *dg,
                                                                int zero) {
  int64_t off[16 * GB];
  T w[16 * GB], dw[32 * GB], acc[3 * GB];
  T *dwp = dg ? dw : NULL;
  if (a->din && zero) memset((T *)a->din + (n * a->C + c0) * a->PI, 0, (size_t)((c1 - c0) * a->PI) * sizeof(T));
  for (int64_t p0 = pb; p0 < pe; p0 += GB) {
    int64_t nb = LN_MIN(GB, pe - p0);
    GK(fill)(a, n, p0, nb, off, w, dwp);
    if (dg) memset(acc, 0, sizeof acc);
    for (int64_t c = c0; c < c1; c++) {
      const T *restrict gy = (const T *)a->dout + (n * a->C + c) * a->P + p0;
      const T *restrict x = (const T *)a->in + (n * a->C + c) * a->PI;
      T *restrict dx = a->din ? (T *)a->din + (n * a->C + c) * a->PI : NULL;
      for (int64_t j = 0; j < nb; j++) {   /* (each tap's value read once for every component) */
        T gj = gy[j], s[3] = {0, 0, 0};
        for (int k = 0; k < K; k++) {
          int64_t o = off[k * GB + j];
          if (o < 0) continue;   /* (outside: no value, no gradient) */
          if (dx) dx[o] += w[k * GB + j] * gj;
          if (dg) {
            T v = x[o];
            for (int e = 0; e < SD; e++) s[e] += dw[(e * K + k) * GB + j] * v;
          }
        }
        if (dg)
          for (int e = 0; e < SD; e++) acc[e * GB + j] += gj * s[e];
      }
    }
    if (dg)
      for (int64_t j = 0; j < nb; j++)
        for (int e = 0; e < SD; e++) dg[(p0 - pb + j) * SD + e] = acc[e * GB + j];
  }
}
LN_SIMD static void GK(bwd_k)(const ln_grid_args *a, int K, int64_t n, int64_t c0, int64_t c1, int64_t pb, int64_t pe,
                      T *dg, int zero) {
  switch (K) {   /* (K constant in each copy) */
    case 1: GK(bwd_part)(a, 1, 1, n, c0, c1, pb, pe, NULL, zero); break;   /* (nearest: no grid gradient) */
    case 4: GK(bwd_part)(a, 4, 2, n, c0, c1, pb, pe, dg, zero); break;
    case 8: GK(bwd_part)(a, 8, 3, n, c0, c1, pb, pe, dg, zero); break;
    default: GK(bwd_part)(a, 16, 2, n, c0, c1, pb, pe, dg, zero); break;
  }
}

/* The input gradient of nearest with few planes (a batch of one): the taps
 * of a sample's points first (blocks split among the threads), then each
 * thread adds into its own band of every input plane, visiting the points
 * in order, so every element gets the sums one thread gives (in the same
 * order: the same bits). Returns -1 without memory for the taps. */
static int GK(bwd_nn_bands)(const ln_grid_args *a, int nt) {
  const int64_t P = a->P, PI = a->PI, nblk = (P + GB - 1) / GB;
  int64_t *off = malloc((size_t)(P > 0 ? P : 1) * sizeof(int64_t));
  if (!off) return -1;
  for (int64_t n = 0; n < a->N; n++) {
    _Pragma("omp parallel num_threads(nt)")
    {
      T w[GB];
      _Pragma("omp for schedule(static)")
      for (int64_t b = 0; b < nblk; b++) GK(fill)(a, n, b * GB, LN_MIN(GB, P - b * GB), off + b * GB, w, NULL);
      const int tid = omp_get_thread_num(), nth = omp_get_num_threads();
      const int64_t b0 = PI * tid / nth, b1 = PI * (tid + 1) / nth;
      for (int64_t c = 0; c < a->C; c++) {
        T *restrict dx = (T *)a->din + (n * a->C + c) * PI;
        const T *restrict gy = (const T *)a->dout + (n * a->C + c) * P;
        memset(dx + b0, 0, (size_t)(b1 - b0) * sizeof(T));
        for (int64_t j = 0; j < P; j++) {
          const int64_t o = off[j];
          if (o >= b0 && o < b1) dx[o] += gy[j];   /* (1 * gy: the weight's product, exact) */
        }
      }
    }
  }
  free(off);
  return 0;
}

static int GK(bwd)(const ln_grid_args *a, int nt) {
  const int K = taps_of(a), sd = a->sd;
  T *dgrid = (T *)a->dgrid;
  if (a->N == 0) return 0;
  if (dgrid && a->mode == GS_NEAREST) {   /* (no gradient through rounding) */
    memset(dgrid, 0, (size_t)(a->N * a->P * sd) * sizeof(T));
    dgrid = NULL;
  }
  if (!a->din) {   /* grid gradient only: any split of the points is race-free */
    const int64_t nblk = (a->P + GB - 1) / GB, items = a->N * nblk;
    _Pragma("omp parallel for num_threads(nt) schedule(static) if (nt > 1)")
    for (int64_t it = 0; it < items; it++) {
      int64_t n = it / nblk, p0 = (it % nblk) * GB, pe = LN_MIN(p0 + GB, a->P);
      GK(bwd_k)(a, K, n, 0, a->C, p0, pe, dgrid ? dgrid + (n * a->P + p0) * sd : NULL, 1);
    }
    return 0;
  }
  const int64_t planes = a->N * a->C;
  if (a->mode == GS_NEAREST && nt > 1 && (planes < nt || (planes < 4 * nt && planes % nt != 0)) &&
      GK(bwd_nn_bands)(a, nt) == 0)
    return 0;
  /* the input gradient scatters within its own planes: work items are
   * (sample, channel chunk), so no two threads add into one plane; with
   * several chunks each keeps its part of the grid gradient, summed after */
  int64_t nch = a->N >= nt ? 1 : LN_MIN(a->C, (nt + a->N - 1) / a->N);
  if (nch < 1) nch = 1;
  T *part = NULL;
  const int64_t ng = a->N * a->P * sd;
  if (dgrid && nch > 1) {
    part = malloc((size_t)(nch * ng) * sizeof(T));
    if (!part) return ln_error("grid_sample_backward: out of memory for %lld partial grid gradients", (long long)nch);
  }
  const int64_t items = a->N * nch;
  _Pragma("omp parallel for num_threads(nt) schedule(static) if (nt > 1)")
  for (int64_t it = 0; it < items; it++) {
    int64_t n = it / nch, ch = it % nch;
    int64_t c0 = a->C * ch / nch, c1 = a->C * (ch + 1) / nch;
    T *dg = !dgrid ? NULL : part ? part + ch * ng + n * a->P * sd : dgrid + n * a->P * sd;
    GK(bwd_k)(a, K, n, c0, c1, 0, a->P, dg, 1);
  }
  if (part) {
    _Pragma("omp parallel for num_threads(nt) schedule(static) if (nt > 1)")
    for (int64_t i = 0; i < ng; i++) {
      T s = 0;
      for (int64_t ch = 0; ch < nch; ch++) s += part[ch * ng + i];
      dgrid[i] = s;
    }
    free(part);
  }
  return 0;
}

#undef GK
#undef GK_CAT
#undef GK_CAT2
