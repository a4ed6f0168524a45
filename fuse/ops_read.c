/*
 * ops_read.c - FUSE operations on names and file contents: init, lookup,
 * forget, getattr, readlink, open, read, release, statfs.  Plain files are
 * passed through (reads spliced from the source descriptor); frames are
 * read through their shared b2_file.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "b2fs.h"

#define B2FS_IO_MAX (1u << 20)

static void op_init(void *userdata, struct fuse_conn_info *conn) {
  (void)userdata;
  conn->max_write = B2FS_IO_MAX;
  conn->max_read = B2FS_IO_MAX;
  conn->max_readahead = B2FS_IO_MAX;
  unsigned want = FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE |
                  FUSE_CAP_PARALLEL_DIROPS | FUSE_CAP_CACHE_SYMLINKS |
                  FUSE_CAP_AUTO_INVAL_DATA | FUSE_CAP_ASYNC_READ;
  conn->want |= want & conn->capable;
  conn->want &= ~(unsigned)FUSE_CAP_EXPORT_SUPPORT;
  conn->time_gran = 1;
}

/* ---- per-thread read buffer --------------------------------------------- */
static pthread_key_t buf_key;
static pthread_once_t buf_once = PTHREAD_ONCE_INIT;
typedef struct tls_buf {
  size_t cap;
  unsigned char data[];
} tls_buf;

static void buf_key_init(void) { pthread_key_create(&buf_key, free); }

void *b2fs_tls_buf(size_t n) {
  pthread_once(&buf_once, buf_key_init);
  tls_buf *b = pthread_getspecific(buf_key);
  if (b && b->cap >= n) return b->data;
  size_t cap = n < B2FS_IO_MAX ? B2FS_IO_MAX : n;
  tls_buf *nb = malloc(sizeof *nb + cap);
  if (!nb) return NULL;
  nb->cap = cap;
  free(b);
  pthread_setspecific(buf_key, nb);
  return nb->data;
}

