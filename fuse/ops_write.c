/*
 * ops_write.c - operations that change a file's content and attributes:
 * write, setattr (mode, owner, size, times), fallocate.  Plain files are
 * changed as they are; frames through their writable handle (whandle.c),
 * opened for the call when the request comes without an open file.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "b2fs.h"

static int set_mode(b2fs_inode *in, mode_t mode);

/* Is the caller of req in group g (its own or a supplementary one)? */
static int in_group(fuse_req_t req, gid_t g) {
  if (fuse_req_ctx(req)->gid == g) return 1;
  gid_t groups[64];
  int n = fuse_req_getgroups(req, 64, groups);
  for (int i = 0; i < n && i < 64; i++)
    if (groups[i] == g) return 1;
  return 0;
}

void b2fs_kill_privs(fuse_req_t req, b2fs_inode *in) {
  struct stat st;
  if (fuse_req_ctx(req)->uid == 0) return;
  if (fstatat(in->fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0) return;
  if (!(st.st_mode & (S_ISUID | S_ISGID))) return;
  if (in->kind != B2_NS_PLAIN && b2fs_stat(in, &st) < 0) return; /* the mode shown */
  mode_t kill = S_ISUID;
  if ((st.st_mode & S_ISGID) && ((st.st_mode & S_IXGRP) || !in_group(req, st.st_gid)))
    kill |= S_ISGID;
  int rc = (st.st_mode & kill) ? set_mode(in, st.st_mode & 07777 & ~kill) : 0;
  if (rc < 0) b2fs_log("cannot clear set-user-ID of a written file: %s", strerror(-rc));
}

/* A write to a frame through its writable handle h: the bytes written,
 * or a negative errno. */
static ssize_t frame_pwrite(b2fs_inode *in, b2fs_handle *h, const void *buf, size_t size,
                            off_t off) {
  uint64_t g0 = in->kind == B2_NS_NPY ? b2fs_frame_gen(h) : 0;
  b2_file *f = b2fs_use(h);
  ssize_t n = f ? b2_file_pwrite(f, buf, size, (int64_t)off) : B2_E_IO;
  if (f && in->kind == B2_NS_NPY) b2fs_frame_note(f);
  if (n >= 0) b2fs_frame_touched(in, f);
  b2fs_unuse(h);
  if (in->kind == B2_NS_NPY) b2fs_frame_renewed(in, h, g0);
  if (n >= 0) return n;
  if (n != B2_E_INVAL) b2fs_frame_log(in, h, "write", (int)n);
  return -b2fs_werrno((int)n);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
                     size_t size, off_t off, struct fuse_file_info *fi) {
  b2fs_inode *in = b2fs_inode_get(ino);
  if (in->kind == B2_NS_PLAIN) {
    ssize_t n = pwrite((int)fi->fh, buf, size, off);
    if (n < 0) {
      fuse_reply_err(req, errno);
    } else {
      if (n > 0) b2fs_kill_privs(req, in);
      fuse_reply_write(req, (size_t)n);
    }
    return;
  }
  b2fs_handle *h = b2fs_fh_handle(fi);
  if (!h->writable) {
    fuse_reply_err(req, EBADF);
    return;
  }
  ssize_t n = frame_pwrite(in, h, buf, size, off);
  if (n < 0) {
    fuse_reply_err(req, (int)-n);
    return;
  }
  if (n > 0) b2fs_kill_privs(req, in);
  fuse_reply_write(req, (size_t)n);
}

/* A frame's writable handle for a change: the open's, or one opened for
 * it (*own: release it after). */
static int rw_for(b2fs_inode *in, struct fuse_file_info *fi, b2fs_handle **h, int *own) {
  *own = 0;
  if (fi && b2fs_fh_writes(fi) && b2fs_fh_handle(fi)->writable) {
    *h = b2fs_fh_handle(fi);
    return 0;
  }
  *own = 1;
  return b2fs_frame_open_rw(in, h, NULL);
}

/* Give back a handle from rw_for; the first error wins. */
static int rw_done(b2fs_inode *in, b2fs_handle *h, int own, int rc) {
  if (!own) {
    b2fs_frame_follow(in);
    return rc;
  }
  int rc2 = b2fs_frame_release(in, h);
  return rc ? rc : rc2;
}

static int set_size(b2fs_inode *in, off_t size, struct fuse_file_info *fi) {
  char path[64];
  if (in->kind == B2_NS_PLAIN) {
    int r = fi ? ftruncate((int)fi->fh, size)
               : truncate(b2fs_fd_path(in->fd, path, sizeof path), size);
    return r < 0 ? -errno : 0;
  }
  b2fs_handle *h;
  int own;
  int rc = rw_for(in, fi, &h, &own);
  if (rc < 0) return rc;
  uint64_t g0 = b2fs_frame_gen(h);
  b2_file *f = b2fs_use(h);
  int brc = f ? b2_file_truncate(f, (int64_t)size) : B2_E_IO;
  if (brc == 0) b2fs_frame_touched(in, f);
  b2fs_unuse(h);
  b2fs_frame_renewed(in, h, g0);
  if (brc < 0) {
    if (brc != B2_E_INVAL) b2fs_frame_log(in, h, "truncate", brc);
    rc = -b2fs_werrno(brc);
  }
  return rw_done(in, h, own, rc);
}

/* Zeros written over [off, end) of a frame, a piece at a time: chunks
 * wholly zeroed are stored as zero chunks of a few bytes, which is what a
 * hole is in a compressed frame. */
static int frame_zero(b2fs_inode *in, b2fs_handle *h, int64_t off, int64_t end) {
  unsigned char *zeros = calloc(1, B2FS_IO_MAX);
  if (!zeros) return -ENOMEM;
  int rc = 0;
  while (rc == 0 && off < end) {
    size_t n = end - off < B2FS_IO_MAX ? (size_t)(end - off) : B2FS_IO_MAX;
    ssize_t w = frame_pwrite(in, h, zeros, n, (off_t)off);
    rc = w < 0 ? (int)w : w == 0 ? -EIO : 0;
    off += w > 0 ? w : 0;
  }
  free(zeros);
  return rc;
}

/* fallocate of a frame: grow it (there is no space to reserve in a
 * compressed file), or zero a range (FALLOC_FL_PUNCH_HOLE with
 * FALLOC_FL_KEEP_SIZE, FALLOC_FL_ZERO_RANGE): the range reads as zeros
 * after, and its chunks wholly zeroed cost a few bytes once the frame is
 * compacted.  Other modes (collapse, insert, unshare) are EOPNOTSUPP. */
static int frame_allocate(b2fs_inode *in, int mode, off_t off, off_t len,
                          struct fuse_file_info *fi) {
  int zero = mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE);
  if (mode & ~(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE))
    return -EOPNOTSUPP;
  if ((mode & FALLOC_FL_PUNCH_HOLE) &&
      (!(mode & FALLOC_FL_KEEP_SIZE) || (mode & FALLOC_FL_ZERO_RANGE)))
    return -EOPNOTSUPP; /* as the kernel asks of every file system */
  if (mode == FALLOC_FL_KEEP_SIZE) return 0;
  b2fs_handle *h;
  int own;
  int rc = rw_for(in, fi, &h, &own);
  if (rc < 0) return rc;
  int64_t end = (int64_t)off + (int64_t)len;
  b2_file *f = b2fs_use(h);
  int64_t size = f ? b2_file_size(f) : 0;
  b2fs_unuse(h);
  if (!f) rc = -EIO;
  if (rc == 0 && zero && off < size) rc = frame_zero(in, h, off, end < size ? end : size);
  if (rc == 0 && end > size && !(mode & FALLOC_FL_KEEP_SIZE)) {
    f = b2fs_use(h);
    int brc = f ? b2_file_truncate(f, end) : B2_E_IO;
    if (brc < 0) rc = -b2fs_werrno(brc);
    else b2fs_frame_touched(in, f);
    b2fs_unuse(h);
  }
  return rw_done(in, h, own, rc);
}

