/* conv_dnnl.c -- float32 conv2d forward, data gradient and weight (+bias)
 * gradient through oneDNN's C API (dnnl.h), used by conv2d.c's kernels where
 * it wins (see conv_auto_dnnl in conv2d.c); grouped and depthwise ones too
 * (weights given as goihw: the same memory as lunet's (O, C/G, KH, KW)).
 *
 * Tensors stay plain NCHW / OIHW in and out. Each primitive is created with
 * format_tag_any, so oneDNN picks its own (blocked) layouts; when they differ
 * from the plain ones, reorder primitives copy the inputs in and the outputs
 * back out through the calling thread's workspace (one buffer, grown to the
 * largest entry's need, shared by all its entries). Plain NCHW src/dst given
 * to oneDNN directly (no reorders) ran 2-4x slower here (its gemm-based
 * fallback), hence the reorders.
 *
 * Fused inference (ln_conv2d_forward_fused, ln_basicblock(s)_forward_fused):
 * the residual add and relu run as post-ops (sum, eltwise relu) of a
 * forward_inference primitive, the residual reordered into dst first; the
 * block functions give src/dst as "raw" pointers already in BLK (nChw16c),
 * so activations stay blocked between the convolutions of a block and
 * between blocks (reorders measured at about half of the oneDNN time per
 * ResNet-8 convolution at batch 64-256). Training's two backward passes
 * share one blocked copy of grad_output (nn_conv_dnnl_bwd; bfloat16 under
 * float32 matmul precision "medium": converted once for both).
 *
 * Cache: per calling thread (device worker threads run kernels concurrently;
 * oneDNN streams are not shared: the thread's engine and stream are
 * dnnl_ctx.c's, also gemm_bf16.c's), CACHE entries keyed by (op, shape, params,
 * threads), least recently used replaced (ResNet-8's training entries, ~35 with the
 * blocked grad_output variants, and its fused inference ones
 * fit); nothing is created per call in the steady state. Threads: oneDNN (built on OpenMP, libgomp as lunet) uses
 * omp_get_max_threads() when a primitive is created and run, so both happen
 * with omp_set_num_threads(nt) = the kernel's share (restored after). */
#include "nn_kernels.h"
#include "dnnl_ctx.h"
#include <omp.h>
#include <stdlib.h>

enum { CACHE = 64, MAXSLOT = 4, CHUNK_KB = 3072 };
enum { OP_FWD, OP_BWD_DATA, OP_BWD_W, OP_REORDER };
/* raw: src/dst given in the blocked layout BLK by the caller (block forwards
 * keep activations blocked between their convolutions: no reorders) */
enum { RAW_SRC = 1, RAW_DST = 2 };
#define BLK dnnl_nChw16c

enum { POST_SUM = 1, POST_RELU = 2 };

typedef struct {
  int op, nt, bias, post;   /* post: POST_* of a fused forward; OP_REORDER: bias = 1 blocked -> NCHW */
  int raw, fpm;             /* fpm: bfloat16 inputs (float32 matmul precision "medium") */
  int64_t N, C, H, W, O, KH, KW, OH, OW;
  int64_t sh, sw, ph, pw, dh, dw, g;
} dkey;

typedef struct {
  int arg;
  bool out;
  dnnl_memory_t user, inner;   /* inner == user when the layouts agree */
  dnnl_primitive_t reorder;    /* user -> inner (inputs) or inner -> user (outputs) */
  dnnl_primitive_t reorder_in; /* dst with a sum post-op: residual (user layout) -> inner */
  size_t off;                  /* inner's offset in the workspace */
  size_t ubytes;               /* size of the user (plain) array */
  size_t ibytes;               /* size of inner */
  char *wkeep, *wsrc;          /* forward weights: inner kept, and the user array it came from */
  bool wvalid;                 /* wkeep holds wsrc reordered */
} dslot;

typedef struct {
  dkey key;
  uint64_t tick;
  dnnl_primitive_t prim;
  bool rejected;               /* oneDNN offers only its reference kernel: callers fall back */
  int ns;
  size_t ws;                   /* workspace bytes */
  dslot s[MAXSLOT];
} dentry;

typedef struct {
  dnnl_engine_t eng;           /* the thread's (dnnl_ctx.c), not owned */
  dnnl_stream_t stream;
  uint64_t tick;
  ln_dnnl_buf ws;
  ln_dnnl_buf gb;              /* nn_conv_dnnl_bwd: grad_output, blocked once for both passes */
  ln_dnnl_buf gb16;            /* and in bfloat16 (float32 matmul precision "medium") */
  dentry e[CACHE];
} dstate;

static void entry_free(dentry *e) {
  for (int i = 0; i < e->ns; i++) {
    dslot *s = &e->s[i];
    if (s->reorder) dnnl_primitive_destroy(s->reorder);
    if (s->reorder_in) dnnl_primitive_destroy(s->reorder_in);
    if (s->inner && s->inner != s->user) dnnl_memory_destroy(s->inner);
    if (s->user) dnnl_memory_destroy(s->user);
    free(s->wkeep);
    free(s->wsrc);
  }
  if (e->prim) dnnl_primitive_destroy(e->prim);
  memset(e, 0, sizeof *e);
}

