/*
 * ops_dir.c - directory listing: opendir takes a snapshot of the source
 * directory (names, inode numbers, types, which entries are frames) and
 * maps every name with names.c against that snapshot, so one listing is
 * consistent with itself; readdir pages through it; rewinding (offset 0
 * after entries were served) takes a new snapshot.  The engine's temporary
 * files (names.h: b2fs_name_hidden) are left out.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "b2fs.h"

typedef struct dent {
  char *name;   /* source name */
  char *shown;  /* name under the mount (may alias name) */
  ino_t ino;
  unsigned char type; /* DT_* as shown */
  int frame;
} dent;

typedef struct dsnap {
  pthread_mutex_t lock;
  dent *e;
  size_t n;
  int served;   /* entries were handed out since the snapshot */
} dsnap;

static void snap_clear(dsnap *s) {
  for (size_t i = 0; i < s->n; i++) {
    if (s->e[i].shown != s->e[i].name) free(s->e[i].shown);
    free(s->e[i].name);
  }
  free(s->e);
  s->e = NULL;
  s->n = 0;
  s->served = 0;
}

static int by_name(const void *a, const void *b) {
  return strcmp(((const dent *)a)->name, ((const dent *)b)->name);
}

/* Probe against the sorted snapshot (ctx: dsnap *). */
static int snap_probe(void *ctx, const char *name) {
  const dsnap *s = ctx;
  dent key;
  key.name = (char *)name;
  const dent *d = bsearch(&key, s->e, s->n, sizeof *s->e, by_name);
  if (!d) return B2FS_ABSENT;
  return d->frame ? B2FS_FRAME : B2FS_PRESENT;
}

/* Is this entry a frame, and what type is shown for it. */
static void classify(int dfd, const struct dirent *de, dent *d) {
  d->type = de->d_type;
  d->frame = 0;
  if (b2fs_name_kind(de->d_name, NULL) == B2FS_KIND_PLAIN) return;
  struct stat st;
  if (de->d_type == DT_REG) {
    d->frame = b2fs_holds_data(dfd, de->d_name);
  } else if (de->d_type == DT_DIR || de->d_type == DT_UNKNOWN) {
    if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) return;
    d->type = IFTODT(st.st_mode);
    d->frame = b2fs_is_frame(dfd, de->d_name, &st);
  }
  if (d->frame) d->type = DT_REG;
}

static int snap_load(dsnap *s, int fd) {
  snap_clear(s);
  int dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return -errno;
  DIR *dir = fdopendir(dfd);
  if (!dir) {
    int err = errno;
    close(dfd);
    return -err;
  }
  size_t cap = 0;
  int rc = 0;
  struct dirent *de;
  errno = 0;
  while ((de = readdir(dir))) {
    if (b2fs_name_hidden(de->d_name)) {
      errno = 0;
      continue;
    }
    if (s->n == cap) {
      size_t ncap = cap ? cap * 2 : 64;
      dent *ne = realloc(s->e, ncap * sizeof *ne);
      if (!ne) {
        rc = -ENOMEM;
        break;
      }
      s->e = ne;
      cap = ncap;
    }
    dent *d = &s->e[s->n];
    d->name = strdup(de->d_name);
    if (!d->name) {
      rc = -ENOMEM;
      break;
    }
    d->shown = d->name;
    d->ino = de->d_ino;
    classify(dirfd(dir), de, d);
    s->n++;
    errno = 0;
  }
  if (!rc && errno) rc = -errno;
  closedir(dir);
  if (rc < 0) {
    snap_clear(s);
    return rc;
  }
  qsort(s->e, s->n, sizeof *s->e, by_name);
  for (size_t i = 0; i < s->n; i++) {
    dent *d = &s->e[i];
    if (!d->frame) continue;
    char shown[B2FS_NAME_MAX + 1];
    rc = b2fs_name_to_shown(d->name, 1, snap_probe, s, shown, sizeof shown);
    if (rc < 0 || strcmp(shown, d->name) == 0) continue;
    char *dup = strdup(shown);
    if (dup) d->shown = dup;
  }
  return 0;
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  b2fs_inode *in = b2fs_inode_get(ino);
  if (in->kind != B2FS_KIND_PLAIN) {
    fuse_reply_err(req, ENOTDIR);
    return;
  }
  dsnap *s = calloc(1, sizeof *s);
  if (!s) {
    fuse_reply_err(req, ENOMEM);
    return;
  }
  pthread_mutex_init(&s->lock, NULL);
  int rc = snap_load(s, in->fd);
  if (rc < 0) {
    pthread_mutex_destroy(&s->lock);
    free(s);
    fuse_reply_err(req, -rc);
    return;
  }
  fi->fh = (uint64_t)(uintptr_t)s;
  fi->cache_readdir = 0;
  if (fuse_reply_open(req, fi) != 0) {
    snap_clear(s);
    pthread_mutex_destroy(&s->lock);
    free(s);
  }
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi) {
  b2fs_inode *in = b2fs_inode_get(ino);
  dsnap *s = (dsnap *)(uintptr_t)fi->fh;
  b2fs_sweep_dir(in); /* here, not at opendir: the kernel holds the
                         directory against creations in it */
  char *buf = b2fs_tls_buf(size);
  if (!buf) {
    fuse_reply_err(req, ENOMEM);
    return;
  }
  pthread_mutex_lock(&s->lock);
  if (off == 0 && s->served) {
    int rc = snap_load(s, in->fd);
    if (rc < 0) {
      pthread_mutex_unlock(&s->lock);
      fuse_reply_err(req, -rc);
      return;
    }
  }
  size_t pos = 0;
  for (size_t i = off < 0 ? 0 : (size_t)off; i < s->n; i++) {
    struct stat st;
    memset(&st, 0, sizeof st);
    st.st_ino = s->e[i].ino;
    st.st_mode = DTTOIF(s->e[i].type);
    size_t n = fuse_add_direntry(req, buf + pos, size - pos, s->e[i].shown, &st,
                                 (off_t)(i + 1));
    if (n > size - pos) break;
    pos += n;
    s->served = 1;
  }
  pthread_mutex_unlock(&s->lock);
  fuse_reply_buf(req, buf, pos);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  (void)ino;
  dsnap *s = (dsnap *)(uintptr_t)fi->fh;
  snap_clear(s);
  pthread_mutex_destroy(&s->lock);
  free(s);
  fuse_reply_err(req, 0);
}

void b2fs_ops_dir(struct fuse_lowlevel_ops *ops) {
  ops->opendir = op_opendir;
  ops->readdir = op_readdir;
  ops->releasedir = op_releasedir;
}
