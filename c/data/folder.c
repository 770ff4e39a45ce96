/* folder.c -- one directory's entries for ImageFolder, without a shell:
 * names with a kind byte, 'd' for a directory (a symlink to one counts, as
 * os.scandir's is_dir() and os.walk(followlinks=True) see it) and 'f' for
 * anything else. */
#include "data.h"
#include <dirent.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

int64_t ln_dir_list(const char *path, char *buf, int64_t cap) {
  const char *fn = "list_dir";
  if (!path) return ln_error("%s: path is NULL", fn);
  DIR *d = opendir(path);
  if (!d) return ln_error("%s: cannot open the folder '%s': %s", fn, path, strerror(errno));
  size_t plen = strlen(path);
  int64_t need = 0;
  struct dirent *e;
  char full[8192];
  while ((e = readdir(d)) != NULL) {
    const char *nm = e->d_name;
    if (nm[0] == '.' && (nm[1] == 0 || (nm[1] == '.' && nm[2] == 0))) continue;
    int isdir = e->d_type == DT_DIR;
    if (e->d_type == DT_LNK || e->d_type == DT_UNKNOWN) {   /* (follow the link) */
      struct stat st;
      size_t nlen = strlen(nm);
      if (plen + nlen + 2 <= sizeof full) {
        memcpy(full, path, plen);
        full[plen] = '/';
        memcpy(full + plen + 1, nm, nlen + 1);
        isdir = stat(full, &st) == 0 && S_ISDIR(st.st_mode);
      }
    }
    int64_t len = (int64_t)strlen(nm) + 2;
    if (buf && need + len <= cap) {
      buf[need] = isdir ? 'd' : 'f';
      memcpy(buf + need + 1, nm, (size_t)len - 1);
    }
    need += len;
  }
  closedir(d);
  return need;
}
