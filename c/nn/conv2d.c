/* conv2d.c -- front ends of 2-D convolution (cross-correlation, as torch's
 * conv2d): training and inference forwards, the fused conv + batch norm +
 * residual + relu forward and runs of fused BasicBlocks. Each checks shapes,
 * asks the device's nn planner (backend.h) for scratch and saved state,
 * then launches the device's kernels (CPU: c/cpu/conv2d.c). */
#include "nn.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- front ends -------------------------------------------------------------- */

/* Checks input and weight against the parameters, fills the geometry. */
static int conv_geometry_dims(const char *fn, const char *wname, int dt, int dev, const int64_t *ishape,
                              const ln_tensor *w, const ln_conv2d_params *p, ln_conv2d_args *a);

static int conv_geometry(const char *fn, const ln_tensor *in, const ln_tensor *w, const ln_conv2d_params *p,
                         ln_conv2d_args *a) {
  char s1[160];
  if (!p) return ln_error("%s: params is NULL", fn);
  if (nn_check(fn, "input", in, -1, -1, -1, NULL) != 0) return -1;
  if (in->ndim != 4)
    return ln_error("%s: input must be 4-d (N,C,H,W), got shape %s", fn, nn_shape(s1, sizeof s1, in));
  return conv_geometry_dims(fn, "weight", in->dtype_id, in->device_id, in->shape, w, p, a);
}

/* the checks of conv_geometry for an input of shape ishape (N,C,H,W) */
static int conv_geometry_dims(const char *fn, const char *wname, int dt, int dev, const int64_t *ishape,
                              const ln_tensor *w, const ln_conv2d_params *p, ln_conv2d_args *a) {
  char s1[160];
  if (!p) return ln_error("%s: params is NULL", fn);
  if (nn_check(fn, wname, w, dt, dev, -1, NULL) != 0) return -1;
  if (w->ndim != 4)
    return ln_error("%s: weight must be 4-d (out_channels, in_channels/groups, kH, kW), got shape %s", fn,
                    nn_shape(s1, sizeof s1, w));
  if (p->stride_h < 1 || p->stride_w < 1)
    return ln_error("%s: stride must be >= 1, got (%d,%d)", fn, p->stride_h, p->stride_w);
  if (p->pad_h < 0 || p->pad_w < 0)
    return ln_error("%s: padding must be >= 0, got (%d,%d)", fn, p->pad_h, p->pad_w);
  if (p->dil_h < 1 || p->dil_w < 1)
    return ln_error("%s: dilation must be >= 1, got (%d,%d)", fn, p->dil_h, p->dil_w);
  if (p->groups < 1) return ln_error("%s: groups must be >= 1, got %d", fn, p->groups);
  int64_t N = ishape[0], C = ishape[1], H = ishape[2], W = ishape[3];
  int64_t O = w->shape[0], KH = w->shape[2], KW = w->shape[3];
  if (C % p->groups != 0)
    return ln_error("%s: input channels %lld are not divisible by groups %d", fn, (long long)C, p->groups);
  if (O % p->groups != 0)
    return ln_error("%s: output channels %lld are not divisible by groups %d", fn, (long long)O, p->groups);
  if (w->shape[1] * p->groups != C)
    return ln_error("%s: input has %lld channels, weight %s expects %lld (in_channels/groups %lld x groups %d)",
                    fn, (long long)C, nn_shape(s1, sizeof s1, w), (long long)(w->shape[1] * p->groups),
                    (long long)w->shape[1], p->groups);
  if (KH < 1 || KW < 1 || O < 1 || C < 1)
    return ln_error("%s: weight %s has an empty dim", fn, nn_shape(s1, sizeof s1, w));
  int64_t eh = (int64_t)p->dil_h * (KH - 1) + 1, ew = (int64_t)p->dil_w * (KW - 1) + 1;
  int64_t hp = H + 2 * (int64_t)p->pad_h, wp = W + 2 * (int64_t)p->pad_w;
  if (hp < eh || wp < ew)
    return ln_error("%s: padded input %lldx%lld is smaller than the (dilated) kernel %lldx%lld", fn,
                    (long long)hp, (long long)wp, (long long)eh, (long long)ew);
  memset(a, 0, sizeof *a);
  a->dtype = dt;
  a->N = N; a->C = C; a->H = H; a->W = W; a->O = O; a->KH = KH; a->KW = KW;
  a->OH = (hp - eh) / p->stride_h + 1;
  a->OW = (wp - ew) / p->stride_w + 1;
  a->p = *p;
  return 0;
}

