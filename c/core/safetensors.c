/* safetensors.c -- reading and writing the safetensors format.
 *
 * File layout (https://github.com/huggingface/safetensors):
 *   8 bytes   N, the header length, unsigned little-endian
 *   N bytes   JSON object: {"__metadata__": {"k": "v", ...},
 *                           "name": {"dtype": "F32", "shape": [2, 3],
 *                                    "data_offsets": [begin, end]}, ...}
 *             (padded with spaces; offsets relative to the data start)
 *   rest      the tensors' bytes, little-endian, row-major, back to back
 *
 * Writes are atomic (file.c's ln_afile: a temporary file in the target's
 * directory, fsync, rename over the target, fsync of the directory; then
 * temporary files left by killed writers on this host are removed). Reading trusts nothing:
 * the header length, the JSON, every dtype, shape and offset are checked
 * against the file size before anything is allocated, so a truncated,
 * corrupt or hostile file gives an error naming the file and the problem. */
#include "internal.h"
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c assumes a little-endian host"
#endif

enum { ST_MAX_HEADER = 100 << 20, ST_MAX_DEPTH = 64, ST_MAX_TENSORS = 1 << 24 };

static const char *const st_dtype[LN_NDTYPES] = {"F32", "F64", "I32", "I64",
                                                 "U8",  "BOOL", "F16", "BF16"};

typedef struct st_entry {
  char *name;
  int dtype, ndim;
  int64_t shape[LN_MAX_DIMS];
  uint64_t begin, end;
} st_entry;

struct ln_st_file {
  char *path;
  int fd;
  uint64_t data_start, data_size;
  int n, cap;
  st_entry *e;
  char *meta_json;            /* the "__metadata__" object's text, or NULL */
  int nmeta, meta_cap;
  char **meta_key, **meta_val;
};

/* ---- small helpers ---------------------------------------------------------- */

typedef struct { char *p; size_t n, cap; int oom; } sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
  if (b->oom) return;
  if (b->n + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap * 2 : 256;
    while (cap < b->n + n + 1) cap *= 2;
    char *q = realloc(b->p, cap);
    if (!q) { b->oom = 1; return; }
    b->p = q; b->cap = cap;
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = 0;
}
static void sb_str(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }
static void sb_fmt(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_fmt(sbuf *b, const char *fmt, ...) {
  char tmp[64];
  va_list ap; va_start(ap, fmt);
  int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (k > 0) sb_put(b, tmp, (size_t)k < sizeof tmp ? (size_t)k : sizeof tmp - 1);
}

/* JSON string literal with escapes (the input is taken as UTF-8 bytes) */
static void sb_json_str(sbuf *b, const char *s) {
  sb_put(b, "\"", 1);
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
    if (*c == '"') sb_put(b, "\\\"", 2);
    else if (*c == '\\') sb_put(b, "\\\\", 2);
    else if (*c == '\n') sb_put(b, "\\n", 2);
    else if (*c == '\t') sb_put(b, "\\t", 2);
    else if (*c == '\r') sb_put(b, "\\r", 2);
    else if (*c < 0x20) sb_fmt(b, "\\u%04x", *c);
    else sb_put(b, (const char *)c, 1);
  }
  sb_put(b, "\"", 1);
}

/* 1 when s is well-formed UTF-8 (what JSON readers such as Python's demand) */
static int utf8_ok(const char *str) {
  const unsigned char *s = (const unsigned char *)str;
  while (*s) {
    unsigned c = *s++, need, min;
    if (c < 0x80) continue;
    if (c >= 0xc2 && c < 0xe0) { need = 1; min = 0x80; c &= 0x1f; }
    else if (c >= 0xe0 && c < 0xf0) { need = 2; min = 0x800; c &= 0x0f; }
    else if (c >= 0xf0 && c < 0xf5) { need = 3; min = 0x10000; c &= 0x07; }
    else return 0;
    for (unsigned k = 0; k < need; k++, s++) {
      if ((*s & 0xc0) != 0x80) return 0;
      c = (c << 6) | (*s & 0x3f);
    }
    if (c < min || c > 0x10ffff || (c >= 0xd800 && c < 0xe000)) return 0;
  }
  return 1;
}

static int read_full(int fd, void *dst, size_t n, uint64_t off) {
  char *p = dst;
  while (n > 0) {
    size_t chunk = n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n;
    ssize_t k = pread(fd, p, chunk, (off_t)off);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) return -1;
    if (k == 0) { errno = 0; return -1; }  /* shorter than its header said */
    p += k; n -= (size_t)k; off += (uint64_t)k;
  }
  return 0;
}

