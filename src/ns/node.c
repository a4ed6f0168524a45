/*
 * node.c - a frame of SOURCE as a namespace node: the directory it is in
 * (a shared, refcounted descriptor, b2_ns_dir: the directory may move and
 * any depth works), its source name there, its kind, and, while it is open
 * for writing, the writable b2_file it owns.  The engine rewrites the
 * frame at that directory and name (compaction, empty commits, .npy
 * recreation), so the node stays valid across its own rewrites; a rename
 * or removal through the caller moves it (b2_ns_node_moved, or
 * b2_ns_node_place while it has no file).  See b2_ns.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "b2_error.h"
#include "b2_file.h"
#include "b2_frame.h"
#include "b2_ns.h"
#include "common/util.h"

struct b2_ns_dir {
  atomic_int refs;
  int fd; /* a descriptor of the directory (O_PATH dup) */
  dev_t dev;
  ino_t ino;
};

struct b2_ns_node {
  b2_file *file; /* open for writing, or NULL */
  int kind;
  b2_ns_dir *dir; /* the directory it was found, opened or created in, or moved to */
  char name[B2_NS_NAME_MAX + 1];
  int store;      /* a value of a .b2d (b2_ns_node_in_store) */
};

/* ---- directories ---------------------------------------------------------- */

int b2_ns_dir_open(int dirfd, const struct stat *known, b2_ns_dir **out) {
  struct stat dst;
  if (!known && fstat(dirfd, &dst) < 0)
    return b2_fail(b2_from_errno(errno), "directory: %s", strerror(errno));
  if (!known) known = &dst;
  b2_ns_dir *d = malloc(sizeof *d);
  if (!d) return b2_fail(B2_E_NOMEM, "out of memory");
  d->fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
  if (d->fd < 0) {
    int err = errno;
    free(d);
    return b2_fail(b2_from_errno(err), "directory: %s", strerror(err));
  }
  atomic_init(&d->refs, 1);
  d->dev = known->st_dev;
  d->ino = known->st_ino;
  *out = d;
  return 0;
}

b2_ns_dir *b2_ns_dir_ref(b2_ns_dir *d) {
  if (d) atomic_fetch_add(&d->refs, 1);
  return d;
}

void b2_ns_dir_put(b2_ns_dir *d) {
  if (!d || atomic_fetch_sub(&d->refs, 1) != 1) return;
  close(d->fd);
  free(d);
}

int b2_ns_dir_fd(const b2_ns_dir *d) { return d->fd; }

int b2_ns_dir_is(const b2_ns_dir *d, const struct stat *st) {
  return d->dev == st->st_dev && d->ino == st->st_ino;
}

/* ---- nodes ------------------------------------------------------------------ */

static int view_of(int kind) { return kind == B2_NS_NPY ? B2_VIEW_NPY : B2_VIEW_LOGICAL; }

static int check_args(const char *name, int kind) {
  if (strlen(name) > B2_NS_NAME_MAX) return b2_fail(B2_E_NAMETOOLONG, "%.64s...: name too long", name);
  if (kind != B2_NS_LOGICAL && kind != B2_NS_NPY)
    return b2_fail(B2_E_INVAL, "%s: not a frame's view", name);
  return 0;
}

int b2_ns_node_new(b2_ns_dir *dir, const char *name, int kind, b2_ns_node **out) {
  int rc = check_args(name, kind);
  if (rc < 0) return rc;
  b2_ns_node *n = calloc(1, sizeof *n);
  if (!n) return b2_fail(B2_E_NOMEM, "out of memory");
  n->kind = kind;
  n->dir = b2_ns_dir_ref(dir);
  snprintf(n->name, sizeof n->name, "%s", name);
  *out = n;
  return 0;
}

/* A node of `name` in dirfd (a new b2_ns_dir of it). */
static int node_at(int dirfd, const char *name, int kind, b2_ns_node **out) {
  b2_ns_dir *d;
  int rc = check_args(name, kind);
  if (rc == 0) rc = b2_ns_dir_open(dirfd, NULL, &d);
  if (rc < 0) return rc;
  rc = b2_ns_node_new(d, name, kind, out);
  b2_ns_dir_put(d);
  return rc;
}

int b2_ns_node_open_file(b2_ns_node *n, b2_env *env) {
  if (n->file) return 0;
  return b2_file_open_at(env, n->dir->fd, n->name, view_of(n->kind), B2_OPEN_RDWR, &n->file);
}

int b2_ns_node_open(b2_env *env, int dirfd, const char *name, int kind, b2_ns_node **out) {
  b2_ns_node *n;
  int rc = node_at(dirfd, name, kind, &n);
  if (rc == 0 && (rc = b2_ns_node_open_file(n, env)) < 0) b2_ns_node_free(n);
  if (rc == 0) *out = n;
  return rc;
}

