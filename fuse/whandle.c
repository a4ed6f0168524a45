/*
 * whandle.c - writable frame handles.
 *
 * The first open for writing opens the frame B2_OPEN_RDWR at its real path
 * and makes it the inode's current handle (handle.c); every later open of
 * the inode shares it, and reads of opens made before go to it.  Its last
 * user commits it, compacts it when dead bytes exceed the mount's
 * thresholds, and closes it.  Opening and closing writable handles are
 * serialised per inode (wlock), so a new writer never meets the advisory
 * lock of one still closing.
 *
 * The engine works on paths: a contiguous frame's compaction, and commits
 * of an empty frame, write a new file and rename it over the path the
 * frame was opened at.  So
 *   - after such a rewrite the inode follows the new file (rebind), found
 *     as the file at the handle's path that our writer holds locked;
 *   - a rename through the mount first commits the writable frames at or
 *     under the renamed path and holds off their uses (each use of a
 *     writable handle's file holds `use` shared), then reopens them at
 *     their new paths;
 *   - compaction runs at the entry's current path with renames and
 *     removals of the entry held off (nslock).
 * Inodes with a writable handle are kept in a registry for the last two.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "b2fs.h"

/* ---- registry of inodes with a writable current handle -------------------- */
static pthread_mutex_t wreg_mu = PTHREAD_MUTEX_INITIALIZER;
static b2fs_inode **wreg;
static size_t nwreg, capwreg;
static atomic_int any_writable;

void b2fs_wreg_add(b2fs_inode *in) {
  pthread_mutex_lock(&wreg_mu);
  if (nwreg == capwreg) {
    size_t ncap = capwreg ? capwreg * 2 : 16;
    b2fs_inode **n = realloc(wreg, ncap * sizeof *n);
    if (n) {
      wreg = n;
      capwreg = ncap;
    }
  }
  if (nwreg < capwreg) wreg[nwreg++] = in; /* else not followed: rare, harmless */
  any_writable = nwreg > 0;
  pthread_mutex_unlock(&wreg_mu);
}

void b2fs_wreg_del(b2fs_inode *in) {
  pthread_mutex_lock(&wreg_mu);
  for (size_t i = 0; i < nwreg; i++)
    if (wreg[i] == in) {
      wreg[i] = wreg[--nwreg];
      break;
    }
  any_writable = nwreg > 0;
  pthread_mutex_unlock(&wreg_mu);
}

int b2fs_frame_any_writable(void) { return any_writable; }

/* The registered inodes, each pinned (b2fs_inode_forget(in, 1) after);
 * NULL when there are none. */
static b2fs_inode **wreg_pinned(size_t *n) {
  *n = 0;
  pthread_mutex_lock(&wreg_mu);
  b2fs_inode **out = nwreg ? malloc(nwreg * sizeof *out) : NULL;
  for (size_t i = 0; out && i < nwreg; i++)
    if (b2fs_inode_pin(wreg[i])) out[(*n)++] = wreg[i];
  pthread_mutex_unlock(&wreg_mu);
  return out;
}

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

/* Open the frame of `in` for writing at its directory and source name
 * (paths longer than PATH_MAX): an engine code. */
static int open_home(b2fs_inode *in, int view, b2_file **f) {
  char name[B2_NS_NAME_MAX + 1];
  b2fs_inode *dir = b2fs_home(in, name, sizeof name, 1);
  if (!dir) return b2_fail(B2_E_NOENT, "the frame's directory is not known");
  int rc = b2_file_open_at(b2fs_g.env, dir->fd, name, view, B2_OPEN_RDWR, f);
  b2fs_home_put(dir);
  return rc;
}

/* open(2) of the inode's source name: at `path`, or (path "": too long)
 * at its directory and source name. */
static int open_name(b2fs_inode *in, const char *path, int flags) {
  if (path[0]) return open(path, flags);
  char name[B2_NS_NAME_MAX + 1];
  b2fs_inode *dir = b2fs_home(in, name, sizeof name, 0);
  if (!dir) return -1;
  int fd = openat(dir->fd, name, flags);
  b2fs_home_put(dir);
  return fd;
}

/* A writable handle around f, opened at path (f closed on failure). */
static b2fs_handle *rw_handle(b2_file *f, const char *path, const b2fs_sig *sig) {
  b2fs_handle *h = b2fs_handle_new(f, sig);
  if (h) {
    h->writable = 1;
    h->path = strdup(path);
    if (h->path) return h;
    b2fs_handle_free(h);
    return NULL;
  }
  b2_file_close(f);
  return NULL;
}

/* The view a writable handle of the inode presents. */
static int rw_view(const b2fs_inode *in) {
  return in->kind == B2_NS_NPY ? B2_VIEW_NPY : B2_VIEW_LOGICAL;
}