/* ---- writing ------------------------------------------------------------------ */

typedef struct { const char *name; const ln_tensor *t; int es; } save_item;

/* widest elements first (keeps every tensor aligned to its element size, as
 * the reference implementation does), then by name: deterministic files */
static int save_cmp(const void *a, const void *b) {
  const save_item *x = a, *y = b;
  if (x->es != y->es) return y->es - x->es;
  return strcmp(x->name, y->name);
}

/* A strided host view, gathered row by row through a bounded buffer (no
 * full-size copy of a large non-contiguous tensor). After a sync. */
static int write_strided(ln_afile *f, const ln_tensor *t) {
  enum { CHUNK = 1 << 20 };
  int es = ln_dtype_size(t->dtype_id), nd = t->ndim, last = nd - 1;
  int64_t rows = 1, len = t->shape[last], st = t->stride[last];
  for (int d = 0; d < last; d++) rows *= t->shape[d];
  size_t rowbytes = (size_t)len * (size_t)es, cap = rowbytes > CHUNK ? rowbytes : CHUNK;
  char *buf = malloc(cap);
  if (!buf) return ln_afile_fail(f, "out of memory");
  const char *base = ln_data_ptr(t);
  int64_t idx[LN_MAX_DIMS] = {0};
  size_t used = 0;
  int rc = 0;
  for (int64_t r = 0; r < rows && rc == 0; r++) {
    int64_t off = 0;
    for (int d = 0; d < last; d++) off += idx[d] * t->stride[d];
    if (used + rowbytes > cap) { rc = ln_afile_write(f, buf, used); used = 0; }
    char *dst = buf + used;
    if (st == 1) memcpy(dst, base + off * es, rowbytes);
    else for (int64_t i = 0; i < len; i++) memcpy(dst + i * es, base + (off + i * st) * es, (size_t)es);
    used += rowbytes;
    for (int d = last - 1; d >= 0; d--) {
      if (++idx[d] < t->shape[d]) break;
      idx[d] = 0;
    }
  }
  if (rc == 0 && used) rc = ln_afile_write(f, buf, used);
  free(buf);
  return rc;
}

/* -1 with the error set: a write's (the OS error) or a device's (its message) */
static int device_failed(ln_afile *f) {
  char msg[512];
  snprintf(msg, sizeof msg, "%s", ln_last_error());
  return ln_afile_fail(f, msg);
}

static int write_tensor(ln_afile *f, const ln_tensor *t, size_t nbytes) {
  if (nbytes == 0) return 0;
  if (t->device_id < LN_CUDA_BASE) {   /* host memory: write it in place */
    if (ln_sync(t->device_id) != 0) return device_failed(f);
    if (ln_is_contiguous(t)) return ln_afile_write(f, ln_data_ptr(t), nbytes);
    if (t->ndim > 0) return write_strided(f, t);
  }
  void *buf = malloc(nbytes);
  if (!buf) return ln_afile_fail(f, "out of memory");
  if (ln_tensor_read(t, buf) != 0) { free(buf); return device_failed(f); }   /* syncs, gathers */
  int rc = ln_afile_write(f, buf, nbytes);
  free(buf);
  return rc;
}


