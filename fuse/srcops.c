/*
 * srcops.c - changes to SOURCE entries that take more than one call:
 * real paths of entries (for messages and the writers opened by path),
 * and carrying owner, mode and times over to a file that replaced another.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "b2fs.h"

int b2fs_real_path(b2fs_inode *in, char *buf, size_t cap) {
  char proc[64];
  int fd = in->fd;
  struct stat st;
  if (fstatat(fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0) return -errno;
  if (st.st_nlink == 0) return -ENOENT;
  ssize_t n = readlink(b2fs_fd_path(fd, proc, sizeof proc), buf, cap);
  if (n < 0) return -errno;
  if ((size_t)n >= cap) return -ENAMETOOLONG;
  buf[n] = 0;
  if (buf[0] != '/') return -ENOENT; /* not a path in our namespace */
  /* A hard-linked file whose name this was got removed. */
  static const char tail[] = " (deleted)";
  size_t k = sizeof tail - 1;
  if ((size_t)n >= k && strcmp(buf + n - k, tail) == 0 && fstatat(AT_FDCWD, buf, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return -ENOENT;
  return 0;
}

int b2fs_path_at(int dirfd, const char *name, char *buf, size_t cap) {
  char proc[64];
  ssize_t n = readlink(b2fs_fd_path(dirfd, proc, sizeof proc), buf, cap);
  if (n < 0) return -errno;
  if ((size_t)n >= cap || buf[0] != '/') return -ENAMETOOLONG;
  size_t k = strlen(name);
  int slash = !(n == 1); /* the root directory "/" */
  if ((size_t)n + (size_t)slash + k + 1 > cap) return -ENAMETOOLONG;
  if (slash) buf[n++] = '/';
  memcpy(buf + n, name, k + 1);
  return 0;
}

mode_t b2fs_sparse_dir_mode(mode_t shown) {
  mode_t m = shown & 07777;
  return m | ((m & 0444) >> 2); /* searchable where readable */
}

int b2fs_req_owner(fuse_req_t req, uid_t *uid, gid_t *gid) {
  const struct fuse_ctx *ctx = fuse_req_ctx(req);
  *uid = (uid_t)-1;
  *gid = (gid_t)-1;
  if (geteuid() != 0 || (ctx->uid == 0 && ctx->gid == 0)) return 0;
  *uid = ctx->uid;
  *gid = ctx->gid;
  return 1;
}

void b2fs_give_owner(int dirfd, const char *name, fuse_req_t req) {
  uid_t uid;
  gid_t gid;
  if (b2fs_req_owner(req, &uid, &gid) &&
      fchownat(dirfd, name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
    b2fs_log("cannot give %s to uid %u: %s", name, (unsigned)uid, strerror(errno));
}

char *b2fs_own_xattr_names(int fd, size_t *len) {
  char path[64];
  b2fs_fd_path(fd, path, sizeof path);
  *len = 0;
  ssize_t n = listxattr(path, NULL, 0);
  char *names = n > 0 ? malloc((size_t)n) : NULL;
  if (names) n = listxattr(path, names, (size_t)n);
  size_t kept = 0;
  for (ssize_t k = 0; names && k < n; k += (ssize_t)strlen(names + k) + 1) {
    size_t l = strlen(names + k) + 1;
    if (!b2_ns_own_xattr(names + k)) continue;
    memmove(names + kept, names + k, l); /* kept <= k: in place */
    kept += l;
  }
  if (!kept) {
    free(names);
    return NULL;
  }
  *len = kept;
  return names;
}

/* The user's own attributes of the file at descriptor `from` onto `to`. */
static void copy_own_xattrs(int from, int to) {
  int err = b2_ns_copy_own_xattrs(from, to);
  if (err) b2fs_log("cannot keep an attribute of a rewritten frame: %s", strerror(err));
}

void b2fs_copy_attrs(int fd, const struct stat *before, int times, int from) {
  char proc[64];
  struct stat now;
  if (from >= 0) copy_own_xattrs(from, fd);
  if (fstatat(fd, "", &now, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0) return;
  if ((now.st_uid != before->st_uid || now.st_gid != before->st_gid) &&
      fchownat(fd, "", before->st_uid, before->st_gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
    b2fs_log("cannot keep the owner of a rewritten frame: %s", strerror(errno));
  b2fs_fd_path(fd, proc, sizeof proc);
  /* Sparse <-> contiguous: the directory is searchable where readable. */
  mode_t mode = before->st_mode & 07777;
  if (S_ISDIR(now.st_mode) && !S_ISDIR(before->st_mode)) mode = b2fs_sparse_dir_mode(mode);
  if (!S_ISDIR(now.st_mode) && S_ISDIR(before->st_mode)) mode &= ~(mode_t)0111;
  if ((now.st_mode & 07777) != mode) (void)chmod(proc, mode);
  if (!times) return;
  struct timespec ts[2] = {before->st_atim, before->st_mtim};
  (void)utimensat(AT_FDCWD, proc, ts, 0);
}
