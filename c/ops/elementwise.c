/* elementwise.c -- front ends of elementwise ops: argument checks, broadcasting,
 * dtype promotion, output allocation, then the device's kernel. */
#include "../core/backend.h"
#include "../core/checked.h"
#include <math.h>

static const char *unary_names[] = {
  "neg", "abs", "exp", "log", "sqrt", "tanh", "sigmoid", "relu", "sin", "cos", "rsqrt",
  "sign", "floor", "ceil", "round", "reciprocal", "log1p", "expm1", "square", "logical_not",
  "isnan", "isinf", "erf", "sinh", "cosh", "asinh", "acosh", "atanh", "asin", "acos", "atan",
  "log2", "log10", "exp2", "trunc", "frac", "lgamma", "digamma", "trigamma", "erfc", "erfinv", "signbit",
  "bitwise_not", "silu", "gelu", "gelu", "mish", "hardswish", "hardsigmoid", "elu", "softplus", "clamp"};
static const char *binary_names[] = {
  "add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge",
  "logical_and", "logical_or", "fmod", "atan2", "hypot", "logaddexp", "logaddexp2", "igamma", "igammac",
  "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift", "gcd", "lcm",
  "silu_backward", "gelu_backward", "gelu_backward", "mish_backward", "hardswish_backward",
  "hardsigmoid_backward", "elu_backward", "softplus_backward", "tanh_backward", "sigmoid_backward", "add_scaled"};

static bool is_predicate(int op) { return op >= LN_EQ && op <= LN_LOGICAL_OR; }
/* the integer-only ops (and, or, xor take bool too) */
static bool is_bitop(int op) { return op >= LN_BITWISE_AND && op <= LN_LCM; }
static bool bool_bitop(int op) { return op >= LN_BITWISE_AND && op <= LN_BITWISE_XOR; }

/* ---- shared helpers ------------------------------------------------------------- */

int ln_check_same_device(const char *fn, const ln_tensor *a, const ln_tensor *b) {
  if (a->device_id != b->device_id)
    return ln_error("%s: tensors are on different devices (cpu:%d and cpu:%d); move one with to()",
                    fn, a->device_id, b->device_id);
  return 0;
}

/* Writing through a view where several elements alias one address is refused. */
static int check_writable(const char *fn, const ln_tensor *t) { return ln_check_no_internal_overlap(fn, t); }

/* Returns t itself or a new tensor cast to dtype; *owned says which. */
static const ln_tensor *as_dtype(const ln_tensor *t, int dtype, ln_tensor **owned) {
  *owned = NULL;
  if (t->dtype_id == dtype) return t;
  *owned = ln_cast(t, dtype);
  return *owned;
}

static bool category_narrower(int result, int target) {
  /* true when result cannot be stored into target without losing its kind */
  if (ln_is_float(result) && !ln_is_float(target)) return true;
  if (result != LN_BOOL && target == LN_BOOL) return true;
  return false;
}

/* ---- unary ---------------------------------------------------------------------- */

static bool int_ok(int op) {
  return op == LN_NEG || op == LN_ABS || op == LN_RELU || op == LN_SIGN || op == LN_SQUARE ||
         op == LN_FLOOR || op == LN_CEIL || op == LN_ROUND || op == LN_LOGICAL_NOT ||
         op == LN_ISNAN || op == LN_ISINF || op == LN_CLAMP || op == LN_TRUNC || op == LN_BITWISE_NOT;
}

/* bitwise_not has no float kernel in torch ("bitwise_not_cpu" not
 * implemented for 'Float'): refused rather than promoted */
static int check_bitwise_not(const char *fn, const ln_tensor *a, bool inplace) {
  if (ln_is_float(a->dtype_id))
    return ln_error("%s%s: only integer and bool tensors are supported, got %s", fn, inplace ? "_" : "",
                    ln_dtype_name(a->dtype_id));
  return 0;
}

/* torch.frac has no integer kernel ("frac_cpu" not implemented for 'Long'):
 * refused rather than promoted to a float of zeros */
static int check_frac(const char *fn, const ln_tensor *a, bool inplace) {
  if (!ln_is_float(a->dtype_id))
    return ln_error("%s%s: not implemented for %s tensors (convert to a float dtype first)", fn,
                    inplace ? "_" : "", ln_dtype_name(a->dtype_id));
  return 0;
}

