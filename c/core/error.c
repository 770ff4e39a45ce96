/* error.c -- the thread-local error message behind ln_last_error(). */
#include "internal.h"
#include <stdarg.h>
#include <stdio.h>

static _Thread_local char last_error[1024];

const char *ln_last_error(void) { return last_error[0] ? last_error : "unknown error"; }
void ln_clear_error(void) { last_error[0] = 0; }

static void set_error(const char *fmt, va_list ap) {
  vsnprintf(last_error, sizeof last_error, fmt, ap);
}

int ln_error(const char *fmt, ...) {
  va_list ap; va_start(ap, fmt); set_error(fmt, ap); va_end(ap);
  return -1;
}

void *ln_error_null(const char *fmt, ...) {
  va_list ap; va_start(ap, fmt); set_error(fmt, ap); va_end(ap);
  return NULL;
}

const char *ln_shape_str(char *buf, size_t n, int ndim, const int64_t *shape) {
  size_t len = 0;
  len += (size_t)snprintf(buf, n, "{");
  for (int i = 0; i < ndim && len < n; i++)
    len += (size_t)snprintf(buf + len, n - len, i ? ",%lld" : "%lld", (long long)shape[i]);
  if (len < n) snprintf(buf + len, n - len, "}");
  return buf;
}

const char *ln_version(void) { return "0.1.0"; }
