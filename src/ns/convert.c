/*
 * convert.c - a frame renamed to a name that shows another kind of file:
 * a plain frame holding the bytes of a .npy file, renamed to a .npy name,
 * made into the b2nd array a new .npy file written under that name would
 * have been; an array's .npy view renamed to another name, into the plain
 * frame of those bytes.
 *
 * Programs that save a file under a temporary name and rename it over its
 * real one (rsync, atomic savers) leave an SChunk of the .npy bytes when
 * the temporary name is no .npy name; `mv x.npy x.bak` moves an array to
 * a name whose files are plain.  The caller of such a rename makes the
 * new file first (b2_ns_convert, at a hidden name) and then renames that
 * in (b2_ns_plan_put, b2_ns_rename).  See b2_ns.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "b2_b2nd.h"
#include "b2_error.h"
#include "b2_file.h"
#include "b2_frame.h"
#include "b2_ns.h"
#include "common/bigbuf.h"

#define COPY_PIECE (4u << 20)

int b2_ns_own_xattr(const char *name) {
  return strncmp(name, "user.", 5) == 0 && strncmp(name, "user.b2.", 8) != 0;
}

int b2_ns_copy_own_xattrs(int from, int to) {
  char pf[64], pt[64];
  snprintf(pf, sizeof pf, "/proc/self/fd/%d", from);
  snprintf(pt, sizeof pt, "/proc/self/fd/%d", to);
  ssize_t n = listxattr(pf, NULL, 0);
  char *names = n > 0 ? malloc((size_t)n) : NULL;
  if (names) n = listxattr(pf, names, (size_t)n);
  int err = 0;
  for (ssize_t k = 0; names && k < n; k += (ssize_t)strlen(names + k) + 1) {
    const char *name = names + k;
    if (!b2_ns_own_xattr(name)) continue;
    ssize_t v = getxattr(pf, name, NULL, 0);
    char *val = v >= 0 ? malloc(v > 0 ? (size_t)v : 1) : NULL;
    if (val) v = getxattr(pf, name, val, (size_t)v);
    if ((!val || v < 0 || setxattr(pt, name, val, (size_t)v, 0) < 0) && !err)
      err = val ? errno : ENOMEM;
    free(val);
  }
  free(names);
  return err;
}

/* Copy n bytes of `from` into `to` (a new file), in pieces. */
static int copy_bytes(b2_file *from, b2_file *to, int64_t n) {
  size_t cap = n < (int64_t)COPY_PIECE ? (size_t)n : COPY_PIECE;
  uint8_t *buf = b2_bigbuf_alloc(cap ? cap : 1);
  if (!buf) return b2_fail(B2_E_NOMEM, "convert: no memory for a copy buffer");
  int rc = 0;
  for (int64_t off = 0; off < n && rc == 0;) {
    size_t k = n - off < (int64_t)cap ? (size_t)(n - off) : cap;
    ssize_t got = b2_file_pread(from, buf, k, off);
    if (got < 0) rc = (int)got;
    else if (got == 0) rc = b2_fail(B2_E_IO, "convert: the file ended early");
    else {
      ssize_t put = b2_file_pwrite(to, buf, (size_t)got, off);
      if (put < 0) rc = (int)put;
      off += got;
    }
  }
  b2_bigbuf_free(buf);
  return rc;
}

int b2_ns_convert(b2_env *env, int pfd, const char *src, int kind, int qfd, char *tmp,
                  size_t cap) {
  struct stat st;
  if ((kind != B2_NS_LOGICAL && kind != B2_NS_NPY) || cap < B2_NS_HIDDEN_MAX ||
      fstatat(pfd, src, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return 0;
  int to_array = kind == B2_NS_LOGICAL;
  b2_file *in;
  if (b2_file_open_at(env, pfd, src, to_array ? B2_VIEW_LOGICAL : B2_VIEW_NPY, B2_OPEN_RDONLY,
                      &in) < 0)
    return 0;
  if (to_array && !b2_file_npy_is_array(in)) {
    b2_file_close(in);
    return 0;
  }
  b2_ns_hidden_name(tmp, cap);
  b2_file *out;
  int rc = to_array ? b2_file_create_npy_at(env, qfd, tmp, NULL, &out)
                    : b2_file_create_at(env, qfd, tmp, NULL, &out);
  if (rc < 0) {
    b2_file_close(in);
    tmp[0] = 0;
    return rc;
  }
  rc = copy_bytes(in, out, b2_file_size(in));
  if (rc == 0) rc = b2_file_finish(out); /* a short array: a plain frame */
  /* What a new file of these bytes under the new name would be: an array
   * for an array's name, else a plain frame. */
  int made = rc == 0 && (to_array ? !b2_file_npy_fell_back(out) && b2_file_array(out) != NULL
                                  : b2_file_array(out) == NULL);
  if (made) { /* python-blosc2's meta and vlmeta, as set by rsync -X from another mount */
    b2_frame_user_meta *um;
    rc = b2_frame_user_meta_take(b2_file_frame(in), &um);
    if (rc == 0) rc = b2_frame_user_meta_put(b2_file_frame(out), um);
    b2_frame_user_meta_free(um);
  }
  b2_file_close(in);
  /* The source's modification time, in the commit that keeps it true. */
  if (made && rc == 0) rc = b2_file_set_mtime(out, &st.st_mtim);
  int crc = b2_file_close(out);
  if (rc == 0) rc = crc;
  if (rc == 0 && made) {
    /* Owner and mode as the source's (a sparse frame's directory keeps
     * the modes its creation gave it). */
    int fd = openat(qfd, tmp, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    struct stat now;
    if (fd < 0 || fstat(fd, &now) < 0 || fchown(fd, st.st_uid, st.st_gid) < 0 ||
        (S_ISREG(now.st_mode) && fchmod(fd, st.st_mode & 07777) < 0) || fsync(fd) < 0)
      rc = b2_fail(b2_from_errno(errno), "convert: %s: %s", tmp, strerror(errno));
    if (fd >= 0) close(fd);
    int a = rc == 0 ? openat(pfd, src, O_PATH | O_NOFOLLOW | O_CLOEXEC) : -1;
    if (a >= 0 && (fd = openat(qfd, tmp, O_PATH | O_NOFOLLOW | O_CLOEXEC)) >= 0) {
      (void)b2_ns_copy_own_xattrs(a, fd); /* the user's own: kept as well as they can be */
      close(fd);
    }
    if (a >= 0) close(a);
  }
  if (rc < 0 || !made) {
    (void)b2_ns_delete(qfd, tmp);
    tmp[0] = 0;
  }
  return rc < 0 ? rc : made;
}
