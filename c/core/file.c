/* file.c -- opening a user's path for reading: regular files only, and
 * writing one atomically. Shared by the safetensors reader/writer, the
 * dataset readers (and linked into their fuzz targets) and, through
 * ln_afile_*, every Lua writer (torch.save zips, images, ONNX, plots). */
#include "internal.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

const char *ln_file_kind(unsigned m) {
  return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO (named pipe)" : S_ISCHR(m) ? "a character device"
       : S_ISBLK(m) ? "a block device" : S_ISSOCK(m) ? "a socket" : S_ISLNK(m) ? "a symbolic link"
       : "a special file";
}

/* stat first: a device node is refused without being opened (opening some
 * has effects: a tape rewinds, a watchdog starts). Then O_NONBLOCK, so that
 * a FIFO swapped in meanwhile cannot make the open wait for a writer, and
 * the kind read again from the descriptor itself (fstat): no swap between
 * the check and the open slips a special file through. */
int ln_open_regular(const char *path, uint64_t *size, char *why, size_t n) {
  if (!path || !*path) { snprintf(why, n, "the path is empty"); return -1; }
  struct stat pre;
  if (stat(path, &pre) == 0 && !S_ISREG(pre.st_mode)) {
    snprintf(why, n, "not a regular file (it is %s)", ln_file_kind(pre.st_mode));
    return -2;
  }
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) { snprintf(why, n, "%s", strerror(errno)); return -1; }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    snprintf(why, n, "%s", strerror(errno));
    close(fd);
    return -1;
  }
  if (!S_ISREG(st.st_mode)) {
    snprintf(why, n, "not a regular file (it is %s)", ln_file_kind(st.st_mode));
    close(fd);
    return -2;
  }
  int fl = fcntl(fd, F_GETFL);
  if (fl != -1) (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  if (size) *size = (uint64_t)st.st_size;
  return fd;
}


/* ---- atomic writes ------------------------------------------------------------ *
 * A temporary file in the target's directory (so that rename is atomic), the
 * bytes, fsync, rename over the target, fsync of the directory (the rename
 * itself durable). On any failure the temporary file is removed and the
 * target is untouched: a reader sees the old file or the new one, never a
 * part. Errors read "FN: cannot write 'PATH': WHY". */

struct ln_afile {
  char *fn, *path;     /* caller's name and the user's path, for errors */
  char *target, *tmp;  /* where the rename lands (symlinks followed), the temporary */
  char host[64];
  int fd, failed;
};

static void dir_of(const char *path, char *dir, size_t n) {
  const char *slash = strrchr(path, '/');
  if (!slash) snprintf(dir, n, ".");
  else if (slash == path) snprintf(dir, n, "/");
  else snprintf(dir, n, "%.*s", (int)(slash - path), path);
}

/* This host's name for temporary file names (no '/' or '.'). */
static void tmp_host(char *host, size_t n) {
  if (gethostname(host, n) != 0) snprintf(host, n, "host");
  host[n - 1] = 0;
  for (char *c = host; *c; c++) if (*c == '/' || *c == '.') *c = '_';
}

/* the process umask, read without changing it (umask() would race threads) */
static mode_t current_umask(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  unsigned m = 022;
  if (!f) return (mode_t)m;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "Umask: %o", &m) == 1) break;
  fclose(f);
  return (mode_t)m;
}

/* Where a write to path lands: path itself, or the file its symbolic links
 * lead to (the links are kept, as editors do; a dangling link's target is
 * created). NULL with the error set when that file exists and is not a
 * regular file: a write never replaces a directory, FIFO or device node. */
static char *write_target(const char *fn, const char *path) {
  char *p = strdup(path);
  if (!p) return ln_error_null("%s: cannot write '%s': out of memory", fn, path);
  for (int hops = 0;; hops++) {
    struct stat st;
    if (lstat(p, &st) != 0) return p;   /* new file (or an error the write reports) */
    if (S_ISREG(st.st_mode)) return p;
    if (!S_ISLNK(st.st_mode)) {
      ln_error("%s: cannot write '%s': refusing to replace %s%s%s (only regular files are replaced)", fn, path,
               ln_file_kind(st.st_mode), strcmp(p, path) ? " at " : "", strcmp(p, path) ? p : "");
      free(p);
      return NULL;
    }
    if (hops >= 40) { free(p); return ln_error_null("%s: cannot write '%s': too many levels of symbolic links", fn, path); }
    char link[4096];
    ssize_t k = readlink(p, link, sizeof link - 1);
    if (k < 0 || k >= (ssize_t)sizeof link - 1) {
      int e = k < 0 ? errno : ENAMETOOLONG;
      free(p);
      return ln_error_null("%s: cannot write '%s': cannot read the symbolic link: %s", fn, path, strerror(e));
    }
    link[k] = 0;
    char *next;
    if (link[0] == '/') {
      next = strdup(link);
    } else {   /* relative to the link's own directory */
      const char *slash = strrchr(p, '/');
      size_t dl = slash ? (size_t)(slash - p) + 1 : 0;
      next = malloc(dl + (size_t)k + 1);
      if (next) { memcpy(next, p, dl); memcpy(next + dl, link, (size_t)k + 1); }
    }
    free(p);
    if (!next) return ln_error_null("%s: cannot write '%s': out of memory", fn, path);
    p = next;
  }
}