/* at thread exit, before the engine goes (dnnl_ctx.c) */
static void state_free(void *p) {
  dstate *st = p;
  for (int i = 0; i < CACHE; i++) entry_free(&st->e[i]);
  free(st->ws.p);
  free(st->gb.p);
  free(st->gb16.p);
  free(st);
}

static dstate *state_get(void) {
  dstate *st = ln_dnnl_state(LN_DNNL_CONV, sizeof *st, state_free);
  if (st && !st->eng) {
    ln_dnnl_ctx *cx = ln_dnnl_ctx_get();
    st->eng = cx->eng;
    st->stream = cx->stream;
  }
  return st;
}

#define CHK(x) do { if ((x) != dnnl_success) goto fail; } while (0)

/* slot for one argument: user (plain) memory + the primitive's own layout */
static dnnl_status_t slot_init(dstate *st, dentry *e, int arg, bool out, const dnnl_memory_desc_t *user_md,
                               const_dnnl_primitive_desc_t pd, dnnl_query_t q, int qi) {
  dslot *s = &e->s[e->ns++];
  const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, q, qi);
  dnnl_primitive_desc_t rpd = NULL;
  dnnl_status_t r;
  s->arg = arg; s->out = out;
  s->ubytes = dnnl_memory_desc_get_size(user_md);
  if (!md) return dnnl_runtime_error;
  if ((r = dnnl_memory_create(&s->user, user_md, st->eng, DNNL_MEMORY_NONE)) != dnnl_success) return r;
  if (dnnl_memory_desc_equal(user_md, md)) { s->inner = s->user; return dnnl_success; }
  if ((r = dnnl_memory_create(&s->inner, md, st->eng, DNNL_MEMORY_NONE)) != dnnl_success) return r;
  s->off = e->ws;
  s->ibytes = dnnl_memory_desc_get_size(md);
  e->ws += (s->ibytes + 63) & ~(size_t)63;
  r = out ? dnnl_reorder_primitive_desc_create(&rpd, md, st->eng, user_md, st->eng, NULL)
          : dnnl_reorder_primitive_desc_create(&rpd, user_md, st->eng, md, st->eng, NULL);
  if (r != dnnl_success) return r;
  r = dnnl_primitive_create(&s->reorder, rpd);
  dnnl_primitive_desc_destroy(rpd);
  if (r != dnnl_success || !out || !(e->key.post & POST_SUM)) return r;
  /* the sum post-op adds what dst holds: the residual, reordered in first */
  if ((r = dnnl_reorder_primitive_desc_create(&rpd, user_md, st->eng, md, st->eng, NULL)) != dnnl_success) return r;
  r = dnnl_primitive_create(&s->reorder_in, rpd);
  dnnl_primitive_desc_destroy(rpd);
  return r;
}

static void key_of(dkey *k, const ln_conv2d_args *a, int op, int nt, bool bias) {
  memset(k, 0, sizeof *k);
  k->raw = a->raw;
  k->fpm = ln_cpu_bf16_math();
  k->op = op; k->nt = nt; k->bias = bias;
  /* bfloat16 weight gradients on one thread: oneDNN 2.6's kernel
   * (jit_bf16:avx512_core_bf16), where it splits one image's channels
   * between threads, meets them at a spinning barrier (no sleep) 2-4 times
   * per image; with more runnable threads than cores each meeting waits out
   * a scheduler time slice: 0.3 ms passes took 0.2-1 s, ResNet-8 training
   * steps 1-2 s (bench/RESULTS.md). One thread ran them in 4 ms a step
   * against 2.4 unloaded on two; float32 (no such barriers) in 14-24. */
  if (op == OP_BWD_W && k->fpm) k->nt = 1;
  if (op == OP_FWD) k->post = (a->res ? POST_SUM : 0) | (a->relu ? POST_RELU : 0);
  k->N = a->N; k->C = a->C; k->H = a->H; k->W = a->W; k->O = a->O; k->KH = a->KH; k->KW = a->KW;
  k->OH = a->OH; k->OW = a->OW;
  k->sh = a->p.stride_h; k->sw = a->p.stride_w; k->ph = a->p.pad_h; k->pw = a->p.pad_w;
  k->dh = a->p.dil_h; k->dw = a->p.dil_w; k->g = a->p.groups;
}

/* oneDNN's reference implementations ("ref:any") are plain loops, 100-1000x
 * slower than its JIT kernels (e.g. the weight gradient of a 6-channel input
 * with grad_output given blocked: 340 ms against ~0.3 ms); the caller's own
 * kernels are far better than that. */
static bool is_reference(const_dnnl_primitive_desc_t pd) {
  const char *impl = NULL;
  if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success || !impl) return false;
  return strncmp(impl, "ref", 3) == 0;
}

/* A grouped convolution oneDNN runs with its gemm kernel ("gemm:jit": no
 * grouped or depthwise JIT kernel for the shape: dilated depthwise backward
 * passes, channel multipliers, depthwise weight gradients over 3x3): 1.1-2.2x
 * the time of lunet's own paths (bench/RESULTS.md), so callers fall back. */
static bool is_grouped_gemm(const_dnnl_primitive_desc_t pd, const dkey *k) {
  const char *impl = NULL;
  if (k->g <= 1 || dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success || !impl)
    return false;
  return strstr(impl, "gemm") != NULL;
}