int b2fs_frame_open_rw(b2fs_inode *in, b2fs_handle **out, int *keep_cache) {
  if (in->kind == B2_NS_PLAIN) return -EROFS;
  pthread_mutex_lock(&in->wlock);
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

  char path[PATH_MAX];
  b2fs_sig sig;
  b2_file *f = NULL;
  b2fs_handle *h = NULL, *old = NULL;
  int rc = b2fs_real_path(in, path, sizeof path);
  int deep = rc == -ENAMETOOLONG; /* by directory + name: any depth */
  if (deep) {
    rc = 0;
    path[0] = 0;
  }
  if (rc == 0) rc = b2fs_handle_sig(in, &sig);
  if (rc == 0 && deep) {
    int brc = open_home(in, rw_view(in), &f);
    if (brc < 0) {
      rc = -open_rw_errno(brc);
      if (rc != -EROFS)
        b2fs_log("cannot open a frame for writing: %s",
                 b2_last_detail()[0] ? b2_last_detail() : b2_strerror(brc));
    }
  } else if (rc == 0) {
    int brc = b2_file_open(b2fs_g.env, path, rw_view(in), B2_OPEN_RDWR, &f);
    /* A rename between finding the path and opening it: find it again. */
    for (int tries = 0; brc < 0 && tries < 8; tries++) {
      char again[PATH_MAX];
      if (b2fs_real_path(in, again, sizeof again) < 0 || strcmp(again, path) == 0) break;
      memcpy(path, again, strlen(again) + 1);
      brc = b2_file_open(b2fs_g.env, path, rw_view(in), B2_OPEN_RDWR, &f);
    }
    if (brc < 0) {
      rc = -open_rw_errno(brc);
      if (rc != -EROFS)
        b2fs_log("%s: cannot open for writing: %s", path,
                 b2_last_detail()[0] ? b2_last_detail() : b2_strerror(brc));
    }
  }
  if (rc == 0 && !(h = rw_handle(f, path, &sig))) rc = -ENOMEM;
  if (rc == 0) {
    pthread_mutex_lock(&in->lock);
    b2fs_handle_make_cur(in, h, &old);
    *out = h;
    if (keep_cache) *keep_cache = b2fs_handle_keep(in, &sig);
    pthread_mutex_unlock(&in->lock);
  }
  pthread_mutex_unlock(&in->wlock);
  b2fs_handle_free(old);
  return rc;
}