int ln_st_save(const char *path, int n, const char *const *names, ln_tensor *const *tensors,
               int nmeta, const char *const *meta_keys, const char *const *meta_values) {
  if (!path || !*path) return ln_error("save: path is empty");
  if (n < 0 || (n > 0 && (!names || !tensors)))
    return ln_error("save: %s: invalid tensor list", path);
  if (nmeta < 0 || (nmeta > 0 && (!meta_keys || !meta_values)))
    return ln_error("save: %s: invalid metadata", path);
  save_item *items = calloc((size_t)(n ? n : 1), sizeof *items);
  if (!items) return ln_error("save: %s: out of memory", path);
  for (int i = 0; i < n; i++) {
    if (!names[i] || !*names[i]) { free(items); return ln_error("save: %s: tensor %d has an empty name", path, i + 1); }
    if (strcmp(names[i], "__metadata__") == 0) {
      free(items); return ln_error("save: %s: '__metadata__' is reserved, not a tensor name", path);
    }
    if (!utf8_ok(names[i])) { free(items); return ln_error("save: %s: tensor name %d is not valid UTF-8", path, i + 1); }
    if (ln_check_tensor("save", tensors[i], names[i]) != 0) { free(items); return -1; }
    if (tensors[i]->dtype_id < 0 || tensors[i]->dtype_id >= LN_NDTYPES) {
      free(items); return ln_error("save: %s: tensor '%s' has an invalid dtype", path, names[i]);
    }
    items[i] = (save_item){names[i], tensors[i], ln_dtype_size(tensors[i]->dtype_id)};
  }
  qsort(items, (size_t)n, sizeof *items, save_cmp);
  for (int i = 1; i < n; i++)
    if (strcmp(items[i].name, items[i - 1].name) == 0) {
      int rc = ln_error("save: %s: tensor name '%s' given twice", path, items[i].name);
      free(items); return rc;
    }
  for (int i = 0; i < nmeta; i++)
    if (!meta_keys[i] || !meta_values[i]) { free(items); return ln_error("save: %s: metadata entry %d is NULL", path, i + 1); }
    else if (!utf8_ok(meta_keys[i]) || !utf8_ok(meta_values[i])) {
      free(items); return ln_error("save: %s: metadata '%.60s' is not valid UTF-8 text", path, meta_keys[i]);
    }

  /* the header */
  sbuf h = {0};
  sb_str(&h, "{");
  if (nmeta > 0) {
    sb_str(&h, "\"__metadata__\":{");
    for (int i = 0; i < nmeta; i++) {
      if (i) sb_str(&h, ",");
      sb_json_str(&h, meta_keys[i]); sb_str(&h, ":"); sb_json_str(&h, meta_values[i]);
    }
    sb_str(&h, "}");
  }
  uint64_t off = 0;
  for (int i = 0; i < n; i++) {
    const ln_tensor *t = items[i].t;
    uint64_t nb = (uint64_t)ln_numel(t) * (uint64_t)items[i].es;
    if (i || nmeta > 0) sb_str(&h, ",");
    sb_json_str(&h, items[i].name);
    sb_fmt(&h, ":{\"dtype\":\"%s\",\"shape\":[", st_dtype[t->dtype_id]);
    for (int d = 0; d < t->ndim; d++) sb_fmt(&h, d ? ",%lld" : "%lld", (long long)t->shape[d]);
    sb_fmt(&h, "],\"data_offsets\":[%llu,", (unsigned long long)off);
    off += nb;
    sb_fmt(&h, "%llu]}", (unsigned long long)off);
  }
  sb_str(&h, "}");
  while (!h.oom && h.n % 8) sb_str(&h, " ");
  if (h.oom) { free(h.p); free(items); return ln_error("save: %s: out of memory", path); }

  /* header and tensors through the shared atomic writer (file.c) */
  ln_afile *f = ln_afile_open("save", path);
  int rc = f ? 0 : -1;
  unsigned char len8[8];
  for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)h.n >> (8 * i));
  if (rc == 0) rc = ln_afile_write(f, len8, 8);
  if (rc == 0) rc = ln_afile_write(f, h.p, h.n);
  for (int i = 0; rc == 0 && i < n; i++)
    rc = write_tensor(f, items[i].t, (size_t)ln_numel(items[i].t) * (size_t)items[i].es);
  if (f) rc = rc == 0 ? ln_afile_commit(f) : (ln_afile_abort(f), -1);
  free(h.p); free(items);
  return rc;
}

/* ---- a strict JSON reader for the header -------------------------------------- */

typedef struct {
  const char *s, *p, *end;   /* header text, cursor, end */
  const char *path;
  int failed;
} jp;