/* The right padding that gives exactly out outputs (may be below the left
 * one; -1 when a last input row/col is reached by no window, e.g. 1x1 stride 2
 * on an even size: oneDNN's forward takes that, its backward passes do not). */
static int64_t right_pad(int64_t out, int64_t stride, int64_t k, int64_t dil, int64_t in, int64_t pad) {
  return (out - 1) * stride + (k - 1) * dil + 1 - in - pad;
}

/* Creates the entry's primitive and slots with algorithm alg (the current
 * OpenMP thread count is nt). */
static int entry_init_alg(dstate *st, dentry *e, const ln_conv2d_args *a, const dkey *k, dnnl_alg_kind_t alg) {
  dnnl_memory_desc_t src_u, w_u, b_u, dst_u, src_a, w_a, b_a, dst_a;
  /* groups: weights (G, O/G, C/G, KH, KW), the same memory as OIHW's (O, C/G, KH, KW) */
  const int64_t G = a->p.groups > 1 ? a->p.groups : 1;
  const int wn = G > 1 ? 5 : 4;
  const dnnl_format_tag_t wtag = G > 1 ? dnnl_goihw : dnnl_oihw;
  dnnl_dims_t sd = {a->N, a->C, a->H, a->W}, bd = {a->O};
  dnnl_dims_t wd = {a->O, a->C, a->KH, a->KW};
  if (G > 1) { wd[0] = G; wd[1] = a->O / G; wd[2] = a->C / G; wd[3] = a->KH; wd[4] = a->KW; }
  dnnl_dims_t dd = {a->N, a->O, a->OH, a->OW};
  dnnl_dims_t strides = {a->p.stride_h, a->p.stride_w}, dil = {a->p.dil_h - 1, a->p.dil_w - 1};
  dnnl_dims_t pl = {a->p.pad_h, a->p.pad_w};
  dnnl_dims_t pr = {right_pad(a->OH, a->p.stride_h, a->KH, a->p.dil_h, a->H, a->p.pad_h),
                    right_pad(a->OW, a->p.stride_w, a->KW, a->p.dil_w, a->W, a->p.pad_w)};
  dnnl_convolution_desc_t fd, bdsc;
  dnnl_primitive_desc_t fpd = NULL, pd = NULL;
  dnnl_primitive_attr_t attr = NULL;
  dnnl_post_ops_t po = NULL;
  memset(e, 0, sizeof *e);
  e->key = *k;   /* slot_init reads key.post */
  if (k->op == OP_REORDER) {   /* NCHW <-> BLK of (N, C, H, W); fpm: BLK float32 -> bfloat16 */
    dnnl_memory_desc_t u, b;
    CHK(dnnl_memory_desc_init_by_tag(&u, 4, sd, dnnl_f32, k->fpm ? BLK : dnnl_nchw));
    CHK(dnnl_memory_desc_init_by_tag(&b, 4, sd, k->fpm ? dnnl_bf16 : dnnl_f32, BLK));
    const dnnl_memory_desc_t *from = k->bias ? &b : &u, *to = k->bias ? &u : &b;
    CHK(dnnl_reorder_primitive_desc_create(&pd, from, st->eng, to, st->eng, NULL));
    e->ns = 2;
    e->s[0].arg = DNNL_ARG_FROM; e->s[1].arg = DNNL_ARG_TO; e->s[1].out = true;
    CHK(dnnl_memory_create(&e->s[0].user, from, st->eng, DNNL_MEMORY_NONE));
    CHK(dnnl_memory_create(&e->s[1].user, to, st->eng, DNNL_MEMORY_NONE));
    e->s[0].inner = e->s[0].user; e->s[1].inner = e->s[1].user;
    CHK(dnnl_primitive_create(&e->prim, pd));
    dnnl_primitive_desc_destroy(pd);
    return 0;
  }
  /* right padding -1: the forward only (checked by the specs against float64
   * references); callers ask nn_conv_dnnl_bwd_ok before a backward pass */
  if (pr[0] < (k->op == OP_FWD ? -1 : 0) || pr[1] < (k->op == OP_FWD ? -1 : 0)) return -1;
  CHK(dnnl_memory_desc_init_by_tag(&src_u, 4, sd, dnnl_f32, dnnl_nchw));
  CHK(dnnl_memory_desc_init_by_tag(&w_u, wn, wd, dnnl_f32, wtag));
  CHK(dnnl_memory_desc_init_by_tag(&b_u, 1, bd, dnnl_f32, dnnl_x));
  CHK(dnnl_memory_desc_init_by_tag(&dst_u, 4, dd, dnnl_f32, dnnl_nchw));
  /* fpm: the pass's two inputs in bfloat16 (the slots' reorders convert
   * them), its output float32: oneDNN 2.6 ignores fpmath_mode on float32
   * primitives (gemm_bf16.c). The forward descriptor (a backward pass's
   * hint) takes bfloat16 src and weights and the pass's dst type. */
  const bool fpm = k->fpm;
  const dnnl_data_type_t sdt = fpm && k->op != OP_BWD_DATA ? dnnl_bf16 : dnnl_f32;
  const dnnl_data_type_t wdt = fpm && k->op != OP_BWD_W ? dnnl_bf16 : dnnl_f32;
  const dnnl_data_type_t ddt = fpm && k->op != OP_FWD ? dnnl_bf16 : dnnl_f32;
  dnnl_memory_desc_t src_h, w_h;
  CHK(dnnl_memory_desc_init_by_tag(&src_a, 4, sd, sdt, k->raw & RAW_SRC && !fpm ? BLK : dnnl_format_tag_any));
  CHK(dnnl_memory_desc_init_by_tag(&w_a, wn, wd, wdt, dnnl_format_tag_any));
  CHK(dnnl_memory_desc_init_by_tag(&b_a, 1, bd, dnnl_f32, dnnl_x));
  CHK(dnnl_memory_desc_init_by_tag(&dst_a, 4, dd, ddt, k->raw & RAW_DST ? BLK : dnnl_format_tag_any));
  CHK(dnnl_memory_desc_init_by_tag(&src_h, 4, sd, fpm ? dnnl_bf16 : dnnl_f32, k->raw & RAW_SRC && !fpm ? BLK : dnnl_format_tag_any));
  CHK(dnnl_memory_desc_init_by_tag(&w_h, wn, wd, fpm ? dnnl_bf16 : dnnl_f32, dnnl_format_tag_any));
  if (k->raw & RAW_SRC) CHK(dnnl_memory_desc_init_by_tag(&src_u, 4, sd, dnnl_f32, BLK));
  /* a backward pass's raw grad_output: BLK in the pass's type (bfloat16
   * under fpm, converted once for both passes by nn_conv_dnnl_bwd) */
  if (k->raw & RAW_DST) CHK(dnnl_memory_desc_init_by_tag(&dst_u, 4, dd, k->op == OP_FWD ? dnnl_f32 : ddt, BLK));
  /* a fused forward records no gradient: inference kernels, with the
   * residual add (sum) and relu run on the output tile while it is hot */
  CHK(dnnl_dilated_convolution_forward_desc_init(&fd, k->post ? dnnl_forward_inference : dnnl_forward_training,
                                                 alg, &src_h, &w_h,
                                                 k->op == OP_FWD && k->bias ? &b_a : NULL, &dst_a,
                                                 strides, dil, pl, pr));
  if (k->post) {
    CHK(dnnl_post_ops_create(&po));
    if (k->post & POST_SUM) CHK(dnnl_post_ops_append_sum(po, 1.0f));
    if (k->post & POST_RELU) CHK(dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f));
    CHK(dnnl_primitive_attr_create(&attr));
    CHK(dnnl_primitive_attr_set_post_ops(attr, po));
  }
  CHK(dnnl_primitive_desc_create(&fpd, &fd, attr, st->eng, NULL));
  if (k->op == OP_FWD) {
    pd = fpd; fpd = NULL;
    CHK(slot_init(st, e, DNNL_ARG_SRC, false, &src_u, pd, dnnl_query_src_md, 0));
    CHK(slot_init(st, e, DNNL_ARG_WEIGHTS, false, &w_u, pd, dnnl_query_weights_md, 0));
    if (k->bias) CHK(slot_init(st, e, DNNL_ARG_BIAS, false, &b_u, pd, dnnl_query_weights_md, 1));
    CHK(slot_init(st, e, DNNL_ARG_DST, true, &dst_u, pd, dnnl_query_dst_md, 0));
  } else if (k->op == OP_BWD_DATA) {
    CHK(dnnl_dilated_convolution_backward_data_desc_init(&bdsc, alg, &src_a, &w_a, &dst_a,
                                                         strides, dil, pl, pr));
    CHK(dnnl_primitive_desc_create(&pd, &bdsc, NULL, st->eng, fpd));
    CHK(slot_init(st, e, DNNL_ARG_DIFF_DST, false, &dst_u, pd, dnnl_query_diff_dst_md, 0));
    CHK(slot_init(st, e, DNNL_ARG_WEIGHTS, false, &w_u, pd, dnnl_query_weights_md, 0));
    CHK(slot_init(st, e, DNNL_ARG_DIFF_SRC, true, &src_u, pd, dnnl_query_diff_src_md, 0));
  } else {
    CHK(dnnl_dilated_convolution_backward_weights_desc_init(&bdsc, alg, &src_a, &w_a,
                                                            k->bias ? &b_a : NULL, &dst_a, strides, dil, pl, pr));
    CHK(dnnl_primitive_desc_create(&pd, &bdsc, NULL, st->eng, fpd));
    CHK(slot_init(st, e, DNNL_ARG_SRC, false, &src_u, pd, dnnl_query_src_md, 0));
    CHK(slot_init(st, e, DNNL_ARG_DIFF_DST, false, &dst_u, pd, dnnl_query_diff_dst_md, 0));
    CHK(slot_init(st, e, DNNL_ARG_DIFF_WEIGHTS, true, &w_u, pd, dnnl_query_diff_weights_md, 0));
    if (k->bias)
      CHK(slot_init(st, e, DNNL_ARG_DIFF_BIAS, true, &b_u, pd, dnnl_query_diff_weights_md, 1));
  }
  if (is_reference(pd) || is_grouped_gemm(pd, k)) {
    entry_free(e);
    e->key = *k;
    e->rejected = true;
    goto fail;
  }
  CHK(dnnl_primitive_create(&e->prim, pd));
  dnnl_primitive_desc_destroy(pd);
  if (fpd) dnnl_primitive_desc_destroy(fpd);
  if (attr) dnnl_primitive_attr_destroy(attr);
  if (po) dnnl_post_ops_destroy(po);
  e->key = *k;
  return 0;