/* The device's nn planner (backend.h) sizes scratch, tiles and saved state;
 * a backend without one gets no saved state and dense activations, and the
 * scratch its runtime's workspace_size asks for kernel slot k with the
 * argument block a (the backward's: a.din/a.dw say which gradients), or none. */
static size_t plan_conv(int dev, int k, ln_conv2d_args *a, bool want_din, bool want_dw) {
  const ln_backend *b = ln_backend_of(dev);
  if (b->nn && b->nn->conv2d) return b->nn->conv2d(ln_device_index(dev), a, want_din, want_dw);
  return b->rt.workspace_size ? b->rt.workspace_size(k, a) : 0;
}

static int64_t saved_numel(int dev, const ln_conv2d_args *a) {
  const ln_nn_planner *p = ln_backend_of(dev)->nn;
  return p && p->conv2d_saved_numel ? p->conv2d_saved_numel(a) : 0;
}

static bool blocks_native(int dev, const ln_block_args *b, int nb, const ln_conv2d_args *stem) {
  const ln_nn_planner *p = ln_backend_of(dev)->nn;
  return p && p->blocks_native && p->blocks_native(b, nb, stem);
}

static size_t act_bytes(int dev, const int64_t sh[4], int dt) {
  const ln_nn_planner *p = ln_backend_of(dev)->nn;
  size_t dense = (size_t)(sh[0] * sh[1] * sh[2] * sh[3] * (dt == LN_FLOAT64 ? 8 : 4));
  return p && p->activation_bytes ? LN_MAX(p->activation_bytes(sh, dt), dense) : dense;
}

static int check_saved(const char *fn, const ln_tensor *saved, const ln_conv2d_args *a, int dev) {
  int64_t n = saved_numel(dev, a);
  if (n == 0) return ln_error("%s: no saved input is used for this convolution (ln_conv2d_saved_numel is 0)", fn);
  int64_t shape[1] = {n};
  if (nn_check(fn, "saved", saved, LN_FLOAT32, dev, 1, shape) != 0) return -1;
  if (!ln_is_contiguous(saved)) return ln_error("%s: saved must be contiguous", fn);
  return 0;
}

