/*
 * attr.c - what the daemon replies about an entry: the attributes shown
 * (frames: the view's size, a regular file's mode, disk use; recomputed
 * only when the frame's signature changes; a frame open for writing shows
 * its writable handle's size and the time of its last change through the
 * mount until that is committed), the entry of a lookup, and the small
 * helpers of requests (an open's handle, per-thread buffers).  Above the
 * handles (handle.c, whandle.c), below the stores and the operations.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "b2_store.h"
#include "b2fs.h"
#include "common/fileio.h"

static int stat_known(b2fs_inode *in, struct stat *st);

/* b2fs_entry, with the directory's device and inode numbers in dst when
 * the caller knows them (NULL: asked). */
static int entry(int pfd, const struct stat *dst, const char *src, int kind,
                 struct fuse_entry_param *e) {
  int fd = openat(pfd, src, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  /* No descriptor left: the kernel is asked to forget cold inodes. */
  if (fd < 0 && b2fs_shed_retry(errno))
    fd = openat(pfd, src, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstatat(fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0) {
    int err = errno;
    if (fd >= 0) close(fd);
    return -err;
  }
  int sparse = 0;
  if (kind == B2_NS_STORE) {
    if (b2_store_detect(pfd, src) == B2_STORE_NONE) kind = B2_NS_PLAIN; /* changed meanwhile */
  } else if (kind != B2_NS_PLAIN && !S_ISREG(st.st_mode)) {
    if (S_ISDIR(st.st_mode) && b2_ns_holds_sparse_index(fd))
      sparse = 1;
    else
      kind = B2_NS_PLAIN; /* changed since the name was resolved */
  }
  b2fs_inode *in = b2fs_inode_ref(fd, &st, kind, sparse);
  if (!in) return -ENOMEM;
  b2fs_shed_note();
  struct stat d; /* a frame is opened for writing by directory + name */
  if (kind != B2_NS_PLAIN && !dst && fstatat(pfd, "", &d, AT_EMPTY_PATH) == 0) dst = &d;
  if (kind != B2_NS_PLAIN && dst) b2fs_set_home(in, dst, src);
  if (kind != B2_NS_PLAIN && dst && S_ISREG(st.st_mode) && st.st_nlink > 1)
    b2fs_note_place(in, dst, src);
  /* A frame file without a sidecar beside it, found with one call by its
   * directory and name: the signature need not look for it by path. */
  if ((kind == B2_NS_LOGICAL || kind == B2_NS_NPY) && S_ISREG(st.st_mode) &&
      b2_ns_has_sidecar(pfd, src, &st) == 0)
    b2fs_sig_nolock_file(in, &st);
  memset(e, 0, sizeof *e);
  e->attr = st; /* the entry as just found: the inode's file */
  int rc = in->kind == B2_NS_STORE ? b2fs_hook.store_stat(in, &e->attr) : stat_known(in, &e->attr);
  if (rc < 0) {
    b2fs_inode_forget(in, 1);
    return rc;
  }
  e->ino = b2fs_inode_id(in);
  e->attr_timeout = b2fs_g.opts.timeout;
  e->entry_timeout = b2fs_g.opts.timeout;
  return 0;
}

int b2fs_entry(int pfd, const char *src, int kind, struct fuse_entry_param *e) {
  return entry(pfd, NULL, src, kind, e);
}

int b2fs_entry_in(b2fs_inode *dir, const char *src, int kind, struct fuse_entry_param *e) {
  /* A frame we rewrote under this name: its inode follows first. */
  if (kind != B2_NS_PLAIN && b2fs_frame_any_writable()) b2fs_frame_follow_at(dir, src);
  struct stat dst;
  memset(&dst, 0, sizeof dst);
  dst.st_dev = dir->dev;
  dst.st_ino = dir->ino;
  return entry(dir->fd, &dst, src, kind, e);
}

int b2fs_reply_entry(fuse_req_t req, fuse_ino_t parent, const char *name,
                     const struct fuse_entry_param *e) {
  /* Before the reply: a FORGET may follow it at once. */
  b2fs_shed_seen(b2fs_inode_get(e->ino), parent, name);
  if (fuse_reply_entry(req, e) != 0) {
    b2fs_inode_forget(b2fs_inode_get(e->ino), 1);
    return -1;
  }
  return 0;
}

int b2fs_reply_create(fuse_req_t req, fuse_ino_t parent, const char *name,
                      const struct fuse_entry_param *e, const struct fuse_file_info *fi) {
  b2fs_shed_seen(b2fs_inode_get(e->ino), parent, name);
  return fuse_reply_create(req, e, fi) != 0 ? -1 : 0;
}

/* A frame open's fh: its handle, with bit 0 set when it may write. */
b2fs_handle *b2fs_fh_handle(const struct fuse_file_info *fi) {
  return (b2fs_handle *)(uintptr_t)(fi->fh & ~(uint64_t)1);
}
int b2fs_fh_writes(const struct fuse_file_info *fi) { return (int)(fi->fh & 1); }

/* Write-only opens of frames (cp, tar, rsync...) bypass the kernel's page
 * cache: one copy less per byte, and such a descriptor cannot be mapped
 * anyway.  Other opens see the new data: each write changes the times the
 * kernel checks before serving cached pages (auto_inval_data). */
int b2fs_write_only(int flags) { return (flags & O_ACCMODE) == O_WRONLY; }

/* Size of the view for signature sig of the file on device dev (under the
 * inode lock); 0 when the frame cannot be opened. */
static int64_t view_size(b2fs_inode *in, dev_t dev, const b2fs_sig *sig) {
  if (in->cur && !in->cur->writable && b2fs_sig_eq(&in->cur->sig, sig))
    return b2_file_size(in->cur->file);
  /* From the header the lookup's probe read (the frame file, or a sparse
   * frame's index, unchanged since): no open. */
  struct stat hst;
  int64_t n;
  memset(&hst, 0, sizeof hst);
  hst.st_dev = dev; /* not in->dev: a rebind writes it under the table lock */
  hst.st_ino = sig->ino;
  hst.st_size = sig->size;
  hst.st_mtim = sig->mtime;
  hst.st_ctim = sig->ctime;
  if (sig->size >= 0 && b2_ns_frame_size(&hst, in->kind, &n) == 0) return n;
  b2_file *f;
  if (sig->size < 0 || b2fs_open_view(in, B2_OPEN_PROBE, &f) < 0) return 0; /* no read */
  n = b2_file_size(f);
  b2_file_close(f);
  return n < 0 ? 0 : n;
}

/* Disk use of a sparse frame: the blocks of the files it holds.  Listing
 * its directory is no access the user made: O_NOATIME where permitted. */
static blkcnt_t sparse_blocks(int fd) {
  int dfd = b2_io_open_noatime(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return 0;
  DIR *d = fdopendir(dfd);
  if (!d) {
    close(dfd);
    return 0;
  }
  blkcnt_t sum = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    struct stat st;
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISREG(st.st_mode))
      sum += st.st_blocks;
  }
  closedir(d);
  return sum;
}

static struct timespec ts_max(struct timespec a, struct timespec b) {
  if (a.tv_sec != b.tv_sec) return a.tv_sec > b.tv_sec ? a : b;
  return a.tv_nsec >= b.tv_nsec ? a : b;
}

int b2fs_stat(b2fs_inode *in, struct stat *st) {
  if (in->kind == B2_NS_STORE) return b2fs_hook.store_stat(in, st);
  if (fstatat(in->fd, "", st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
    return -errno;
  return stat_known(in, st);
}

/* b2fs_stat of a plain or frame inode whose lstat st has just been taken. */
static int stat_known(b2fs_inode *in, struct stat *st) {
  if (in->kind == B2_NS_PLAIN) return 0;
  if (in->rw && st->st_nlink == 0) { /* rewritten by our writer? */
    b2fs_frame_follow(in);
    if (fstatat(in->fd, "", st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0) return -errno;
  }
  b2fs_sig sig;
  b2fs_sig_of(in, st, &sig);
  pthread_mutex_lock(&in->lock);
  b2fs_handle *w = in->cur && in->cur->writable ? in->cur : NULL;
  if (!in->attr_valid || !b2fs_sig_eq(&in->attr_sig, &sig)) {
    in->lsize = w ? (w->file ? b2_file_size(w->file) : 0) : view_size(in, st->st_dev, &sig);
    in->blocks = in->sparse ? sparse_blocks(in->fd) : st->st_blocks;
    in->attr_sig = sig;
    in->attr_valid = 1;
  }
  if (w && !w->file) w = NULL; /* lost at a reopen */
  int64_t lsize = w ? b2_file_size(w->file) : in->lsize;
  blkcnt_t blocks = in->blocks;
  struct timespec wtime = in->wtime;
  pthread_mutex_unlock(&in->lock);
  st->st_size = lsize;
  st->st_ino = in->shown;
  /* Whole chunks are the cheap unit: ask for large reads and writes (cp
   * sizes its buffer by this). */
  st->st_blksize = B2FS_IO_MAX;
  if (wtime.tv_sec) {
    st->st_mtim = ts_max(st->st_mtim, wtime);
    st->st_ctim = ts_max(st->st_ctim, wtime);
  }
  if (in->hidlink && S_ISREG(st->st_mode) && st->st_nlink > 0)
    st->st_nlink--; /* the hidden link kept for a writer of a removed name */
  if (in->sparse) {
    st->st_mode = S_IFREG | (st->st_mode & 07777 & ~(mode_t)0111);
    st->st_nlink = in->hidlink ? 0 : 1;
    st->st_blocks = blocks;
    if (sig.size >= 0) {
      st->st_mtim = ts_max(st->st_mtim, sig.mtime);
      st->st_ctim = ts_max(st->st_ctim, sig.ctime);
    }
  }
  return 0;
}