fail:
  if (pd) dnnl_primitive_desc_destroy(pd);
  if (fpd) dnnl_primitive_desc_destroy(fpd);
  if (attr) dnnl_primitive_attr_destroy(attr);
  if (po) dnnl_post_ops_destroy(po);
  if (!e->rejected) entry_free(e);
  return -1;
}

/* Winograd F(4x4, 3x3) (oneDNN's jit_wino_4x3) for op where it measured
 * faster than the direct kernels, reorders included (2 threads, AVX-512):
 * - 32+ channels, all three passes: at batch 64 1.2-1.4x on 32->32 at 16x16
 *   and 1.7-2.8x on 64->64 at 8x8 (forward + both gradients), each pass
 *   faster; from 512 output pixels per channel (N*OH*OW) on, 1.1-1.8x (32->32
 *   at batch 2: a tie); below, slower (256: 0.6-0.9x);
 * - 16 channels, the weight gradient only: 16->16 at 32x32, batch 64: 1.3-1.9x
 *   (forward a tie, data gradient 0.8x); batch 32 1.4x; batch 16 and below
 *   slower, hence from 32768 pixels.
 * Its error against float64 (1-2e-6 of the largest output) stays within
 * float32 training's (spec/conv_winograd_spec.lua). LUNET_WINOGRAD=0 turns it
 * off (read when a primitive is created). */