static int conv_forward(const char *fn, ln_tensor *out, const ln_tensor *in, const ln_tensor *w,
                        const ln_tensor *b, const ln_conv2d_fuse *f, ln_tensor *saved,
                        const ln_conv2d_params *p) {
  ln_conv2d_args a;
  if (conv_geometry(fn, in, w, p, &a) != 0) return -1;
  int dt = in->dtype_id, dev = in->device_id;
  int64_t bshape[1] = {a.O}, oshape[4] = {a.N, a.O, a.OH, a.OW};
  if (b && nn_check(fn, "bias", b, dt, dev, 1, bshape) != 0) return -1;
  if (nn_check(fn, "out", out, dt, dev, 4, oshape) != 0) return -1;
  if (saved && check_saved(fn, saved, &a, dev) != 0) return -1;
  const bool bn = f && f->bn_mean;
  if (f) {
    if ((!f->bn_mean) != (!f->bn_var))
      return ln_error("%s: give both bn_mean and bn_var (the running statistics), or neither", fn);
    if (!bn && (f->bn_weight || f->bn_bias))
      return ln_error("%s: bn_weight/bn_bias need bn_mean and bn_var", fn);
    if ((f->bn_weight && nn_check(fn, "bn_weight", f->bn_weight, dt, dev, 1, bshape) != 0) ||
        (f->bn_bias && nn_check(fn, "bn_bias", f->bn_bias, dt, dev, 1, bshape) != 0) ||
        (bn && nn_check(fn, "bn_mean", f->bn_mean, dt, dev, 1, bshape) != 0) ||
        (bn && nn_check(fn, "bn_var", f->bn_var, dt, dev, 1, bshape) != 0) ||
        (f->residual && nn_check(fn, "residual", f->residual, dt, dev, 4, oshape) != 0))
      return -1;
    if (bn && !(f->bn_eps >= 0)) return ln_error("%s: bn_eps must be >= 0, got %g", fn, f->bn_eps);
  }
  nn_in xi = {0}, wi = {0}, bi = {0}, ri = {0}, gi = {0}, ei = {0}, mi = {0}, vi = {0};
  nn_out o = {0};
  nn_scratch s = {0};
  int rc = -1;
  if (nn_input(fn, "input", in, &xi) != 0 || nn_input(fn, "weight", w, &wi) != 0 ||
      nn_input(fn, "bias", b, &bi) != 0 || nn_output(fn, "out", out, &o) != 0)
    goto done;
  if (f && (nn_input(fn, "residual", f->residual, &ri) != 0 || nn_input(fn, "bn_weight", f->bn_weight, &gi) != 0 ||
            nn_input(fn, "bn_bias", f->bn_bias, &ei) != 0 || nn_input(fn, "bn_mean", f->bn_mean, &mi) != 0 ||
            nn_input(fn, "bn_var", f->bn_var, &vi) != 0))
    goto done;
  size_t bytes = plan_conv(dev, LN_K_conv2d_fwd, &a, false, false);
  const int64_t es = dt == LN_FLOAT64 ? 8 : 4, WN = a.O * w->shape[1] * a.KH * a.KW;
  if (bn) {   /* the folded weights and bias after the column slices */
    a.fold_off = (int64_t)((bytes + 63) & ~(size_t)63);
    bytes = (size_t)a.fold_off + (size_t)((WN + a.O) * es);
  }
  if (nn_scratch_new(fn, dev, bytes, &s) != 0) goto done;
  a.out = nn_ptr(o.t); a.in = nn_ptr(xi.t); a.w = nn_ptr(wi.t); a.b = nn_ptr(bi.t);
  a.scratch = s.data;
  if (bn) {   /* launch 1 of 2: fold (a task keeps at most LN_TASK_KEEP tensors) */
    a.bn_w = nn_ptr(gi.t); a.bn_b = nn_ptr(ei.t); a.bn_m = nn_ptr(mi.t); a.bn_v = nn_ptr(vi.t);
    a.bn_eps = f->bn_eps;
    a.fold_only = 1;
    const ln_tensor *keep[7] = {&s.hold, wi.t, bi.t, gi.t, ei.t, mi.t, vi.t};
    if ((rc = ln_launch(dev, fn, ln_backend_of(dev)->conv2d_fwd, &a, sizeof a, keep, 7)) != 0) goto done;
    a.fold_only = 0;
    a.bn_w = a.bn_b = a.bn_m = a.bn_v = NULL;
    a.w = s.data + a.fold_off;
    a.b = a.w + WN * es;
  }
  if (f) { a.res = nn_ptr(ri.t); a.relu = f->relu != 0; }
  a.saved = saved ? nn_ptr(saved) : NULL;
  const ln_tensor *keep[7] = {o.t, xi.t, &s.hold, bn ? NULL : wi.t, bn ? NULL : bi.t, ri.t, saved};
  rc = ln_launch(dev, fn, ln_backend_of(dev)->conv2d_fwd, &a, sizeof a, keep, 7);
done:
  rc = nn_out_finish(&o, rc);
  nn_scratch_free(&s);
  nn_in_free(&xi); nn_in_free(&wi); nn_in_free(&bi);
  nn_in_free(&ri); nn_in_free(&gi); nn_in_free(&ei); nn_in_free(&mi); nn_in_free(&vi);
  return rc;
}

int ln_conv2d_forward(ln_tensor *out, const ln_tensor *in, const ln_tensor *w, const ln_tensor *b,
                      const ln_conv2d_params *p) {
  return conv_forward("conv2d", out, in, w, b, NULL, NULL, p);
}

int64_t ln_conv2d_saved_numel(const ln_tensor *in, const ln_tensor *w, const ln_conv2d_params *p) {
  ln_conv2d_args a;
  if (!in || !w || !p || in->ndim != 4 || w->ndim != 4) return 0;
  if (conv_geometry("conv2d_saved_numel", in, w, p, &a) != 0) { ln_clear_error(); return 0; }
  return saved_numel(in->device_id, &a);
}

