/*
 * ops_read.c - FUSE operations on names and open files: init, lookup,
 * forget, getattr, readlink, statfs, open, read, flush, fsync, release.
 * Plain files are passed through (reads spliced from the source
 * descriptor); frames are read through their shared b2_file.  An open for
 * writing of a frame takes its writable handle; close(2) (FUSE flush)
 * commits it, so that close reports errors such as ENOSPC.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "b2fs.h"

static void op_init(void *userdata, struct fuse_conn_info *conn) {
  (void)userdata;
  conn->max_write = B2FS_IO_MAX;
  conn->max_read = B2FS_IO_MAX;
  /* The kernel keeps the smaller of this and the read-ahead set on the
   * mount's device before (main.c); one request carries up to max_read. */
  unsigned ra = b2fs_g.opts.read_ahead_kb;
  conn->max_readahead = ra && ra <= UINT_MAX / 1024 ? ra * 1024u : B2FS_IO_MAX;
  unsigned want = FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE |
                  FUSE_CAP_PARALLEL_DIROPS | FUSE_CAP_CACHE_SYMLINKS |
                  FUSE_CAP_AUTO_INVAL_DATA | FUSE_CAP_ASYNC_READ |
                  FUSE_CAP_ATOMIC_O_TRUNC;
  conn->want |= want & conn->capable;
  /* No write-back cache: the kernel would then keep its own size and
   * times of a file and miss frames changed behind the mount. */
  conn->want &= ~(unsigned)(FUSE_CAP_EXPORT_SUPPORT | FUSE_CAP_WRITEBACK_CACHE);
  conn->time_gran = 1;
  if (b2fs_g.opts.direct_io && !b2fs_dev_mmap_allowed())
    b2fs_log("direct_io: this kernel maps frames only privately (shared mappings need "
             "Linux 6.6 or later)");
}

/* ---- names --------------------------------------------------------------- */
static void reply_negative(fuse_req_t req) {
  struct fuse_entry_param e;
  memset(&e, 0, sizeof e);
  e.entry_timeout = b2fs_g.opts.timeout;
  fuse_reply_entry(req, &e);
}

/* Reply to a lookup of `name` in `parent` that found e (rc 0) or failed. */
static void reply_lookup(fuse_req_t req, fuse_ino_t parent, const char *name, int rc,
                         struct fuse_entry_param *e) {
  if (rc == -ENOENT)
    reply_negative(req);
  else if (rc < 0)
    fuse_reply_err(req, -rc);
  else
    (void)b2fs_reply_entry(req, parent, name, e);
}

/* The entry shown as `name` in directory p: 0 (e filled), -ENOENT, or
 * another -errno. */