int b2fs_frame_install_rw(b2fs_inode *in, b2_file *f, const char *path, b2fs_handle **out) {
  b2fs_handle *h = rw_handle(f, path, NULL), *old = NULL;
  if (!h) return -ENOMEM;
  pthread_mutex_lock(&in->wlock);
  pthread_mutex_lock(&in->lock);
  int busy = in->cur && in->cur->writable; /* cannot happen for a new file */
  if (!busy) {
    b2fs_handle_make_cur(in, h, &old);
    *out = h;
  }
  pthread_mutex_unlock(&in->lock);
  pthread_mutex_unlock(&in->wlock);
  b2fs_handle_free(busy ? h : old);
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
  char *path = f && b2_file_recreations(f) != g0 && h->path ? strdup(h->path) : NULL;
  b2fs_unuse(h);
  struct stat before, st;
  if (path && fstatat(in->fd, "", &before, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == 0) {
    int nfd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (nfd >= 0 && fstat(nfd, &st) == 0 &&
        (st.st_ino != before.st_ino || st.st_dev != before.st_dev)) {
      b2fs_copy_attrs(nfd, &before, 1);
      fstat(nfd, &st);
      b2fs_inode_rebind(in, nfd, &st);
    } else if (nfd >= 0) {
      close(nfd);
    }
  }
  pthread_mutex_unlock(&in->nslock);
  free(path);
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
  if (h->writable || !in->rw) return NULL;
  pthread_mutex_lock(&in->lock);
  b2fs_handle *w = in->cur && in->cur->writable ? in->cur : NULL;
  if (w) b2fs_handle_take(in);
  pthread_mutex_unlock(&in->lock);
  return w;
}

void b2fs_frame_touched(b2fs_inode *in) {
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  pthread_mutex_lock(&in->lock);
  in->wtime = now;
  pthread_mutex_unlock(&in->lock);
}

/* ---- following rewrites and renames ------------------------------------- */

/* Rebind in to the regular file at path when it is not the file `old`
 * describes and (with check_lock) a writer holds it locked: ours, since
 * the engine rewrote the frame.  nslock held. */
static void rebind_to(b2fs_inode *in, const char *path, const struct stat *old, int check_lock) {
  int fd = open_name(in, path, (check_lock ? O_RDONLY | O_NONBLOCK : O_PATH) | O_NOFOLLOW | O_CLOEXEC);
  struct stat st;
  if (fd < 0) return;
  if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
      (st.st_ino == old->st_ino && st.st_dev == old->st_dev)) {
    close(fd);
    return;
  }
  if (check_lock) {
    if (flock(fd, LOCK_SH | LOCK_NB) == 0) { /* nobody writes it: not ours */
      flock(fd, LOCK_UN);
      close(fd);
      return;
    }
    int pfd = open_name(in, path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    struct stat pst;
    int same = pfd >= 0 && fstat(pfd, &pst) == 0 && pst.st_ino == st.st_ino;
    close(fd);
    if (!same) {
      if (pfd >= 0) close(pfd);
      return;
    }
    fd = pfd;
  }
  b2fs_copy_attrs(fd, old, 0);
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
  char path[PATH_MAX];
  if (!in->rw || !replaced(in, &old)) return;
  pthread_mutex_lock(&in->nslock);
  pthread_mutex_lock(&in->lock);
  b2fs_handle *h = in->cur && in->cur->writable ? in->cur : NULL;
  if (h) snprintf(path, sizeof path, "%s", h->path);
  pthread_mutex_unlock(&in->lock);
  if (h && replaced(in, &old)) rebind_to(in, path, &old, 1);
  pthread_mutex_unlock(&in->nslock);
}

void b2fs_frame_follow_path(const char *path) {
  size_t n;
  if (!any_writable) return;
  b2fs_inode **ins = wreg_pinned(&n);
  for (size_t i = 0; i < n; i++) {
    b2fs_inode *in = ins[i];
    pthread_mutex_lock(&in->lock);
    int closing = in->closing && strcmp(in->closing, path) == 0;
    int match = closing || (in->cur && in->cur->writable && strcmp(in->cur->path, path) == 0);
    pthread_mutex_unlock(&in->lock);
    if (closing) { /* a compaction may be replacing the file: wait for it */
      pthread_mutex_lock(&in->wlock);
      pthread_mutex_unlock(&in->wlock);
    }
    if (match) b2fs_frame_follow(in);
    b2fs_inode_forget(in, 1);
  }
  free(ins);
}

int b2fs_frame_writing_at(const char *path) {
  size_t n;
  if (!any_writable) return 0;
  b2fs_inode **ins = wreg_pinned(&n);
  int yes = 0;
  for (size_t i = 0; i < n; i++) {
    b2fs_inode *in = ins[i];
    pthread_mutex_lock(&in->lock);
    if ((in->closing && strcmp(in->closing, path) == 0) ||
        (in->cur && in->cur->writable && in->cur->path && strcmp(in->cur->path, path) == 0))
      yes = 1;
    pthread_mutex_unlock(&in->lock);
    b2fs_inode_forget(in, 1);
  }
  free(ins);
  return yes;
}

/* Renames.  The engine rewrites a frame (an empty one at a commit) at the
 * path it was opened with, so a writable frame must not be renamed with
 * uncommitted changes and must be reopened at its new path right after:
 * before the rename each writable frame at or under the renamed path is
 * committed and its uses are held off (`use` exclusively, in address
 * order), after it the frame is reopened at its real path. */
typedef struct held_e {
  b2fs_inode *in;
  b2fs_handle *h;
} held_e;
typedef struct held {
  size_t n;
  held_e e[];
} held;

static int by_handle(const void *a, const void *b) {
  uintptr_t x = (uintptr_t)((const held_e *)a)->h, y = (uintptr_t)((const held_e *)b)->h;
  return x < y ? -1 : x > y;
}

/* Is path `p` at or under `dir`? */
static int under(const char *p, const char *dir) {
  size_t n = strlen(dir);
  return strncmp(p, dir, n) == 0 && (p[n] == 0 || p[n] == '/');
}

void *b2fs_frame_hold(const char *from, const char *also, int *err) {
  size_t n;
  if (err) *err = 0;
  if (!any_writable) return NULL;
  b2fs_inode **ins = wreg_pinned(&n);
  held *hd = ins ? malloc(sizeof *hd + n * sizeof hd->e[0]) : NULL;
  if (!hd) {
    for (size_t i = 0; i < n; i++) b2fs_inode_forget(ins[i], 1);
    free(ins);
    return NULL;
  }
  hd->n = 0;
  for (size_t i = 0; i < n; i++) {
    b2fs_inode *in = ins[i];
    pthread_mutex_lock(&in->lock);
    b2fs_handle *h = in->cur && in->cur->writable &&
                     (under(in->cur->path, from) || (also && under(in->cur->path, also)))
                         ? in->cur : NULL;
    if (h) b2fs_handle_take(in); /* no close while held */
    pthread_mutex_unlock(&in->lock);
    if (h) {
      hd->e[hd->n].in = in;
      hd->e[hd->n++].h = h;
    } else {
      b2fs_inode_forget(in, 1);
    }
  }
  free(ins);
  qsort(hd->e, hd->n, sizeof hd->e[0], by_handle);
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
    if (replaced(hd->e[i].in, &old)) rebind_to(hd->e[i].in, h->path, &old, 1);
  }
  return hd;
}

