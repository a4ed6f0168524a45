/* io.c - positioned reads for frames (pread only, so reads from several
 * threads never disturb one another). */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "b2_error.h"
#include "frame/frame_impl.h"

int b2_frame_pread(int fd, void *buf, size_t n, int64_t off) {
  uint8_t *p = buf;
  size_t done = 0;
  if (off < 0) return b2_fail(B2_E_RANGE, "read at negative offset %lld",
                              (long long)off);
  while (done < n) {
    ssize_t got = pread(fd, p + done, n - done, (off_t)(off + (int64_t)done));
    if (got < 0) {
      if (errno == EINTR) continue;
      return b2_fail(b2_from_errno(errno), "read of %zu bytes at %lld: %s", n,
                     (long long)off, strerror(errno));
    }
    if (got == 0)
      return b2_fail(B2_E_TRUNCATED, "file ends at %lld, inside the %zu "
                     "bytes read at %lld", (long long)(off + (int64_t)done), n,
                     (long long)off);
    done += (size_t)got;
  }
  return 0;
}