static ln_tensor *unary_p(int op, const ln_tensor *a, double p0, double p1, double p2) {
  const char *fn = (op >= 0 && op <= LN_CLAMP) ? unary_names[op] : "unary";
  if (op < 0 || op > LN_CLAMP) return ln_error_null("unary: invalid op %d", op);
  if (ln_check_tensor(fn, a, "input") != 0) return NULL;
  if (op == LN_FRAC && check_frac(fn, a, false) != 0) return NULL;
  if (op == LN_BITWISE_NOT && check_bitwise_not(fn, a, false) != 0) return NULL;
  if (op == LN_BITWISE_NOT && a->dtype_id == LN_BOOL) op = LN_LOGICAL_NOT;   /* (~ of a bool is not) */
  int ct = a->dtype_id;
  if (ct == LN_FLOAT16 || ct == LN_BFLOAT16 || (!ln_is_float(ct) && !int_ok(op))) ct = LN_FLOAT32;
  if (op == LN_NEG && ct == LN_BOOL)
    return ln_error_null("neg: negation of a bool tensor is not supported; use logical_not");
  ln_tensor *tmp;
  const ln_tensor *x = as_dtype(a, ct, &tmp);
  if (!x) return NULL;
  int odt = (op == LN_LOGICAL_NOT || op == LN_ISNAN || op == LN_ISINF || op == LN_SIGNBIT) ? LN_BOOL : ct;
  ln_tensor *out = ln_tensor_new_named(fn, a->ndim, a->shape, odt, a->device_id);
  if (out) {
    ln_unary_args args = {op, p0, p1, ln_kview_of(out), ln_kview_of(x), p2};
    const ln_tensor *keep[2] = {out, x};
    if (ln_launch(a->device_id, fn, ln_kernel(fn, a->device_id, LN_K_unary, ct), &args, sizeof args, keep, 2) != 0) {
      ln_tensor_free(out); out = NULL;
    }
  }
  ln_tensor_free(tmp);
  return out;
}

ln_tensor *ln_unary(int op, const ln_tensor *a) {
  if (op < 0 || op >= LN_NUNARY) return ln_error_null("unary: invalid op %d", op);
  if (op == LN_ELU || op == LN_SOFTPLUS) return ln_error_null("%s: has parameters; call ln_unary_p", unary_names[op]);
  return unary_p(op, a, 0, 0, 0);
}

ln_tensor *ln_unary_p(int op, const ln_tensor *a, double p0, double p1, double p2) {
  if (op < LN_HARDSWISH || op >= LN_NUNARY) return ln_error_null("unary_p: invalid op %d", op);
  return unary_p(op, a, p0, p1, p2);
}

static int unary_inplace_p(int op, ln_tensor *a, double p0, double p1) {
  const char *fn = (op >= 0 && op <= LN_CLAMP) ? unary_names[op] : "unary";
  if (op < 0 || op > LN_CLAMP) return ln_error("unary_: invalid op %d", op);
  if (ln_check_tensor(fn, a, "input") != 0 || check_writable(fn, a) != 0) return -1;
  if (op == LN_LOGICAL_NOT || op == LN_ISNAN || op == LN_ISINF || op == LN_SIGNBIT)
    return ln_error("%s_: has no in-place form", fn);
  if (op == LN_FRAC && check_frac(fn, a, true) != 0) return -1;
  if (op == LN_BITWISE_NOT && check_bitwise_not(fn, a, true) != 0) return -1;
  if (op == LN_BITWISE_NOT && a->dtype_id == LN_BOOL) op = LN_LOGICAL_NOT;   /* (writes 0/1 bytes in place) */
  if (!ln_is_float(a->dtype_id) && !int_ok(op))
    return ln_error("%s_: result type float32 can't be stored in place into %s", fn,
                    ln_dtype_name(a->dtype_id));
  if (a->dtype_id == LN_FLOAT16 || a->dtype_id == LN_BFLOAT16)
    return ln_error("%s_: in-place math on %s is not supported; cast to float32", fn,
                    ln_dtype_name(a->dtype_id));
  ln_unary_args args = {op, p0, p1, ln_kview_of(a), ln_kview_of(a)};
  const ln_tensor *keep[1] = {a};
  return ln_launch(a->device_id, fn, ln_backend_of(a->device_id)->unary, &args, sizeof args, keep, 1);
}

int ln_unary_(int op, ln_tensor *a) {
  if (op < 0 || op >= LN_NUNARY) return ln_error("unary_: invalid op %d", op);
  if (op == LN_ELU || op == LN_SOFTPLUS) return ln_error("%s_: has parameters; use ln_unary_p", unary_names[op]);
  return unary_inplace_p(op, a, 0, 0);
}

