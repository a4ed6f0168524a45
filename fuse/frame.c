/*
 * frame.c - frames under the mount: what counts as a frame, its signature
 * (size, mtime, ctime, inode of the frame file: it changes when the frame
 * is rewritten in SOURCE), and the attributes shown for it (view size,
 * regular-file mode, disk use), recomputed only when the signature changes.
 * A frame open for writing shows the size of its writable handle, and the
 * time of its last change through the mount until that is committed.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "b2fs.h"

int b2fs_errno(int rc) {
  switch (rc) {
  case B2_E_NOMEM:
  case B2_E_PERM:
  case B2_E_ROFS:
  case B2_E_NOSPC:
  case B2_E_BUSY:
  case B2_E_INVAL:
    return b2_to_errno(rc);
  default:
    return EIO; /* damaged, truncated, unsupported, missing parts */
  }
}

int b2fs_werrno(int rc) {
  switch (rc) {
  case B2_E_LIMIT:
    return EFBIG;
  case B2_E_EXIST:
    return EEXIST;
  default:
    return b2fs_errno(rc);
  }
}

static int ts_eq(struct timespec a, struct timespec b) {
  return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

int b2fs_sig_eq(const b2fs_sig *a, const b2fs_sig *b) {
  return a->size == b->size && a->ino == b->ino && a->gen == b->gen && ts_eq(a->mtime, b->mtime) &&
         ts_eq(a->ctime, b->ctime) && ts_eq(a->dmtime, b->dmtime) &&
         ts_eq(a->dctime, b->dctime);
}

int b2fs_sig_of(b2fs_inode *in, const struct stat *st, b2fs_sig *sig) {
  memset(sig, 0, sizeof *sig);
  struct stat cst;
  const struct stat *f = st;
  if (in->sparse) {
    sig->dmtime = st->st_mtim;
    sig->dctime = st->st_ctim;
    if (fstatat(in->fd, B2_NS_SPARSE_INDEX, &cst, AT_SYMLINK_NOFOLLOW) < 0) {
      sig->size = -1;
      return -errno;
    }
    f = &cst;
  }
  sig->size = f->st_size;
  sig->mtime = f->st_mtim;
  sig->ctime = f->st_ctim;
  sig->ino = f->st_ino;
  /* another program's change under the reference library's locking may
   * keep size and times: its sidecar's counter moves */
  char path[64];
  if (b2_frame_lock_gen(b2fs_fd_path(in->fd, path, sizeof path), &sig->gen) < 0) sig->gen = 0;
  return 0;
}

const char *b2fs_src_path(b2fs_inode *in, char *buf, size_t cap) {
  char proc[64];
  ssize_t n = readlink(b2fs_fd_path(in->fd, proc, sizeof proc), buf, cap - 1);
  if (n < 0) n = 0;
  buf[n] = 0;
  return buf;
}

/* Size of the view for signature sig (under the inode lock); 0 when the
 * frame cannot be opened. */
static int64_t view_size(b2fs_inode *in, const b2fs_sig *sig) {
  if (in->cur && !in->cur->writable && b2fs_sig_eq(&in->cur->sig, sig))
    return b2_file_size(in->cur->file);
  b2_file *f;
  if (sig->size < 0 || b2fs_open_view(in, &f) < 0) return 0;
  int64_t n = b2_file_size(f);
  b2_file_close(f);
  return n < 0 ? 0 : n;
}

/* Disk use of a sparse frame: the blocks of the files it holds. */
static blkcnt_t sparse_blocks(int fd) {
  int dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
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
  if (in->kind == B2_NS_STORE) return b2fs_store_stat(in, st);
  if (fstatat(in->fd, "", st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
    return -errno;
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
    in->lsize = w ? (w->file ? b2_file_size(w->file) : 0) : view_size(in, &sig);
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
  /* Whole chunks are the cheap unit: ask for large reads and writes (cp
   * sizes its buffer by this). */
  st->st_blksize = B2FS_IO_MAX;
  if (wtime.tv_sec) {
    st->st_mtim = ts_max(st->st_mtim, wtime);
    st->st_ctim = ts_max(st->st_ctim, wtime);
  }
  if (in->sparse) {
    st->st_mode = S_IFREG | (st->st_mode & 07777 & ~(mode_t)0111);
    st->st_nlink = 1;
    st->st_blocks = blocks;
    if (sig.size >= 0) {
      st->st_mtim = ts_max(st->st_mtim, sig.mtime);
      st->st_ctim = ts_max(st->st_ctim, sig.ctime);
    }
  }
  return 0;
}

