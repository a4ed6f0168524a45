/*
 * frame.c - frames under the mount: what counts as a frame, the attributes
 * shown for one (view size, regular-file mode, disk use), and the one
 * b2_file per inode shared by all its opens.  A frame changed in SOURCE is
 * noticed by its signature (size, mtime, ctime, inode of the file) and
 * opened again; the kernel keeps its cached pages only while the signature
 * is the one of the previous open.
 */
#include <dirent.h>
#include <stdatomic.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "b2fs.h"

int b2fs_holds_sparse_index(int fd) {
  struct stat cst;
  return fstatat(fd, B2FS_SPARSE_INDEX, &cst, AT_SYMLINK_NOFOLLOW) == 0 &&
         S_ISREG(cst.st_mode);
}

int b2fs_is_frame(int dirfd, const char *name, const struct stat *st) {
  if (b2fs_name_kind(name, NULL) == B2FS_KIND_PLAIN) return 0;
  if (S_ISREG(st->st_mode)) return 1;
  if (!S_ISDIR(st->st_mode)) return 0;
  int fd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return 0;
  int yes = b2fs_holds_sparse_index(fd);
  close(fd);
  return yes;
}

int b2fs_probe_dir(void *ctx, const char *name) {
  int dirfd = *(const int *)ctx;
  struct stat st;
  if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
    if (errno == ENOENT || errno == ENAMETOOLONG || errno == ENOTDIR)
      return B2FS_ABSENT;
    return -errno;
  }
  return b2fs_is_frame(dirfd, name, &st) ? B2FS_FRAME : B2FS_PRESENT;
}

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

static int ts_eq(struct timespec a, struct timespec b) {
  return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

static int sig_eq(const b2fs_sig *a, const b2fs_sig *b) {
  return a->size == b->size && a->ino == b->ino && ts_eq(a->mtime, b->mtime) &&
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
    if (fstatat(in->fd, B2FS_SPARSE_INDEX, &cst, AT_SYMLINK_NOFOLLOW) < 0) {
      sig->size = -1;
      return -errno;
    }
    f = &cst;
  }
  sig->size = f->st_size;
  sig->mtime = f->st_mtim;
  sig->ctime = f->st_ctim;
  sig->ino = f->st_ino;
  return 0;
}

static int open_file(b2fs_inode *in, b2_file **out) {
  char path[64];
  int view = in->kind == B2FS_KIND_NPY ? B2_VIEW_NPY : B2_VIEW_LOGICAL;
  return b2_file_open(b2fs_g.env, b2fs_fd_path(in->fd, path, sizeof path),
                      view, B2_OPEN_RDONLY, out);
}

/* Source path of an inode for messages. */
static const char *src_path(b2fs_inode *in, char *buf, size_t cap) {
  char proc[64];
  ssize_t n = readlink(b2fs_fd_path(in->fd, proc, sizeof proc), buf, cap - 1);
  if (n < 0) n = 0;
  buf[n] = 0;
  return buf;
}

/* Size of the view for signature sig (under the inode lock); 0 when the
 * frame cannot be opened. */