static int check_bounds(double lo, double hi) {
  if (isnan(lo) || isnan(hi)) return ln_error("clamp: bounds must not be NaN");
  if (lo > hi) return ln_error("clamp: min %g is greater than max %g", lo, hi);
  return 0;
}

ln_tensor *ln_clamp(const ln_tensor *a, double lo, double hi) {
  if (check_bounds(lo, hi) != 0) return NULL;
  return unary_p(LN_CLAMP, a, lo, hi, 0);
}
int ln_clamp_(ln_tensor *a, double lo, double hi) {
  if (check_bounds(lo, hi) != 0) return -1;
  return unary_inplace_p(LN_CLAMP, a, lo, hi);
}

/* ---- binary --------------------------------------------------------------------- */

/* The dtype the kernel computes in, and the op after bool rewriting (us:
 * "_" in the errors of an in-place form). */
static int compute_dtype(const char *fn, const char *us, int *op, int ct) {
  /* hypot and logaddexp have no integer kernel in PyTorch (two integer
   * tensors are refused there too; with a float operand they promote) */
  if ((*op == LN_HYPOT || *op == LN_LOGADDEXP || *op == LN_LOGADDEXP2 || *op == LN_IGAMMA || *op == LN_IGAMMAC ||
       (*op >= LN_SILU_BWD && *op <= LN_SIGMOID_BWD)) &&
      !ln_is_float(ct))
    return ln_error("%s%s: not implemented for %s tensors (convert to a float dtype first)", fn, us,
                    ln_dtype_name(ct));
  /* bitwise ops, gcd and lcm have no float kernel in torch either; shifts,
   * gcd and lcm none for bool */
  if (is_bitop(*op) && ln_is_float(ct))
    return ln_error("%s%s: only integer%s tensors are supported, got %s", fn, us,
                    bool_bitop(*op) ? " and bool" : "", ln_dtype_name(ct));
  if (is_bitop(*op) && !bool_bitop(*op) && ct == LN_BOOL)
    return ln_error("%s%s: not implemented for bool tensors (only integer ones)", fn, us);
  if ((*op == LN_DIV || *op == LN_ATAN2) && !ln_is_float(ct)) ct = LN_FLOAT32;
  if (ct == LN_FLOAT16 || ct == LN_BFLOAT16) ct = LN_FLOAT32;
  if (ct == LN_BOOL) {
    if (*op == LN_ADD || *op == LN_MAXIMUM) *op = LN_LOGICAL_OR;
    else if (*op == LN_MUL || *op == LN_MINIMUM) *op = LN_LOGICAL_AND;
    else if (!is_predicate(*op) && !bool_bitop(*op))
      return ln_error("%s%s: not supported for bool tensors; cast them first", fn, us);
  }
  return ct;
}

static ln_tensor *binary_impl(int op, const ln_tensor *a, const ln_tensor *b, double alpha, double p1, double p2) {
  if (op < 0 || op > LN_AXPY) return ln_error_null("binary: invalid op %d", op);
  const char *fn = binary_names[op];
  if (ln_check_tensor(fn, a, "first argument") != 0 || ln_check_tensor(fn, b, "second argument") != 0 ||
      ln_check_same_device(fn, a, b) != 0)
    return NULL;
  int nd = 0; int64_t shape[LN_MAX_DIMS];
  if (ln_broadcast_shapes(fn, a->ndim, a->shape, b->ndim, b->shape, &nd, shape) != 0) return NULL;
  int kop = op;
  int ct = compute_dtype(fn, "", &kop, ln_promote(a->dtype_id, b->dtype_id));
  if (ct < 0) return NULL;
  ln_tensor *ta, *tb;
  const ln_tensor *x = as_dtype(a, ct, &ta), *y = x ? as_dtype(b, ct, &tb) : NULL;
  ln_tensor *out = NULL;
  if (x && y) {
    out = ln_tensor_new_named(fn, nd, shape, is_predicate(op) ? LN_BOOL : ct, a->device_id);
    if (out) {
      ln_binary_args args = {kop, 0, alpha, ln_kview_of(out), ln_kview_broadcast(x, nd, shape),
                             ln_kview_broadcast(y, nd, shape), {0}, p1, p2};
      const ln_tensor *keep[3] = {out, x, y};
      if (ln_launch(a->device_id, fn, ln_kernel(fn, a->device_id, LN_K_binary, ct), &args, sizeof args, keep, 3) != 0) {
        ln_tensor_free(out); out = NULL;
      }
    }
  }
  ln_tensor_free(ta);
  if (x) ln_tensor_free(tb);
  return out;
}

