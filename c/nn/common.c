/* common.c -- helpers shared by the nn front ends: argument checks,
 * contiguous inputs, dense outputs, scratch memory from the device cache. */
#include "nn.h"
#include <stdio.h>

static const char *dev_name(char *buf, size_t n, int id) { return ln_device_str(buf, n, id); }

const char *nn_shape(char *buf, size_t n, const ln_tensor *t) {
  return ln_shape_str(buf, n, t->ndim, t->shape);
}

int nn_check(const char *fn, const char *name, const ln_tensor *t, int dtype, int device,
             int ndim, const int64_t *shape) {
  if (ln_check_tensor(fn, t, name) != 0) return -1;
  if (t->dtype_id != LN_FLOAT32 && t->dtype_id != LN_FLOAT64)
    return ln_error("%s: %s must be float32 or float64, got %s", fn, name, ln_dtype_name(t->dtype_id));
  if (dtype >= 0 && t->dtype_id != dtype)
    return ln_error("%s: %s is %s but the input is %s; cast it first", fn, name,
                    ln_dtype_name(t->dtype_id), ln_dtype_name(dtype));
  if (device >= 0 && t->device_id != device) {
    char a[32], b[32];
    return ln_error("%s: %s is on %s but the input is on %s; move it with to()", fn, name,
                    dev_name(a, sizeof a, t->device_id), dev_name(b, sizeof b, device));
  }
  if (ndim >= 0) {
    bool ok = t->ndim == ndim;
    for (int i = 0; ok && shape && i < ndim; i++) ok = shape[i] < 0 || shape[i] == t->shape[i];
    if (!ok) {
      char want[200], got[200];
      size_t len = 0;
      len += (size_t)snprintf(want, sizeof want, "{");
      for (int i = 0; i < ndim && len < sizeof want; i++) {
        if (shape && shape[i] >= 0)
          len += (size_t)snprintf(want + len, sizeof want - len, i ? ",%lld" : "%lld", (long long)shape[i]);
        else
          len += (size_t)snprintf(want + len, sizeof want - len, i ? ",*" : "*");
      }
      if (len < sizeof want) snprintf(want + len, sizeof want - len, "}");
      return ln_error("%s: %s has shape %s, expected %s", fn, name, nn_shape(got, sizeof got, t), want);
    }
  }
  return 0;
}

int nn_input(const char *fn, const char *name, const ln_tensor *t, nn_in *in) {
  in->t = t;
  in->owned = NULL;
  if (!t || ln_is_contiguous(t)) return 0;
  in->owned = ln_contiguous(t);
  if (!in->owned) return -1;
  in->t = in->owned;
  return 0;
}

void nn_in_free(nn_in *in) {
  ln_tensor_free(in->owned);
  in->owned = NULL;
}

int nn_output(const char *fn, const char *name, ln_tensor *t, nn_out *out) {
  out->user = t;
  out->t = t;
  if (!t || ln_is_contiguous(t)) return 0;
  for (int i = 0; i < t->ndim; i++)
    if (t->stride[i] == 0 && t->shape[i] > 1)
      return ln_error("%s: cannot write %s, an expanded tensor (dim %d has stride 0); clone() it first",
                      fn, name, i + 1);
  out->t = ln_tensor_new_like_shape(t->ndim, t->shape, t->dtype_id, t->device_id);
  return out->t ? 0 : -1;
}

int nn_out_finish(nn_out *out, int rc) {
  if (out->t && out->t != out->user) {
    if (rc == 0) rc = ln_copy_(out->user, out->t);
    ln_tensor_free(out->t);
  }
  out->t = out->user;
  return rc;
}

int nn_scratch_new(const char *fn, int device, size_t nbytes, nn_scratch *s) {
  memset(s, 0, sizeof *s);
  if (nbytes == 0) return 0;
  ln_storage *st = ln_storage_new(device, nbytes);
  if (!st) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", ln_last_error());
    return ln_error("%s: scratch memory: %s", fn, msg);
  }
  s->hold.storage = st;
  s->hold.device_id = device;
  s->data = st->data;
  return 0;
}

void nn_scratch_free(nn_scratch *s) {
  if (s->hold.storage) ln_storage_release(s->hold.storage);
  s->hold.storage = NULL;
  s->data = NULL;
}