static bool winograd_wanted(const ln_conv2d_args *a, int op) {
  const char *e = getenv("LUNET_WINOGRAD");
  if (e && e[0] == '0') return false;
  if (!(a->KH == 3 && a->KW == 3 && a->p.stride_h == 1 && a->p.stride_w == 1 && a->p.dil_h == 1 &&
        a->p.dil_w == 1 && a->C % 16 == 0 && a->O % 16 == 0 && a->C >= 16 && a->O >= 16))
    return false;
  const int64_t pixels = a->N * a->OH * a->OW;
  if (a->C >= 32 && a->O >= 32) return pixels >= 512;
  return op == OP_BWD_W && pixels >= 32768;
}

/* Creates the entry: Winograd where wanted and oneDNN offers it (its JIT
 * kernel exists only for some CPUs, layouts and post-ops), else direct. */
static int entry_init_any(dstate *st, dentry *e, const ln_conv2d_args *a, const dkey *k) {
  if (k->op != OP_REORDER && winograd_wanted(a, k->op) && entry_init_alg(st, e, a, k, dnnl_convolution_winograd) == 0)
    return 0;
  return entry_init_alg(st, e, a, k, dnnl_convolution_direct);
}

/* A bfloat16 pass oneDNN cannot run (no JIT kernel for the shape) runs in
 * float32 instead, cached under the key that asked for bfloat16; not one
 * whose user memory is bfloat16 (a backward pass's raw grad_output, a
 * reorder to bfloat16): it fails, and nn_conv_dnnl_bwd's caller runs the
 * passes one by one. */
static int entry_init(dstate *st, dentry *e, const ln_conv2d_args *a, const dkey *k) {
  int rc = entry_init_any(st, e, a, k);
  if (rc == 0 || !k->fpm || k->op == OP_REORDER || (k->op != OP_FWD && k->raw & RAW_DST)) return rc;
  dkey f = *k;
  f.fpm = 0;
  rc = entry_init_any(st, e, a, &f);
  e->key = *k;   /* a rejected key is remembered as asked */
  return rc;
}

/* Inference runs the same (folded) weights step after step, and oneDNN's
 * weight reorders are slow: Winograd's transform of 64->64 3x3 took 0.8-1.1
 * ms beside the convolution's 2.6 (ResNet-8, batch 256). The weights of a
 * forward that saves no input for a backward (keepw), up to WKEEP_MAX bytes,
 * keep their reordered copy in the entry, redone only when the weights differ
 * from the array it was made from (a memcmp: ~1% of the reorder). Training's
 * forwards that save their input (most; their weights change every step)
 * keep nothing. Two layers of one geometry share an entry and redo it in turn. */
enum { WKEEP_MAX = 4 << 20 };
static bool weights_kept(bool keepw, dslot *s) {
  if (!keepw || s->arg != DNNL_ARG_WEIGHTS || !s->reorder || s->ubytes + s->ibytes > WKEEP_MAX)
    return false;
  if (!s->wkeep) {
    s->wkeep = aligned_alloc(64, (s->ibytes + 63) & ~(size_t)63);
    s->wsrc = malloc(s->ubytes);
    if (!s->wkeep || !s->wsrc) {   /* out of memory: the workspace path still works */
      free(s->wkeep); free(s->wsrc);
      s->wkeep = s->wsrc = NULL;
      return false;
    }
  }
  return true;
}

/* Runs op with the user pointers ptr[i] for the entry's slots (in slot order);
 * res: the residual a sum post-op adds (NULL without one). */