ln_tensor *ln_binary(int op, const ln_tensor *a, const ln_tensor *b) {
  if (op < 0 || op >= LN_NBINARY) return ln_error_null("binary: invalid op %d", op);
  if (op == LN_ELU_BWD || op == LN_SOFTPLUS_BWD)
    return ln_error_null("%s: has parameters; call ln_binary_p", binary_names[op]);
  return binary_impl(op, a, b, 1.0, 0, 0);
}

ln_tensor *ln_binary_p(int op, const ln_tensor *a, const ln_tensor *b, double p0, double p1, double p2) {
  if (op < LN_SILU_BWD || op >= LN_NBINARY) return ln_error_null("binary_p: invalid op %d", op);
  return binary_impl(op, a, b, p0, p1, p2);
}

static int binary_inplace_impl(int op, ln_tensor *a, const ln_tensor *b, double alpha) {
  if (op < 0 || op > LN_AXPY) return ln_error("binary_: invalid op %d", op);
  const char *fn = binary_names[op];
  if (ln_check_tensor(fn, a, "first argument") != 0 || ln_check_tensor(fn, b, "second argument") != 0 ||
      ln_check_same_device(fn, a, b) != 0 || check_writable(fn, a) != 0 ||
      ln_check_no_partial_overlap(fn, a, b, "second argument") != 0)
    return -1;
  if (is_predicate(op)) return ln_error("%s_: has no in-place form", fn);
  int nd = 0; int64_t shape[LN_MAX_DIMS];
  if (ln_broadcast_shapes(fn, a->ndim, a->shape, b->ndim, b->shape, &nd, shape) != 0) return -1;
  bool same = nd == a->ndim;
  for (int i = 0; same && i < nd; i++) same = shape[i] == a->shape[i];
  if (!same) {
    char b1[160], b2[160];
    return ln_error("%s_: shape %s cannot be broadcast into the in-place target's shape %s", fn,
                    ln_shape_str(b1, sizeof b1, b->ndim, b->shape), ln_shape_str(b2, sizeof b2, a->ndim, a->shape));
  }
  int kop = op;
  int ct = compute_dtype(fn, "_", &kop, ln_promote(a->dtype_id, b->dtype_id));
  if (ct < 0) return -1;
  if (category_narrower(ct, a->dtype_id) || a->dtype_id == LN_FLOAT16 || a->dtype_id == LN_BFLOAT16)
    return ln_error("%s_: result type %s can't be cast to the in-place target's type %s", fn,
                    ln_dtype_name(ct), ln_dtype_name(a->dtype_id));
  if (ct != a->dtype_id && is_bitop(kop) && !bool_bitop(kop)) {
    /* shifts, gcd, lcm in the wider dtype, then cast into a (as torch):
     * b's values cast down first would change the counts and divisors */
    ln_tensor *r = binary_impl(op, a, b, alpha, 0, 0);
    int rc = r ? ln_copy_(a, r) : -1;
    ln_tensor_free(r);
    return rc;
  }
  ct = a->dtype_id;
  ln_tensor *tb;
  const ln_tensor *y = as_dtype(b, ct, &tb);
  if (!y) return -1;
  ln_binary_args args = {kop, 0, alpha, ln_kview_of(a), ln_kview_of(a), ln_kview_broadcast(y, nd, shape), {0}};
  const ln_tensor *keep[2] = {a, y};
  int rc = ln_launch(a->device_id, fn, ln_backend_of(a->device_id)->binary, &args, sizeof args, keep, 2);
  ln_tensor_free(tb);
  return rc;
}

int ln_binary_(int op, ln_tensor *a, const ln_tensor *b) {
  if (op < 0 || op >= LN_NBINARY) return ln_error("binary_: invalid op %d", op);
  if (op == LN_ELU_BWD || op == LN_SOFTPLUS_BWD) return ln_error("%s_: has parameters; use ln_binary_p", binary_names[op]);
  return binary_inplace_impl(op, a, b, 1.0);
}

int ln_add_scaled_(ln_tensor *a, const ln_tensor *b, double alpha) {
  return binary_inplace_impl(LN_AXPY, a, b, alpha);
}

/* integer fmod by a zero scalar, refused on the host (a zero in a divisor
 * tensor is found by the kernel) */