static int jerr(jp *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int jerr(jp *j, const char *fmt, ...) {
  if (j->failed) return -1;
  char msg[512];
  va_list ap; va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  j->failed = 1;
  return ln_error("load: %s: invalid header: %s (at byte %ld of the JSON header)", j->path, msg,
                  (long)(j->p - j->s));
}

static void ws(jp *j) {
  while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')) j->p++;
}

static int expect(jp *j, char c) {
  ws(j);
  if (j->p >= j->end) return jerr(j, "expected '%c', got the end of the header", c);
  if (*j->p != c) return jerr(j, "expected '%c', got '%c'", c, *j->p);
  j->p++;
  return 0;
}

static int peek(jp *j) { ws(j); return j->p < j->end ? (unsigned char)*j->p : -1; }

static int hex4(jp *j, unsigned *v) {
  if (j->end - j->p < 4) return jerr(j, "truncated \\u escape");
  *v = 0;
  for (int i = 0; i < 4; i++) {
    char c = *j->p++;
    unsigned d = (c >= '0' && c <= '9') ? (unsigned)(c - '0') : (c >= 'a' && c <= 'f') ? (unsigned)(c - 'a' + 10)
               : (c >= 'A' && c <= 'F') ? (unsigned)(c - 'A' + 10) : 99u;
    if (d > 15) return jerr(j, "bad hex digit in \\u escape");
    *v = *v * 16 + d;
  }
  return 0;
}

/* A string into *out (malloc'd, UTF-8, NUL-free), or skipped when out is NULL. */
static int jstring(jp *j, char **out) {
  if (expect(j, '"') != 0) return -1;
  sbuf b = {0};
  while (1) {
    if (j->p >= j->end) { free(b.p); return jerr(j, "unterminated string"); }
    unsigned char c = (unsigned char)*j->p++;
    if (c == '"') break;
    if (c < 0x20) { free(b.p); return jerr(j, "control character in a string"); }
    if (c != '\\') { if (out) sb_put(&b, (const char *)&c, 1); continue; }
    if (j->p >= j->end) { free(b.p); return jerr(j, "unterminated escape"); }
    char e = *j->p++, ch;
    switch (e) {
      case '"': ch = '"'; break; case '\\': ch = '\\'; break; case '/': ch = '/'; break;
      case 'b': ch = '\b'; break; case 'f': ch = '\f'; break; case 'n': ch = '\n'; break;
      case 'r': ch = '\r'; break; case 't': ch = '\t'; break;
      case 'u': {
        unsigned u, lo;
        if (hex4(j, &u) != 0) { free(b.p); return -1; }
        if (u >= 0xd800 && u < 0xdc00) {  /* surrogate pair */
          if (j->end - j->p < 6 || j->p[0] != '\\' || j->p[1] != 'u') { free(b.p); return jerr(j, "lone surrogate in \\u escape"); }
          j->p += 2;
          if (hex4(j, &lo) != 0) { free(b.p); return -1; }
          if (lo < 0xdc00 || lo >= 0xe000) { free(b.p); return jerr(j, "bad surrogate pair in \\u escape"); }
          u = 0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00);
        } else if (u >= 0xdc00 && u < 0xe000) { free(b.p); return jerr(j, "lone surrogate in \\u escape"); }
        if (u == 0) { free(b.p); return jerr(j, "\\u0000 in a string"); }
        char enc[4]; size_t k;
        if (u < 0x80) { enc[0] = (char)u; k = 1; }
        else if (u < 0x800) { enc[0] = (char)(0xc0 | (u >> 6)); enc[1] = (char)(0x80 | (u & 0x3f)); k = 2; }
        else if (u < 0x10000) { enc[0] = (char)(0xe0 | (u >> 12)); enc[1] = (char)(0x80 | ((u >> 6) & 0x3f)); enc[2] = (char)(0x80 | (u & 0x3f)); k = 3; }
        else { enc[0] = (char)(0xf0 | (u >> 18)); enc[1] = (char)(0x80 | ((u >> 12) & 0x3f)); enc[2] = (char)(0x80 | ((u >> 6) & 0x3f)); enc[3] = (char)(0x80 | (u & 0x3f)); k = 4; }
        if (out) sb_put(&b, enc, k);
        continue;
      }
      default: free(b.p); return jerr(j, "bad escape '\\%c'", e);
    }
    if (out) sb_put(&b, &ch, 1);
  }
  if (b.oom) { free(b.p); j->failed = 1; return ln_error("load: %s: out of memory", j->path); }
  if (out) *out = b.p ? b.p : strdup("");
  else free(b.p);
  if (out && !*out) { j->failed = 1; return ln_error("load: %s: out of memory", j->path); }
  return 0;
}

/* A non-negative integer that fits int64. */
static int juint(jp *j, uint64_t *v, const char *what) {
  ws(j);
  if (j->p >= j->end || *j->p < '0' || *j->p > '9')
    return jerr(j, "%s must be a non-negative integer", what);
  if (*j->p == '0' && j->end - j->p > 1 && j->p[1] >= '0' && j->p[1] <= '9')
    return jerr(j, "%s has a leading zero", what);
  uint64_t x = 0;
  while (j->p < j->end && *j->p >= '0' && *j->p <= '9') {
    unsigned d = (unsigned)(*j->p - '0');
    if (x > ((uint64_t)INT64_MAX - d) / 10) return jerr(j, "%s is too large", what);
    x = x * 10 + d;
    j->p++;
  }
  if (j->p < j->end && (*j->p == '.' || *j->p == 'e' || *j->p == 'E'))
    return jerr(j, "%s must be an integer", what);
  *v = x;
  return 0;
}