static int entry_run(dstate *st, dentry *e, char *const *ptr, const char *res, bool keepw) {
  dnnl_exec_arg_t args[MAXSLOT], ra[2];
  if (ln_dnnl_buf_reserve(&st->ws, e->ws) != 0) return -1;
  char *ws = st->ws.p;
  for (int i = 0; i < e->ns; i++) {
    dslot *s = &e->s[i];
    CHK(dnnl_memory_set_data_handle(s->user, ptr[i]));
    if (weights_kept(keepw, s)) {
      CHK(dnnl_memory_set_data_handle(s->inner, s->wkeep));
      if (!s->wvalid || memcmp(ptr[i], s->wsrc, s->ubytes) != 0) {
        s->wvalid = false;
        ra[0] = (dnnl_exec_arg_t){DNNL_ARG_FROM, s->user};
        ra[1] = (dnnl_exec_arg_t){DNNL_ARG_TO, s->inner};
        CHK(dnnl_primitive_execute(s->reorder, st->stream, 2, ra));
        memcpy(s->wsrc, ptr[i], s->ubytes);
        s->wvalid = true;
      }
      args[i] = (dnnl_exec_arg_t){s->arg, s->inner};
      continue;
    }
    if (s->inner != s->user) CHK(dnnl_memory_set_data_handle(s->inner, ws + s->off));
    if (s->out && res) {   /* dst starts as the residual */
      if (s->reorder_in) {
        CHK(dnnl_memory_set_data_handle(s->user, (void *)res));
        ra[0] = (dnnl_exec_arg_t){DNNL_ARG_FROM, s->user};
        ra[1] = (dnnl_exec_arg_t){DNNL_ARG_TO, s->inner};
        CHK(dnnl_primitive_execute(s->reorder_in, st->stream, 2, ra));
        CHK(dnnl_memory_set_data_handle(s->user, ptr[i]));
      } else if (res != ptr[i]) {
        memcpy(ptr[i], res, s->ubytes);
      }
    }
    if (!s->out && s->reorder) {
      ra[0] = (dnnl_exec_arg_t){DNNL_ARG_FROM, s->user};
      ra[1] = (dnnl_exec_arg_t){DNNL_ARG_TO, s->inner};
      /* bfloat16 passes convert their weights each call: a few thousand
       * elements, where a parallel region's wake-up costs more (up to ms
       * on a loaded machine) than converting them on this thread */
      int nt = omp_get_max_threads();
      bool one = e->key.fpm && nt > 1 && s->ubytes < (64 << 10);
      if (one) omp_set_num_threads(1);
      dnnl_status_t r = dnnl_primitive_execute(s->reorder, st->stream, 2, ra);
      if (one) omp_set_num_threads(nt);
      CHK(r);
    }
    args[i] = (dnnl_exec_arg_t){s->arg, s->inner};
  }
  CHK(dnnl_primitive_execute(e->prim, st->stream, e->ns, args));
  for (int i = 0; i < e->ns; i++) {
    dslot *s = &e->s[i];
    if (s->out && s->reorder) {
      ra[0] = (dnnl_exec_arg_t){DNNL_ARG_FROM, s->inner};
      ra[1] = (dnnl_exec_arg_t){DNNL_ARG_TO, s->user};
      CHK(dnnl_primitive_execute(s->reorder, st->stream, 2, ra));
    }
  }
  CHK(dnnl_stream_wait(st->stream));
  return 0;
fail:
  return -1;
}

/* Finds or creates the entry for key k (geometry a) and runs it with
 * k->nt OpenMP threads. Returns 0, or -1 when oneDNN cannot do it (the caller
 * falls back). */
static int cache_run(const dkey *k, const ln_conv2d_args *a, char *const *ptr, const char *res, bool keepw) {
  dstate *st = state_get();
  if (!st) return -1;
  int prev = omp_get_max_threads();
  if (prev != k->nt) omp_set_num_threads(k->nt);
  dentry *e = NULL, *victim = &st->e[0];
  for (int i = 0; i < CACHE; i++) {
    dentry *c = &st->e[i];
    bool used = c->prim || c->rejected;
    if (used && memcmp(&c->key, k, sizeof *k) == 0) { e = c; break; }
    if (!used || ((victim->prim || victim->rejected) && c->tick < victim->tick)) victim = c;
  }
  int rc = 0;
  if (!e) {
    entry_free(victim);
    if (entry_init(st, victim, a, k) == 0) e = victim;
    else rc = -1;
    victim->tick = ++st->tick;   /* a rejected key is remembered: it fails fast next time */
  } else if (e->rejected) {
    e->tick = ++st->tick;
    e = NULL;
    rc = -1;
  }
  if (e) {
    e->tick = ++st->tick;
    rc = entry_run(st, e, ptr, res, keepw);
    if (k->op == OP_BWD_W && k->fpm) ln_dnnl_count_bf16_bwd_w(omp_get_max_threads());
  }
  if (prev != k->nt) omp_set_num_threads(prev);
  return rc;
}

/* Has oneDNN already been found to offer only its reference kernel for this
 * pass (see is_reference)? Lets callers skip the preparation for it. */
static bool known_rejected(dstate *st, const ln_conv2d_args *a, int op, int nt, bool bias) {
  dkey k;
  key_of(&k, a, op, nt, bias);
  for (int i = 0; i < CACHE; i++)
    if (st->e[i].rejected && memcmp(&st->e[i].key, &k, sizeof k) == 0) return true;
  return false;
}