int ln_conv2d_forward_saving(ln_tensor *out, ln_tensor *saved, const ln_tensor *in, const ln_tensor *w,
                             const ln_tensor *b, const ln_conv2d_params *p) {
  return conv_forward("conv2d", out, in, w, b, NULL, saved, p);
}

int ln_conv2d_forward_fused(ln_tensor *out, const ln_tensor *in, const ln_tensor *w, const ln_tensor *b,
                            const ln_conv2d_fuse *f, const ln_conv2d_params *p) {
  return conv_forward("conv2d_fused", out, in, w, b, f, NULL, p);
}

static int conv_backward(ln_tensor *din, ln_tensor *dw, ln_tensor *db, const ln_tensor *dout,
                         const ln_tensor *in, const ln_tensor *w, const ln_tensor *saved,
                         const ln_conv2d_params *p) {
  const char *fn = "conv2d_backward";
  ln_conv2d_args a;
  if (conv_geometry(fn, in, w, p, &a) != 0) return -1;
  int dt = in->dtype_id, dev = in->device_id;
  if (saved && check_saved(fn, saved, &a, dev) != 0) return -1;
  int64_t oshape[4] = {a.N, a.O, a.OH, a.OW}, bshape[1] = {a.O};
  if (nn_check(fn, "grad_output", dout, dt, dev, 4, oshape) != 0) return -1;
  if (din && nn_check(fn, "grad_input", din, dt, dev, 4, in->shape) != 0) return -1;
  if (dw && nn_check(fn, "grad_weight", dw, dt, dev, 4, w->shape) != 0) return -1;
  if (db && nn_check(fn, "grad_bias", db, dt, dev, 1, bshape) != 0) return -1;
  if (!din && !dw && !db) return 0;
  nn_in xi, wi, gi;
  nn_out oi, ow, ob;
  nn_scratch s = {0};
  int rc = -1;
  xi.owned = wi.owned = gi.owned = NULL;
  oi.user = oi.t = ow.user = ow.t = ob.user = ob.t = NULL;
  if (nn_input(fn, "input", in, &xi) != 0 || nn_input(fn, "weight", w, &wi) != 0 ||
      nn_input(fn, "grad_output", dout, &gi) != 0 || nn_output(fn, "grad_input", din, &oi) != 0 ||
      nn_output(fn, "grad_weight", dw, &ow) != 0 || nn_output(fn, "grad_bias", db, &ob) != 0)
    goto done;
  a.in = nn_ptr(xi.t); a.w = nn_ptr(wi.t); a.dout = nn_ptr(gi.t);
  a.din = nn_ptr(oi.t); a.dw = nn_ptr(ow.t); a.db = nn_ptr(ob.t);
  size_t bytes = plan_conv(dev, LN_K_conv2d_bwd, &a, din != NULL, dw != NULL);
  if (nn_scratch_new(fn, dev, bytes, &s) != 0) goto done;
  a.scratch = s.data;
  a.saved = saved ? nn_ptr(saved) : NULL;
  const ln_tensor *keep[8] = {oi.t, ow.t, ob.t, xi.t, wi.t, gi.t, &s.hold, saved};
  rc = ln_launch(dev, fn, ln_backend_of(dev)->conv2d_bwd, &a, sizeof a, keep, 8);
done:
  rc = nn_out_finish(&oi, rc);
  rc = nn_out_finish(&ow, rc);
  rc = nn_out_finish(&ob, rc);
  nn_scratch_free(&s);
  nn_in_free(&xi); nn_in_free(&wi); nn_in_free(&gi);
  return rc;
}

int ln_conv2d_backward(ln_tensor *din, ln_tensor *dw, ln_tensor *db, const ln_tensor *dout,
                       const ln_tensor *in, const ln_tensor *w, const ln_conv2d_params *p) {
  return conv_backward(din, dw, db, dout, in, w, NULL, p);
}

int ln_conv2d_backward_saved(ln_tensor *din, ln_tensor *dw, ln_tensor *db, const ln_tensor *dout,
                             const ln_tensor *in, const ln_tensor *w, const ln_tensor *saved,
                             const ln_conv2d_params *p) {
  return conv_backward(din, dw, db, dout, in, w, saved, p);
}