static int lookup_in(b2fs_inode *p, const char *name, struct fuse_entry_param *e) {
  char src[B2_NS_NAME_MAX + 1];
  int pfd = p->fd;
  int kind = b2_ns_name_to_source(name, b2_ns_probe_dir, &pfd, src, sizeof src);
  if (kind == B2_E_NOENT || (kind >= 0 && b2_ns_name_hidden(src))) return -ENOENT;
  if (kind < 0) return -b2_to_errno(kind);
  return b2fs_entry_in(p, src, kind, e);
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name) {
  b2fs_inode *p = b2fs_inode_get(parent);
  struct fuse_entry_param e;
  if (p->kind == B2_NS_STORE) { /* a store's directory (store.c) */
    reply_lookup(req, parent, name, b2fs_store_lookup(p, name, &e), &e);
    return;
  }
  if (p->kind != B2_NS_PLAIN) {
    fuse_reply_err(req, ENOTDIR);
    return;
  }
  if (!strcmp(name, ".") || !strcmp(name, "..")) { /* never above SOURCE */
    fuse_reply_err(req, EINVAL);
    return;
  }
  b2fs_sweep_dir(p);
  int rc = lookup_in(p, name, &e);
  /* Two source names show a .npy name (NAME.b2nd, NAME.npy.b2frame): a
   * close renaming one to the other between the probes (kept as its
   * bytes, an array again) makes both look absent once; a negative entry
   * would stay in the kernel's cache. */
  if (rc == -ENOENT && b2_ns_shown_npy(name)) rc = lookup_in(p, name, &e);
  reply_lookup(req, parent, name, rc, &e);
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
  b2fs_inode *in = b2fs_inode_get(ino);
  b2fs_frame_await_release(in); /* which may make it stale */
  if (b2fs_stale_reply(req, in, 1)) return;
  int rc = b2fs_stat(in, &st);
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
static void open_plain(fuse_req_t req, b2fs_inode *in, struct fuse_file_info *fi) {
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
  /* Offsets come with every request: no O_APPEND on our descriptor. */
  int flags = fi->flags & (O_ACCMODE | O_TRUNC | O_SYNC | O_DSYNC | O_NOATIME);
  int fd = open(b2fs_fd_path(in->fd, path, sizeof path), flags | O_CLOEXEC);
  if (fd < 0) {
    fuse_reply_err(req, errno);
    return;
  }
  if (fstat(fd, &st) == 0) fi->keep_cache = b2fs_plain_keep_cache(in, &st);
  if (fi->flags & O_TRUNC) b2fs_kill_privs(req, in);
  fi->fh = (uint64_t)fd;
  fi->noflush = 1;
  if (fuse_reply_open(req, fi) != 0) close(fd);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  b2fs_inode *in = b2fs_inode_get(ino);
  b2fs_frame_await_release(in); /* which may make it stale */
  if (b2fs_stale_reply(req, in, 0)) return;
  if (in->kind == B2_NS_STORE) {
    int rc = b2fs_store_open(in, fi->flags, &fi->fh);
    if (rc < 0) {
      fuse_reply_err(req, -rc);
      return;
    }
    fi->keep_cache = 1; /* a member changes only with its store's inode */
    fi->noflush = 1;
    if (fuse_reply_open(req, fi) != 0) b2fs_store_release(fi->fh);
    return;
  }
  if (in->kind == B2_NS_PLAIN) {
    open_plain(req, in, fi);
    return;
  }
  int writes = (fi->flags & O_ACCMODE) != O_RDONLY;
  b2fs_handle *h;
  int keep = 0, rc;
  b2fs_frame_kopen(in, 1);
  if (writes || (fi->flags & O_TRUNC)) {
    rc = b2fs_frame_open_rw(in, &h, &keep);
    if (rc < 0 && b2fs_shed_retry(-rc)) rc = b2fs_frame_open_rw(in, &h, &keep);
    b2_file *f = rc == 0 && (fi->flags & O_TRUNC) ? b2fs_use(h) : NULL;
    if (f && b2_file_size(f) > 0) {
      int brc = b2_file_truncate(f, 0);
      if (brc == 0) b2fs_frame_touched(in, f);
      b2fs_unuse(h);
      f = NULL;
      if (brc < 0) {
        b2fs_frame_log(in, h, "truncate at open", brc);
        b2fs_frame_release(in, h);
        rc = -b2fs_werrno(brc);
      } else {
        keep = 0;
      }
    }
    if (f) b2fs_unuse(h);
  } else {
    rc = b2fs_frame_open(in, &h, &keep);
    if (rc < 0 && b2fs_shed_retry(-rc)) rc = b2fs_frame_open(in, &h, &keep);
  }
  if (rc < 0) {
    b2fs_frame_kopen(in, -1);
    fuse_reply_err(req, -rc);
    return;
  }
  if (fi->flags & O_TRUNC) b2fs_kill_privs(req, in);
  fi->fh = (uint64_t)(uintptr_t)h | (uint64_t)(writes != 0);
  fi->noflush = !writes;
  fi->direct_io = b2fs_write_only(fi->flags) || (!writes && b2fs_g.opts.direct_io);
  /* Small frames decoded whole go to the page cache with the open, unless
   * warm.c handed them over already (the pages are then of this version). */
  if (!writes && !fi->direct_io && !(fi->flags & O_DIRECT) &&
      (atomic_load(&h->stored) || b2fs_handle_store(ino, h)))
    keep = 1;
  fi->keep_cache = keep;
  /* Before the reply: once the kernel has the open, a close and a forget
   * may free the inode. */
  if (!writes) b2fs_warm_opened(in);
  if (fuse_reply_open(req, fi) != 0) {
    b2fs_frame_release(in, h);
    b2fs_frame_kopen(in, -1);
  }
}

/* Log a failed read of a frame (one line naming file, chunk and reason);
 * the errno to reply. */
static int read_failed(b2fs_inode *in, b2fs_handle *use, int64_t off, int rc) {
  if (rc == B2_E_STALE) return ESTALE; /* op_read reads the new state */
  char what[64];
  snprintf(what, sizeof what, "read at offset %lld", (long long)off);
  b2fs_frame_log(in, use, what, rc);
  return b2fs_errno(rc);
}

/* SEEK_DATA and SEEK_HOLE (the kernel answers the other kinds itself):
 * plain files as their source says, frames by their chunks stored as
 * zeros (b2_file_seek_hole), a store's values as data throughout. */
static void op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
                     struct fuse_file_info *fi) {
  b2fs_inode *in = b2fs_inode_get(ino);
  if (whence != SEEK_DATA && whence != SEEK_HOLE) {
    fuse_reply_err(req, EINVAL);
    return;
  }
  if (in->kind == B2_NS_PLAIN) {
    off_t r = lseek((int)fi->fh, off, whence);
    if (r < 0)
      fuse_reply_err(req, errno);
    else
      fuse_reply_lseek(req, r);
    return;
  }
  int64_t r;
  if (in->kind == B2_NS_STORE) {
    struct stat st;
    int rc = b2fs_stat(in, &st);
    r = rc < 0 ? b2_from_errno(-rc)
        : off >= st.st_size ? B2_E_RANGE
        : whence == SEEK_DATA ? (int64_t)off : (int64_t)st.st_size;
  } else {
    b2fs_handle *h = b2fs_fh_handle(fi);
    b2fs_handle *w = b2fs_frame_redirect(in, h); /* a writer's: data throughout */
    b2fs_handle *use = w ? w : h;
    b2_file *f = b2fs_use(use);
    r = f ? b2_file_seek_hole(f, (int64_t)off, whence == SEEK_HOLE) : B2_E_IO;
    b2fs_unuse(use);
    if (w) b2fs_frame_release(in, w);
  }
  if (r == B2_E_RANGE)
    fuse_reply_err(req, ENXIO);
  else if (r < 0)
    fuse_reply_err(req, b2_to_errno((int)r));
  else
    fuse_reply_lseek(req, (off_t)r);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi) {
  b2fs_inode *in = b2fs_inode_get(ino);
  if (in->kind == B2_NS_STORE) {
    unsigned char *sbuf = b2fs_tls_buf(size);
    ssize_t n = sbuf ? b2fs_store_read(in, fi->fh, sbuf, size, off) : -ENOMEM;
    if (n < 0)
      fuse_reply_err(req, (int)-n);
    else
      fuse_reply_buf(req, (const char *)sbuf, (size_t)n);
    return;
  }
  if (in->kind == B2_NS_PLAIN) {
    struct fuse_bufvec bv = FUSE_BUFVEC_INIT(size);
    bv.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
    bv.buf[0].fd = (int)fi->fh;
    bv.buf[0].pos = off;
    fuse_reply_data(req, &bv, FUSE_BUF_SPLICE_MOVE);
    return;
  }
  b2fs_handle *h = b2fs_fh_handle(fi);
  b2fs_handle *w = b2fs_frame_redirect(in, h);
  b2fs_handle *use = w ? w : h;
  unsigned char *buf = b2fs_tls_buf(size);
  b2_file *f = b2fs_use(use);
  size_t done = 0, want = size;
  int err = !buf ? ENOMEM : !f ? EIO : 0;
  if (err) /* the kernel ends a read at a failed page: name it */
    b2fs_frame_log(in, use, "read", b2_fail(B2_E_IO, !buf ? "no buffer" : "the handle has no file"));
  int tries = 0, stale = 0, shortcheck = 0;
  b2_file_pin pin = {0};
again:
  if (!err && !use->writable) {
    /* Read-only: a sequential read is sent straight from the cache. */
    ssize_t n = b2_file_pread_pin(f, buf, size, (int64_t)off, &pin);
    if (n > 0) done = (size_t)n;
    else b2_file_unpin(&pin);
    if (n == 0) size = 0; /* at the end */
    if (n < 0) err = read_failed(in, use, (int64_t)off, (int)n);
  }
  while (!err && done < size) {
    ssize_t n = b2_file_pread(f, buf + done, size - done, (int64_t)off + (int64_t)done);
    /* A size change racing with the read (kernel read-ahead of a file
     * being truncated and written): read again. */
    if (n == B2_E_RANGE && use->writable && tries++ < 20) {
      sched_yield();
      continue;
    }
    if (n < 0 && use->writable && (int64_t)off + (int64_t)done >= b2_file_size(f)) break;
    if (n < 0) {
      err = read_failed(in, use, (int64_t)off + (int64_t)done, (int)n);
      break;
    }
    if (n == 0) break;
    done += (size_t)n;
  }
  /* Another program changed the frame under the reference library's
   * locking (its bytes may have moved): read the whole request again from
   * the frame as it is now, so that it shows one committed state. */
  int reread = err == ESTALE && stale++ < 8;
  /* A short reply is the end of the file to the kernel, which fills the
   * rest of the pages asked for with zeros and keeps them as the file's
   * content when another answer about the size came in meanwhile.  From a
   * version the source no longer holds (replaced or rewritten behind the
   * mount while this handle was open), its end is not the one the kernel
   * knows: read the request again from the frame as it is now. */
  b2fs_handle *now = NULL; /* the current version, when already looked up */
  if (!reread && !err && done < want && !use->writable && !shortcheck++ &&
      b2fs_frame_peek(in, &now) == 0 && now == use) {
    b2fs_frame_release(in, now);
    now = NULL;
  }
  if (reread || now) {
    b2_file_unpin(&pin);
    memset(&pin, 0, sizeof pin);
    b2fs_unuse(use);
    if (w) b2fs_frame_release(in, w);
    w = now;
    int rc = w ? 0 : b2fs_frame_peek(in, &w);
    if (rc < 0) w = NULL;
    use = w ? w : h;
    f = b2fs_use(use);
    done = 0;
    size = want;
    err = rc < 0 || !f ? EIO : 0;
    goto again;
  }
  if (err == ESTALE) err = read_failed(in, use, (int64_t)off, B2_E_IO);
  /* The kernel takes a short reply for the end of the file (and lowers
   * its size to it): one short of the size is a bug to name, and so is a
   * short one from a read-only view while the file is open for writing
   * (the writer's size is the one the kernel knows). */
  if (!err && done < want) {
    int64_t end = b2_file_size(f);
    int ro_beside_writer = !use->writable && atomic_load(&in->rw);
    if ((int64_t)off + (int64_t)done < end || ro_beside_writer) {
      char what[192];
      snprintf(what, sizeof what,
               "read at offset %lld: %zu of %zu bytes, short of the size %lld (%s handle%s)",
               (long long)off, done, want, (long long)end,
               use->writable ? "writable" : "read-only",
               ro_beside_writer ? ", the file open for writing" : "");
      b2fs_frame_log(in, use, what, b2_fail(B2_E_IO, "the kernel takes it for the end"));
    }
  }
  /* Done with the handle before replying: once the reply is out, a release
   * may free it.  The pin holds only the cache entry the reply sends. */
  b2fs_unuse(use);
  if (w) b2fs_frame_release(in, w);
  if (err)
    fuse_reply_err(req, err);
  else
    fuse_reply_buf(req, pin.entry ? (const char *)pin.data : (const char *)buf, done);
  b2_file_unpin(&pin);
}

