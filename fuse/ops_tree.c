/*
 * ops_tree.c - operations that change the tree: create, mknod, mkdir,
 * symlink, link, unlink, rmdir, rename, fsyncdir.
 *
 * A new regular file NAME is the frame NAME.b2frame in SOURCE, or for a name
 * STEM.npy the b2nd array STEM.b2nd once its .npy header is in (created with
 * the mount's parameters), unless the directory's names would then not
 * show it as NAME: then it is a plain file NAME, or EEXIST when that is not
 * possible either.  A frame renamed keeps its suffix (a -> b is a.b2frame
 * -> b.b2frame); every change checks with names.c that the entry will be
 * shown under the name asked for.  Moves that would turn a plain file into
 * a frame fail with EXDEV, so that mv copies the content instead; a frame
 * moved to a name that shows another kind of file (a plain frame holding
 * a .npy file to a .npy name, an array's .npy view to another name) is
 * made anew as that kind under it (rename_kind).  Frames still open (for writing, or
 * sparse ones at all) are removed by renaming them aside to a hidden name;
 * they go with their inode.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "b2fs.h"
#include "common/util.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

/* The directory inode of a request, or NULL after replying ENOTDIR. */
static b2fs_inode *dir_of(fuse_req_t req, fuse_ino_t parent) {
  b2fs_inode *p = b2fs_inode_get(parent);
  if (p->kind != B2_NS_PLAIN) {
    fuse_reply_err(req, p->kind == B2_NS_STORE ? EROFS : ENOTDIR);
    return NULL;
  }
  return p;
}

/* Reply with source entry src of pfd, shown as `name` in `parent`. */
static void reply_entry(fuse_req_t req, fuse_ino_t parent, const char *name, int pfd,
                        const char *src, int kind) {
  struct fuse_entry_param e;
  int rc = b2fs_entry(pfd, src, kind, &e);
  if (rc < 0)
    fuse_reply_err(req, -rc);
  else
    (void)b2fs_reply_entry(req, parent, name, &e);
}

/* ---- new entries --------------------------------------------------------- */

/* The namespace layer's choice of a source name, as -errno. */
static int choose_new(int pfd, const char *name, mode_t type, int frames,
                      char *src, size_t cap, int *frame) {
  int rc = b2_ns_choose_new(pfd, name, type, frames, src, cap, frame);
  return rc < 0 ? -b2_to_errno(rc) : 0;
}

/* Create the frame src (a new .npy file for kind B2_NS_NPY) in pfd
 * with the mount's parameters and the mode asked for, at the directory and
 * name (any depth); *n gets it open for writing, in the shared namespace
 * directory of directory inode pdir, or of store group inode `store`,
 * when given (the node stays with its inode: a directory of its own would
 * hold a descriptor per file).  A store's value is a contiguous frame
 * whatever the layout (python-blosc2 finds files only). */
static int new_frame(fuse_req_t req, int pfd, b2fs_inode *pdir, const char *src, int kind,
                     mode_t mode, b2fs_inode *store, b2_ns_node **n) {
  b2_frame_params p;
  b2_file_env_params(b2fs_g.env, &p);
  if (store) p.layout = B2_LAYOUT_CONTIGUOUS;
  b2_ns_dir *d = pdir ? b2fs_dir_ns(pdir) : store ? b2fs_store_dir_ns(store, pfd) : NULL;
  int brc = d ? b2_ns_node_create_in(b2fs_g.env, d, src, kind, &p, n)
              : b2_ns_node_create(b2fs_g.env, pfd, src, kind, &p, n);
  if (brc < 0 && b2fs_shed_retry(brc)) /* cold inodes forgotten: again */
    brc = d ? b2_ns_node_create_in(b2fs_g.env, d, src, kind, &p, n)
            : b2_ns_node_create(b2fs_g.env, pfd, src, kind, &p, n);
  b2_ns_dir_put(d);
  if (brc < 0) {
    b2fs_log("%s: cannot create: %s", src,
             b2_last_detail()[0] ? b2_last_detail() : b2_strerror(brc));
    return -b2fs_werrno(brc);
  }
  struct stat st;
  if (fstatat(pfd, src, &st, AT_SYMLINK_NOFOLLOW) == 0) {
    mode_t m = mode & 07777;
    if (S_ISDIR(st.st_mode)) m = b2fs_sparse_dir_mode(m);
    if (fchmodat(pfd, src, m, 0) < 0)
      b2fs_log("%s: cannot set mode %o: %s", src, (unsigned)m, strerror(errno));
  }
  b2fs_give_owner(pfd, src, req);
  return 0;
}

/* Create the frame src of kind `frame` in pfd (the directory of inode
 * pdir, when not NULL), open, and reply: shown as `name` in `parent` (a
 * new value of the store group of inode `store`, when not NULL). */