/* Images per call of a grouped forward or data gradient (0: the whole
 * batch at once). Their reorders in and out of the blocked layout took as
 * long as the convolution (depthwise 3x3 stride 1, batch 32: 0.2-0.27 ms
 * each beside 0.22, 1 thread), the whole batch's blocked copies (6.4 MB
 * each for 64 channels at 28x28) going through L3 or memory between the
 * three steps; a few images at a time keep them in cache: 0.6-0.9x the
 * time per call (bench/RESULTS.md). Grouped convolutions only: their
 * weights are small (reordered once, kept: weights_kept), where a dense
 * convolution's weight reorder would be paid per chunk. LUNET_DNNL_CHUNK_KB
 * sets the budget of a chunk's blocked copies (0: whole batches). */
static int64_t chunk_images(const ln_conv2d_args *a, int op, int nt) {
  const char *e = getenv("LUNET_DNNL_CHUNK_KB");
  const int64_t budget = (e ? atoll(e) : CHUNK_KB) << 10;
  if (a->p.groups <= 1 || (op != OP_FWD && op != OP_BWD_DATA) || a->raw || a->res || a->relu || budget <= 0)
    return 0;
  /* blocked src + dst of one image (channels padded to 16) */
  const int64_t img = ((a->C + 15) / 16 * a->H * a->W + (a->O + 15) / 16 * a->OH * a->OW) * 16 * 4;
  /* whole batches of copies up to 3 budgets (~8 MB: stride-2 depthwise
   * 16-240 channels) stay in L3 (32 MB here) beside the plain arrays: chunks
   * gained nothing there, and on 2 threads lost 10% (a parallel region per
   * primitive, three per chunk) */
  if (img * a->N <= 3 * budget) return 0;
  int64_t max = LN_MAX(budget / img, (int64_t)nt);
  if (max >= a->N) return 0;
  const int64_t chunks = (a->N + max - 1) / max;
  return (a->N + chunks - 1) / chunks;   /* even chunks: at most one other (tail) entry */
}

static int dnnl_conv(const ln_conv2d_args *a, int op, bool bias, int nt, char *const *ptr) {
  dkey k;
  const int64_t ch = chunk_images(a, op, nt);
  if (ch > 0) {   /* images are contiguous in NCHW: chunks are offsets */
    const int64_t xs = a->C * a->H * a->W * 4, ys = a->O * a->OH * a->OW * 4;
    const int64_t in_s = op == OP_FWD ? xs : ys, out_s = op == OP_FWD ? ys : xs;
    const int last = op == OP_FWD ? 2 + bias : 2;   /* ptr: in, w, [b], out */
    for (int64_t n0 = 0; n0 < a->N; n0 += ch) {
      ln_conv2d_args g = *a;
      char *p[4];
      g.N = LN_MIN(ch, a->N - n0);
      for (int i = 0; i <= last; i++) p[i] = ptr[i];
      p[0] += n0 * in_s;
      p[last] += n0 * out_s;
      key_of(&k, &g, op, nt, bias);
      /* keepw: the weights reordered by the first chunk serve the others */
      if (cache_run(&k, &g, p, NULL, true) != 0) return -1;
    }
    return 0;
  }
  key_of(&k, a, op, nt, bias);
  return cache_run(&k, a, ptr, op == OP_FWD ? a->res : NULL, op == OP_FWD && !a->saved);
}

/* (N,C,H,W) from NCHW to BLK (to_plain = false) or back; bf16: from BLK
 * float32 to BLK bfloat16 instead (to_plain = false) */
static int blk_reorder(int64_t N, int64_t C, int64_t H, int64_t W, bool to_plain, bool bf16, int nt, char *from,
                       char *to) {
  ln_conv2d_args g;
  dkey k;
  memset(&g, 0, sizeof g);
  memset(&k, 0, sizeof k);
  g.N = k.N = N; g.C = k.C = C; g.H = k.H = H; g.W = k.W = W;
  k.op = OP_REORDER; k.bias = to_plain; k.fpm = bf16; k.nt = nt;
  char *ptr[2] = {from, to};
  return cache_run(&k, &g, ptr, NULL, false);
}

size_t nn_conv_dnnl_blocked_bytes(int64_t N, int64_t C, int64_t H, int64_t W) {
  return (size_t)(N * ((C + 15) / 16 * 16) * H * W * 4);
}

/* Inference basic block with activations in BLK between the convolutions:
 * in -> xb; c1: xb -> hb (+relu); cs: xb -> rb (or rb = xb); c2: hb -> rb
 * (+ what rb holds, relu); rb -> out. in_blk: in is already blocked (xb =
 * in, overwritten by an identity block); out_blk: the output stays in rb
 * (xb without a shortcut) for the next block. c1/c2/cs carry folded weights and bias
 * (their in/out pointers are ignored); xb, hb, rb hold
 * nn_conv_dnnl_blocked_bytes of their shapes. */