/* ---- ln_basicblock_forward_fused -------------------------------------------------- */

static int check_bn(const char *fn, const ln_conv_bn *c, int dt, int dev, int64_t O) {
  int64_t shape[1] = {O};
  if (!c->bn_mean != !c->bn_var)
    return ln_error("%s: give both bn_mean and bn_var (the running statistics), or neither", fn);
  if (!c->bn_mean && (c->bn_weight || c->bn_bias))
    return ln_error("%s: bn_weight/bn_bias need bn_mean and bn_var", fn);
  if (c->bn_mean && !(c->bn_eps >= 0)) return ln_error("%s: bn_eps must be >= 0, got %g", fn, c->bn_eps);
  if ((c->bias && nn_check(fn, "bias", c->bias, dt, dev, 1, shape) != 0) ||
      (c->bn_weight && nn_check(fn, "bn_weight", c->bn_weight, dt, dev, 1, shape) != 0) ||
      (c->bn_bias && nn_check(fn, "bn_bias", c->bn_bias, dt, dev, 1, shape) != 0) ||
      (c->bn_mean && nn_check(fn, "bn_mean", c->bn_mean, dt, dev, 1, shape) != 0) ||
      (c->bn_mean && nn_check(fn, "bn_var", c->bn_var, dt, dev, 1, shape) != 0))
    return -1;
  return 0;
}

/* launches the fold of c (weights, bias, batch norm) into scratch + a->fold_off */
static int fold_launch(const char *fn, int dev, ln_conv2d_args *a, const ln_conv_bn *c, nn_scratch *s) {
  nn_in in[6] = {{0}};
  const ln_tensor *t[6] = {c->weight, c->bias, c->bn_weight, c->bn_bias, c->bn_mean, c->bn_var};
  int rc = -1;
  for (int i = 0; i < 6; i++)
    if (nn_input(fn, "conv/bn tensor", t[i], &in[i]) != 0) goto done;
  ln_conv2d_args f = *a;
  f.fold_only = 1;
  f.scratch = s->data;
  f.w = nn_ptr(in[0].t); f.b = nn_ptr(in[1].t);
  f.bn_w = nn_ptr(in[2].t); f.bn_b = nn_ptr(in[3].t); f.bn_m = nn_ptr(in[4].t); f.bn_v = nn_ptr(in[5].t);
  f.bn_eps = c->bn_eps;
  const ln_tensor *keep[7] = {&s->hold, in[0].t, in[1].t, in[2].t, in[3].t, in[4].t, in[5].t};
  rc = ln_launch(dev, fn, ln_backend_of(dev)->conv2d_fwd, &f, sizeof f, keep, 7);
done:
  for (int i = 0; i < 6; i++) nn_in_free(&in[i]);
  return rc;
}

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

/* nb blocks, block i = (cb[3i], cb[3i+1], cb[3i+2] or NULL): each block's
 * output feeds the next; intermediate outputs stay in the backend's own
 * layout when blocks_native, else NCHW in scratch. One fold launch per convolution,
 * then one launch per block, all holding one scratch allocation. */
