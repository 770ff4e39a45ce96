/* grid_taps.h -- grid_sample's per-point arithmetic, PyTorch 1.13's
 * (aten/src/ATen/native/GridSampler.h), shared by the CPU kernels
 * (c/cpu/grid.c) and the CUDA ones (c/cuda/grid.cu) so both sample alike.
 * Included once per element type with GT (float or double), GS_SFX (a name
 * suffix) and GS_FN (the function qualifiers) defined; plain C that nvcc
 * compiles as C++ too.
 *
 * A point's taps are the input positions it reads (1 nearest, 4 bilinear,
 * 8 trilinear, 16 bicubic): off (within one input plane), w the weight, and
 * dw[a] dw/dgrid[a] (the source coordinate's derivative folded in). A tap
 * outside the input (padding 'zeros') gets off -1 and weight 0: the callers
 * read 0 there, never element 0 (whose inf or NaN times 0 was NaN, where
 * torch gives 0). Arrays are strided by `bs`: tap k
 * of point j is at [k*bs + j], derivative a at dw[(a*K + k)*bs + j]. */
#define GS_CAT2(a, b) a##_##b
#define GS_CAT(a, b) GS_CAT2(a, b)
#define GS(name) GS_CAT(name, GS_SFX)

#ifndef GS_ONCE
#define GS_ONCE
enum { GS_BILINEAR = 0, GS_NEAREST = 1, GS_BICUBIC = 2 };
enum { GS_ZEROS = 0, GS_BORDER = 1, GS_REFLECTION = 2 };
#define GS_CUBIC_A (-0.75)
#endif

/* [-1, 1] to pixel coordinates; *m the derivative */
GS_FN GT GS(unnorm)(GT g, int64_t size, int align, GT *m) {
  if (align) { *m = (GT)(size - 1) / 2; return ((g + 1) / 2) * (GT)(size - 1); }
  *m = (GT)size / 2;
  return ((g + 1) * (GT)size - 1) / 2;
}
/* clamped to [0, size-1]; the borders count as outside for the gradient */
GS_FN GT GS(clip)(GT c, int64_t size, GT *m) {
  GT hi = (GT)(size - 1);
  if (c <= 0) { *m = 0; return 0; }
  if (c >= hi) { *m = 0; return hi; }
  *m = 1;
  return c;
}
/* reflected into [twice_lo/2, twice_hi/2] */
GS_FN GT GS(reflect)(GT c, GT twice_lo, GT twice_hi, GT *m) {
  if (twice_lo == twice_hi) { *m = 0; return 0; }
  GT lo = twice_lo / 2, span = (twice_hi - twice_lo) / 2, s = 1;
  c -= lo;
  if (c < 0) { s = -1; c = -c; }
  /* fmod(c, span) without the call where it is a subtraction: exact below
   * 2 span (Sterbenz), so the same values; the parity of the integral flips
   * by halving (exact), not fmod */
  GT extra = c < span ? c : c < 2 * span ? c - span : (GT)fmod(c, span), flips = (GT)floor(c / span);
  if (flips - 2 * (GT)floor(flips / 2) == 0) { *m = s; return extra + lo; }
  *m = -s;
  return span - extra + lo;
}
/* a coordinate padded by `padding` (border, reflection: clamped inside) */
GS_FN GT GS(pad)(GT c, int64_t size, int padding, int align, GT *m) {
  GT m1 = 1, m2 = 1;
  if (padding == GS_BORDER) c = GS(clip)(c, size, &m2);
  else if (padding == GS_REFLECTION) {
    c = align ? GS(reflect)(c, 0, (GT)(2 * (size - 1)), &m1) : GS(reflect)(c, -1, (GT)(2 * size - 1), &m1);
    c = GS(clip)(c, size, &m2);
  }
  *m = m1 * m2;
  return c;
}
GS_FN int GS(inside)(GT c, int64_t size) { return c >= 0 && c <= (GT)(size - 1); }

/* bicubic weights of the 4 taps at t in [0, 1) and their derivatives d/dt */
GS_FN void GS(cubic)(GT t, GT *w, GT *d) {
  const GT A = (GT)GS_CUBIC_A;
  GT u = t + 1, s = 1 - t, v = 2 - t;
  w[0] = ((A * u - 5 * A) * u + 8 * A) * u - 4 * A;
  w[1] = ((A + 2) * t - (A + 3)) * t * t + 1;
  w[2] = ((A + 2) * s - (A + 3)) * s * s + 1;
  w[3] = ((A * v - 5 * A) * v + 8 * A) * v - 4 * A;
  d[0] = (3 * A * u - 10 * A) * u + 8 * A;
  d[1] = (3 * (A + 2) * t - 2 * (A + 3)) * t;
  d[2] = -((3 * (A + 2) * s - 2 * (A + 3)) * s);
  d[3] = -((3 * A * v - 10 * A) * v + 8 * A);
}