int nn_conv_dnnl_block(const ln_conv2d_args *c1, const ln_conv2d_args *c2, const ln_conv2d_args *cs,
                       char *in, char *out, char *xb, char *hb, char *rb, bool in_blk, bool out_blk, int nt) {
  ln_conv2d_args a = *c1;
  if (in_blk) xb = in;   /* the previous block's blocked output */
  else if (blk_reorder(c1->N, c1->C, c1->H, c1->W, false, false, nt, in, xb) != 0) return -1;
  a.raw = RAW_SRC | RAW_DST; a.res = NULL; a.relu = 1; a.in = xb; a.out = hb;
  if (nn_conv_dnnl_fwd(&a, nt) != 0) return -1;
  char *r = xb;
  if (cs) {
    a = *cs;
    a.raw = RAW_SRC | RAW_DST; a.res = NULL; a.relu = 0; a.in = xb; a.out = rb;
    if (nn_conv_dnnl_fwd(&a, nt) != 0) return -1;
    r = rb;
  }
  a = *c2;
  a.raw = RAW_SRC | RAW_DST; a.res = r; a.relu = 1; a.in = hb; a.out = r;   /* in place: dst = residual */
  if (nn_conv_dnnl_fwd(&a, nt) != 0) return -1;
  return out_blk ? 0 : blk_reorder(c2->N, c2->O, c2->OH, c2->OW, true, false, nt, r, out);
}

bool nn_conv_dnnl_ok(const ln_conv2d_args *a) {
  return a->dtype == LN_FLOAT32 && a->N > 0 && a->OH > 0 && a->OW > 0;
}

bool nn_conv_dnnl_bwd_ok(const ln_conv2d_args *a) {
  return nn_conv_dnnl_ok(a) && right_pad(a->OH, a->p.stride_h, a->KH, a->p.dil_h, a->H, a->p.pad_h) >= 0 &&
         right_pad(a->OW, a->p.stride_w, a->KW, a->p.dil_w, a->W, a->p.pad_w) >= 0;
}

int nn_conv_dnnl_fwd(const ln_conv2d_args *a, int nt) {
  char *ptr[4];
  int n = 0;
  ptr[n++] = a->in; ptr[n++] = a->w;
  if (a->b) ptr[n++] = a->b;
  ptr[n++] = a->out;
  return dnnl_conv(a, OP_FWD, a->b != NULL, nt, ptr);
}

int nn_conv_dnnl_fwd_saving(const ln_conv2d_args *a, int nt) {
  if (blk_reorder(a->N, a->C, a->H, a->W, false, false, nt, a->in, a->saved) != 0) return -2;
  ln_conv2d_args g = *a;
  g.in = a->saved;
  g.raw = RAW_SRC;
  g.saved = NULL;
  return nn_conv_dnnl_fwd(&g, nt);
}

int nn_conv_dnnl_bwd_data(const ln_conv2d_args *a, int nt) {
  char *ptr[3] = {a->dout, a->w, a->din};
  return dnnl_conv(a, OP_BWD_DATA, false, nt, ptr);
}

/* dw, and db when with_bias */
int nn_conv_dnnl_bwd_weights(const ln_conv2d_args *a, int nt, bool with_bias) {
  char *ptr[4] = {a->in, a->dout, a->dw, a->db};
  return dnnl_conv(a, OP_BWD_W, with_bias, nt, ptr);
}

/* Both gradients of one convolution: grad_output reordered to the blocked
 * layout once and given to the weight (+bias) and the data gradient as is
 * (each pass reordered it on its own before). 0, or -1 (the caller falls
 * back to the passes one by one, which recompute everything). */
int nn_conv_dnnl_bwd(const ln_conv2d_args *a, int nt, bool with_bias) {
  /* groups of 2-15 channels: oneDNN blocks them by 8 or 4, not BLK */
  const int64_t cg = a->C / a->p.groups;
  if (a->O % 16 || (cg > 1 && cg % 16)) return -1;
  dstate *st = state_get();
  if (!st) return -1;
  ln_conv2d_args g = *a, gd;
  g.raw = RAW_DST;
  g.saved = NULL;
  gd = g;   /* the data gradient does not read the input */
  if (a->saved) {   /* the forward's blocked copy of the input: one reorder less */
    g.in = a->saved;
    g.raw |= RAW_SRC;
  }
  if (known_rejected(st, &g, OP_BWD_W, nt, with_bias) || known_rejected(st, &gd, OP_BWD_DATA, nt, false))
    return -1;   /* no blocked copy of grad_output made for nothing */
  size_t need = nn_conv_dnnl_blocked_bytes(a->N, a->O, a->OH, a->OW);
  if (ln_dnnl_buf_reserve(&st->gb, need) != 0) return -1;
  if (blk_reorder(a->N, a->O, a->OH, a->OW, false, false, nt, a->dout, st->gb.p) != 0) return -1;
  g.dout = gd.dout = st->gb.p;
  /* bfloat16 passes (fpm): the blocked grad_output converted to bfloat16
   * here, once; both passes read it as is (each converted the float32 copy
   * before). In two reorders: oneDNN's single NCHW float32 -> BLK bfloat16
   * one (jit:uni) took 0.16 ms against 0.08 + 0.03 (64x32x16x16, 1 thread). */
  if (ln_cpu_bf16_math()) {
    if (ln_dnnl_buf_reserve(&st->gb16, need / 2) != 0) return -1;
    if (blk_reorder(a->N, a->O, a->OH, a->OW, false, true, nt, st->gb.p, st->gb16.p) != 0) return -1;
    g.dout = gd.dout = st->gb16.p;
  }
  char *pw[4] = {g.in, g.dout, g.dw, g.db};
  if (dnnl_conv(&g, OP_BWD_W, with_bias, nt, pw) != 0) return -1;
  char *pd[3] = {gd.dout, gd.w, gd.din};
  return dnnl_conv(&gd, OP_BWD_DATA, false, nt, pd);
}