int b2_ns_node_create(b2_env *env, int dirfd, const char *name, int kind,
                      const b2_frame_params *p, b2_ns_node **out) {
  b2_ns_dir *d;
  int rc = b2_ns_dir_open(dirfd, NULL, &d);
  if (rc < 0) return rc;
  rc = b2_ns_node_create_in(env, d, name, kind, p, out);
  b2_ns_dir_put(d);
  return rc;
}

int b2_ns_node_create_in(b2_env *env, b2_ns_dir *dir, const char *name, int kind,
                         const b2_frame_params *p, b2_ns_node **out) {
  b2_ns_node *n;
  int rc = b2_ns_node_new(dir, name, kind, &n);
  if (rc < 0) return rc;
  rc = kind == B2_NS_NPY ? b2_file_create_npy_at(env, n->dir->fd, name, p, &n->file)
                         : b2_file_create_at(env, n->dir->fd, name, p, &n->file);
  if (rc < 0) {
    n->file = NULL;
    b2_ns_node_free(n);
    return rc;
  }
  *out = n;
  return 0;
}

b2_file *b2_ns_node_file(const b2_ns_node *n) { return n->file; }

int b2_ns_node_kind(const b2_ns_node *n) { return n->kind; }

const char *b2_ns_node_name(const b2_ns_node *n) { return n->name; }

void b2_ns_node_dir(const b2_ns_node *n, dev_t *ddev, ino_t *dino) {
  *ddev = n->dir->dev;
  *dino = n->dir->ino;
}

b2_ns_dir *b2_ns_node_where(const b2_ns_node *n, char *name, size_t cap) {
  if (strlen(n->name) >= cap) return NULL;
  memcpy(name, n->name, strlen(n->name) + 1);
  return b2_ns_dir_ref(n->dir);
}

int b2_ns_node_is_at(const b2_ns_node *n, dev_t ddev, ino_t dino, const char *name) {
  return n->dir->dev == ddev && n->dir->ino == dino && strcmp(n->name, name) == 0;
}

int b2_ns_node_place(b2_ns_node *n, b2_ns_dir *dir, const char *name) {
  if (strlen(name) > B2_NS_NAME_MAX) return b2_fail(B2_E_NAMETOOLONG, "%.64s...: name too long", name);
  if (n->file) return b2_fail(B2_E_BUSY, "%s: open for writing: moved with b2_ns_node_moved", n->name);
  if (dir != n->dir) {
    b2_ns_dir_put(n->dir);
    n->dir = b2_ns_dir_ref(dir);
  }
  snprintf(n->name, sizeof n->name, "%s", name);
  return 0;
}

int b2_ns_node_moved(b2_ns_node *n, int dirfd, const char *name) {
  if (strlen(name) > B2_NS_NAME_MAX) return b2_fail(B2_E_NAMETOOLONG, "%.64s...: name too long", name);
  b2_ns_dir *d;
  int rc = b2_ns_dir_open(dirfd, NULL, &d);
  if (rc < 0) return rc;
  if (n->file && (rc = b2_frame_rehome(b2_file_frame(n->file), dirfd, name)) < 0) {
    b2_ns_dir_put(d);
    return rc;
  }
  b2_ns_dir_put(n->dir);
  n->dir = d;
  snprintf(n->name, sizeof n->name, "%s", name);
  return 0;
}

