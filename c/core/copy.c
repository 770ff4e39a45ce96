/* copy.c -- broadcasting and the checked copy every layer uses (ln_copy_,
 * contiguous/clone, random draws into strided tensors): core launches the
 * device backend's copy kernel itself, so core never calls into c/ops. */
#include "backend.h"
#include "checked.h"

int ln_broadcast_shapes(const char *fn, int na, const int64_t *sa, int nb, const int64_t *sb,
                        int *nout, int64_t *out) {
  int n = na > nb ? na : nb;
  for (int i = 0; i < n; i++) {
    int ia = na - n + i, ib = nb - n + i;
    int64_t da = ia >= 0 ? sa[ia] : 1, db = ib >= 0 ? sb[ib] : 1;
    if (da != db && da != 1 && db != 1) {
      char b1[160], b2[160];
      return ln_error("%s: shapes %s and %s cannot broadcast", fn,
                      ln_shape_str(b1, sizeof b1, na, sa), ln_shape_str(b2, sizeof b2, nb, sb));
    }
    out[i] = da == 1 ? db : da;
  }
  int64_t count;   /* (expanded operands can broadcast to more than any tensor holds) */
  if (ln_numel_ovf(n, out, &count) || count > LN_MAX_BYTES) {
    char b1[160];
    return ln_error("%s: the broadcast shape %s is too large (element count overflows)", fn,
                    ln_shape_str(b1, sizeof b1, n, out));
  }
  *nout = n;
  return 0;
}

ln_kview ln_kview_broadcast(const ln_tensor *t, int ndim, const int64_t *shape) {
  ln_kview v = ln_kview_of(t);
  int off = ndim - t->ndim;
  v.ndim = ndim;
  for (int i = ndim - 1; i >= 0; i--) {
    int j = i - off;
    v.shape[i] = shape[i];
    v.stride[i] = (j >= 0 && t->shape[j] != 1) ? t->stride[j] : 0;
  }
  for (int i = ndim; i < LN_MAX_DIMS; i++) { v.shape[i] = 1; v.stride[i] = 0; }
  return v;
}

/* A copy between two devices of one type whose runtime has copy_peer (a
 * GPU's peer copy; the CPU has none: its devices share host memory and the
 * copy kernel does it): when it moves bytes only (one dtype, both dense, no
 * broadcast), the source's stream runs the runtime's copy_peer instead of the
 * copy kernel. */
typedef struct { const ln_backend *b; int dst_index, src_index; void *dst; const void *src; size_t nbytes; } peer_args;
static int peer_task(void *p) {
  peer_args *a = p;
  return a->b->rt.copy_peer(a->dst_index, a->dst, a->src_index, a->src, a->nbytes);
}
static bool peer_copy(const ln_tensor *dst, const ln_tensor *src, peer_args *pa) {
  const ln_backend *b = ln_backend_of(src->device_id);
  if (!b->rt.copy_peer || ln_device_type(dst->device_id) != ln_device_type(src->device_id) ||
      dst->dtype_id != src->dtype_id || ln_numel(dst) != ln_numel(src) || !ln_is_contiguous(dst) ||
      !ln_is_contiguous(src))
    return false;
  *pa = (peer_args){b, ln_device_index(dst->device_id), ln_device_index(src->device_id), ln_data_ptr(dst),
                    ln_data_ptr(src), (size_t)ln_numel(dst) * ln_dtype_size(dst->dtype_id)};
  return true;
}

/* the checks every copy makes, and its kernel arguments */
static int copy_args(ln_tensor *dst, const ln_tensor *src, ln_copy_args *args) {
  const char *fn = "copy_";
  if (ln_check_tensor(fn, dst, "destination") != 0 || ln_check_tensor(fn, src, "source") != 0 ||
      ln_check_no_internal_overlap(fn, dst) != 0 || ln_check_no_partial_overlap(fn, dst, src, "source") != 0)
    return -1;
  int nd = 0; int64_t shape[LN_MAX_DIMS];
  if (ln_broadcast_shapes(fn, dst->ndim, dst->shape, src->ndim, src->shape, &nd, shape) != 0) return -1;
  bool same = nd == dst->ndim;
  for (int i = 0; same && i < nd; i++) same = shape[i] == dst->shape[i];
  if (!same) {
    char b1[160], b2[160];
    return ln_error("copy_: source shape %s cannot be broadcast to destination shape %s",
                    ln_shape_str(b1, sizeof b1, src->ndim, src->shape),
                    ln_shape_str(b2, sizeof b2, dst->ndim, dst->shape));
  }
  *args = (ln_copy_args){ln_kview_of(dst), ln_kview_broadcast(src, nd, shape)};
  return 0;
}

