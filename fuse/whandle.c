/*
 * whandle.c - writable frame handles.
 *
 * The first open for writing opens the frame as a new namespace node (at
 * the directory and source name of the inode's node, never by path, so any
 * depth works), which becomes the inode's node while the writer lives, and
 * makes a handle using that node the inode's current handle (handle.c);
 * every later open of the inode shares it, and reads of
 * opens made before go to it.  Its last user commits it, compacts it when
 * dead bytes exceed the mount's thresholds, and closes it.  Opening and
 * closing writable handles are serialised per inode (wlock), so a new
 * writer never meets the advisory lock of one still closing.
 *
 * The node stays valid across the frame's own rewrites (the engine
 * rewrites a frame at its directory and name: compaction, commits of an
 * empty frame, .npy recreation), so the daemon only
 *   - moves the inode to the new file a rewrite left at the node's name
 *     (rebind: the file the node's writer is in now, b2_ns_node_current);
 *   - around a rename or removal through the mount, commits the writers of
 *     the entries moved or replaced, holds off their uses (each use of a
 *     writable handle's file holds `use` shared) and tells their nodes the
 *     new name (b2_ns_node_moved); frames under a moved directory need
 *     nothing, their node holds a descriptor of the directory;
 *   - compacts at close with renames and removals of the entry held off
 *     (nslock), while the node's name still holds the inode's file.
 * Inodes with a writable handle are kept in a registry, for the lookups
 * and sweeps that must know which source names our writers use.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "b2fs.h"

/* ---- opening -------------------------------------------------------------- */

/* errno of a failed writable open. */
static int open_rw_errno(int rc) {
  switch (rc) {
  case B2_E_UNSUPPORTED: /* older layout, variable-length chunks */
  case B2_E_ROFS:
    return EROFS;
  case B2_E_BUSY:
    return EBUSY;
  default:
    return b2fs_errno(rc);
  }
}

/* A new descriptor of the directory of frame inode `in`, with its source
 * name there in name (cap > B2_NS_NAME_MAX), as last seen through the
 * mount; when that name no longer holds the file (moved behind the
 * mount), the directory and name its descriptor resolves to now.  An
 * engine code on failure. */