/* ---- names --------------------------------------------------------------- */
static void reply_negative(fuse_req_t req) {
  struct fuse_entry_param e;
  memset(&e, 0, sizeof e);
  e.entry_timeout = b2fs_g.opts.timeout;
  fuse_reply_entry(req, &e);
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name) {
  b2fs_inode *p = b2fs_inode_get(parent);
  if (p->kind != B2FS_KIND_PLAIN) {
    fuse_reply_err(req, ENOTDIR);
    return;
  }
  if (!strcmp(name, ".") || !strcmp(name, "..")) { /* never above SOURCE */
    fuse_reply_err(req, EINVAL);
    return;
  }
  char src[B2FS_NAME_MAX + 1];
  int kind = b2fs_name_to_source(name, b2fs_probe_dir, &p->fd, src, sizeof src);
  if (kind == -ENOENT) {
    reply_negative(req);
    return;
  }
  if (kind < 0) {
    fuse_reply_err(req, -kind);
    return;
  }
  int fd = openat(p->fd, src, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstatat(fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0) {
    int err = errno;
    if (fd >= 0) close(fd);
    if (err == ENOENT)
      reply_negative(req);
    else
      fuse_reply_err(req, err);
    return;
  }
  int sparse = 0;
  if (kind != B2FS_KIND_PLAIN && !S_ISREG(st.st_mode)) {
    if (S_ISDIR(st.st_mode) && b2fs_holds_sparse_index(fd))
      sparse = 1;
    else
      kind = B2FS_KIND_PLAIN; /* changed since the name was resolved */
  }
  b2fs_inode *in = b2fs_inode_ref(fd, &st, kind, sparse);
  if (!in) {
    fuse_reply_err(req, ENOMEM);
    return;
  }
  struct fuse_entry_param e;
  memset(&e, 0, sizeof e);
  int rc = b2fs_stat(in, &e.attr);
  if (rc < 0) {
    b2fs_inode_forget(in, 1);
    fuse_reply_err(req, -rc);
    return;
  }
  e.ino = b2fs_inode_id(in);
  e.attr_timeout = b2fs_g.opts.timeout;
  e.entry_timeout = b2fs_g.opts.timeout;
  if (fuse_reply_entry(req, &e) != 0) b2fs_inode_forget(in, 1);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
  b2fs_inode_forget(b2fs_inode_get(ino), nlookup);
  fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count,
                            struct fuse_forget_data *forgets) {
  for (size_t i = 0; i < count; i++)
    b2fs_inode_forget(b2fs_inode_get(forgets[i].ino), forgets[i].nlookup);
  fuse_reply_none(req);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  (void)fi;
  struct stat st;
  int rc = b2fs_stat(b2fs_inode_get(ino), &st);
  if (rc < 0)
    fuse_reply_err(req, -rc);
  else
    fuse_reply_attr(req, &st, b2fs_g.opts.timeout);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino) {
  char buf[PATH_MAX + 1];
  ssize_t n = readlinkat(b2fs_inode_get(ino)->fd, "", buf, sizeof buf);
  if (n < 0) {
    fuse_reply_err(req, errno);
    return;
  }
  if ((size_t)n >= sizeof buf) {
    fuse_reply_err(req, ENAMETOOLONG);
    return;
  }
  buf[n] = 0;
  fuse_reply_readlink(req, buf);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino) {
  struct statvfs sv;
  if (fstatvfs(b2fs_inode_get(ino)->fd, &sv) < 0 &&
      fstatvfs(b2fs_g.root.fd, &sv) < 0) {
    fuse_reply_err(req, errno);
    return;
  }
  fuse_reply_statfs(req, &sv);
}

/* ---- contents ------------------------------------------------------------ */
static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  b2fs_inode *in = b2fs_inode_get(ino);
  if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & (O_TRUNC | O_CREAT))) {
    fuse_reply_err(req, EROFS);
    return;
  }
  if (in->kind == B2FS_KIND_PLAIN) {
    struct stat st;
    char path[64];
    if (fstatat(in->fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0) {
      fuse_reply_err(req, errno);
      return;
    }
    if (!S_ISREG(st.st_mode)) {
      fuse_reply_err(req, S_ISDIR(st.st_mode) ? EISDIR : EINVAL);
      return;
    }
    int fd = open(b2fs_fd_path(in->fd, path, sizeof path), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      fuse_reply_err(req, errno);
      return;
    }
    fi->fh = (uint64_t)fd;
    fi->keep_cache = b2fs_plain_keep_cache(in, &st);
    fi->noflush = 1;
    if (fuse_reply_open(req, fi) != 0) close(fd);
    return;
  }
  b2fs_handle *h;
  int keep = 0;
  int rc = b2fs_frame_open(in, &h, &keep);
  if (rc < 0) {
    fuse_reply_err(req, -rc);
    return;
  }
  fi->fh = (uint64_t)(uintptr_t)h;
  fi->keep_cache = keep;
  fi->noflush = 1;
  if (fuse_reply_open(req, fi) != 0) b2fs_frame_release(in, h);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi) {
  b2fs_inode *in = b2fs_inode_get(ino);
  if (in->kind == B2FS_KIND_PLAIN) {
    struct fuse_bufvec bv = FUSE_BUFVEC_INIT(size);
    bv.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
    bv.buf[0].fd = (int)fi->fh;
    bv.buf[0].pos = off;
    fuse_reply_data(req, &bv, FUSE_BUF_SPLICE_MOVE);
    return;
  }
  b2fs_handle *h = (b2fs_handle *)(uintptr_t)fi->fh;
  unsigned char *buf = b2fs_tls_buf(size);
  if (!buf) {
    fuse_reply_err(req, ENOMEM);
    return;
  }
  size_t done = 0;
  while (done < size) {
    ssize_t n = b2_file_pread(h->file, buf + done, size - done, (int64_t)off + (int64_t)done);
    if (n < 0) {
      char what[64];
      snprintf(what, sizeof what, "read at offset %lld", (long long)off + (long long)done);
      b2fs_frame_log(in, h, what, (int)n);
      fuse_reply_err(req, b2fs_errno((int)n));
      return;
    }
    if (n == 0) break;
    done += (size_t)n;
  }
  fuse_reply_buf(req, (const char *)buf, done);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  b2fs_inode *in = b2fs_inode_get(ino);
  if (in->kind == B2FS_KIND_PLAIN)
    close((int)fi->fh);
  else
    b2fs_frame_release(in, (b2fs_handle *)(uintptr_t)fi->fh);
  fuse_reply_err(req, 0);
}

/* With default_permissions the kernel checks modes itself; without it,
 * only writing is refused here (the mount is read-only). */
static void op_access(fuse_req_t req, fuse_ino_t ino, int mask) {
  (void)ino;
  fuse_reply_err(req, (mask & W_OK) ? EROFS : 0);
}

void b2fs_ops_read(struct fuse_lowlevel_ops *ops) {
  ops->access = op_access;
  ops->init = op_init;
  ops->lookup = op_lookup;
  ops->forget = op_forget;
  ops->forget_multi = op_forget_multi;
  ops->getattr = op_getattr;
  ops->readlink = op_readlink;
  ops->statfs = op_statfs;
  ops->open = op_open;
  ops->read = op_read;
  ops->release = op_release;
}
