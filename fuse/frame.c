/*
 * frame.c - frames under the mount: their signature (size, mtime, ctime,
 * inode of the frame file: it changes when the frame is rewritten in
 * SOURCE; the .b2lock counter), messages' source paths, and the errno
 * replied for an engine code.
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
  case B2_E_NOFILES:
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

/* Guards the inodes' nolock fields (sig_of runs under the inode lock or
 * not, so it takes a lock of its own). */
#define NOLOCK_MU 16
static pthread_mutex_t nolock_mu[NOLOCK_MU] = {
    PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
    PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
    PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
    PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
    PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
    PTHREAD_MUTEX_INITIALIZER};

/* The fields of a signature that come from the frame file (or index). */
static void file_fields(b2fs_sig *sig, const struct stat *f) {
  sig->size = f->st_size;
  sig->mtime = f->st_mtim;
  sig->ctime = f->st_ctim;
  sig->ino = f->st_ino;
}

void b2fs_sig_nolock_file(b2fs_inode *in, const struct stat *st) {
  b2fs_sig sig;
  memset(&sig, 0, sizeof sig);
  file_fields(&sig, st);
  b2fs_sig_nolock(in, &sig);
}

void b2fs_sig_nolock(b2fs_inode *in, const b2fs_sig *sig) {
  pthread_mutex_t *mu = &nolock_mu[((uintptr_t)in >> 6) % NOLOCK_MU];
  pthread_mutex_lock(mu);
  in->nolock_sig = *sig;
  in->nolock_sig.gen = 0;
  in->nolock_valid = 1;
  pthread_mutex_unlock(mu);
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
  file_fields(sig, f);
  /* another program's change under the reference library's locking may
   * keep size and times: its sidecar's counter moves.  A sidecar found
   * absent is not looked for again while the source is unchanged (that
   * program's changes change it). */
  pthread_mutex_t *mu = &nolock_mu[((uintptr_t)in >> 6) % NOLOCK_MU];
  pthread_mutex_lock(mu);
  int absent = in->nolock_valid && b2fs_sig_eq(&in->nolock_sig, sig);
  pthread_mutex_unlock(mu);
  if (absent) return 0;
  char path[64];
  int rc = b2_frame_lock_gen(b2fs_fd_path(in->fd, path, sizeof path), &sig->gen);
  if (rc < 0) sig->gen = 0;
  if (rc == B2_E_NOENT) b2fs_sig_nolock(in, sig);
  return 0;
}

const char *b2fs_src_path(b2fs_inode *in, char *buf, size_t cap) {
  char proc[64];
  ssize_t n = readlink(b2fs_fd_path(in->fd, proc, sizeof proc), buf, cap - 1);
  if (n < 0) n = 0;
  buf[n] = 0;
  return buf;
}
