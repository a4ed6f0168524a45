/* sframe.c - sparse frames: chunk files `%08X.chunk` in the frame's
 * directory, opened on demand relative to the directory's descriptor. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "b2_error.h"
#include "frame/frame_impl.h"

int b2_sframe_open_chunk(const b2_frame *f, int64_t num, int *fd, struct stat *st) {
  if (num < 0 || num > (int64_t)UINT32_MAX)
    return b2_fail(B2_E_FORMAT, "chunk file number %lld is out of range",
                   (long long)num);
  char name[32];
  snprintf(name, sizeof name, "%08X.chunk", (unsigned)num);
  int cfd = openat(f->dirfd, name, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
  if (cfd < 0)
    return b2_fail(b2_from_errno(errno), "chunk file %s: %s", name,
                   strerror(errno));
  if (fstat(cfd, st) != 0) {
    int e = errno;
    close(cfd);
    return b2_fail(b2_from_errno(e), "chunk file %s: %s", name, strerror(e));
  }
  if (!S_ISREG(st->st_mode)) {
    close(cfd);
    return b2_fail(B2_E_FORMAT, "chunk file %s: not a regular file", name);
  }
  *fd = cfd;
  return 0;
}

int b2_sframe_index_moved(const b2_frame *f) {
  struct stat a, b;
  if (f->info.layout != B2_LAYOUT_SPARSE || f->dirfd < 0 || fstat(f->fd, &a) != 0) return 0;
  if (fstatat(f->dirfd, B2_FRAME_SPARSE_INDEX, &b, AT_SYMLINK_NOFOLLOW) != 0)
    return errno == ENOENT;
  return a.st_dev != b.st_dev || a.st_ino != b.st_ino;
}