static void create_frame(fuse_req_t req, fuse_ino_t parent, const char *name, int pfd,
                         b2fs_inode *pdir, const char *src, int frame,
                         mode_t mode, struct fuse_file_info *fi, b2fs_inode *store) {
  struct fuse_entry_param e;
  b2_ns_node *f;
  int rc = new_frame(req, pfd, pdir, src, frame, mode, store, &f);
  if (rc < 0) {
    fuse_reply_err(req, -rc);
    return;
  }
  if (store) b2fs_store_changed(store, 1);
  if (store) b2_ns_node_in_store(f);
  rc = b2fs_entry(pfd, src, frame, &e);
  if (rc < 0) {
    b2_ns_node_close(f, NULL);
    fuse_reply_err(req, -rc);
    return;
  }
  b2fs_inode *in = b2fs_inode_get(e.ino);
  if (store) atomic_store(&in->in_store, 1);
  b2fs_handle *h;
  b2fs_frame_kopen(in, 1);
  rc = b2fs_frame_install_rw(in, f, &h);
  if (rc < 0) {
    b2fs_frame_kopen(in, -1);
    b2fs_inode_forget(in, 1);
    fuse_reply_err(req, -rc);
    return;
  }
  int writes = (fi->flags & O_ACCMODE) != O_RDONLY;
  fi->fh = (uint64_t)(uintptr_t)h | (uint64_t)writes;
  fi->keep_cache = 0;
  fi->noflush = !writes;
  fi->direct_io = b2fs_write_only(fi->flags);
  if (b2fs_reply_create(req, parent, name, &e, fi) != 0) {
    b2fs_frame_release(in, h);
    b2fs_frame_kopen(in, -1);
    b2fs_inode_forget(in, 1);
  }
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name,
                      mode_t mode, struct fuse_file_info *fi) {
  if (b2fs_inode_get(parent)->kind == B2_NS_STORE) { /* a new value of a .b2d */
    b2_ns_store_file file = {.kind = 0}; /* the kind its name gives */
    int rc = b2fs_store_create(b2fs_inode_get(parent), name, 0, req, &file);
    if (rc < 0) {
      fuse_reply_err(req, -rc);
      return;
    }
    create_frame(req, parent, name, file.dirfd, NULL, file.name, file.kind, mode, fi, b2fs_inode_get(parent));
    close(file.dirfd);
    return;
  }
  b2fs_inode *p = dir_of(req, parent);
  if (!p) return;
  int pfd = p->fd, frame;
  char src[B2_NS_NAME_MAX + 1];
  int rc = choose_new(pfd, name, S_IFREG, 1, src, sizeof src, &frame);
  if (rc < 0) {
    fuse_reply_err(req, -rc);
    return;
  }
  struct fuse_entry_param e;
  if (!frame) {
    int flags = fi->flags & (O_ACCMODE | O_SYNC | O_DSYNC | O_NOATIME);
    int fd = openat(pfd, src, flags | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd < 0 && b2fs_shed_retry(errno))
      fd = openat(pfd, src, flags | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd < 0) {
      fuse_reply_err(req, errno);
      return;
    }
    b2fs_give_owner(pfd, src, req);
    rc = b2fs_entry(pfd, src, B2_NS_PLAIN, &e);
    if (rc < 0) {
      close(fd);
      fuse_reply_err(req, -rc);
      return;
    }
    fi->fh = (uint64_t)fd;
    fi->noflush = 1;
    if (b2fs_reply_create(req, parent, name, &e, fi) != 0) {
      close(fd);
      b2fs_inode_forget(b2fs_inode_get(e.ino), 1);
    }
    return;
  }
  create_frame(req, parent, name, pfd, p, src, frame, mode, fi, NULL);
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
                     mode_t mode, dev_t rdev) {
  b2fs_inode *p = dir_of(req, parent);
  if (!p) return;
  int pfd = p->fd, frame;
  char src[B2_NS_NAME_MAX + 1];
  int rc = choose_new(pfd, name, mode & S_IFMT, 1, src, sizeof src, &frame);
  if (rc < 0) {
    fuse_reply_err(req, -rc);
    return;
  }
  if (frame) {
    b2_ns_node *f;
    rc = new_frame(req, pfd, NULL, src, frame, mode, NULL, &f);
    if (rc == 0) {
      int brc = b2_ns_node_close(f, NULL);
      if (brc < 0) rc = -b2fs_werrno(brc);
    }
  } else {
    rc = mknodat(pfd, src, mode, rdev) < 0 ? -errno : 0;
    if (rc == 0) b2fs_give_owner(pfd, src, req);
  }
  if (rc < 0)
    fuse_reply_err(req, -rc);
  else
    reply_entry(req, parent, name, pfd, src, frame ? frame : B2_NS_PLAIN);
}

/* A new directory (link NULL) or symbolic link under `name`: never a frame. */
static void make_plain(fuse_req_t req, fuse_ino_t parent, const char *name,
                       mode_t mode, const char *link) {
  b2fs_inode *p = dir_of(req, parent);
  if (!p) return;
  int pfd = p->fd, frame;
  char src[B2_NS_NAME_MAX + 1];
  int rc = choose_new(pfd, name, link ? S_IFLNK : S_IFDIR, 0, src, sizeof src, &frame);
  if (rc == 0 && (link ? symlinkat(link, pfd, src) : mkdirat(pfd, src, mode)) < 0) rc = -errno;
  if (rc < 0) {
    fuse_reply_err(req, -rc);
    return;
  }
  b2fs_give_owner(pfd, src, req);
  reply_entry(req, parent, name, pfd, src, B2_NS_PLAIN);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
                     mode_t mode) {
  if (b2fs_inode_get(parent)->kind == B2_NS_STORE) { /* a new group of a .b2d */
    struct fuse_entry_param e;
    int rc = b2fs_store_mkdir(b2fs_inode_get(parent), name, mode, req, &e);
    if (rc < 0)
      fuse_reply_err(req, -rc);
    else
      (void)b2fs_reply_entry(req, parent, name, &e);
    return;
  }
  make_plain(req, parent, name, mode, NULL);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
                       const char *name) {
  make_plain(req, parent, name, 0, link);
}