static int skip_value(jp *j, int depth) {
  if (depth > ST_MAX_DEPTH) return jerr(j, "nested too deeply");
  int c = peek(j);
  if (c == '"') return jstring(j, NULL);
  if (c == '{' || c == '[') {
    char close = c == '{' ? '}' : ']';
    j->p++;
    if (peek(j) == close) { j->p++; return 0; }
    while (1) {
      if (c == '{') { if (jstring(j, NULL) != 0 || expect(j, ':') != 0) return -1; }
      if (skip_value(j, depth + 1) != 0) return -1;
      int d = peek(j);
      if (d == ',') { j->p++; continue; }
      if (d == close) { j->p++; return 0; }
      return jerr(j, "expected ',' or '%c'", close);
    }
  }
  if (c == '-' || (c >= '0' && c <= '9')) {
    j->p++;
    while (j->p < j->end && strchr("0123456789.eE+-", *j->p)) j->p++;
    return 0;
  }
  static const char *const words[] = {"true", "false", "null"};
  for (int i = 0; i < 3; i++) {
    size_t k = strlen(words[i]);
    if ((size_t)(j->end - j->p) >= k && memcmp(j->p, words[i], k) == 0) { j->p += k; return 0; }
  }
  return c < 0 ? jerr(j, "unexpected end of the header") : jerr(j, "unexpected character '%c'", c);
}

static int parse_metadata(jp *j, ln_st_file *f) {
  ws(j);
  const char *start = j->p;
  if (peek(j) == 'n' && j->end - j->p >= 4 && memcmp(j->p, "null", 4) == 0) { j->p += 4; return 0; }
  if (expect(j, '{') != 0) return -1;
  if (peek(j) != '}') {
    while (1) {
      char *k = NULL, *v = NULL;
      if (jstring(j, &k) != 0) return -1;
      if (expect(j, ':') != 0) { free(k); return -1; }
      if (peek(j) != '"') { free(k); return jerr(j, "__metadata__ values must be strings"); }
      if (jstring(j, &v) != 0) { free(k); return -1; }
      if (f->nmeta == f->meta_cap) {
        int cap = f->meta_cap ? 2 * f->meta_cap : 8;
        char **a = realloc(f->meta_key, (size_t)cap * sizeof *a);
        if (a) f->meta_key = a;
        char **b = a ? realloc(f->meta_val, (size_t)cap * sizeof *b) : NULL;
        if (b) f->meta_val = b;
        if (!a || !b) { free(k); free(v); j->failed = 1; return ln_error("load: %s: out of memory", j->path); }
        f->meta_cap = cap;
      }
      f->meta_key[f->nmeta] = k; f->meta_val[f->nmeta] = v; f->nmeta++;
      int c = peek(j);
      if (c == ',') { j->p++; continue; }
      if (c == '}') break;
      return jerr(j, "expected ',' or '}' in __metadata__");
    }
  }
  j->p++;
  size_t len = (size_t)(j->p - start);
  f->meta_json = malloc(len + 1);
  if (!f->meta_json) { j->failed = 1; return ln_error("load: %s: out of memory", j->path); }
  memcpy(f->meta_json, start, len);
  f->meta_json[len] = 0;
  return 0;
}

