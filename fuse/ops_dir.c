/*
 * ops_dir.c - directory listing: opendir takes a snapshot of the source
 * directory as the namespace layer lists it (b2_ns_list_load: names shown,
 * inode numbers, types, hidden temporaries left out, every name mapped
 * against the snapshot so one listing is consistent with itself); readdir
 * pages through it; rewinding (offset 0 after entries were served) takes a
 * new snapshot.
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
  b2_ns_list l;   /* the listing, names mapped as the mount shows them */
  int served;     /* entries were handed out since the snapshot */
} dsnap;

static int snap_load(dsnap *s, int fd) {
  s->served = 0;
  int rc = b2_ns_list_load(fd, &s->l);
  return rc < 0 ? -b2_to_errno(rc) : 0;
}

static void snap_clear(dsnap *s) {
  b2_ns_list_free(&s->l);
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

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi) {
  b2fs_inode *in = b2fs_inode_get(ino);
  if (in->kind == B2_NS_STORE) {
    char *sbuf = b2fs_tls_buf(size);
    if (!sbuf)
      fuse_reply_err(req, ENOMEM);
    else
      fuse_reply_buf(req, sbuf, b2fs_store_readdir(req, fi->fh, sbuf, size, off));
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
  size_t pos = 0;
  for (size_t i = off < 0 ? 0 : (size_t)off; i < s->l.n; i++) {
    struct stat st;
    memset(&st, 0, sizeof st);
    st.st_ino = s->l.e[i].ino;
    st.st_mode = DTTOIF(s->l.e[i].type);
    size_t n = fuse_add_direntry(req, buf + pos, size - pos, s->l.e[i].shown, &st,
                                 (off_t)(i + 1));
    if (n > size - pos) break;
    pos += n;
    s->served = 1;
  }
  pthread_mutex_unlock(&s->lock);
  fuse_reply_buf(req, buf, pos);
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
  ops->releasedir = op_releasedir;
}