static int blocks_forward(const char *fn, ln_tensor *out, const ln_tensor *in, const ln_conv_bn *stem,
                          const ln_conv_bn *const *cb, int nb) {
  enum { MAXB = 16 };
  ln_block_args b[MAXB];
  ln_conv2d_args sa;
  char s1[160];
  if (nb < 1 || nb > MAXB) return ln_error("%s: expected 1 to %d blocks, got %d", fn, MAXB, nb);
  if (nn_check(fn, "input", in, -1, -1, -1, NULL) != 0) return -1;
  if (in->ndim != 4)
    return ln_error("%s: input must be 4-d (N,C,H,W), got shape %s", fn, nn_shape(s1, sizeof s1, in));
  const int dt = in->dtype_id, dev = in->device_id;
  const int64_t es = dt == LN_FLOAT64 ? 8 : 4;
  int64_t xshape[MAXB + 1][4];
  memcpy(xshape[0], in->shape, sizeof xshape[0]);
  size_t bytes = 0;
  if (stem) {   /* conv + bn + relu before the blocks: xshape[0] is its output */
    if (conv_geometry_dims(fn, "stem.weight", dt, dev, in->shape, stem->weight, &stem->p, &sa) != 0) return -1;
    if (check_bn(fn, stem, dt, dev, sa.O) != 0) return -1;
    xshape[0][1] = sa.O; xshape[0][2] = sa.OH; xshape[0][3] = sa.OW;
    bytes = plan_conv(dev, LN_K_conv2d_fwd, &sa, false, false);
  }
  for (int i = 0; i < nb; i++) {
    const ln_conv_bn *c1 = cb[3 * i], *c2 = cb[3 * i + 1], *cs = cb[3 * i + 2];
    memset(&b[i], 0, sizeof b[i]);
    if (!c1 || !c2) return ln_error("%s: block %d: conv1 and conv2 are required", fn, i + 1);
    if (conv_geometry_dims(fn, "conv1.weight", dt, dev, xshape[i], c1->weight, &c1->p, &b[i].c[0]) != 0) return -1;
    int64_t hshape[4] = {b[i].c[0].N, b[i].c[0].O, b[i].c[0].OH, b[i].c[0].OW};
    if (conv_geometry_dims(fn, "conv2.weight", dt, dev, hshape, c2->weight, &c2->p, &b[i].c[1]) != 0) return -1;
    int64_t rshape[4] = {xshape[i][0], xshape[i][1], xshape[i][2], xshape[i][3]};
    b[i].has_sc = cs != NULL;
    if (cs) {
      if (conv_geometry_dims(fn, "shortcut.weight", dt, dev, xshape[i], cs->weight, &cs->p, &b[i].c[2]) != 0)
        return -1;
      rshape[1] = b[i].c[2].O; rshape[2] = b[i].c[2].OH; rshape[3] = b[i].c[2].OW;
    }
    int64_t *os = xshape[i + 1];
    os[0] = b[i].c[1].N; os[1] = b[i].c[1].O; os[2] = b[i].c[1].OH; os[3] = b[i].c[1].OW;
    if (rshape[1] != os[1] || rshape[2] != os[2] || rshape[3] != os[3])
      return ln_error("%s: block %d: conv2's output (%lld,%lld,%lld) does not match the shortcut's (%lld,%lld,%lld)",
                      fn, i + 1, (long long)os[1], (long long)os[2], (long long)os[3], (long long)rshape[1],
                      (long long)rshape[2], (long long)rshape[3]);
    for (int j = 0; j < 3; j++)
      if (cb[3 * i + j] && check_bn(fn, cb[3 * i + j], dt, dev, b[i].c[j].O) != 0) return -1;
    for (int j = 0; j < 3; j++)
      if (cb[3 * i + j]) bytes = LN_MAX(bytes, plan_conv(dev, LN_K_conv2d_fwd, &b[i].c[j], false, false));
  }
  if (nn_check(fn, "out", out, dt, dev, 4, xshape[nb]) != 0) return -1;
  const bool blk = blocks_native(dev, b, nb, stem ? &sa : NULL);
  /* scratch: column slices, folded weights, then per block xb, hb, rb and
   * (NCHW chains) the block's output */
#define ACT(sh) act_bytes(dev, (sh), dt)
  size_t off = bytes, xo[MAXB], ho[MAXB], ro[MAXB], oo[MAXB], so = 0;
  if (stem) {
    off = align64(off);
    sa.fold_off = (int64_t)off;
    off += (size_t)((sa.O * (sa.C / sa.p.groups) * sa.KH * sa.KW + sa.O) * es);
    so = off = align64(off);
    off += ACT(xshape[0]);
  }
  for (int i = 0; i < nb; i++)
    for (int j = 0; j < 3; j++) {
      if (!cb[3 * i + j]) continue;
      ln_conv2d_args *c = &b[i].c[j];
      off = align64(off);
      c->fold_off = (int64_t)off;
      off += (size_t)((c->O * (c->C / c->p.groups) * c->KH * c->KW + c->O) * es);
    }
  for (int i = 0; i < nb; i++) {
    int64_t hs[4] = {b[i].c[0].N, b[i].c[0].O, b[i].c[0].OH, b[i].c[0].OW};
    xo[i] = off = align64(off); off += ACT(xshape[i]);
    ho[i] = off = align64(off); off += ACT(hs);
    ro[i] = off = align64(off); if (b[i].has_sc) off += ACT(xshape[i + 1]);
    oo[i] = off = align64(off); if (!blk && i < nb - 1) off += ACT(xshape[i + 1]);
  }
#undef ACT
  nn_in xi = {0};
  nn_out o = {0};
  nn_scratch s = {0};
  int rc = -1;
  if (nn_input(fn, "input", in, &xi) != 0 || nn_output(fn, "out", out, &o) != 0) goto done;
  if (nn_scratch_new(fn, dev, off, &s) != 0) goto done;
  for (int i = 0; i < nb; i++)
    for (int j = 0; j < 3; j++) {
      ln_conv2d_args *c = &b[i].c[j];
      if (!cb[3 * i + j]) continue;
      if ((rc = fold_launch(fn, dev, c, cb[3 * i + j], &s)) != 0) goto done;
      c->scratch = s.data;
      c->w = s.data + c->fold_off;
      c->b = c->w + (c->O * (c->C / c->p.groups) * c->KH * c->KW) * es;
    }
  char *prev = nn_ptr(xi.t);
  if (stem) {
    if ((rc = fold_launch(fn, dev, &sa, stem, &s)) != 0) goto done;
    sa.scratch = s.data;
    sa.w = s.data + sa.fold_off;
    sa.b = sa.w + (sa.O * (sa.C / sa.p.groups) * sa.KH * sa.KW) * es;
    sa.in = prev; sa.out = s.data + so; sa.relu = 1; sa.raw = blk ? 2 : 0;   /* 2: the output in the native layout */
    const ln_tensor *keep[3] = {xi.t, &s.hold, NULL};
    if ((rc = ln_launch(dev, fn, ln_backend_of(dev)->conv2d_fwd, &sa, sizeof sa, keep, 3)) != 0) goto done;
    prev = sa.out;
  }
  for (int i = 0; i < nb; i++) {
    b[i].c[0].block = 1;
    b[i].in_blk = blk && (i > 0 || stem);
    b[i].out_blk = blk && i < nb - 1;
    b[i].in = prev;
    b[i].xb = b[i].in_blk ? prev : s.data + xo[i];
    b[i].hb = s.data + ho[i];
    b[i].rb = b[i].has_sc ? s.data + ro[i] : NULL;
    b[i].out = i == nb - 1 ? nn_ptr(o.t) : b[i].out_blk ? NULL : s.data + oo[i];
    /* a native-layout output stays where conv2 wrote it: rb, or xb (identity) */
    prev = b[i].out_blk ? (b[i].has_sc ? b[i].rb : b[i].xb) : b[i].out;
    const ln_tensor *keep[3] = {o.t, xi.t, &s.hold};
    if ((rc = ln_launch(dev, fn, ln_backend_of(dev)->conv2d_fwd, &b[i], sizeof b[i], keep, 3)) != 0) goto done;
  }
done:
  rc = nn_out_finish(&o, rc);
  nn_scratch_free(&s);
  nn_in_free(&xi);
  return rc;
}

int ln_basicblock_forward_fused(ln_tensor *out, const ln_tensor *in, const ln_conv_bn *conv1,
                                const ln_conv_bn *conv2, const ln_conv_bn *shortcut) {
  const ln_conv_bn *cb[3] = {conv1, conv2, shortcut};
  return blocks_forward("basicblock_fused", out, in, NULL, cb, 1);
}

int ln_basicblocks_forward_fused(ln_tensor *out, const ln_tensor *in, const ln_conv_bn *stem,
                                 const ln_conv_bn *convs, int nblocks) {
  enum { MAXB = 16 };
  const ln_conv_bn *cb[3 * MAXB];
  if (!convs) return ln_error("basicblocks_fused: convs is NULL");
  if (nblocks < 1 || nblocks > MAXB)
    return ln_error("basicblocks_fused: expected 1 to %d blocks, got %d", MAXB, nblocks);
  for (int i = 0; i < nblocks; i++) {
    cb[3 * i] = &convs[3 * i];
    cb[3 * i + 1] = &convs[3 * i + 1];
    cb[3 * i + 2] = convs[3 * i + 2].weight ? &convs[3 * i + 2] : NULL;
  }
  return blocks_forward("basicblocks_fused", out, in, stem, cb, nblocks);
}
