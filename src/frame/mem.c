/* mem.c - frames held in memory (a frame embedded in another container and
 * extracted from it): the bytes go to an anonymous memory file, which is
 * then read like any file (b2_frame_open_fd), so every read path stays the
 * same.  The memory is the kernel's (swappable) and is freed at close. */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "b2_error.h"
#include "common/fileio.h"
#include "frame/frame_impl.h"

int b2_frame_open_mem(const void *data, size_t len, const char *name,
                      b2_frame **out) {
  if (!out) return b2_fail(B2_E_INVAL, "frame open: no output");
  *out = NULL;
  if (!data && len) return b2_fail(B2_E_INVAL, "frame open: no bytes");
  if (len > (size_t)INT64_MAX) return b2_fail(B2_E_LIMIT, "frame too large");
  int fd = memfd_create("b2fs-frame", MFD_CLOEXEC);
  if (fd < 0)
    return b2_fail(b2_from_errno(errno), "memory file: %s", strerror(errno));
  int rc = len ? b2_io_pwrite(fd, data, len, 0) : 0;
  if (rc < 0) rc = b2_context(rc, "memory file");
  if (!rc) rc = b2_frame_open_fd(fd, 0, (int64_t)len, name, out);
  close(fd); /* the frame holds its own descriptor */
  return rc;
}