int b2_ns_node_current(const b2_ns_node *n, const struct stat *known, int *fd) {
  struct stat cur, st;
  *fd = -1;
  if (!n->file || b2_file_frame_now(n->file, &cur) < 0 || !S_ISREG(cur.st_mode) ||
      (cur.st_dev == known->st_dev && cur.st_ino == known->st_ino))
    return 0;
  /* the writer's file as its name holds it (not when moved behind our back) */
  int e = openat(n->dir->fd, n->name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (e >= 0 && fstat(e, &st) == 0 && st.st_dev == cur.st_dev && st.st_ino == cur.st_ino) {
    *fd = e;
    return 1;
  }
  if (e >= 0) close(e);
  return 0;
}

int b2_ns_node_entry(const b2_ns_node *n, int flags) {
  int fd = openat(n->dir->fd, n->name, flags | O_NOFOLLOW | O_CLOEXEC);
  return fd < 0 ? b2_fail(b2_from_errno(errno), "%s: %s", n->name, strerror(errno)) : fd;
}

int b2_ns_node_compact(b2_ns_node *n, const struct stat *expect) {
  if (!n->file) return 0;
  int fd = b2_ns_node_entry(n, O_PATH);
  struct stat st;
  int here = fd >= 0 && fstat(fd, &st) == 0 && st.st_ino == expect->st_ino &&
             st.st_dev == expect->st_dev;
  if (fd >= 0) close(fd);
  if (!here) return 0; /* moved or replaced behind the caller's back */
  int rc = b2_file_compact(n->file);
  return rc < 0 ? rc : 1;
}

static void sync_dir(int dfd) {
  int sfd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (sfd >= 0) {
    (void)fsync(sfd);
    close(sfd);
  }
}

void b2_ns_node_in_store(b2_ns_node *n) { n->store = 1; }

/* A new NAME.npy stored as NAME.b2nd whose header was no array: it ends
 * as the plain frame a plain NAME.npy is, NAME.npy.b2frame (in a store,
 * the SChunk NAME.npy.b2f, key NAME.npy) when that name is free; renamed
 * in place, the same file. */
static void to_plain_name(b2_ns_node *n) {
  char plain[B2_NS_NAME_MAX + 1];
  int dfd = n->dir->fd;
  if (b2_ns_npy_names(n->name, n->store, NULL, plain, NULL, sizeof plain) != B2_NS_NPY ||
      renameat2(dfd, n->name, dfd, plain, RENAME_NOREPLACE) != 0)
    return;
  b2_ns_move_sidecar(dfd, n->name, dfd, plain);
  sync_dir(dfd);
  snprintf(n->name, sizeof n->name, "%s", plain);
}

int b2_ns_node_close_file(b2_ns_node *n, int *entry) {
  if (entry) *entry = -1;
  if (!n || !n->file) return 0;
  if (n->kind == B2_NS_NPY) (void)b2_file_flush(n->file); /* settles a new .npy */
  int plain = n->kind == B2_NS_NPY && b2_file_npy_fell_back(n->file);
  int rc = b2_file_close(n->file); /* a failed commit is tried once more */
  n->file = NULL;
  if (plain && rc == 0) to_plain_name(n);
  if (entry) *entry = openat(n->dir->fd, n->name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  return rc;
}

int b2_ns_node_kept_npy(const b2_ns_node *n) {
  return n->kind != B2_NS_STORE &&
         b2_ns_npy_names(n->name, n->store, NULL, NULL, NULL, 0) == B2_NS_LOGICAL;
}

int b2_ns_node_rearray(b2_ns_node *n, b2_env *env, char *note, size_t cap) {
  struct stat st, now;
  if (cap) note[0] = 0;
  int dfd = n->dir->fd;
  if (n->file || !b2_ns_node_kept_npy(n) || fstatat(dfd, n->name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
      !S_ISREG(st.st_mode) || st.st_nlink != 1)
    return 0;
  char tmp[B2_NS_HIDDEN_MAX], target[B2_NS_NAME_MAX + 1];
  (void)b2_ns_npy_names(n->name, n->store, target, NULL, NULL, sizeof target);
  int rc = b2_ns_convert(env, dfd, n->name, B2_NS_LOGICAL, dfd, tmp, sizeof tmp);
  if (rc <= 0) return rc;
  /* Still the entry copied, and the array's name free: the array goes in
   * beside it (both show these bytes; NAME.b2nd is shown as NAME.npy, so
   * the name never shows nothing), then the plain frame goes.  A crash
   * between leaves both, the plain frame shown under its own name. */
  if (fstatat(dfd, n->name, &now, AT_SYMLINK_NOFOLLOW) < 0 || !b2_same_file(&now, &st) ||
      renameat2(dfd, tmp, dfd, target, RENAME_NOREPLACE) < 0) {
    (void)b2_ns_delete(dfd, tmp);
    return 0;
  }
  sync_dir(dfd);
  b2_ns_move_sidecar(dfd, n->name, dfd, target); /* lockers keep their lock */
  b2_ns_move_sidecar(dfd, tmp, dfd, target);     /* the copy's own, if none */
  rc = b2_ns_delete(dfd, n->name);
  if (rc < 0 && cap)
    snprintf(note, cap, "%s: made the array %s, but left: %s", n->name, target, b2_last_detail());
  sync_dir(dfd);
  n->kind = B2_NS_NPY;
  snprintf(n->name, sizeof n->name, "%s", target);
  return 1;
}

void b2_ns_node_free(b2_ns_node *n) {
  if (!n) return;
  (void)b2_ns_node_close_file(n, NULL);
  b2_ns_dir_put(n->dir);
  free(n);
}

int b2_ns_node_close(b2_ns_node *n, int *entry) {
  if (entry) *entry = -1;
  if (!n) return 0;
  int rc = b2_ns_node_close_file(n, entry);
  b2_ns_node_free(n);
  return rc;
}