static int parse_entry(jp *j, st_entry *e) {
  int have_dtype = 0, have_shape = 0, have_off = 0;
  if (expect(j, '{') != 0) return -1;
  if (peek(j) == '}') return jerr(j, "tensor '%s' has an empty description", e->name);
  while (1) {
    char *key = NULL;
    if (jstring(j, &key) != 0 || expect(j, ':') != 0) { free(key); return -1; }
    if (strcmp(key, "dtype") == 0) {
      char *dt = NULL;
      if (peek(j) != '"') { free(key); return jerr(j, "tensor '%s': dtype must be a string", e->name); }
      if (jstring(j, &dt) != 0) { free(key); return -1; }
      e->dtype = -1;
      for (int i = 0; i < LN_NDTYPES; i++) if (strcmp(dt, st_dtype[i]) == 0) e->dtype = i;
      if (e->dtype < 0) {
        jerr(j, "tensor '%s' has dtype '%.40s', which lunet does not support (F32 F64 I32 I64 U8 BOOL F16 BF16)",
             e->name, dt);
        free(dt); free(key); return -1;
      }
      free(dt);
      have_dtype = 1;
    } else if (strcmp(key, "shape") == 0) {
      if (expect(j, '[') != 0) { free(key); return -1; }
      e->ndim = 0;
      if (peek(j) != ']') {
        while (1) {
          uint64_t v;
          if (e->ndim >= LN_MAX_DIMS) { free(key); return jerr(j, "tensor '%s' has more than %d dims", e->name, LN_MAX_DIMS); }
          if (juint(j, &v, "a shape entry") != 0) { free(key); return -1; }
          e->shape[e->ndim++] = (int64_t)v;
          int c = peek(j);
          if (c == ',') { j->p++; continue; }
          if (c == ']') break;
          free(key); return jerr(j, "expected ',' or ']' in the shape of '%s'", e->name);
        }
      }
      j->p++;
      have_shape = 1;
    } else if (strcmp(key, "data_offsets") == 0) {
      if (expect(j, '[') != 0 || juint(j, &e->begin, "a data offset") != 0 || expect(j, ',') != 0 ||
          juint(j, &e->end, "a data offset") != 0 || expect(j, ']') != 0) { free(key); return -1; }
      have_off = 1;
    } else if (skip_value(j, 1) != 0) { free(key); return -1; }
    free(key);
    int c = peek(j);
    if (c == ',') { j->p++; continue; }
    if (c == '}') { j->p++; break; }
    return jerr(j, "expected ',' or '}' in the description of '%s'", e->name);
  }
  if (!have_dtype || !have_shape || !have_off)
    return jerr(j, "tensor '%s' lacks %s", e->name, !have_dtype ? "a dtype" : !have_shape ? "a shape" : "data_offsets");
  return 0;
}

static int parse_header(jp *j, ln_st_file *f) {
  if (peek(j) != '{') return jerr(j, "the header is not a JSON object");
  j->p++;
  int have_meta = 0;
  if (peek(j) != '}') {
    while (1) {
      char *name = NULL;
      if (jstring(j, &name) != 0) return -1;
      if (expect(j, ':') != 0) { free(name); return -1; }
      if (strcmp(name, "__metadata__") == 0) {
        free(name);
        if (have_meta) return jerr(j, "__metadata__ given twice");
        have_meta = 1;
        if (parse_metadata(j, f) != 0) return -1;
      } else {
        if (!*name) { free(name); return jerr(j, "a tensor has an empty name"); }
        if (f->n >= ST_MAX_TENSORS) { free(name); return jerr(j, "too many tensors"); }
        if (f->n == f->cap) {
          int cap = f->cap ? 2 * f->cap : 16;
          st_entry *e = realloc(f->e, (size_t)cap * sizeof *e);
          if (!e) { free(name); j->failed = 1; return ln_error("load: %s: out of memory", j->path); }
          f->e = e; f->cap = cap;
        }
        st_entry *e = &f->e[f->n++];
        memset(e, 0, sizeof *e);
        e->name = name;
        if (parse_entry(j, e) != 0) return -1;
      }
      int c = peek(j);
      if (c == ',') { j->p++; continue; }
      if (c == '}') break;
      return jerr(j, "expected ',' or '}' after an entry");
    }
  }
  j->p++;
  ws(j);
  if (j->p != j->end) return jerr(j, "trailing characters after the JSON object");
  return 0;
}

static int entry_cmp(const void *a, const void *b) {
  const st_entry *x = a, *y = b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  if (x->end != y->end) return x->end < y->end ? -1 : 1;
  return strcmp(x->name, y->name);
}