/* Reopen the writable handle h of in at path (use held exclusively). */
static void reopen(b2fs_inode *in, b2fs_handle *h, const char *path) {
  char *np = strdup(path);
  if (!np) return;
  if (h->file && b2_frame_dirty(b2_file_frame(h->file))) {
    /* The commit before the rename failed: closing would lose data. */
    b2fs_log("%s: renamed with uncommitted changes; commits may fail", path);
    free(np);
    return;
  }
  pthread_mutex_lock(&in->lock);
  int rc = h->file ? b2_file_close(h->file) : 0;
  h->file = NULL;
  b2_file *f;
  if (rc == 0) rc = b2_file_open(b2fs_g.env, np, rw_view(in), B2_OPEN_RDWR, &f);
  if (rc == 0) {
    h->file = f;
    free(h->path);
    h->path = np;
  } else {
    b2fs_log("%s: cannot reopen after a rename: %s", np,
             b2_last_detail()[0] ? b2_last_detail() : b2_strerror(rc));
    free(np);
  }
  pthread_mutex_unlock(&in->lock);
}

void b2fs_frame_unhold(void *arg, int renamed) {
  held *hd = arg;
  if (!hd) return;
  for (size_t i = 0; i < hd->n; i++) {
    b2fs_inode *in = hd->e[i].in;
    b2fs_handle *h = hd->e[i].h;
    char path[PATH_MAX];
    if (renamed && b2fs_real_path(in, path, sizeof path) == 0 &&
        strcmp(path, h->path) != 0)
      reopen(in, h, path);
    pthread_rwlock_unlock(&h->use);
  }
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

/* ---- closing ------------------------------------------------------------- */

/* Is compaction worth it: dead bytes above both thresholds. */
static int worth_compacting(b2_file *f) {
  const b2fs_opts *o = &b2fs_g.opts;
  if (o->compact_pct == 0 || !f) return 0;
  int64_t dead = b2_file_dead_bytes(f);
  b2_frame_info info;
  if (dead <= 0 || b2_frame_info_copy(b2_file_frame(f), &info) < 0) return 0;
  int64_t total = info.cbytes + dead;
  return (uint64_t)dead > o->compact_min && dead * 100 > (int64_t)o->compact_pct * total;
}

/* Compact the (committed) frame of h, no longer current, at the entry's
 * current path; rebind the inode to the new file (nslock held). */
static void compact(b2fs_inode *in, b2fs_handle *h) {
  char path[PATH_MAX], src[4096];
  struct stat before;
  if (in->gone || b2fs_real_path(in, path, sizeof path) < 0 ||
      fstatat(in->fd, "", &before, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
    return;
  int rc;
  if (strcmp(path, h->path) == 0) {
    rc = b2_file_compact(h->file);
  } else { /* the engine knows another path: compact afresh */
    rc = b2_file_close(h->file);
    h->file = NULL;
    if (rc == 0) rc = b2_frame_compact_path(path);
  }
  if (rc < 0) {
    b2fs_log("%s: compaction failed: %s", b2fs_src_path(in, src, sizeof src),
             b2_last_detail()[0] ? b2_last_detail() : b2_strerror(rc));
    return;
  }
  if (!S_ISDIR(before.st_mode)) {
    rebind_to(in, path, &before, 0);
    b2fs_copy_attrs(in->fd, &before, 1); /* same content: same times */
  }
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
  in->closing = h->path;
  b2fs_handle_drop(in); /* refs 0: ours alone now */
  pthread_mutex_unlock(&in->lock);

  pthread_mutex_lock(&in->nslock);
  if (rc == 0 && worth_compacting(h->file)) compact(in, h);
  int64_t size = h->file ? b2_file_size(h->file) : -1;
  char *path = h->path;
  h->path = NULL;
  struct stat old;
  int crc = b2fs_handle_free(h); /* a failed commit is retried here */
  if (rc == 0) rc = crc;
  /* That last try may have rewritten the file (an empty frame). */
  if (path && replaced(in, &old)) rebind_to(in, path, &old, 0);
  pthread_mutex_lock(&in->lock);
  in->closing = NULL;
  int current = in->cur && in->cur->writable;
  pthread_mutex_unlock(&in->lock);
  if (!current) b2fs_wreg_del(in);
  free(path);
  pthread_mutex_unlock(&in->nslock);
  note_size(in, rc == 0 ? size : -1);
  pthread_mutex_unlock(&in->wlock);
  return rc;
}