/* dst_fresh: dst's storage was just allocated, so no queued work uses it
 * (a storage goes back to the allocator only when the last task keeping it
 * has run): a copy from another device need not wait for dst's stream */
int ln_copy_into(ln_tensor *dst, const ln_tensor *src, bool dst_fresh) {
  const char *fn = "copy_";
  ln_copy_args args;
  if (copy_args(dst, src, &args) != 0) return -1;
  const ln_tensor *keep[2] = {dst, src};
  if (ln_numel(dst) == 0) return 0;
  if (dst->device_id == src->device_id)
    return ln_launch(dst->device_id, fn, ln_backend_of(dst->device_id)->copy, &args, sizeof args, keep, 2);
  /* across devices: the copy runs on the source's stream, or on the
   * destination's when only its memory is out of the host's reach (a GPU's:
   * its copy kernel reads host memory too). The copier starts once the
   * destination's earlier work is done (it may still use dst; not for a fresh
   * dst: then the two streams are not coupled both ways, DataParallel's
   * scatter and gather included) and the source's too; the destination's
   * later work waits for the copy */
  int sdev = src->device_id, ddev = dst->device_id;
  int copier = ln_backend_of(ddev)->rt.copy_to_host && !ln_backend_of(sdev)->rt.copy_to_host ? ddev : sdev;
  ln_event ev;
  if (!dst_fresh && copier != ddev && (ln_event_record(ddev, &ev) != 0 || ln_event_wait(copier, &ev) != 0))
    return -1;
  if (copier != sdev && (ln_event_record(sdev, &ev) != 0 || ln_event_wait(copier, &ev) != 0)) return -1;
  peer_args pa;   /* (two devices of one type: the copier is the source) */
  int rc = peer_copy(dst, src, &pa) ? ln_launch(copier, fn, peer_task, &pa, sizeof pa, keep, 2)
                                    : ln_launch(copier, fn, ln_backend_of(copier)->copy, &args, sizeof args, keep, 2);
  if (rc != 0) return -1;
  if (copier == ddev) return 0;
  if (ln_event_record(copier, &ev) != 0) return -1;
  return ln_event_wait(ddev, &ev);
}

/* A transfer (a pipeline's activations forward and gradients back): the copy
 * runs on the destination's comm stream once the work queued so far on both
 * devices' compute streams is done (the source's made src; the destination's
 * earlier work may still read dst), and the destination's later work waits
 * for it (*done: the point after the copy, ln_event_wait'ed by the
 * destination just before the work that reads dst, so that what it runs
 * until then does not wait). Neither compute stream waits for the other, so
 * a device never stalls until the other drains its queue, as ln_copy_into's
 * copier does (it waits for dst's stream). Where a device has no host comm
 * stream (an inline device, one with streams of its own) it is ln_copy_into. */
int ln_transfer_into(ln_tensor *dst, const ln_tensor *src, ln_event *done) {
  if (!dst || !src || dst->device_id == src->device_id || !ln_device_has_comm_stream(dst->device_id) ||
      !ln_backend_of(dst->device_id)->rt.stream || !ln_backend_of(src->device_id)->rt.stream) {
    if (ln_copy_into(dst, src, false) != 0) return -1;
    return dst ? ln_event_record(dst->device_id, done) : 0;
  }
  ln_copy_args args;
  if (copy_args(dst, src, &args) != 0) return -1;
  const ln_tensor *keep[2] = {dst, src};
  int ddev = dst->device_id;
  ln_event ev;
  if (ln_numel(dst) > 0) {
    if (ln_comm_stream_wait_compute(ddev) != 0 || ln_event_record(src->device_id, &ev) != 0 ||
        ln_comm_event_wait(ddev, &ev) != 0)
      return -1;
    if (ln_launch_comm(ddev, "copy_", ln_backend_of(ddev)->copy, &args, sizeof args, keep, 2, 0) != 0) return -1;
  }
  return ln_comm_event_record(ddev, done);
}
