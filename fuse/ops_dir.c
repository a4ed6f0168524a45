/*
 * ops_dir.c - directory listing: opendir takes a snapshot of the source
 * directory as the namespace layer lists it (b2_ns_list_load: names shown,
 * inode numbers, types, hidden temporaries left out, every name mapped
 * against the snapshot so one listing is consistent with itself); readdir
 * pages through it; rewinding (offset 0 after entries were served) takes a
 * new snapshot.  readdirplus hands each entry out with its attributes, as a
 * lookup would (one request for a whole page of `ls -l` instead of one
 * lookup per name); the kernel asks for it when names are looked up after
 * a listing (FUSE_CAP_READDIRPLUS_AUTO).  A listing, a store's too,
 * starts with "." and ".." (offsets 0 and 1), as on a local file system
 * (`ls -a`).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "b2fs.h"

typedef struct dsnap {
  pthread_mutex_t lock;
  b2fs_listing *lst; /* the listing, names mapped as the mount shows them
                        (shared with warm.c once read to its end) */
  int served;        /* entries were handed out since the snapshot */
  int kept;          /* the directory inode keeps this listing (warm.c) */
} dsnap;

static int snap_load(dsnap *s, int fd) {
  b2fs_listing *x = b2fs_listing_new();
  if (!x) return -ENOMEM;
  int rc = b2_ns_list_load(fd, &x->l);
  if (rc < 0) {
    b2fs_listing_put(x);
    return -b2_to_errno(rc);
  }
  b2fs_listing_put(s->lst);
  s->lst = x;
  s->served = 0;
  s->kept = 0;
  return 0;
}

static void snap_clear(dsnap *s) {
  b2fs_listing_put(s->lst);
  s->lst = NULL;
  s->served = 0;
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  b2fs_inode *in = b2fs_inode_get(ino);
  if (in->kind == B2_NS_STORE) { /* a store's directory (store.c) */
    int rc = b2fs_store_opendir(in, &fi->fh);
    if (rc < 0) {
      fuse_reply_err(req, -rc);
      return;
    }
    fi->cache_readdir = 0;
    if (fuse_reply_open(req, fi) != 0) b2fs_store_releasedir(fi->fh);
    return;
  }
  if (in->kind != B2_NS_PLAIN) {
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

/* One entry of a listing into buf (at most room bytes): its size, larger
 * than room when it did not fit.  With plus, the entry carries its
 * attributes and counts a lookup (given back when it did not fit); an entry
 * gone meanwhile, or failing, is handed out by name only. */
static size_t add_entry(fuse_req_t req, b2fs_inode *dir, const b2_ns_entry *d, int plus,
                        char *buf, size_t room, off_t next) {
  struct stat st;
  memset(&st, 0, sizeof st);
  /* A frame's number as a stat of it shows it (kept across rewrites). */
  st.st_ino = d->kind == B2_NS_PLAIN ? d->ino : b2fs_inode_shown(dir->dev, d->ino, d->kind);
  st.st_mode = DTTOIF(d->type);
  if (!plus) return fuse_add_direntry(req, buf, room, d->shown, &st, next);
  struct fuse_entry_param e;
  /* Near the descriptor limit, names only: the lookups the kernel then
   * makes are for the names it uses (b2fs_shed_crowded). */
  if (b2fs_shed_crowded() || b2fs_entry_in(dir, d->name, d->kind, &e) < 0) {
    memset(&e, 0, sizeof e); /* ino 0: the kernel looks it up itself */
    e.attr = st;
    return fuse_add_direntry_plus(req, buf, room, d->shown, &e, next);
  }
  e.attr.st_ino = st.st_ino; /* the number readdir gives, as the listing's */
  size_t n = fuse_add_direntry_plus(req, buf, room, d->shown, &e, next);
  if (n > room)
    b2fs_inode_forget(b2fs_inode_get(e.ino), 1);
  else
    b2fs_shed_seen(b2fs_inode_get(e.ino), b2fs_inode_id(dir), d->shown);
  return n;
}

/* "." and ".." for the entries of offsets off and on below 2 that fit in
 * buf: their size.  They carry numbers only (no lookup counted: the kernel
 * resolves dots itself); ".." of the mount's root, and of a store's
 * directory, is given the directory's own number. */
static size_t add_dots(fuse_req_t req, fuse_ino_t ino, b2fs_inode *in, int plus, char *buf,
                       size_t size, off_t off, int *all) {
  struct stat st, up;
  *all = 1;
  if (off >= 2) return 0;
  *all = 0;
  if (b2fs_stat(in, &st) < 0) return 0;
  up = st;
  if (ino != FUSE_ROOT_ID && in->kind != B2_NS_STORE &&
      fstatat(in->fd, "..", &up, AT_SYMLINK_NOFOLLOW) < 0)
    up = st;
  size_t pos = 0;
  for (off_t i = off < 0 ? 0 : off; i < 2; i++) {
    struct fuse_entry_param e;
    memset(&e, 0, sizeof e);
    e.attr.st_mode = S_IFDIR;
    e.attr.st_ino = i == 0 ? st.st_ino : up.st_ino;
    const char *name = i == 0 ? "." : "..";
    size_t n = plus ? fuse_add_direntry_plus(req, buf + pos, size - pos, name, &e, i + 1)
                    : fuse_add_direntry(req, buf + pos, size - pos, name, &e.attr, i + 1);
    if (n > size - pos) return pos;
    pos += n;
  }
  *all = 1;
  return pos;
}

static void readdir_any(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                        struct fuse_file_info *fi, int plus) {
  b2fs_inode *in = b2fs_inode_get(ino);
  if (in->kind == B2_NS_STORE) {
    char *sbuf = b2fs_tls_buf(size);
    if (!sbuf) {
      fuse_reply_err(req, ENOMEM);
      return;
    }
    int all;
    size_t pos = add_dots(req, ino, in, plus, sbuf, size, off, &all);
    if (all) pos += b2fs_store_readdir(req, fi->fh, plus, sbuf + pos, size - pos, off - 2);
    fuse_reply_buf(req, sbuf, pos);
    return;
  }
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
  int all;
  size_t pos = add_dots(req, ino, in, plus, buf, size, off, &all), i;
  if (pos) s->served = 1;
  const b2_ns_list *l = &s->lst->l;
  for (i = off < 2 ? 0 : (size_t)off - 2; all && i < l->n; i++) {
    size_t n = add_entry(req, in, &l->e[i], plus, buf + pos, size - pos, (off_t)(i + 3));
    if (n > size - pos) break;
    pos += n;
    s->served = 1;
  }
  if (i == l->n && s->served && !s->kept) { /* read to its end: its order */
    b2fs_warm_keep(in, s->lst);
    s->kept = 1;
  }
  pthread_mutex_unlock(&s->lock);
  fuse_reply_buf(req, buf, pos);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi) {
  readdir_any(req, ino, size, off, fi, 0);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                           struct fuse_file_info *fi) {
  readdir_any(req, ino, size, off, fi, 1);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  if (b2fs_inode_get(ino)->kind == B2_NS_STORE) {
    b2fs_store_releasedir(fi->fh);
    fuse_reply_err(req, 0);
    return;
  }
  dsnap *s = (dsnap *)(uintptr_t)fi->fh;
  snap_clear(s);
  pthread_mutex_destroy(&s->lock);
  free(s);
  fuse_reply_err(req, 0);
}

void b2fs_ops_dir(struct fuse_lowlevel_ops *ops) {
  ops->opendir = op_opendir;
  ops->readdir = op_readdir;
  ops->readdirplus = op_readdirplus;
  ops->releasedir = op_releasedir;
}