static int home_at(b2fs_inode *in, char *name, size_t cap) {
  b2_ns_dir *dir = b2fs_home(in, name, cap, 1);
  struct stat st;
  /* Replaced behind the mount (b2f compact, another daemon's compaction,
   * a rename over it): the frame is what its name holds now, as for any
   * program that opens it by name. */
  if (!dir && !in->gone && fstatat(in->fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == 0 &&
      st.st_nlink == 0)
    dir = b2fs_home(in, name, cap, 0);
  int dfd;
  if (dir) {
    dfd = fcntl(b2_ns_dir_fd(dir), F_DUPFD_CLOEXEC, 0);
    b2_ns_dir_put(dir);
    return dfd < 0 ? b2_fail(b2_from_errno(errno), "%s: %s", name, strerror(errno)) : dfd;
  }
  char path[PATH_MAX];
  if (b2fs_real_path(in, path, sizeof path) < 0)
    return b2_fail(B2_E_NOENT, "the frame's directory and name are not known");
  char *slash = strrchr(path, '/');
  if (!slash || strlen(slash + 1) >= cap) return b2_fail(B2_E_NOENT, "%s: no name", path);
  snprintf(name, cap, "%s", slash + 1);
  *slash = 0;
  dfd = open(path[0] ? path : "/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  return dfd < 0 ? b2_fail(b2_from_errno(errno), "%s: %s", path, strerror(errno)) : dfd;
}

int b2fs_frame_open_own(b2fs_inode *in, int view, b2_file **f) {
  char name[B2_NS_NAME_MAX + 1];
  int dfd = home_at(in, name, sizeof name);
  if (dfd < 0) return dfd;
  int rc = b2_file_open_at(b2fs_g.env, dfd, name, view, B2_OPEN_RDWR, f);
  close(dfd);
  return rc;
}

/* Open frame inode `in` for writing as a new node: at its node's
 * directory and name while that name holds its file, else where its
 * descriptor's path says (moved behind the mount).  name gets the name. */
static int open_node(b2fs_inode *in, char *name, size_t cap, b2_ns_node **out) {
  b2_ns_dir *dir = b2fs_home(in, name, cap, 1);
  int rc;
  if (dir) {
    rc = b2_ns_node_new(dir, name, in->kind, out);
    b2_ns_dir_put(dir);
    if (rc == 0 && atomic_load(&in->in_store)) b2_ns_node_in_store(*out);
    if (rc == 0 && (rc = b2_ns_node_open_file(*out, b2fs_g.env)) < 0) b2_ns_node_free(*out);
    return rc;
  }
  int dfd = home_at(in, name, cap);
  rc = dfd < 0 ? dfd : b2_ns_node_open(b2fs_g.env, dfd, name, in->kind, out);
  if (dfd >= 0) close(dfd);
  if (rc == 0 && atomic_load(&in->in_store)) b2_ns_node_in_store(*out);
  return rc;
}

/* A writable handle around node n (closed on failure). */
static b2fs_handle *rw_handle(b2_ns_node *n, const b2fs_sig *sig) {
  b2fs_handle *h = b2fs_handle_new(b2_ns_node_file(n), sig);
  if (!h) {
    b2_ns_node_close(n, NULL);
    return NULL;
  }
  h->writable = 1;
  h->node = n;
  return h;
}

/* Is the writable handle h's frame entry `name` of the directory (dev,
 * ino)?  (inode lock) */
static int home_is(const b2fs_handle *h, dev_t dev, ino_t ino, const char *name) {
  return h && h->node && b2_ns_node_is_at(h->node, dev, ino, name);
}

/* A new descriptor of what the frame of writable handle h has at its name
 * now (the caller may use h->file), -1 when unknown. */
static int open_at_home(b2fs_handle *h, int flags) {
  int fd = h->node ? b2_ns_node_entry(h->node, flags) : -1;
  return fd < 0 ? -1 : fd;
}


int b2fs_frame_open_rw(b2fs_inode *in, b2fs_handle **out, int *keep_cache) {
  if (in->kind == B2_NS_PLAIN) return -EROFS;
  pthread_mutex_lock(&in->wlock);
  if (atomic_load(&in->stale)) { /* its name shows another file now (kind_changed) */
    pthread_mutex_unlock(&in->wlock);
    return -ESTALE;
  }
  pthread_mutex_lock(&in->lock);
  if (in->cur && in->cur->writable) {
    b2fs_handle_take(in);
    *out = in->cur;
    if (keep_cache) *keep_cache = 1;
    pthread_mutex_unlock(&in->lock);
    pthread_mutex_unlock(&in->wlock);
    return 0;
  }
  pthread_mutex_unlock(&in->lock);

  char name[B2_NS_NAME_MAX + 1] = "";
  b2fs_sig sig;
  b2_ns_node *node = NULL;
  b2fs_handle *h = NULL, *old = NULL;
  int rc = b2fs_handle_sig(in, &sig);
  if (rc == 0) {
    pthread_mutex_lock(&in->nslock); /* the entry is not renamed meanwhile */
    int brc = open_node(in, name, sizeof name, &node);
    pthread_mutex_unlock(&in->nslock);
    if (brc < 0) {
      rc = -open_rw_errno(brc);
      if (rc != -EROFS)
        b2fs_log("%s: cannot open for writing: %s", name,
                 b2_last_detail()[0] ? b2_last_detail() : b2_strerror(brc));
    }
  }
  if (rc == 0 && !(h = rw_handle(node, &sig))) rc = -ENOMEM;
  b2_ns_node *oldn = NULL;
  if (rc == 0) {
    pthread_mutex_lock(&in->lock);
    b2fs_handle_make_cur(in, h, &old);
    oldn = b2fs_node_swap(in, node); /* the inode's node is the writer's now */
    *out = h;
    if (keep_cache) *keep_cache = b2fs_handle_keep(in, &sig);
    pthread_mutex_unlock(&in->lock);
  }
  pthread_mutex_unlock(&in->wlock);
  if (rc == 0) b2fs_handle_store_wait(in);
  b2fs_handle_free(old);
  b2_ns_node_free(oldn);
  return rc;
}

int b2fs_frame_install_rw(b2fs_inode *in, b2_ns_node *node, b2fs_handle **out) {
  b2fs_handle *h = rw_handle(node, NULL), *old = NULL;
  if (!h) return -ENOMEM;
  b2_ns_node *oldn = NULL;
  pthread_mutex_lock(&in->wlock);
  pthread_mutex_lock(&in->lock);
  int busy = in->cur && in->cur->writable; /* cannot happen for a new file */
  if (!busy) {
    b2fs_handle_make_cur(in, h, &old);
    oldn = b2fs_node_swap(in, node);
    *out = h;
  }
  pthread_mutex_unlock(&in->lock);
  pthread_mutex_unlock(&in->wlock);
  if (!busy) b2fs_handle_store_wait(in);
  b2fs_handle_free(busy ? h : old);
  b2_ns_node_free(busy ? node : oldn);
  return busy ? -EBUSY : 0;
}

uint64_t b2fs_frame_gen(b2fs_handle *h) {
  b2_file *f = b2fs_use(h);
  uint64_t g = f ? b2_file_recreations(f) : 0;
  b2fs_unuse(h);
  return g;
}

void b2fs_frame_renewed(b2fs_inode *in, b2fs_handle *h, uint64_t g0) {
  pthread_mutex_lock(&in->nslock); /* no rename of the entry meanwhile */
  b2_file *f = b2fs_use(h);
  int nfd = f && b2_file_recreations(f) != g0 ? open_at_home(h, O_PATH) : -1;
  b2fs_unuse(h);
  struct stat before, st;
  if (nfd >= 0 && fstatat(in->fd, "", &before, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == 0 &&
      fstat(nfd, &st) == 0 && (st.st_ino != before.st_ino || st.st_dev != before.st_dev)) {
    /* Not its times: new content, whose checksum table vouches for the
     * time its commit gave it (the old one's would leave it stale). */
    b2fs_copy_attrs(nfd, &before, 0, in->fd);
    fstat(nfd, &st);
    b2fs_inode_rebind(in, nfd, &st);
  } else if (nfd >= 0) {
    close(nfd);
  }
  pthread_mutex_unlock(&in->nslock);
}

void b2fs_frame_note(b2_file *f) {
  char note[256];
  if (b2_file_take_note(f, note, sizeof note)) b2fs_log("%s", note);
}

b2_file *b2fs_use(b2fs_handle *h) {
  if (h->writable) pthread_rwlock_rdlock(&h->use);
  return h->file;
}

void b2fs_unuse(b2fs_handle *h) {
  if (h->writable) pthread_rwlock_unlock(&h->use);
}

b2fs_handle *b2fs_frame_redirect(b2fs_inode *in, b2fs_handle *h) {
  if (h->writable) return NULL;
  b2fs_handle *w = NULL;
  if (in->rw) {
    pthread_mutex_lock(&in->lock);
    w = in->cur && in->cur->writable ? in->cur : NULL;
    if (w) b2fs_handle_take(in);
    pthread_mutex_unlock(&in->lock);
    if (w) return w;
  }
  /* A writer came and went since h was made: the version now on disk
   * (the writer's, unless another program changed it since). */
  unsigned g = atomic_load(&in->wgen);
  if (atomic_load_explicit(&h->wgen, memory_order_relaxed) == g ||
      b2fs_frame_peek(in, &w) < 0)
    return NULL;
  if (w != h) return w;
  atomic_store_explicit(&h->wgen, g, memory_order_relaxed); /* h is that version */
  b2fs_frame_release(in, w);
  return NULL;
}

void b2fs_frame_touched(b2fs_inode *in, b2_file *f) {
  struct timespec now; /* the engine's, which the commit gives the frame */
  if (!b2_file_changed_at(f, &now)) clock_gettime(CLOCK_REALTIME, &now);
  pthread_mutex_lock(&in->lock);
  in->wtime = now;
  pthread_mutex_unlock(&in->lock);
}

/* ---- following rewrites and renames ------------------------------------- */

/* Rebind in to the file the writer of handle h is in now when a rewrite
 * of its own (compaction, an empty frame's commit) left it another file
 * than `old` describes, at the node's name (b2_ns_node_current): with
 * old's owner and mode (and with times, its times).  nslock held; the
 * caller may use h->file. */
static void rebind_home(b2fs_inode *in, b2fs_handle *h, const struct stat *old, int times) {
  int fd;
  struct stat st;
  if (!h->node || b2_ns_node_current(h->node, old, &fd) != 1) return;
  b2fs_copy_attrs(fd, old, times, in->fd);
  if (fstat(fd, &st) < 0) {
    close(fd);
    return;
  }
  b2fs_inode_rebind(in, fd, &st);
}

/* The source entry was unlinked (and not by us through the mount)?  *old
 * gets its stat. */
static int replaced(b2fs_inode *in, struct stat *old) {
  return !in->gone && !in->sparse &&
         fstatat(in->fd, "", old, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == 0 &&
         old->st_nlink == 0;
}

void b2fs_frame_follow(b2fs_inode *in) {
  struct stat old;
  if (!in->rw || !replaced(in, &old)) return;
  pthread_mutex_lock(&in->nslock);
  pthread_mutex_lock(&in->lock);
  b2fs_handle *h = in->cur && in->cur->writable ? in->cur : NULL;
  if (h) b2fs_handle_take(in); /* no close meanwhile */
  pthread_mutex_unlock(&in->lock);
  if (h) {
    b2fs_use(h);
    if (replaced(in, &old)) rebind_home(in, h, &old, 0);
    b2fs_unuse(h);
  }
  pthread_mutex_unlock(&in->nslock);
  if (h) b2fs_frame_release(in, h);
}

/* Does a writable handle of ours (current or closing) have its home at
 * entry `name` of the directory (dev, ino)?  With follow, let it follow a
 * rewrite first (waiting for a closing one). */
static int writing_at(dev_t dev, ino_t ino, const char *name, int follow) {
  size_t n;
  if (!b2fs_frame_any_writable()) return 0;
  b2fs_inode **ins = b2fs_wreg_pinned(&n);
  int yes = 0;
  for (size_t i = 0; i < n; i++) {
    b2fs_inode *in = ins[i];
    pthread_mutex_lock(&in->lock);
    int closing = in->closing && in->cdev == dev && in->cino == ino &&
                  strcmp(in->closing, name) == 0;
    int match = closing || (in->cur && in->cur->writable && home_is(in->cur, dev, ino, name));
    pthread_mutex_unlock(&in->lock);
    yes |= match;
    if (follow && closing) { /* a compaction may be replacing the file: wait for it */
      pthread_mutex_lock(&in->wlock);
      pthread_mutex_unlock(&in->wlock);
    }
    if (follow && match) b2fs_frame_follow(in);
    b2fs_inode_forget(in, 1);
  }
  free(ins);
  return yes;
}

void b2fs_frame_follow_at(b2fs_inode *dir, const char *name) {
  writing_at(dir->dev, dir->ino, name, 1);
}

int b2fs_frame_writes_as(b2fs_inode *in, dev_t ddev, ino_t dino, const char *name) {
  if (!in->rw) return 0;
  pthread_mutex_lock(&in->lock);
  int yes = in->cur && in->cur->writable && home_is(in->cur, ddev, dino, name);
  pthread_mutex_unlock(&in->lock);
  return yes;
}

int b2fs_frame_writing_at(int dirfd, const char *name) {
  struct stat dst;
  if (fstat(dirfd, &dst) < 0) return 1; /* cannot tell */
  return writing_at(dst.st_dev, dst.st_ino, name, 0);
}

int b2fs_frame_settle_at(int dirfd, const char *name) {
  struct stat dst;
  if (!b2fs_frame_any_writable() || fstat(dirfd, &dst) < 0) return 0;
  return writing_at(dst.st_dev, dst.st_ino, name, 1);
}

/* Renames and removals.  A writable frame moved or set aside through the
 * mount is committed first (its data on disk before its name changes: a
 * failed commit fails the rename) and its uses are held off (`use`
 * exclusively, in address order); once the entry has its new name the
 * frame is told its new home (b2fs_frame_moved), then let go. */
typedef struct held_e {
  b2fs_inode *in;
  b2fs_handle *h;
} held_e;
typedef struct held {
  size_t n;
  held_e e[2];
} held;

void *b2fs_frame_hold(b2fs_inode *a, b2fs_inode *b, int *err) {
  if (err) *err = 0;
  held *hd = calloc(1, sizeof *hd);
  if (!hd) return NULL;
  b2fs_inode *ins[2] = {a, b == a ? NULL : b};
  for (int i = 0; i < 2; i++) {
    b2fs_inode *in = ins[i];
    if (!in || !in->rw || !b2fs_inode_pin(in)) continue;
    pthread_mutex_lock(&in->lock);
    b2fs_handle *h = in->cur && in->cur->writable ? in->cur : NULL;
    if (h) b2fs_handle_take(in); /* no close while held */
    pthread_mutex_unlock(&in->lock);
    if (h) {
      hd->e[hd->n].in = in;
      hd->e[hd->n++].h = h;
    } else {
      b2fs_inode_forget(in, 1);
    }
  }
  if (hd->n == 2 && (uintptr_t)hd->e[0].h > (uintptr_t)hd->e[1].h) {
    held_e t = hd->e[0];
    hd->e[0] = hd->e[1];
    hd->e[1] = t;
  }
  for (size_t i = 0; i < hd->n; i++) {
    b2fs_handle *h = hd->e[i].h;
    pthread_rwlock_wrlock(&h->use);
    int rc = h->file ? b2_file_flush(h->file) : 0;
    if (rc < 0) {
      b2fs_frame_log(hd->e[i].in, h, "commit before a rename", rc);
      if (err && !*err) *err = -b2_to_errno(rc);
    }
    /* That commit (or one of the idle flusher) may have rewritten the
     * file: the inode must know the file that gets renamed. */
    struct stat old;
    if (replaced(hd->e[i].in, &old)) rebind_home(hd->e[i].in, h, &old, 0);
  }
  if (hd->n == 0) {
    free(hd);
    return NULL;
  }
  return hd;
}

void b2fs_frame_moved(void *arg, b2fs_inode *in, int dirfd, const char *name) {
  held *hd = arg;
  for (size_t i = 0; hd && i < hd->n; i++) {
    if (hd->e[i].in != in) continue;
    b2fs_handle *h = hd->e[i].h;
    pthread_mutex_lock(&in->lock); /* home_is reads the node's place */
    int rc = h->node ? b2_ns_node_moved(h->node, dirfd, name) : 0;
    pthread_mutex_unlock(&in->lock);
    if (rc < 0) b2fs_frame_log(in, h, "moving the writer to the new name", rc);
  }
}

void b2fs_frame_unhold(void *arg) {
  held *hd = arg;
  for (size_t i = 0; hd && i < hd->n; i++) pthread_rwlock_unlock(&hd->e[i].h->use);
}

void b2fs_frame_hold_drop(void *arg) {
  held *hd = arg;
  if (!hd) return;
  for (size_t i = 0; i < hd->n; i++) {
    b2fs_frame_release(hd->e[i].in, hd->e[i].h);
    b2fs_inode_forget(hd->e[i].in, 1);
  }
  free(hd);
}

/* ---- releasing and closing ---------------------------------------------- */

static int release(b2fs_inode *in, b2fs_handle *h, int warmed) {
  int close_rw = 0;
  b2fs_handle *dead = b2fs_handle_unref(in, h, warmed, &close_rw);
  int rc = close_rw ? b2fs_wclose(in, h) : b2fs_handle_free(dead);
  return rc < 0 ? -b2fs_werrno(rc) : 0;
}

int b2fs_frame_release(b2fs_inode *in, b2fs_handle *h) { return release(in, h, 0); }

void b2fs_frame_release_warmed(b2fs_inode *in, b2fs_handle *h) { (void)release(in, h, 1); }

/* ---- closing ------------------------------------------------------------- */

void b2fs_frame_flushed(b2fs_inode *in, b2fs_handle *h) {
  pthread_mutex_lock(&in->lock);
  /* Two users: this open and the inode's current handle itself. */
  int due = h->writable && in->cur == h && h->refs == 2 && in->kopen == 1;
  pthread_mutex_unlock(&in->lock);
  b2_file *f = due ? b2fs_use(h) : NULL;
  /* The release changes the size (a short new .npy file), or renames the
   * source entry (a .npy file kept as its bytes), or makes it anew (bytes
   * kept that are an array again, kind_changed): stats and opens wait. */
  if (f && (b2_file_reopen_size(f) != b2_file_size(f) || b2_file_npy_kept_as_bytes(f) ||
            (h->node && b2_ns_node_kept_npy(h->node) && b2_file_npy_is_array(f))))
    atomic_store(&in->rel_due, 1);
  if (f) b2fs_unuse(h);
}

void b2fs_frame_await_release(b2fs_inode *in) {
  if (!atomic_load(&in->rel_due)) return;
  for (int i = 0; i < 1000 && atomic_load(&in->rel_due); i++) usleep(100);
  atomic_store(&in->rel_due, 0);
}

void b2fs_frame_released(b2fs_inode *in) { atomic_store(&in->rel_due, 0); }

/* Is compaction worth it: dead bytes above `floor`, above compact_pct of
 * the bytes stored, and above compact_min or (with `small`, while open:
 * a small frame mostly dead costs little to copy) the live bytes; *dead
 * gets them.  Not `small` at a close: a compaction there delays the
 * release, which the kernel sends after close(2) returned, and with it the
 * size a new .npy header gives. */
static int worth_compacting(b2_file *f, int64_t floor, int small, int64_t *dead) {
  const b2fs_opts *o = &b2fs_g.opts;
  *dead = 0;
  if (o->compact_pct == 0 || !f) return 0;
  int64_t stored;
  *dead = b2_file_dead_bytes(f, &stored);
  return *dead > 0 && *dead > floor && *dead * 100 > (int64_t)o->compact_pct * stored &&
         ((uint64_t)*dead > o->compact_min || (small && *dead > stored - *dead));
}

/* Compact the (committed) frame of h at its home; rebind the inode to the
 * new file (nslock held; h no longer current, or its `use` held
 * exclusively).  1 compacted, 0 not (the name holds another file now),
 * or a negative code. */
static int compact(b2fs_inode *in, b2fs_handle *h) {
  char src[4096];
  struct stat before;
  if (in->gone || !h->node || fstatat(in->fd, "", &before, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
    return 0;
  /* Only while the frame's name still holds the inode's file (not moved
   * behind the mount's back). */
  int rc = b2_ns_node_compact(h->node, &before);
  if (rc == 0) return 0;
  if (rc < 0) {
    b2fs_log("%s: compaction failed: %s", b2fs_src_path(in, src, sizeof src),
             b2_last_detail()[0] ? b2_last_detail() : b2_strerror(rc));
    return rc;
  }
  if (!S_ISDIR(before.st_mode)) {
    rebind_home(in, h, &before, 0);
    b2fs_copy_attrs(in->fd, &before, 1, -1); /* same content: same times */
  }
  return 1;
}

void b2fs_frame_compact_open(b2fs_inode *in) {
  if (!in->rw || b2fs_g.opts.compact_pct == 0) return;
  /* No writable open or close meanwhile, so h lives; not a reference of
   * h, which would leave a user's last close to this thread (the close,
   * its commit and the size it gives the kernel, after close(2) returned). */
  pthread_mutex_lock(&in->wlock);
  pthread_mutex_lock(&in->lock);
  b2fs_handle *h = in->cur && in->cur->writable && !in->cur->wclosing && !in->gone ? in->cur : NULL;
  pthread_mutex_unlock(&in->lock);
  if (!h) {
    pthread_mutex_unlock(&in->wlock);
    return;
  }
  /* A look first, beside the handle's other uses, once the file has not
   * been written for the idle commit's delay (the copy holds off its
   * reads and writes: about 4 s per GB here). */
  b2_file *f = b2fs_use(h);
  int64_t quiet = 0, dead = 0;
  uint64_t c = f ? b2_file_committed(f, &quiet) : 0;
  unsigned idle = b2fs_g.opts.env.idle_ms ? b2fs_g.opts.env.idle_ms : 1000;
  int look = f && c != h->cseen && quiet >= (int64_t)idle;
  int worth = look && worth_compacting(f, 2 * h->cfailed, 1, &dead);
  if (look) h->cseen = c;
  b2fs_unuse(h);
  if (worth) {
    pthread_mutex_lock(&in->nslock);
    pthread_rwlock_wrlock(&h->use); /* the inode's file changes */
    struct stat old;
    if (h->file && replaced(in, &old)) rebind_home(in, h, &old, 0);
    if (h->file) h->cfailed = compact(in, h) == 1 ? 0 : dead;
    pthread_rwlock_unlock(&h->use);
    pthread_mutex_unlock(&in->nslock);
  }
  pthread_mutex_unlock(&in->wlock);
}

/* Remember what was just committed for the next stat (no handle left). */
static void note_size(b2fs_inode *in, int64_t size) {
  b2fs_sig sig;
  struct stat st;
  pthread_mutex_lock(&in->lock);
  memset(&in->wtime, 0, sizeof in->wtime);
  in->attr_valid = 0;
  if (size >= 0 && !in->sparse &&
      fstatat(in->fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == 0) {
    b2fs_sig_of(in, &st, &sig);
    in->attr_sig = sig;
    in->lsize = size;
    in->blocks = st.st_blocks;
    in->attr_valid = 1;
  }
  pthread_mutex_unlock(&in->lock);
}

/* The last writer of frame inode `in` closed its node's file.  A .npy
 * file kept as its bytes (NAME.npy.b2frame, renamed so by this close or
 * an earlier one) that holds a whole array again (a program wrote a .npy
 * file over it) is made that array (b2_ns_node_rearray; wlock and nslock
 * held, so no writer, rename or removal meanwhile).  When the name now
 * shows another kind of file than the inode's (an array's .npy view kept
 * as its bytes, a plain frame made an array), the inode is stale: the
 * kernel looks the name up again (readers keep the file they opened).
 * 1 then, with its directory (*pdev, *pino) and name shown, for
 * stale_notify; else 0. */
static int kind_changed(b2fs_inode *in, b2_ns_node *node, char *shown, size_t cap, dev_t *pdev,
                        ino_t *pino) {
  char note[1024], src[4096];
  /* an array's inode whose file this close kept as its bytes */
  int plain = in->kind == B2_NS_NPY && b2_ns_node_kept_npy(node);
  int c = b2_ns_node_rearray(node, b2fs_g.env, note, sizeof note);
  if (c < 0)
    b2fs_log("%s: holds an array again, but stays plain bytes: %s",
             b2fs_src_path(in, src, sizeof src),
             b2_last_detail()[0] ? b2_last_detail() : b2_strerror(c));
  if (c > 0 && note[0]) b2fs_log("%s", note);
  if (!plain && c <= 0) return 0;
  atomic_store(&in->stale, 1);
  b2_ns_node_dir(node, pdev, pino);
  /* NAME.b2nd or NAME.npy.b2frame, both shown as NAME.npy */
  (void)b2_ns_npy_names(b2_ns_node_name(node), atomic_load(&in->in_store), NULL, NULL, shown, cap);
  return 1;
}

/* After kind_changed, with no lock held: the kernel drops the name's tie
 * to the stale inode (as after a rename that made a file anew), so the
 * name is looked up again; waiters for the release go first.  Told from a
 * thread of its own (b2fs_notify_gone): this close may be a truncate's,
 * whose system call holds the inode's lock until we answer. */
static void stale_notify(b2fs_inode *in, dev_t pdev, ino_t pino, const char *shown) {
  b2fs_frame_released(in);
  b2fs_inode *dir = b2fs_dir_find(pdev, pino);
  if (dir && b2fs_inode_pin(in))
    b2fs_notify_gone(dir, in, shown);
  else
    b2fs_home_put(dir);
}

int b2fs_wclose(b2fs_inode *in, b2fs_handle *h) {
  /* Commit while still current: a new open may still take the handle. */
  uint64_t g0 = b2fs_frame_gen(h);
  b2_file *f = b2fs_use(h);
  int rc = f ? b2_file_flush(f) : B2_E_IO;
  if (rc < 0 && f) b2fs_frame_log(in, h, "commit at close", rc);
  if (f) b2fs_frame_note(f);
  b2fs_unuse(h);
  b2fs_frame_renewed(in, h, g0);
  b2fs_frame_follow(in);
  pthread_mutex_lock(&in->wlock);
  pthread_mutex_lock(&in->lock);
  if (in->cur != h || h->refs != 1) { /* taken again meanwhile */
    h->wclosing = 0; /* its last release closes it */
    pthread_mutex_unlock(&in->lock);
    pthread_mutex_unlock(&in->wlock);
    return rc;
  }
  /* Stay registered under our path until the file is final: a lookup
   * that meets a compacted file waits for the inode to follow it. */
  in->closing = h->node ? strdup(b2_ns_node_name(h->node)) : NULL;
  if (in->closing) b2_ns_node_dir(h->node, &in->cdev, &in->cino);
  b2fs_handle_drop(in); /* refs 0: ours alone now */
  /* The node is the closer's until its file is closed (lookups meanwhile
   * make the inode a new one; this one comes back if none did). */
  if (in->node == h->node) b2fs_node_swap(in, NULL);
  pthread_mutex_unlock(&in->lock);

  /* The last writer is done: a new .npy file that ends short of its
   * header's size keeps its bytes (a plain frame, made anew at its home). */
  int64_t kernel_size = -1; /* the size the kernel may hold */
  if (rc == 0 && h->file && in->kind == B2_NS_NPY) {
    uint64_t g1 = b2fs_frame_gen(h);
    kernel_size = b2_file_size(h->file);
    pthread_mutex_lock(&in->nslock);
    rc = b2_file_finish(h->file);
    pthread_mutex_unlock(&in->nslock);
    b2fs_frame_note(h->file);
    b2fs_frame_renewed(in, h, g1);
    if (rc < 0) b2fs_frame_log(in, h, "commit at close", rc);
  }
  pthread_mutex_lock(&in->nslock);
  int64_t dead;
  if (rc == 0 && worth_compacting(h->file, 0, 0, &dead)) (void)compact(in, h);
  int64_t size = h->file ? b2_file_reopen_size(h->file) : -1;
  /* The kernel holds the writer's size for up to its timeout; a .npy
   * header its writer spelled otherwise than numpy.save makes another,
   * and a short one kept as its bytes its own. */
  int resized = h->file && (size != b2_file_size(h->file) || (kernel_size >= 0 && kernel_size != size));
  /* The last try of a failed commit (at the close) may rewrite the file
   * (an empty frame): where that lands, before the handle goes. */
  int hfd = -1, stale = 0;
  b2_ns_node *node = h->node;
  dev_t pdev = 0;
  ino_t pino = 0;
  char shown[B2_NS_NAME_MAX + 1] = "";
  if (node) { /* a failed commit is retried here */
    int crc = b2_ns_node_close_file(node, &hfd);
    h->node = NULL;
    h->file = NULL;
    if (rc == 0) rc = crc;
    if (rc == 0 && !in->gone) stale = kind_changed(in, node, shown, sizeof shown, &pdev, &pino);
    pthread_mutex_lock(&in->lock); /* back as the inode's node, read-only */
    if (!in->node && !stale) node = b2fs_node_swap(in, node);
    pthread_mutex_unlock(&in->lock);
    b2_ns_node_free(node);
  }
  b2fs_handle_free(h);
  struct stat old, st;
  if (stale) {
    if (hfd >= 0) close(hfd);
  } else if (hfd >= 0 && replaced(in, &old) && fstat(hfd, &st) == 0 && S_ISREG(st.st_mode) &&
      st.st_ino != old.st_ino) {
    b2fs_copy_attrs(hfd, &old, 0, in->fd);
    fstat(hfd, &st);
    b2fs_inode_rebind(in, hfd, &st);
  } else if (hfd >= 0) {
    close(hfd);
  }
  pthread_mutex_lock(&in->lock);
  char *closing = in->closing;
  in->closing = NULL;
  int current = in->cur && in->cur->writable;
  pthread_mutex_unlock(&in->lock);
  if (!current) {
    b2fs_wreg_del(in);
    b2fs_undoom_linked(in); /* a hidden link kept for this writer alone */
  }
  pthread_mutex_lock(&in->lock);
  int open_now = in->cur != NULL;
  pthread_mutex_unlock(&in->lock);
  if (!open_now) b2fs_inode_unpin(in); /* nobody holds the number shown */
  free(closing);
  pthread_mutex_unlock(&in->nslock);
  note_size(in, rc == 0 ? size : -1);
  pthread_mutex_unlock(&in->wlock);
  if (resized && b2fs_g.se && !stale) /* attributes only: no page is waited for */
    fuse_lowlevel_notify_inval_inode(b2fs_g.se, b2fs_inode_id(in), -1, 0);
  if (stale) stale_notify(in, pdev, pino, shown);
  return rc;
}
