/*
 * ops_xattr.c - extended attributes.  A frame answers only its own
 * "user.b2.*" attributes (b2_file_xattr_list/get); other names get ENODATA
 * without opening the frame (ls asks every file for security.* ones).
 * Plain files and directories show their source attributes; symlinks none.
 */
#include <errno.h>
#include <string.h>
#include <sys/xattr.h>

#include "b2fs.h"

#define FRAME_XATTR_PREFIX "user.b2."

/* Reply to a listxattr/getxattr of `n` bytes (or error) in buf. */
static void reply_sized(fuse_req_t req, size_t size, ssize_t n, const char *buf) {
  if (n < 0)
    fuse_reply_err(req, (int)-n);
  else if (size == 0)
    fuse_reply_xattr(req, (size_t)n);
  else
    fuse_reply_buf(req, buf, (size_t)n);
}

/* Errno for an engine code from the xattr calls. */
static int xattr_errno(ssize_t rc) {
  if (rc == B2_E_RANGE) return ERANGE;
  if (rc == B2_E_NOENT) return ENODATA;
  return b2fs_errno((int)rc);
}

/* May we pass attribute calls through to the source entry? */
static int plain_ok(b2fs_inode *in) {
  struct stat st;
  if (fstatat(in->fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0) return 0;
  return S_ISREG(st.st_mode) || S_ISDIR(st.st_mode);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
  b2fs_inode *in = b2fs_inode_get(ino);
  char *buf = size ? b2fs_tls_buf(size) : NULL;
  if (size && !buf) {
    fuse_reply_err(req, ENOMEM);
    return;
  }
  if (in->kind == B2FS_KIND_PLAIN) {
    char path[64];
    if (!plain_ok(in)) {
      reply_sized(req, size, 0, buf);
      return;
    }
    ssize_t n = listxattr(b2fs_fd_path(in->fd, path, sizeof path), buf, size);
    reply_sized(req, size, n < 0 ? -errno : n, buf);
    return;
  }
  b2fs_handle *h;
  if (b2fs_frame_peek(in, &h) < 0) { /* an unreadable frame has none */
    reply_sized(req, size, 0, buf);
    return;
  }
  ssize_t n = b2_file_xattr_list(h->file, buf, size);
  b2fs_frame_release(in, h);
  reply_sized(req, size, n < 0 ? -xattr_errno(n) : n, buf);
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
                        size_t size) {
  b2fs_inode *in = b2fs_inode_get(ino);
  char *buf = size ? b2fs_tls_buf(size) : NULL;
  if (size && !buf) {
    fuse_reply_err(req, ENOMEM);
    return;
  }
  if (in->kind == B2FS_KIND_PLAIN) {
    char path[64];
    if (!plain_ok(in)) {
      fuse_reply_err(req, ENODATA);
      return;
    }
    ssize_t n = getxattr(b2fs_fd_path(in->fd, path, sizeof path), name, buf, size);
    reply_sized(req, size, n < 0 ? -errno : n, buf);
    return;
  }
  if (strncmp(name, FRAME_XATTR_PREFIX, strlen(FRAME_XATTR_PREFIX)) != 0) {
    fuse_reply_err(req, ENODATA);
    return;
  }
  b2fs_handle *h;
  int rc = b2fs_frame_peek(in, &h);
  if (rc < 0) {
    fuse_reply_err(req, ENODATA);
    return;
  }
  ssize_t n = b2_file_xattr_get(h->file, name, buf, size);
  b2fs_frame_release(in, h);
  reply_sized(req, size, n < 0 ? -xattr_errno(n) : n, buf);
}

void b2fs_ops_xattr(struct fuse_lowlevel_ops *ops) {
  ops->listxattr = op_listxattr;
  ops->getxattr = op_getxattr;
}