/* Temporary files are named TARGET.tmp.HOST.PID.XXXXXX. A writer killed
 * before its rename (SIGKILL, power loss) leaves one behind, as large as the
 * file: after each successful write, those of this host whose process is
 * gone are removed (a repeatedly preempted run would otherwise fill the disk). */
/* 0 when pid is gone or a zombie (killed, not yet reaped) */
static int process_alive(long pid) {
  if (kill((pid_t)pid, 0) != 0) return errno != ESRCH;   /* EPERM: someone else's, alive */
  char p[64], buf[512];
  snprintf(p, sizeof p, "/proc/%ld/stat", pid);
  FILE *f = fopen(p, "r");
  if (!f) return 1;
  size_t k = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[k] = 0;
  const char *rp = strrchr(buf, ')');   /* "pid (comm) S ..." */
  return !(rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X'));
}

static void remove_stale_tmp(const char *path, const char *host) {
  char dir[4096], prefix[512];
  dir_of(path, dir, sizeof dir);
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  int pn = snprintf(prefix, sizeof prefix, "%s.tmp.%s.", base, host);
  if (pn <= 0 || (size_t)pn >= sizeof prefix) return;
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (strncmp(e->d_name, prefix, (size_t)pn) != 0) continue;
    char *end;
    long pid = strtol(e->d_name + pn, &end, 10);
    if (end == e->d_name + pn || *end != '.' || pid <= 0 || pid == (long)getpid()) continue;
    if (process_alive(pid)) continue;
    char full[4096 + 300];
    if (snprintf(full, sizeof full, "%s/%s", dir, e->d_name) < (int)sizeof full) unlink(full);
  }
  closedir(d);
}

static void afile_free(ln_afile *f) {
  free(f->fn); free(f->path); free(f->target); free(f->tmp); free(f);
}

ln_afile *ln_afile_open(const char *fn, const char *path) {
  if (!fn) fn = "write";
  if (!path || !*path) return ln_error_null("%s: cannot write: the path is empty", fn);
  char *target = write_target(fn, path);
  if (!target) return NULL;
  ln_afile *f = calloc(1, sizeof *f);
  size_t tl = strlen(target) + 64 + 48;
  if (f) { f->fn = strdup(fn); f->path = strdup(path); f->tmp = malloc(tl); }
  if (!f || !f->fn || !f->path || !f->tmp) {
    if (f) { f->target = target; afile_free(f); } else free(target);
    return ln_error_null("%s: cannot write '%s': out of memory", fn, path);
  }
  f->target = target;
  tmp_host(f->host, sizeof f->host);
  snprintf(f->tmp, tl, "%s.tmp.%s.%d.XXXXXX", target, f->host, (int)getpid());
  f->fd = mkstemp(f->tmp);
  if (f->fd < 0) {
    int e = errno;
    ln_error("%s: cannot write '%s': %s", fn, path, strerror(e));
    afile_free(f);
    return NULL;
  }
  (void)fchmod(f->fd, 0666 & ~current_umask());   /* mkstemp makes 0600 */
  return f;
}

/* the error for a failed step, set once; the file is then dead */
static int afile_fail(ln_afile *f, const char *step, int e) {
  if (!f->failed) {
    f->failed = 1;
    ln_error("%s: cannot write '%s': %s%s%s", f->fn, f->path, step, *step ? ": " : "", strerror(e ? e : EIO));
  }
  return -1;
}

int ln_afile_write(ln_afile *f, const void *bytes, size_t n) {
  if (!f) return ln_error("write: no file");
  if (f->failed) return -1;
  const char *p = bytes;
  while (n > 0) {
    size_t chunk = n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n;
    ssize_t k = write(f->fd, p, chunk);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return afile_fail(f, "", k < 0 ? errno : ENOSPC);
    p += k; n -= (size_t)k;
  }
  return 0;
}

int ln_afile_fail(ln_afile *f, const char *why) {
  if (!f) return -1;
  if (!f->failed) { f->failed = 1; ln_error("%s: cannot write '%s': %s", f->fn, f->path, why ? why : "failed"); }
  return -1;
}

void ln_afile_abort(ln_afile *f) {
  if (!f) return;
  if (f->fd >= 0) close(f->fd);
  unlink(f->tmp);
  afile_free(f);
}

int ln_afile_commit(ln_afile *f) {
  if (!f) return ln_error("write: no file");
  if (!f->failed && fsync(f->fd) != 0) afile_fail(f, "fsync", errno);
  int fd = f->fd;
  f->fd = -1;
  if (close(fd) != 0) afile_fail(f, "close", errno);
  if (!f->failed && rename(f->tmp, f->target) != 0) afile_fail(f, "rename", errno);
  if (f->failed) { ln_afile_abort(f); return -1; }
  char dir[4096];
  dir_of(f->target, dir, sizeof dir);
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) { (void)fsync(dfd); close(dfd); }
  remove_stale_tmp(f->target, f->host);
  afile_free(f);
  return 0;
}

int ln_file_write_atomic(const char *fn, const char *path, const void *bytes, size_t n) {
  ln_afile *f = ln_afile_open(fn, path);
  if (!f) return -1;
  if (ln_afile_write(f, bytes, n) != 0) { ln_afile_abort(f); return -1; }
  return ln_afile_commit(f);
}