/* The taps of point j with grid components g[0..sd-1] (x, y[, z]) over an
 * input of sizes size[0..sd-1] (W, H[, D]); dw NULL: no derivatives. */
GS_FN void GS(taps)(const GT *g, int sd, const int64_t *size, int mode, int padding, int align, int64_t *off,
                    GT *w, GT *dw, int64_t bs, int64_t j) {
  GT c[3], m[3];
  if (mode == GS_NEAREST) {
    int64_t o = 0, stride = 1;
    int ok = 1;
    for (int a = 0; a < sd; a++) {
      GT u = GS(unnorm)(g[a], size[a], align, &m[a]);
      /* (torch 1.13 rounds ties to even in 2-d, its vectorised kernel, and
       * away from zero in 3-d, std::round) */
      GT c = GS(pad)(u, size[a], padding, align, &m[a]);
      GT r = sd == 3 ? (GT)round(c) : (GT)nearbyint(c);
      ok = ok && GS(inside)(r, size[a]);
      if (ok) o += (int64_t)r * stride;
      stride *= size[a];
    }
    off[j] = ok ? o : -1;
    w[j] = ok ? (GT)1 : (GT)0;
    return;
  }
  if (mode == GS_BICUBIC) {   /* (sd 2: the taps' coordinates are padded one by one) */
    GT wc[2][4], dc[2][4];
    int64_t ix[2][4];
    int in[2][4];
    for (int a = 0; a < 2; a++) {
      GT u = GS(unnorm)(g[a], size[a], align, &m[a]), b = (GT)floor(u), pm;
      GS(cubic)(u - b, wc[a], dc[a]);
      for (int i = 0; i < 4; i++) {
        GT p = GS(pad)(b - 1 + (GT)i, size[a], padding, align, &pm);
        in[a][i] = GS(inside)(p, size[a]);
        ix[a][i] = in[a][i] ? (int64_t)p : 0;
      }
    }
    for (int jy = 0; jy < 4; jy++)
      for (int jx = 0; jx < 4; jx++) {
        int k = jy * 4 + jx, ok = in[0][jx] && in[1][jy];
        off[k * bs + j] = ok ? ix[1][jy] * size[0] + ix[0][jx] : -1;
        w[k * bs + j] = ok ? wc[0][jx] * wc[1][jy] : (GT)0;
        if (dw) {
          dw[k * bs + j] = ok ? dc[0][jx] * wc[1][jy] * m[0] : (GT)0;
          dw[(16 + k) * bs + j] = ok ? wc[0][jx] * dc[1][jy] * m[1] : (GT)0;
        }
      }
    return;
  }
  /* bilinear / trilinear: corner k's bit a picks base+1 along component a */
  GT t[3];
  int64_t b[3];
  int lo_in[3], hi_in[3];
  for (int a = 0; a < sd; a++) {
    GT u = GS(unnorm)(g[a], size[a], align, &m[a]), mp;
    c[a] = GS(pad)(u, size[a], padding, align, &mp);
    m[a] *= mp;
    GT f = (GT)floor(c[a]);
    t[a] = c[a] - f;
    lo_in[a] = GS(inside)(f, size[a]);
    hi_in[a] = GS(inside)(f + 1, size[a]);
    b[a] = lo_in[a] ? (int64_t)f : hi_in[a] ? -1 : 0;   /* (f = -1 when only base+1 is inside) */
  }
  int K = 1 << sd;
  for (int k = 0; k < K; k++) {
    int64_t o = 0, stride = 1;
    int ok = 1;
    GT wa[3] = {1, 1, 1};
    for (int a = 0; a < sd; a++) {
      int bit = (k >> a) & 1;
      ok = ok && (bit ? hi_in[a] : lo_in[a]);
      o += (b[a] + bit) * stride;
      stride *= size[a];
      wa[a] = bit ? t[a] : 1 - t[a];
    }
    GT wk = wa[0] * wa[1] * wa[2];
    off[k * bs + j] = ok ? o : -1;
    w[k * bs + j] = ok ? wk : (GT)0;
    if (dw)
      for (int a = 0; a < sd; a++) {
        GT d = ((k >> a) & 1) ? (GT)1 : (GT)-1;
        for (int e = 0; e < sd; e++)
          if (e != a) d *= wa[e];
        dw[(a * K + k) * bs + j] = ok ? d * m[a] : (GT)0;
      }
  }
}

#undef GS
#undef GS_CAT
#undef GS_CAT2