static int name_cmp(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Every tensor's bytes must match its shape and dtype, and together they
 * must tile the data section exactly: in range, no overlap, no hole. */
static int check_layout(ln_st_file *f) {
  if (f->n > 1) qsort(f->e, (size_t)f->n, sizeof *f->e, entry_cmp);
  uint64_t pos = 0;
  for (int i = 0; i < f->n; i++) {
    st_entry *e = &f->e[i];
    if (e->end < e->begin)
      return ln_error("load: %s: tensor '%s' has data_offsets [%llu, %llu] that run backwards", f->path,
                      e->name, (unsigned long long)e->begin, (unsigned long long)e->end);
    /* bytes the shape needs, saturated at 2^64 (a zero dim makes it 0) */
    unsigned __int128 nb = (unsigned __int128)ln_dtype_size(e->dtype);
    int zero = 0;
    for (int d = 0; d < e->ndim; d++) zero |= e->shape[d] == 0;
    for (int d = 0; d < e->ndim && !zero; d++) {
      nb *= (unsigned __int128)e->shape[d];
      if (nb > (unsigned __int128)UINT64_MAX) { nb = (unsigned __int128)UINT64_MAX; break; }
    }
    if (zero) nb = 0;
    char sb[160];
    if (nb != (unsigned __int128)(e->end - e->begin))
      return ln_error("load: %s: tensor '%s' (%s, shape %s) needs %llu bytes but its data_offsets [%llu, %llu] hold %llu",
                      f->path, e->name, st_dtype[e->dtype], ln_shape_str(sb, sizeof sb, e->ndim, e->shape),
                      (unsigned long long)nb,
                      (unsigned long long)e->begin, (unsigned long long)e->end,
                      (unsigned long long)(e->end - e->begin));
    if (e->end > f->data_size)
      return ln_error("load: %s: tensor '%s' has data_offsets [%llu, %llu] past the end of the data (%llu bytes): the file is truncated or corrupt",
                      f->path, e->name, (unsigned long long)e->begin, (unsigned long long)e->end,
                      (unsigned long long)f->data_size);
    if (e->begin < pos)
      return ln_error("load: %s: tensor '%s' overlaps the tensor before it (data_offsets [%llu, %llu])", f->path,
                      e->name, (unsigned long long)e->begin, (unsigned long long)e->end);
    if (e->begin > pos)
      return ln_error("load: %s: a gap of %llu bytes before tensor '%s' (data_offsets must be contiguous)",
                      f->path, (unsigned long long)(e->begin - pos), e->name);
    pos = e->end;
  }
  /* a name given twice (JSON allows it; safetensors does not) */
  const char **names = malloc((size_t)(f->n ? f->n : 1) * sizeof *names);
  if (!names) return ln_error("load: %s: out of memory", f->path);
  for (int i = 0; i < f->n; i++) names[i] = f->e[i].name;
  if (f->n > 1) qsort(names, (size_t)f->n, sizeof *names, name_cmp);
  for (int i = 1; i < f->n; i++)
    if (strcmp(names[i], names[i - 1]) == 0) {
      int rc = ln_error("load: %s: tensor '%s' is described twice", f->path, names[i]);
      free(names); return rc;
    }
  free(names);
  if (pos != f->data_size)
    return ln_error("load: %s: %llu bytes of data but the tensors describe %llu", f->path,
                    (unsigned long long)f->data_size, (unsigned long long)pos);
  return 0;
}

/* ---- reading ------------------------------------------------------------------- */

void ln_st_close(ln_st_file *f) {
  if (!f) return;
  if (f->fd >= 0) close(f->fd);
  for (int i = 0; i < f->n; i++) free(f->e[i].name);
  for (int i = 0; i < f->nmeta; i++) { free(f->meta_key[i]); free(f->meta_val[i]); }
  free(f->e); free(f->meta_key); free(f->meta_val); free(f->meta_json); free(f->path);
  free(f);
}

ln_st_file *ln_st_open(const char *path) {
  if (!path || !*path) return ln_error_null("load: path is empty");
  ln_st_file *f = calloc(1, sizeof *f);
  if (!f || !(f->path = strdup(path))) { free(f); return ln_error_null("load: %s: out of memory", path); }
  uint64_t size = 0;
  char why[160];
  f->fd = ln_open_regular(path, &size, why, sizeof why);
  if (f->fd < 0) {
    int kind = f->fd;
    ln_st_close(f);
    return ln_error_null(kind == -2 ? "load: %s: %s" : "load: %s: cannot open: %s", path, why);
  }
  unsigned char len8[8];
  if (size < 8 || read_full(f->fd, len8, 8, 0) != 0) {
    ln_st_close(f);
    return ln_error_null("load: %s: too short for a safetensors file (%llu bytes; the header length alone takes 8)",
                         path, (unsigned long long)size);
  }
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; i--) hlen = hlen << 8 | len8[i];
  if (hlen > size - 8) {
    ln_st_close(f);
    return ln_error_null("load: %s: header length %llu exceeds the file size (%llu bytes): truncated or not a safetensors file",
                         path, (unsigned long long)hlen, (unsigned long long)size);
  }
  if (hlen > ST_MAX_HEADER) {
    ln_st_close(f);
    return ln_error_null("load: %s: header length %llu is over the limit of %d bytes", path,
                         (unsigned long long)hlen, ST_MAX_HEADER);
  }
  if (hlen < 2) {
    ln_st_close(f);
    return ln_error_null("load: %s: header length %llu is too small for a JSON object", path, (unsigned long long)hlen);
  }
  char *hdr = malloc((size_t)hlen + 1);
  if (!hdr) { ln_st_close(f); return ln_error_null("load: %s: out of memory for the header", path); }
  if (read_full(f->fd, hdr, (size_t)hlen, 8) != 0) {
    int e = errno;
    free(hdr); ln_st_close(f);
    return ln_error_null("load: %s: cannot read the header: %s", path, e ? strerror(e) : "file truncated");
  }
  hdr[hlen] = 0;
  f->data_start = 8 + hlen;
  f->data_size = size - f->data_start;
  jp j = {hdr, hdr, hdr + hlen, path, 0};
  int rc = parse_header(&j, f);
  free(hdr);
  if (rc != 0 || check_layout(f) != 0) { ln_st_close(f); return NULL; }
  return f;
}