static void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset,
                         off_t length, struct fuse_file_info *fi) {
  b2fs_inode *in = b2fs_inode_get(ino);
  int rc;
  if (in->kind == B2_NS_PLAIN)
    rc = fallocate((int)fi->fh, mode, offset, length) < 0 ? -errno : 0;
  else
    rc = frame_allocate(in, mode, offset, length, fi);
  fuse_reply_err(req, -rc);
}

/* ---- attributes ---------------------------------------------------------- */

static int set_mode(b2fs_inode *in, mode_t mode) {
  char path[64];
  struct stat st;
  if (fstatat(in->fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0) return -errno;
  if (S_ISLNK(st.st_mode)) return 0; /* links have no mode of their own */
  mode_t m = mode & 07777;
  if (in->kind != B2_NS_PLAIN && S_ISDIR(st.st_mode)) m = b2fs_sparse_dir_mode(m);
  return chmod(b2fs_fd_path(in->fd, path, sizeof path), m) < 0 ? -errno : 0;
}

/* Does frame inode `in` hold a checksum table (read-only look)? */
static int holds_table(b2fs_inode *in) {
  b2fs_handle *h;
  if (b2fs_frame_peek(in, &h) < 0) return 0;
  b2_file *f = b2fs_use(h);
  b2_frame_csum_info ci;
  int yes = f && b2_frame_checksums(b2_file_frame(f), &ci) == 0 && ci.state != B2_CSUM_NONE;
  b2fs_unuse(h);
  b2fs_frame_release(in, h);
  return yes;
}

/* Modification time t given to a frame that holds a checksum table, or is
 * open for writing: committed by its writer, the table saying it is true
 * at t (b2_file_set_mtime).  Set as any file's time, it would read as
 * another program's change, and the table would vouch for nothing.
 * Frames without a table (another program's) are not opened for writing:
 * their time is set like a plain file's. */
static int frame_mtime(b2fs_inode *in, const struct timespec *t) {
  if (!in->rw && !holds_table(in)) return 0;
  b2fs_handle *h;
  int own;
  int rc = rw_for(in, NULL, &h, &own);
  if (rc == -EROFS || rc == -EOPNOTSUPP) return 0; /* not writable here: its time only */
  if (rc < 0) return rc;
  uint64_t g0 = b2fs_frame_gen(h);
  b2_file *f = b2fs_use(h);
  int brc = f ? b2_file_set_mtime(f, t) : B2_E_IO;
  b2fs_unuse(h);
  b2fs_frame_renewed(in, h, g0);
  if (brc < 0) {
    b2fs_frame_log(in, h, "set times", brc);
    rc = -b2fs_werrno(brc);
  }
  return rw_done(in, h, own, rc);
}

/* The times of a hard-linked symbolic link whose name the inode's
 * descriptor knows it by is gone (removed; it has others): set through a
 * hidden link of its own made for the call at SOURCE's top. */
static int link_times(b2fs_inode *in, const struct timespec ts[2]) {
  char proc[64], hidden[B2_NS_HIDDEN_MAX];
  b2_ns_hidden_name(hidden, sizeof hidden);
  int top = b2fs_g.root.fd;
  if (linkat(AT_FDCWD, b2fs_fd_path(in->fd, proc, sizeof proc), top, hidden,
             AT_SYMLINK_FOLLOW) < 0)
    return -errno;
  int r = utimensat(top, hidden, ts, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
  (void)unlinkat(top, hidden, 0);
  return r;
}

/* The times a setattr asks for, as utimensat(2) takes them. */
static void times_of(const struct stat *attr, int to_set, struct timespec ts[2]) {
  ts[0].tv_nsec = ts[1].tv_nsec = UTIME_OMIT;
  if (to_set & FUSE_SET_ATTR_ATIME_NOW) ts[0].tv_nsec = UTIME_NOW;
  else if (to_set & FUSE_SET_ATTR_ATIME) ts[0] = attr->st_atim;
  if (to_set & FUSE_SET_ATTR_MTIME_NOW) ts[1].tv_nsec = UTIME_NOW;
  else if (to_set & FUSE_SET_ATTR_MTIME) ts[1] = attr->st_mtim;
}

static int set_times(b2fs_inode *in, const struct stat *attr, int to_set) {
  struct timespec ts[2];
  times_of(attr, to_set, ts);
  struct stat st;
  char path[PATH_MAX];
  if (fstatat(in->fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0) return -errno;
  if (in->kind != B2_NS_PLAIN && ts[1].tv_nsec != UTIME_OMIT && !S_ISLNK(st.st_mode)) {
    if (ts[1].tv_nsec == UTIME_NOW) clock_gettime(CLOCK_REALTIME, &ts[1]);
    int rc = frame_mtime(in, &ts[1]);
    if (rc < 0) return rc;
    b2fs_frame_follow(in);
  } else if (in->kind != B2_NS_PLAIN && in->rw) {
    /* Commit first: a later commit would change the times again. */
    b2fs_handle *h;
    int rc = b2fs_frame_peek(in, &h);
    if (rc < 0) return rc;
    b2_file *f = b2fs_use(h);
    int brc = h->writable && f ? b2_file_flush(f) : 0;
    b2fs_unuse(h);
    b2fs_frame_release(in, h);
    if (brc < 0) return -b2fs_werrno(brc);
    b2fs_frame_follow(in);
  }
  int r;
  if (S_ISLNK(st.st_mode)) { /* no call sets a link's times by descriptor */
    r = b2fs_real_path(in, path, sizeof path);
    if (r == -ENOENT && st.st_nlink > 0) return link_times(in, ts);
    if (r < 0) return r;
    r = utimensat(AT_FDCWD, path, ts, AT_SYMLINK_NOFOLLOW);
  } else {
    r = utimensat(AT_FDCWD, b2fs_fd_path(in->fd, path, sizeof path), ts, 0);
    if (r == 0 && in->kind != B2_NS_PLAIN && S_ISDIR(st.st_mode))
      r = utimensat(in->fd, B2_NS_SPARSE_INDEX, ts, AT_SYMLINK_NOFOLLOW);
  }
  if (r < 0) return -errno;
  pthread_mutex_lock(&in->lock);
  memset(&in->wtime, 0, sizeof in->wtime);
  in->attr_valid = 0;
  pthread_mutex_unlock(&in->lock);
  return 0;
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
                       int to_set, struct fuse_file_info *fi) {
  b2fs_inode *in = b2fs_inode_get(ino);
  if (b2fs_stale_reply(req, in, 1)) return;
  int rc = 0;
  if (in->kind == B2_NS_STORE) { /* a .b2d's directories only: the rest is read-only */
    struct timespec ts[2];
    times_of(attr, to_set, ts);
    struct stat st;
    rc = b2fs_store_setattr(in, to_set, attr, ts);
    if (!rc) rc = b2fs_stat(in, &st);
    if (rc < 0)
      fuse_reply_err(req, -rc);
    else
      fuse_reply_attr(req, &st, b2fs_g.opts.timeout);
    return;
  }
  /* A frame's mode and owner under its namespace lock: a compaction at
   * the last close (which holds it) may be replacing the file, and the
   * inode's descriptor follows the new one only when it is done. */
  int locked = in->kind != B2_NS_PLAIN &&
               (to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID));
  if (locked) b2fs_nslock2(in, NULL);
  if (to_set & FUSE_SET_ATTR_MODE) rc = set_mode(in, attr->st_mode);
  if (!rc && (to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID))) {
    uid_t u = (to_set & FUSE_SET_ATTR_UID) ? attr->st_uid : (uid_t)-1;
    gid_t g = (to_set & FUSE_SET_ATTR_GID) ? attr->st_gid : (gid_t)-1;
    if (fchownat(in->fd, "", u, g, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0) rc = -errno;
  }
  if (locked) b2fs_nsunlock2(in, NULL);
  if (!rc && (to_set & FUSE_SET_ATTR_SIZE)) rc = set_size(in, attr->st_size, fi);
  if (!rc && (to_set & FUSE_SET_ATTR_SIZE) && !(to_set & FUSE_SET_ATTR_MODE))
    b2fs_kill_privs(req, in); /* a truncate is a write */
  if (!rc && (to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME |
                        FUSE_SET_ATTR_ATIME_NOW | FUSE_SET_ATTR_MTIME_NOW)))
    rc = set_times(in, attr, to_set);
  struct stat st;
  if (!rc) rc = b2fs_stat(in, &st);
  if (rc < 0)
    fuse_reply_err(req, -rc);
  else
    fuse_reply_attr(req, &st, b2fs_g.opts.timeout);
}

void b2fs_ops_write(struct fuse_lowlevel_ops *ops) {
  ops->write = op_write;
  ops->setattr = op_setattr;
  ops->fallocate = op_fallocate;
}