static int check_int_divisor(int op, int ct, double s) {
  if (op == LN_FMOD && !ln_is_float(ct) && s > -1 && s < 1) return ln_error("fmod: integer division by zero");
  return 0;
}

ln_tensor *ln_binary_scalar(int op, const ln_tensor *a, double s, int reversed) {
  if (op < 0 || op >= LN_NBINARY) return ln_error_null("binary: invalid op %d", op);
  if (op == LN_ELU_BWD || op == LN_SOFTPLUS_BWD)
    return ln_error_null("%s: has parameters; call ln_binary_p", binary_names[op]);
  const char *fn = binary_names[op];
  if (ln_check_tensor(fn, a, "tensor argument") != 0) return NULL;
  int kop = op;
  int ct = compute_dtype(fn, "", &kop, ln_result_dtype_scalar(a, s));
  if (ct < 0 || (!reversed && check_int_divisor(kop, ct, s) != 0)) return NULL;
  ln_tensor *ta;
  const ln_tensor *x = as_dtype(a, ct, &ta);
  if (!x) return NULL;
  ln_tensor *out = ln_tensor_new_named(fn, a->ndim, a->shape, is_predicate(op) ? LN_BOOL : ct, a->device_id);
  if (out) {
    ln_binary_args args = {kop, reversed ? 1 : 2, 1.0, ln_kview_of(out), ln_kview_of(x), ln_kview_of(x), {0}};
    ln_kview *sv = reversed ? &args.a : &args.b;
    for (int i = 0; i < LN_MAX_DIMS; i++) sv->stride[i] = 0;
    ln_store_from_double(args.scalar, ct, s);
    const ln_tensor *keep[2] = {out, x};
    if (ln_launch(a->device_id, fn, ln_backend_of(a->device_id)->binary, &args, sizeof args, keep, 2) != 0) {
      ln_tensor_free(out); out = NULL;
    }
  }
  ln_tensor_free(ta);
  return out;
}

int ln_binary_scalar_(int op, ln_tensor *a, double s) {
  if (op < 0 || op >= LN_NBINARY) return ln_error("binary_: invalid op %d", op);
  if (op == LN_ELU_BWD || op == LN_SOFTPLUS_BWD) return ln_error("%s_: has parameters; use ln_binary_p", binary_names[op]);
  const char *fn = binary_names[op];
  if (ln_check_tensor(fn, a, "tensor argument") != 0 || check_writable(fn, a) != 0) return -1;
  if (is_predicate(op)) return ln_error("%s_: has no in-place form", fn);
  int kop = op;
  int ct = compute_dtype(fn, "_", &kop, ln_result_dtype_scalar(a, s));
  if (ct < 0 || check_int_divisor(kop, ct, s) != 0) return -1;
  if (category_narrower(ct, a->dtype_id) || a->dtype_id == LN_FLOAT16 || a->dtype_id == LN_BFLOAT16)
    return ln_error("%s_: result type %s can't be cast to the in-place target's type %s", fn,
                    ln_dtype_name(ct), ln_dtype_name(a->dtype_id));
  ln_binary_args args = {kop, 2, 1.0, ln_kview_of(a), ln_kview_of(a), ln_kview_of(a), {0}};
  for (int i = 0; i < LN_MAX_DIMS; i++) args.b.stride[i] = 0;
  ln_store_from_double(args.scalar, a->dtype_id, s);
  const ln_tensor *keep[1] = {a};
  return ln_launch(a->device_id, fn, ln_backend_of(a->device_id)->binary, &args, sizeof args, keep, 1);
}

/* ---- where, cast, copy ---------------------------------------------------------------- */