int ln_st_count(const ln_st_file *f) { return f ? f->n : 0; }

const char *ln_st_name(const ln_st_file *f, int i) {
  if (!f || i < 0 || i >= f->n) return ln_error_null("load: tensor index %d out of range", i + 1);
  return f->e[i].name;
}

const char *ln_st_metadata(const ln_st_file *f) { return f ? f->meta_json : NULL; }
int ln_st_meta_count(const ln_st_file *f) { return f ? f->nmeta : 0; }
const char *ln_st_meta_key(const ln_st_file *f, int i) {
  return f && i >= 0 && i < f->nmeta ? f->meta_key[i] : NULL;
}
const char *ln_st_meta_value(const ln_st_file *f, int i) {
  return f && i >= 0 && i < f->nmeta ? f->meta_val[i] : NULL;
}

int ln_st_info(const ln_st_file *f, int i, int *dtype, int *ndim, int64_t *shape) {
  if (!f || i < 0 || i >= f->n) return ln_error("load: tensor index %d out of range", i + 1);
  const st_entry *e = &f->e[i];
  if (dtype) *dtype = e->dtype;
  if (ndim) *ndim = e->ndim;
  if (shape) for (int d = 0; d < e->ndim; d++) shape[d] = e->shape[d];
  return 0;
}

ln_tensor *ln_st_tensor(ln_st_file *f, int i, int device) {
  if (!f || i < 0 || i >= f->n) return ln_error_null("load: tensor index %d out of range", i + 1);
  const st_entry *e = &f->e[i];
  size_t nb = (size_t)(e->end - e->begin);
  ln_tensor *t = NULL;
  char *buf = NULL;
  if (device < LN_CUDA_BASE) {   /* host memory: read straight into the new storage */
    t = ln_empty(e->ndim, e->shape, e->dtype, device);
    if (!t) return NULL;
    buf = ln_data_ptr(t);
  } else if (nb && !(buf = malloc(nb))) {
    return ln_error_null("load: %s: out of memory for tensor '%s'", f->path, e->name);
  }
  if (nb && read_full(f->fd, buf, nb, f->data_start + e->begin) != 0) {
    int err = errno;
    if (t) ln_tensor_free(t); else free(buf);
    return ln_error_null("load: %s: cannot read tensor '%s': %s", f->path, e->name,
                         err ? strerror(err) : "file truncated");
  }
  if (e->dtype == LN_BOOL)
    for (size_t k = 0; k < nb; k++) buf[k] = buf[k] != 0;
  if (!t) {
    t = ln_from_buffer(buf, e->ndim, e->shape, e->dtype, device);
    free(buf);
  }
  return t;
}

/* ---- checksums ------------------------------------------------------------------ */

#include <zlib.h>

static uint32_t crc_bytes(uint32_t crc, const unsigned char *p, size_t n) {
  uLong c = crc;
  while (n > 0) {
    uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;
    c = crc32(c, p, k);
    p += k; n -= k;
  }
  return (uint32_t)c;
}

int ln_tensor_crc32(const ln_tensor *t, uint32_t crc, uint32_t *out) {
  if (ln_check_tensor("crc32", t, "tensor") != 0) return -1;
  if (!out) return ln_error("crc32: out is NULL");
  size_t nbytes = (size_t)ln_numel(t) * (size_t)ln_dtype_size(t->dtype_id);
  if (nbytes == 0) { *out = crc; return 0; }
  if (t->device_id < LN_CUDA_BASE && ln_is_contiguous(t)) {
    if (ln_sync(t->device_id) != 0) return -1;
    *out = crc_bytes(crc, ln_data_ptr(t), nbytes);
    return 0;
  }
  unsigned char *buf = malloc(nbytes);
  if (!buf) return ln_error("crc32: out of memory for %zu bytes", nbytes);
  if (ln_tensor_read(t, buf) != 0) { free(buf); return -1; }
  *out = crc_bytes(crc, buf, nbytes);
  free(buf);
  return 0;
}