/* Commit a frame through the handle of an open (or the writable one);
 * sync: fsync's, all made durable. */
static int commit(b2fs_inode *in, b2fs_handle *h, const char *what, int sync) {
  b2fs_handle *w = b2fs_frame_redirect(in, h);
  b2fs_handle *use = w ? w : h;
  uint64_t g0 = b2fs_frame_gen(use);
  b2_file *f = b2fs_use(use);
  int rc = !f ? B2_E_IO : sync ? b2_file_sync(f) : b2_file_flush(f);
  if (rc < 0 && f) b2fs_frame_log(in, use, what, rc);
  if (f && use->writable) b2fs_frame_note(f);
  b2fs_unuse(use);
  if (use->writable) b2fs_frame_renewed(in, use, g0);
  b2fs_frame_follow(in);
  if (w) b2fs_frame_release(in, w);
  return rc < 0 ? -b2fs_werrno(rc) : 0;
}

/* close(2) of an open that may write: commit, so that close sees errors. */
static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  b2fs_inode *in = b2fs_inode_get(ino);
  int rc = 0;
  if (in->kind != B2_NS_PLAIN && b2fs_fh_writes(fi)) {
    rc = commit(in, b2fs_fh_handle(fi), "commit at close", 0);
    b2fs_frame_flushed(in, b2fs_fh_handle(fi));
  }
  fuse_reply_err(req, -rc);
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
                     struct fuse_file_info *fi) {
  b2fs_inode *in = b2fs_inode_get(ino);
  int rc;
  if (in->kind == B2_NS_STORE)
    rc = 0; /* read-only */
  else if (in->kind == B2_NS_PLAIN)
    rc = (datasync ? fdatasync((int)fi->fh) : fsync((int)fi->fh)) < 0 ? -errno : 0;
  else
    rc = commit(in, b2fs_fh_handle(fi), "fsync", 1);
  fuse_reply_err(req, -rc);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  b2fs_inode *in = b2fs_inode_get(ino);
  if (in->kind == B2_NS_STORE)
    b2fs_store_release(fi->fh);
  else if (in->kind == B2_NS_PLAIN)
    close((int)fi->fh);
  else {
    b2fs_frame_release(in, b2fs_fh_handle(fi)); /* errors are logged */
    b2fs_frame_kopen(in, -1);
    b2fs_frame_released(in);
  }
  fuse_reply_err(req, 0);
}

/* With default_permissions the kernel checks modes itself and never asks;
 * without it, access is granted here and the source file system decides
 * when the call is made. */
static void op_access(fuse_req_t req, fuse_ino_t ino, int mask) {
  (void)ino, (void)mask;
  fuse_reply_err(req, 0);
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
  ops->lseek = op_lseek;
  ops->flush = op_flush;
  ops->fsync = op_fsync;
  ops->release = op_release;
}
