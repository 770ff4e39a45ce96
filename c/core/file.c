/* file.c -- opening a user's path for reading: regular files only.
 * Shared by the safetensors reader and the dataset readers (and linked into
 * their fuzz targets). */
#include "internal.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
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