ln_tensor *ln_where(const ln_tensor *cond, const ln_tensor *a, const ln_tensor *b) {
  const char *fn = "where";
  if (ln_check_tensor(fn, cond, "condition") != 0 || ln_check_tensor(fn, a, "second argument") != 0 ||
      ln_check_tensor(fn, b, "third argument") != 0 || ln_check_same_device(fn, cond, a) != 0 ||
      ln_check_same_device(fn, a, b) != 0)
    return NULL;
  if (cond->dtype_id != LN_BOOL && cond->dtype_id != LN_UINT8)
    return ln_error_null("where: condition must be bool, got %s", ln_dtype_name(cond->dtype_id));
  int n1 = 0, nd = 0; int64_t s1[LN_MAX_DIMS], shape[LN_MAX_DIMS];
  if (ln_broadcast_shapes(fn, a->ndim, a->shape, b->ndim, b->shape, &n1, s1) != 0 ||
      ln_broadcast_shapes(fn, cond->ndim, cond->shape, n1, s1, &nd, shape) != 0)
    return NULL;
  int ct = ln_promote(a->dtype_id, b->dtype_id);
  ln_tensor *ta, *tb = NULL;
  const ln_tensor *x = as_dtype(a, ct, &ta), *y = x ? as_dtype(b, ct, &tb) : NULL;
  ln_tensor *out = NULL;
  if (x && y && (out = ln_tensor_new_named(fn, nd, shape, ct, a->device_id))) {
    ln_where_args args = {ln_kview_of(out), ln_kview_broadcast(cond, nd, shape),
                          ln_kview_broadcast(x, nd, shape), ln_kview_broadcast(y, nd, shape)};
    const ln_tensor *keep[4] = {out, cond, x, y};
    if (ln_launch(a->device_id, fn, ln_backend_of(a->device_id)->where, &args, sizeof args, keep, 4) != 0) {
      ln_tensor_free(out); out = NULL;
    }
  }
  ln_tensor_free(ta);
  ln_tensor_free(tb);
  return out;
}

ln_tensor *ln_cast(const ln_tensor *a, int dtype) {
  if (ln_check_tensor("cast", a, "tensor") != 0) return NULL;
  if (dtype < 0 || dtype >= LN_NDTYPES) return ln_error_null("cast: invalid dtype %d", dtype);
  ln_tensor *out = ln_tensor_new_named("cast", a->ndim, a->shape, dtype, a->device_id);
  if (out && ln_copy_(out, a) != 0) { ln_tensor_free(out); out = NULL; }
  return out;
}

int ln_copy_(ln_tensor *dst, const ln_tensor *src) { return ln_copy_into(dst, src, false); }
int ln_transfer_(ln_tensor *dst, const ln_tensor *src, ln_event *done) {
  if (!done) return ln_error("transfer_: done is NULL");
  return ln_transfer_into(dst, src, done);
}

ln_tensor *ln_to_device(const ln_tensor *a, int device) {
  if (ln_check_tensor("to", a, "tensor") != 0) return NULL;
  if (!ln_device_valid(device)) {
    if (device >= LN_CUDA_BASE)
      return ln_error_null("to: cuda:%d is not available (%s)", device - LN_CUDA_BASE, ln_cuda_reason());
    return ln_error_null("to: no device cpu:%d (there are %d CPU devices)", device, ln_cpu_device_count());
  }
  if (device == a->device_id) return ln_alias(a);
  ln_tensor *out = ln_tensor_new_named("to", a->ndim, a->shape, a->dtype_id, device);
  if (out && ln_copy_into(out, a, true) != 0) { ln_tensor_free(out); out = NULL; }
  return out;
}

/* ---- fill, arange, eye ---------------------------------------------------------------- */

int ln_fill_(ln_tensor *t, double value) {
  if (ln_check_tensor("fill_", t, "tensor") != 0 || check_writable("fill_", t) != 0) return -1;
  ln_fill_args args = {value, 0, ln_kview_of(t)};
  const ln_tensor *keep[1] = {t};
  return ln_launch(t->device_id, "fill_", ln_backend_of(t->device_id)->fill, &args, sizeof args, keep, 1);
}

int ln_arange_(ln_tensor *t, double start, double step) {
  if (ln_check_tensor("arange", t, "tensor") != 0) return -1;
  if (!ln_is_contiguous(t)) return ln_error("arange: output must be contiguous");
  ln_fill_args args = {start, step, ln_kview_of(t)};
  const ln_tensor *keep[1] = {t};
  return ln_launch(t->device_id, "arange", ln_backend_of(t->device_id)->arange, &args, sizeof args, keep, 1);
}

int ln_eye_(ln_tensor *t) {
  if (ln_check_tensor("eye", t, "tensor") != 0) return -1;
  if (t->ndim != 2) return ln_error("eye: needs a 2-d tensor, got %d-d", t->ndim);
  if (ln_fill_(t, 0) != 0) return -1;
  int64_t n = LN_MIN(t->shape[0], t->shape[1]);
  int64_t shape[1] = {n}, stride[1] = {t->stride[0] + t->stride[1]};
  ln_tensor *diag = ln_as_strided(t, 1, shape, stride, t->offset);
  if (!diag) return -1;
  int rc = ln_fill_(diag, 1);
  ln_tensor_free(diag);
  return rc;
}