static int64_t view_size(b2fs_inode *in, const b2fs_sig *sig) {
  if (in->cur && sig_eq(&in->cur->sig, sig)) return b2_file_size(in->cur->file);
  b2_file *f;
  if (sig->size < 0 || open_file(in, &f) < 0) return 0;
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
  if (fstatat(in->fd, "", st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
    return -errno;
  if (in->kind == B2FS_KIND_PLAIN) return 0;
  b2fs_sig sig;
  b2fs_sig_of(in, st, &sig);
  pthread_mutex_lock(&in->lock);
  if (!in->attr_valid || !sig_eq(&in->attr_sig, &sig)) {
    in->lsize = view_size(in, &sig);
    in->blocks = in->sparse ? sparse_blocks(in->fd) : st->st_blocks;
    in->attr_sig = sig;
    in->attr_valid = 1;
  }
  int64_t lsize = in->lsize;
  blkcnt_t blocks = in->blocks;
  pthread_mutex_unlock(&in->lock);
  st->st_size = lsize;
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

/* Handles: refs counts the opens (and peeks) using a handle plus one while
 * it is its inode's current handle.  A current handle nobody uses is kept
 * (frame parsed, chunk cache warm) for the next open, up to idle_max of
 * them; a handle of an older version of the frame lives until its last
 * user is done.  All under the inode lock. */
static atomic_int idle_kept;
static int idle_max = 256;

void b2fs_frame_set_idle_max(int n) { idle_max = n; }

static b2fs_handle *handle_new(b2_file *f, const b2fs_sig *sig) {
  b2fs_handle *h = calloc(1, sizeof *h);
  if (!h) return NULL;
  h->file = f;
  h->sig = *sig;
  pthread_mutex_init(&h->errlock, NULL);
  return h;
}

static void handle_free(b2fs_handle *h) {
  if (!h) return;
  b2_file_close(h->file);
  pthread_mutex_destroy(&h->errlock);
  free(h);
}

/* Take one more user of the inode's current handle. */
static void take_cur(b2fs_inode *in) {
  if (in->cur->refs++ == 1) atomic_fetch_sub(&idle_kept, 1);
}

/* The inode lets go of its current handle; returns it if now unused. */
static b2fs_handle *drop_cur(b2fs_inode *in) {
  b2fs_handle *h = in->cur;
  in->cur = NULL;
  if (!h) return NULL;
  if (h->refs == 1) atomic_fetch_sub(&idle_kept, 1);
  return --h->refs == 0 ? h : NULL;
}

/* Open the frame again as the inode's current handle, with one user
 * (lock held).  *old gets a replaced handle to free after unlocking. */
static int install_new(b2fs_inode *in, const b2fs_sig *sig, b2fs_handle **old) {
  b2_file *f;
  int rc = open_file(in, &f);
  if (rc < 0) {
    char path[4096];
    b2fs_log("%s: cannot open: %s", src_path(in, path, sizeof path),
             b2_last_detail()[0] ? b2_last_detail() : b2_strerror(rc));
    return -b2fs_errno(rc);
  }
  b2fs_handle *h = handle_new(f, sig);
  if (!h) {
    b2_file_close(f);
    return -ENOMEM;
  }
  *old = drop_cur(in);
  h->refs = 2; /* the inode and this user */
  in->cur = h;
  return 0;
}

static int current_sig(b2fs_inode *in, b2fs_sig *sig) {
  struct stat st;
  if (fstatat(in->fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
    return -errno;
  b2fs_sig_of(in, &st, sig);
  return 0;
}

/* The inode's current handle for the frame as it is now, with one more
 * user; with keep_cache, also the page-cache decision of an open. */
static int get_handle(b2fs_inode *in, b2fs_handle **h, int *keep_cache) {
  b2fs_sig sig;
  b2fs_handle *old = NULL;
  int rc = current_sig(in, &sig);
  if (rc < 0) return rc;
  pthread_mutex_lock(&in->lock);
  if (in->cur && sig_eq(&in->cur->sig, &sig)) {
    take_cur(in);
  } else {
    rc = install_new(in, &sig, &old);
  }
  if (rc == 0) {
    *h = in->cur;
    if (keep_cache) {
      *keep_cache = in->open_valid && sig_eq(&in->open_sig, &sig);
      in->open_sig = sig;
      in->open_valid = 1;
    }
  }
  pthread_mutex_unlock(&in->lock);
  handle_free(old);
  return rc;
}

int b2fs_frame_open(b2fs_inode *in, b2fs_handle **h, int *keep_cache) {
  return get_handle(in, h, keep_cache);
}

int b2fs_frame_peek(b2fs_inode *in, b2fs_handle **h) {
  return get_handle(in, h, NULL);
}

void b2fs_frame_release(b2fs_inode *in, b2fs_handle *h) {
  b2fs_handle *dead = NULL;
  pthread_mutex_lock(&in->lock);
  if (--h->refs == 0) {
    dead = h; /* an older version, no longer current */
  } else if (h->refs == 1 && in->cur == h) {
    if (atomic_fetch_add(&idle_kept, 1) >= idle_max) dead = drop_cur(in);
  }
  pthread_mutex_unlock(&in->lock);
  handle_free(dead);
}

void b2fs_frame_forget(b2fs_inode *in) {
  pthread_mutex_lock(&in->lock);
  b2fs_handle *dead = drop_cur(in);
  pthread_mutex_unlock(&in->lock);
  handle_free(dead);
}

static uint64_t fnv1a(const char *s) {
  uint64_t h = 0xcbf29ce484222325u;
  for (; *s; s++) h = (h ^ (uint8_t)*s) * 0x100000001b3u;
  return h;
}

void b2fs_frame_log(b2fs_inode *in, b2fs_handle *h, const char *what, int rc) {
  const char *detail = b2_last_detail()[0] ? b2_last_detail() : b2_strerror(rc);
  uint64_t key = fnv1a(detail);
  size_t n = sizeof h->logged / sizeof h->logged[0];
  int repeat = 0;
  pthread_mutex_lock(&h->errlock);
  for (size_t i = 0; i < n && i < h->nlogged; i++) repeat |= h->logged[i] == key;
  if (!repeat) h->logged[h->nlogged++ % n] = key;
  pthread_mutex_unlock(&h->errlock);
  if (repeat) return;
  char path[4096];
  b2fs_log("%s: %s: %s", src_path(in, path, sizeof path), what, detail);
}

int b2fs_plain_keep_cache(b2fs_inode *in, const struct stat *st) {
  b2fs_sig sig;
  memset(&sig, 0, sizeof sig);
  sig.size = st->st_size;
  sig.mtime = st->st_mtim;
  sig.ino = st->st_ino;
  pthread_mutex_lock(&in->lock);
  int keep = in->open_valid && sig_eq(&in->open_sig, &sig);
  in->open_sig = sig;
  in->open_valid = 1;
  pthread_mutex_unlock(&in->lock);
  return keep;
}