/* Hard links.  A contiguous frame is one file: its second name gets the
 * frame's suffix (b -> b.b2frame), both names are the same inode, and the
 * engine rewrites a linked frame in place (compaction, empty commits) so
 * the link is never split.  A sparse frame is a directory: EPERM, as for
 * directories.  A plain file cannot get a name that would make it a
 * frame (EPERM). */
static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
                    const char *newname) {
  b2fs_inode *in = b2fs_inode_get(ino);
  b2fs_inode *q = dir_of(req, newparent);
  if (!q) return;
  struct stat st;
  char path[64];
  int qfd = q->fd, frame;
  char src[B2_NS_NAME_MAX + 1];
  int rc = fstatat(in->fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
  if (rc == 0 && in->kind == B2_NS_STORE) rc = -EROFS;
  if (rc == 0 && strlen(newname) > B2_NS_NAME_MAX) rc = -ENAMETOOLONG;
  if (rc == 0 && in->kind != B2_NS_PLAIN) {
    char real[PATH_MAX];
    if (!S_ISREG(st.st_mode)) rc = -EPERM; /* a sparse frame: a directory */
    if (rc == 0) {
      /* The suffix of the name the inode's node is at while that name
       * holds the file (else from its descriptor's path, perhaps of a name
       * removed since: " (deleted)" follows it). */
      b2_ns_dir *dir = b2fs_home(in, real, sizeof real, 1);
      if (dir) {
        b2_ns_dir_put(dir);
      } else {
        b2fs_src_path(in, real, sizeof real);
        char *del = strstr(real, " (deleted)");
        if (del && !del[sizeof " (deleted)" - 1]) *del = 0;
      }
      const char *base = strrchr(real, '/');
      rc = b2_ns_choose_link(qfd, newname, in->kind, base ? base + 1 : real, src, sizeof src);
      if (rc < 0) rc = -b2_to_errno(rc);
    }
  } else if (rc == 0) {
    rc = choose_new(qfd, newname, st.st_mode & S_IFMT, 0, src, sizeof src, &frame);
    if (rc == -EEXIST && S_ISREG(st.st_mode) &&
        b2_ns_name_kind(newname, NULL) != B2_NS_PLAIN)
      rc = -EPERM; /* the new name would make it a frame */
  }
  /* Under the namespace lock: a compaction (which must see the link) does
   * not run meanwhile. */
  if (rc == 0) {
    b2fs_nslock2(in, NULL);
    if (linkat(AT_FDCWD, b2fs_fd_path(in->fd, path, sizeof path), qfd, src,
               AT_SYMLINK_FOLLOW) < 0)
      rc = -errno;
    b2fs_nsunlock2(in, NULL);
  }
  if (rc < 0)
    fuse_reply_err(req, -rc);
  else
    reply_entry(req, newparent, newname, qfd, src, in->kind);
}

/* ---- removing and renaming ------------------------------------------------ */

/* Wait for the release that follows close(2) when it renames the source
 * entry st (a .npy file kept as its bytes: b2fs_frame_flushed): 1 waited,
 * 0 not. */
static int settle(const struct stat *st) {
  b2fs_inode *in = b2fs_inode_find(st, B2_NS_NPY);
  int due = in && atomic_load(&in->rel_due);
  if (due) b2fs_frame_await_release(in);
  if (in) b2fs_inode_forget(in, 1);
  return due;
}

/* The same for the entry shown as `name` in pfd, when it is an array's. */
static void settle_name(int pfd, const char *name) {
  char src[B2_NS_NAME_MAX + 1];
  struct stat st;
  if (b2_ns_shown_npy(name) && b2_ns_resolve(pfd, name, src, &st) == B2_NS_NPY)
    settle(&st);
}

/* The source entry shown as `name` in pfd: its name, kind and lstat
 * (-errno). */
static int resolve(int pfd, const char *name, char *src, struct stat *st) {
  int kind = b2_ns_resolve(pfd, name, src, st);
  if (kind == B2_NS_NPY && settle(st)) kind = b2_ns_resolve(pfd, name, src, st);
  if (kind == B2_NS_STORE) return -EROFS; /* stores are not moved or removed */
  return kind < 0 ? -b2_to_errno(kind) : kind;
}

/* errno of a failed b2_ns_rename or b2_ns_remove. */
static int ns_errno(int rc) {
  int err = b2_ns_last_errno();
  return err ? err : b2_to_errno(rc);
}

/* Delete frame or file `src` of pfd (in: its inode, nslock held).  A
 * frame still open (a sparse one at all, a contiguous one for writing: the
 * engine might write it again at its path) is set aside under a hidden
 * name (b2_ns_remove), its writer following it, and deleted with its
 * inode. */
static int remove_entry(int pfd, dev_t pdev, ino_t pino, const char *src, int kind,
                        const struct stat *st, b2fs_inode *in, void **held_out) {
  int keep = 0;
  int linked = S_ISREG(st->st_mode) && st->st_nlink > 1;
  if (in && !linked) {
    in->gone = 1; /* its writer must not follow, compact or recreate it */
    pthread_mutex_lock(&in->lock);
    keep = in->cur && (b2_ns_is_sparse(kind, st) || in->cur->writable) && !in->doomed;
    pthread_mutex_unlock(&in->lock);
  } else if (in) {
    /* One name of a linked frame: kept (one more hidden link) only while
     * our writer rewrites the frame under that very name. */
    keep = !in->doomed && b2fs_frame_writes_as(in, pdev, pino, src);
  }
  char hidden[B2_NS_HIDDEN_MAX];
  void *held = keep ? b2fs_frame_hold(in, NULL, NULL) : NULL;
  int rc = b2_ns_remove(pfd, src, kind, st, keep, hidden, sizeof hidden);
  if (rc == 1) b2fs_frame_moved(held, in, pfd, hidden); /* its writer rewrites it there */
  b2fs_frame_unhold(held);
  *held_out = held; /* dropped by the caller once the locks are gone */
  if (rc < 0) return -ns_errno(rc);
  if (rc == 1) b2fs_doom(in, pfd, hidden, linked);
  return 0;
}

/* Delete the source entry src of pfd shown as a frame or file of `kind`
 * (lstat st), and reply (a value of the store of inode `store`, when not
 * NULL). */
static void unlink_entry(fuse_req_t req, int pfd, dev_t pdev, ino_t pino, const char *src,
                         int kind, const struct stat *st, b2fs_inode *store) {
  b2fs_inode *in = b2fs_inode_find(st, kind);
  void *held = NULL;
  b2fs_nslock2(in, NULL);
  int rc = remove_entry(pfd, pdev, pino, src, kind, st, in, &held);
  b2fs_nsunlock2(in, NULL);
  b2fs_frame_hold_drop(held);
  if (in) b2fs_inode_forget(in, 1);
  if (store && rc == 0) b2fs_store_changed(store, 1);
  fuse_reply_err(req, -rc);
}

/* A .b2d's value in a file of its own is removed as python-blosc2's del
 * removes it: the file goes; other store entries are read-only. */
static void unlink_store_value(fuse_req_t req, b2fs_inode *p, const char *name) {
  b2_ns_store_file file;
  struct stat st, dst;
  int rc = b2fs_store_file(p, name, &file);
  if (rc == -EROFS) { /* not a file: an embedded value leaves the index */
    fuse_reply_err(req, -b2fs_store_rekey(p, name, NULL, NULL, 0));
    return;
  }
  if (rc < 0) {
    fuse_reply_err(req, -rc);
    return;
  }
  if (fstatat(file.dirfd, file.name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
      fstat(file.dirfd, &dst) < 0)
    fuse_reply_err(req, errno);
  else
    unlink_entry(req, file.dirfd, dst.st_dev, dst.st_ino, file.name, file.kind, &st, p);
  close(file.dirfd);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name) {
  if (b2fs_inode_get(parent)->kind == B2_NS_STORE) {
    unlink_store_value(req, b2fs_inode_get(parent), name);
    return;
  }
  b2fs_inode *p = dir_of(req, parent);
  if (!p) return;
  char src[B2_NS_NAME_MAX + 1];
  struct stat st;
  int pfd = p->fd;
  int kind = resolve(pfd, name, src, &st);
  if (kind < 0) {
    fuse_reply_err(req, -kind);
    return;
  }
  if (S_ISDIR(st.st_mode) && kind == B2_NS_PLAIN) {
    fuse_reply_err(req, EISDIR);
    return;
  }
  unlink_entry(req, pfd, p->dev, p->ino, src, kind, &st, NULL);
}

/* Frames removed while still open keep a hidden entry in their directory
 * until their last close.  Directory `src` of pfd is being removed: such
 * entries in it move to pfd itself (the same file system), so that their
 * readers and writers go on (a sparse frame's chunks are files of that
 * entry) and the directory can go. */
static void rehome_doomed(int pfd, const char *src) {
  struct stat dst, ds;
  b2fs_inode **ins;
  if (fstatat(pfd, src, &dst, AT_SYMLINK_NOFOLLOW) < 0) return;
  size_t n = b2fs_doomed_pin(&ins);
  for (size_t i = 0; i < n; i++) {
    b2fs_inode *in = ins[i];
    void *held = NULL;
    b2fs_nslock2(in, NULL);
    if (in->doomed && fstat(in->doomed_dir, &ds) == 0 && ds.st_dev == dst.st_dev &&
        ds.st_ino == dst.st_ino) {
      int nfd = fcntl(pfd, F_DUPFD_CLOEXEC, 0);
      held = nfd >= 0 ? b2fs_frame_hold(in, NULL, NULL) : NULL;
      if (nfd >= 0 && renameat2(in->doomed_dir, in->doomed, pfd, in->doomed,
                                RENAME_NOREPLACE) == 0) {
        b2_ns_move_sidecar(in->doomed_dir, in->doomed, pfd, in->doomed);
        b2fs_frame_moved(held, in, pfd, in->doomed);
        close(in->doomed_dir);
        in->doomed_dir = nfd;
      } else {
        b2fs_log("rmdir %s: cannot keep the removed open frame %s: %s", src, in->doomed,
                 strerror(errno));
        if (nfd >= 0) close(nfd);
      }
      b2fs_frame_unhold(held);
    }
    b2fs_nsunlock2(in, NULL);
    b2fs_frame_hold_drop(held);
    b2fs_inode_forget(in, 1);
  }
  free(ins);
}

/* Remove directory src of pfd, shown empty but maybe holding engine
 * leftovers (those go), frames removed while open (those move out:
 * rehome_doomed) or frames removed whose last close is under way (their
 * inode deletes them: waited for, up to a second).  0 or -errno. */
static int rmdir_at(int pfd, const char *src) {
  int rc = 0;
  for (int tries = 0; unlinkat(pfd, src, AT_REMOVEDIR) < 0; tries++) {
    rc = -errno;
    if ((rc != -ENOTEMPTY && rc != -EEXIST) || tries == 100) break;
    int left = b2_ns_clear_hidden(pfd, src);
    if (left != 1 && left != 2) break;
    if (left == 2) rehome_doomed(pfd, src);
    if (left == 2 && tries) nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    rc = 0;
  }
  return rc;
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name) {
  char src[B2_NS_NAME_MAX + 1];
  int rc;
  if (b2fs_inode_get(parent)->kind == B2_NS_STORE) { /* a group's directory */
    int pfd = b2fs_store_rmdir(b2fs_inode_get(parent), name, src, sizeof src);
    rc = pfd < 0 ? pfd : rmdir_at(pfd, src);
    if (pfd >= 0) {
      close(pfd);
      b2fs_store_changed(b2fs_inode_get(parent), 0);
    }
    fuse_reply_err(req, -rc);
    return;
  }
  b2fs_inode *p = dir_of(req, parent);
  if (!p) return;
  struct stat st;
  int pfd = p->fd;
  int kind = resolve(pfd, name, src, &st);
  rc = kind < 0 ? kind : 0;
  if (rc == 0 && (kind != B2_NS_PLAIN || !S_ISDIR(st.st_mode))) rc = -ENOTDIR;
  if (rc == 0) rc = rmdir_at(pfd, src);
  fuse_reply_err(req, -rc);
}

typedef b2_ns_move move;


/* Carry out a planned rename (nslocks of both entries held, their
 * writers held: held). */
static int do_move(move *m, b2fs_inode *sin, b2fs_inode *ein, void *held) {
  int busy = 0;
  if (ein) {
    pthread_mutex_lock(&ein->lock);
    busy = ein->cur && (b2_ns_is_sparse(m->ekind, &m->est) || ein->cur->writable) &&
           !ein->doomed;
    pthread_mutex_unlock(&ein->lock);
  }
  int rc = b2_ns_rename(m, busy);
  if (m->note[0]) b2fs_log("rename: %s", m->note);
  if (rc < 0) return -ns_errno(rc);
  if (ein && m->hidden[0] && !(S_ISREG(m->est.st_mode) && m->est.st_nlink > 1))
    ein->gone = 1; /* its writer must not follow, compact or recreate it */
  if (m->linked) { /* the inode's descriptor names the file by its hidden name now */
    int hfd = openat(m->qfd, m->hidden, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    struct stat hs;
    if (hfd < 0 || fstat(hfd, &hs) < 0 || hs.st_ino != m->est.st_ino ||
        dup3(hfd, ein->fd, O_CLOEXEC) < 0)
      b2fs_log("rename: replaced %s kept as %s: %s", m->esrc, m->hidden, strerror(errno));
    if (hfd >= 0) close(hfd);
  }
  if (sin) b2fs_frame_moved(held, sin, m->qfd, m->target);
  if (m->kept) {
    b2fs_frame_moved(held, ein, m->qfd, m->hidden);
    b2fs_doom(ein, m->qfd, m->hidden, S_ISREG(m->est.st_mode) && m->est.st_nlink > 1);
  }
  return 0;
}

/* A writer closing at either entry of a planned move may be replacing its
 * file (a compaction): the inode found by the entry must be the one that
 * follows it.  1 when there was such a writer (then plan again). */
static int settled(const move *m) {
  int a = b2fs_frame_settle_at(m->pfd, m->src);
  int b = m->ekind >= 0 && b2fs_frame_settle_at(m->qfd, m->esrc);
  return a || b;
}

/* Does the planned move m change what the entry is (rename_kind): a
 * plain frame (LOGICAL) to a .npy name, where a new file is an array, or
 * an array's .npy view (NPY, whose plan gave EXDEV) to another name; of
 * one file (or a sparse frame) not open for writing?  The kernel sends
 * the release of a file after close(2) returned, so its opens are waited
 * for a little (at most 100 ms): a program that writes, closes and
 * renames at once.  Readers may stay (they read the frame they opened). */
static int kind_changes(const move *m, int planned, const char *newname) {
  char t[B2_NS_NAME_MAX + 1];
  if (m->kind == B2_NS_LOGICAL) {
    if (planned != 0 || b2_ns_name_target(B2_NS_NPY, ".b2nd", newname, t, sizeof t) != 0)
      return 0;
  } else if (m->kind != B2_NS_NPY || planned != -EXDEV ||
             b2_ns_name_target(B2_NS_NPY, ".b2nd", newname, t, sizeof t) != B2_E_XDEV) {
    return 0; /* (an array's name too long for a frame: EXDEV too, copied) */
  }
  if (S_ISREG(m->st.st_mode) && m->st.st_nlink != 1) return 0;
  b2fs_inode *in = b2fs_inode_find(&m->st, m->kind);
  if (!in) return 1;
  int writer = 1, open_now = 1;
  for (int i = 0; i < 1000 && open_now; i++) {
    if (i) usleep(100);
    pthread_mutex_lock(&in->lock);
    writer = in->cur && in->cur->writable;
    open_now = in->kopen > 0;
    pthread_mutex_unlock(&in->lock);
  }
  b2fs_inode_forget(in, 1);
  return !writer;
}

/* The move planned in m changes what the entry is (kind_changes): the
 * file a new file of its bytes under the new name would be (an array for
 * a .npy name, else a plain frame), made at a hidden name
 * (b2_ns_convert), goes in under the new name and the entry is removed,
 * as if the program had written the file there (rsync and atomic savers
 * write a temporary file, then rename it; `mv x.npy x.bak` would copy).
 * The kernel still takes the name for the entry's inode: that inode
 * answers ESTALE from now on, so the name is looked up again, and *stale
 * gets it (with a reference) for the caller to tell the kernel, once it
 * has replied, that the inode has no name (stale_notify).  1 done, 0 not
 * done (the entry is renamed as it is, or the plan's EXDEV stands), or
 * -errno. */
static int rename_kind(move *m, const char *name, const char *newname, int noreplace,
                       dev_t pdev, ino_t pino, b2fs_inode **stale) {
  char tmp[B2_NS_HIDDEN_MAX];
  int c = b2_ns_convert(b2fs_g.env, m->pfd, m->src, m->kind, m->qfd, tmp, sizeof tmp);
  if (c < 0)
    b2fs_log("rename: %s: not made anew for %s: %s", m->src, newname,
             b2_last_detail()[0] ? b2_last_detail() : b2_strerror(c));
  if (c <= 0) return 0;
  int kind = m->kind == B2_NS_LOGICAL ? B2_NS_NPY : B2_NS_LOGICAL;
  move *put = calloc(1, sizeof *put);
  struct stat now;
  char src[B2_NS_NAME_MAX + 1];
  int rc = put ? 0 : -ENOMEM;
  if (rc == 0) {
    put->qfd = m->qfd;
    /* A plan that fails leaves the rename to the first plan, but for an
     * array's, whose EXDEV came before the target was looked at (EEXIST,
     * EISDIR...; a name too long for a frame still gives EXDEV). */
    int prc = b2_ns_plan_put(put, tmp, kind, newname, noreplace);
    if (prc != 0)
      rc = m->kind == B2_NS_NPY && prc < 0 && prc != B2_E_NAMETOOLONG ? -b2_to_errno(prc) : 1;
  }
  /* The frame must still be the one copied, and still unused. */
  if (rc == 0 && (b2_ns_resolve(m->pfd, name, src, &now) != m->kind || strcmp(src, m->src) ||
                  !b2_same_file(&now, &m->st)))
    rc = 1;
  if (rc != 0) {
    (void)b2_ns_delete(m->qfd, tmp);
    free(put);
    return rc < 0 ? rc : 0;
  }
  b2fs_inode *sin = b2fs_inode_find(&m->st, m->kind);
  b2fs_inode *ein = put->ekind >= 0 ? b2fs_inode_find(&put->est, put->ekind) : NULL;
  /* No writer may open the frame until it is gone (wlock: opens for
   * writing; then the namespace locks, in the order closes take them),
   * and none may have come meanwhile: its writes would go to the frame
   * removed. */
  if (sin) pthread_mutex_lock(&sin->wlock);
  b2fs_nslock2(sin, ein);
  int writer = sin && b2fs_frame_writing(sin), herr = 0;
  void *held = writer ? NULL : b2fs_frame_hold(NULL, ein, &herr), *gone = NULL;
  rc = writer ? 1 : herr ? herr : do_move(put, NULL, ein, held);
  b2fs_frame_unhold(held);
  if (rc == 0) {
    if (sin) atomic_store(&sin->stale, 1);
    int r = remove_entry(m->pfd, pdev, pino, m->src, m->kind, &m->st, sin, &gone);
    if (r < 0) /* the new file is in; the old stays, as a crash here leaves it */
      b2fs_log("rename: %s: made anew as %s, but cannot remove it: %s", m->src, put->target,
               strerror(-r));
  } else {
    (void)b2_ns_delete(m->qfd, tmp);
  }
  b2fs_nsunlock2(sin, ein);
  if (sin) pthread_mutex_unlock(&sin->wlock);
  b2fs_frame_hold_drop(held);
  b2fs_frame_hold_drop(gone);
  if (sin && rc == 0) *stale = sin;
  else if (sin) b2fs_inode_forget(sin, 1);
  if (ein) b2fs_inode_forget(ein, 1);
  free(put);
  return rc < 0 ? rc : rc == 0; /* rc 1: a writer came (0: renamed as it is) */
}

/* After the reply to a rename that made a file anew (rename_kind): the kernel
 * drops the name's tie to the frame's inode (which it then forgets at its
 * last close, and with it the frame's file), so the name is looked up
 * again.  Not before the reply: the kernel holds the directory until then. */
static void stale_notify(fuse_ino_t parent, const char *name, b2fs_inode *in) {
  if (!in) return;
  if (b2fs_g.se)
    (void)fuse_lowlevel_notify_delete(b2fs_g.se, parent, b2fs_inode_id(in), name, strlen(name));
  b2fs_inode_forget(in, 1);
}

/* Plan and carry out the rename of what is shown as `name` in m->pfd, a
 * directory of device pdev and inode pino, to `newname` in m->qfd (qdev,
 * qino); with `arrays` (not NULL), a frame whose name makes it another
 * kind of file is made anew (rename_kind: *arrays may get the inode for
 * stale_notify).  0 or -errno. */
static int rename_shown(move *m, const char *name, const char *newname, int noreplace,
                        dev_t pdev, ino_t pino, dev_t qdev, ino_t qino, b2fs_inode **arrays) {
  int rc = b2_ns_plan_rename(m, name, newname, noreplace);
  for (int k = 0; k < 3 && rc == 0 && settled(m); k++)
    rc = b2_ns_plan_rename(m, name, newname, noreplace);
  if (rc < 0) rc = -b2_to_errno(rc);
  if (arrays && kind_changes(m, rc, newname)) {
    int c = rename_kind(m, name, newname, noreplace, pdev, pino, arrays);
    if (c != 0) return c < 0 ? c : 0;
    if (rc == 0) { /* planned again: the copy took a while */
      rc = b2_ns_plan_rename(m, name, newname, noreplace);
      if (rc < 0) rc = -b2_to_errno(rc);
    }
  }
  if (rc >= 0 && (m->kind == B2_NS_STORE || m->ekind == B2_NS_STORE))
    rc = -EROFS; /* stores are not moved, nor replaced */
  if (rc != 0) return rc < 0 ? rc : 0;
  b2fs_inode *sin = b2fs_inode_find(&m->st, m->kind);
  b2fs_inode *ein = m->ekind >= 0 ? b2fs_inode_find(&m->est, m->ekind) : NULL;
  b2fs_nslock2(sin, ein);
  /* Writers of the frames moved or replaced (frames under a moved
   * directory need nothing: they are at a descriptor of it). */
  int herr = 0;
  void *held = b2fs_frame_hold(sin, ein, &herr);
  /* A frame whose pending data could not be committed is not moved: the
   * rename fails (EIO, ENOSPC) and the writer keeps its file. */
  rc = herr ? herr : do_move(m, sin, ein, held);
  if (rc == 0 && sin && m->kind != B2_NS_PLAIN) { /* opened by directory + name */
    struct stat dst;
    memset(&dst, 0, sizeof dst);
    dst.st_dev = qdev;
    dst.st_ino = qino;
    b2fs_set_home(sin, &dst, m->target);
  }
  b2fs_frame_unhold(held);
  b2fs_nsunlock2(sin, ein);
  b2fs_frame_hold_drop(held);
  if (sin) b2fs_inode_forget(sin, 1);
  if (ein) b2fs_inode_forget(ein, 1);
  return rc;
}

/* The entry moved by m is known to the kernel as `name` in `parent` now
 * (the names shed.c asks the kernel to drop). */
static void renamed(const move *m, fuse_ino_t parent, const char *name) {
  b2fs_inode *in = b2fs_inode_find(&m->st, m->kind);
  if (!in) return;
  b2fs_shed_seen(in, parent, name);
  b2fs_inode_forget(in, 1);
}

/* A rename into, out of or inside a store.  Inside one .b2d, a value in a
 * file of its own moves as python-blosc2 would find it under its new key
 * (b2fs_store_create says where: NAME.npy an array, other names an
 * SChunk; its group's directory made when missing); an embedded value (of
 * a .b2d or a .b2e) gets its new key in the EmbedStore's index; a .b2d's
 * group whose values all lie in files moves with its directory (one
 * holding embedded entries: EXDEV); across a store's boundary, EXDEV (mv
 * then copies and removes); anything else in a store (zip members,
 * objects) EROFS. */
static int rename_store(fuse_req_t req, b2fs_inode *p, const char *name, b2fs_inode *q,
                        const char *newname, int noreplace) {
  if (!b2fs_store_same(p, q)) return -EXDEV;
  if (p == q && strcmp(name, newname) == 0) { /* onto itself: nothing to do */
    struct fuse_entry_param e;
    int rc = b2fs_store_lookup(p, name, &e);
    if (rc == 0) b2fs_inode_forget(b2fs_inode_get(e.ino), 1);
    return rc;
  }
  int rc = b2fs_store_move_group(p, name, q, newname, noreplace);
  if (rc != 1) return rc;
  b2_ns_store_file sf, tf;
  rc = b2fs_store_file(p, name, &sf);
  if (rc == -EROFS) return b2fs_store_rekey(p, name, q, newname, !noreplace); /* embedded */
  if (rc < 0) return rc;
  if (sf.kind == B2_NS_PLAIN) { /* an object kept in a file */
    close(sf.dirfd);
    return -EROFS;
  }
  if (sf.kind == B2_NS_NPY && !b2_ns_shown_npy(newname)) { /* an array is NAME.npy */
    close(sf.dirfd);
    return -EXDEV;
  }
  tf.kind = sf.kind; /* an SChunk keeps its kind under a NAME.npy name */
  rc = b2fs_store_create(q, newname, !noreplace, req, &tf);
  if (rc < 0) {
    close(sf.dirfd);
    return rc;
  }
  char from[B2_NS_NAME_MAX + 1], to[B2_NS_NAME_MAX + 1];
  struct stat qst;
  move *m = calloc(1, sizeof *m);
  if (!m) rc = -ENOMEM;
  else if (tf.kind != sf.kind) rc = -EXDEV; /* an array to an SChunk's name, or back */
  else if (fstat(tf.dirfd, &qst) < 0) rc = -errno;
  else if (b2_ns_name_to_shown(sf.name, 1, b2_ns_probe_dir, &sf.dirfd, from, sizeof from) < 0 ||
           b2_ns_name_to_shown(tf.name, 1, b2_ns_probe_dir, &tf.dirfd, to, sizeof to) < 0)
    rc = -EIO;
  if (rc >= 0) {
    m->pfd = sf.dirfd;
    m->qfd = tf.dirfd;
    rc = rename_shown(m, from, to, noreplace, 0, 0, qst.st_dev, qst.st_ino, NULL);
    if (rc == 0) renamed(m, b2fs_inode_id(q), newname);
  }
  free(m);
  close(sf.dirfd);
  close(tf.dirfd);
  b2fs_store_changed(p, 1); /* also when it failed: a group's directory may be new */
  return rc;
}

/* Swap what is shown as `name` in p and `newname` in q (RENAME_EXCHANGE:
 * two plain entries, or two frames of one kind; b2_ns_plan_exchange):
 * their writers commit first and follow their frames.  0 or -errno. */
static int exchange_shown(b2fs_inode *p, const char *name, b2fs_inode *q, const char *newname) {
  move *m = calloc(1, sizeof *m);
  if (!m) return -ENOMEM;
  m->pfd = p->fd;
  m->qfd = q->fd;
  int rc = b2_ns_plan_exchange(m, name, newname);
  for (int k = 0; k < 3 && rc == 0 && settled(m); k++)
    rc = b2_ns_plan_exchange(m, name, newname);
  if (rc < 0) rc = -b2_to_errno(rc);
  if (rc == 0 && m->kind == B2_NS_STORE) rc = -EROFS; /* stores are not moved */
  if (rc != 0) {
    free(m);
    return rc < 0 ? rc : 0;
  }
  b2fs_inode *a = b2fs_inode_find(&m->st, m->kind);
  b2fs_inode *b = b2fs_inode_find(&m->est, m->ekind);
  b2fs_nslock2(a, b);
  int herr = 0;
  void *held = b2fs_frame_hold(a, b, &herr);
  rc = herr ? herr : b2_ns_exchange(m);
  if (rc < 0 && !herr) rc = -ns_errno(rc);
  if (m->note[0]) b2fs_log("rename: %s", m->note);
  if (rc == 0) {
    if (a) b2fs_frame_moved(held, a, m->qfd, m->esrc);
    if (b) b2fs_frame_moved(held, b, m->pfd, m->src);
    if (m->kind != B2_NS_PLAIN) { /* opened by directory + name */
      struct stat pd, qd;
      memset(&pd, 0, sizeof pd);
      memset(&qd, 0, sizeof qd);
      pd.st_dev = p->dev;
      pd.st_ino = p->ino;
      qd.st_dev = q->dev;
      qd.st_ino = q->ino;
      if (a) b2fs_set_home(a, &qd, m->esrc);
      if (b) b2fs_set_home(b, &pd, m->src);
    }
  }
  b2fs_frame_unhold(held);
  b2fs_nsunlock2(a, b);
  b2fs_frame_hold_drop(held);
  if (a) b2fs_inode_forget(a, 1);
  if (b) b2fs_inode_forget(b, 1);
  free(m);
  return rc;
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
                      fuse_ino_t newparent, const char *newname, unsigned int flags) {
  if (flags == RENAME_EXCHANGE) {
    if (b2fs_inode_get(parent)->kind == B2_NS_STORE ||
        b2fs_inode_get(newparent)->kind == B2_NS_STORE) {
      fuse_reply_err(req, EINVAL); /* no swaps in a store */
      return;
    }
    if (!dir_of(req, parent) || !dir_of(req, newparent)) return;
    fuse_reply_err(req, -exchange_shown(b2fs_inode_get(parent), name,
                                        b2fs_inode_get(newparent), newname));
    return;
  }
  if (flags & ~(unsigned)RENAME_NOREPLACE) { /* RENAME_WHITEOUT, several */
    fuse_reply_err(req, EINVAL);
    return;
  }
  int noreplace = (flags & RENAME_NOREPLACE) != 0, rc;
  b2fs_inode *p = b2fs_inode_get(parent), *q = b2fs_inode_get(newparent);
  if (p->kind == B2_NS_STORE || q->kind == B2_NS_STORE) {
    rc = rename_store(req, p, name, q, newname, noreplace);
    fuse_reply_err(req, -rc);
    return;
  }
  if (!dir_of(req, parent) || !dir_of(req, newparent)) return;
  move *m = calloc(1, sizeof *m);
  if (!m) {
    fuse_reply_err(req, ENOMEM);
    return;
  }
  m->pfd = p->fd;
  m->qfd = q->fd;
  settle_name(m->pfd, name);
  b2fs_inode *stale = NULL;
  rc = rename_shown(m, name, newname, noreplace, p->dev, p->ino, q->dev, q->ino, &stale);
  if (rc == 0) renamed(m, newparent, newname);
  free(m);
  fuse_reply_err(req, -rc);
  stale_notify(newparent, newname, stale);
}

static void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
                        struct fuse_file_info *fi) {
  (void)fi;
  char path[64];
  b2fs_inode *in = b2fs_inode_get(ino);
  int fd = open(b2fs_fd_path(in->fd, path, sizeof path), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int rc = fd < 0 ? -errno : 0;
  if (fd >= 0) {
    if ((datasync ? fdatasync(fd) : fsync(fd)) < 0) rc = -errno;
    close(fd);
  }
  fuse_reply_err(req, -rc);
}

void b2fs_ops_tree(struct fuse_lowlevel_ops *ops) {
  ops->create = op_create;
  ops->mknod = op_mknod;
  ops->mkdir = op_mkdir;
  ops->symlink = op_symlink;
  ops->link = op_link;
  ops->unlink = op_unlink;
  ops->rmdir = op_rmdir;
  ops->rename = op_rename;
  ops->fsyncdir = op_fsyncdir;
}
