/*
 * node.c - a frame of SOURCE open for writing, as a namespace node: the
 * directory it is in (a descriptor, so the directory may move and any
 * depth works), its source name there, its kind, and the writable b2_file
 * it owns.  The engine rewrites the frame at that directory and name
 * (compaction, empty commits, .npy recreation), so the node stays valid
 * across its own rewrites; a rename or removal through the caller moves it
 * (b2_ns_node_moved).  See b2_ns.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "b2_error.h"
#include "b2_file.h"
#include "b2_frame.h"
#include "b2_ns.h"

struct b2_ns_node {
  b2_file *file;
  int kind;
  int dfd;    /* a descriptor of the directory it is in (O_PATH dup) */
  dev_t ddev; /* the directory it was opened in or moved to */
  ino_t dino;
  char name[B2_NS_NAME_MAX + 1];
};

static int view_of(int kind) { return kind == B2_NS_NPY ? B2_VIEW_NPY : B2_VIEW_LOGICAL; }

/* A node around f, opened or created at (dirfd, name). */
static int node_new(b2_file *f, int dirfd, const char *name, int kind, b2_ns_node **out) {
  struct stat dst;
  b2_ns_node *n = calloc(1, sizeof *n);
  int dfd = -1;
  int rc = !n ? b2_fail(B2_E_NOMEM, "out of memory")
           : fstat(dirfd, &dst) < 0 || (dfd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0)) < 0
               ? b2_fail(b2_from_errno(errno), "%s: directory: %s", name, strerror(errno))
               : 0;
  if (rc < 0) {
    free(n);
    b2_file_close(f);
    return rc;
  }
  n->dfd = dfd;
  n->file = f;
  n->kind = kind;
  n->ddev = dst.st_dev;
  n->dino = dst.st_ino;
  snprintf(n->name, sizeof n->name, "%s", name);
  *out = n;
  return 0;
}

static int check_args(const char *name, int kind) {
  if (strlen(name) > B2_NS_NAME_MAX) return b2_fail(B2_E_NAMETOOLONG, "%.64s...: name too long", name);
  if (kind != B2_NS_LOGICAL && kind != B2_NS_NPY)
    return b2_fail(B2_E_INVAL, "%s: not a frame's view", name);
  return 0;
}

int b2_ns_node_open(b2_env *env, int dirfd, const char *name, int kind, b2_ns_node **out) {
  int rc = check_args(name, kind);
  b2_file *f;
  if (rc == 0) rc = b2_file_open_at(env, dirfd, name, view_of(kind), B2_OPEN_RDWR, &f);
  return rc < 0 ? rc : node_new(f, dirfd, name, kind, out);
}

int b2_ns_node_create(b2_env *env, int dirfd, const char *name, int kind,
                      const b2_frame_params *p, b2_ns_node **out) {
  int rc = check_args(name, kind);
  b2_file *f;
  if (rc == 0)
    rc = kind == B2_NS_NPY ? b2_file_create_npy_at(env, dirfd, name, p, &f)
                           : b2_file_create_at(env, dirfd, name, p, &f);
  return rc < 0 ? rc : node_new(f, dirfd, name, kind, out);
}

b2_file *b2_ns_node_file(const b2_ns_node *n) { return n->file; }

const char *b2_ns_node_name(const b2_ns_node *n) { return n->name; }

void b2_ns_node_dir(const b2_ns_node *n, dev_t *ddev, ino_t *dino) {
  *ddev = n->ddev;
  *dino = n->dino;
}

int b2_ns_node_is_at(const b2_ns_node *n, dev_t ddev, ino_t dino, const char *name) {
  return n->ddev == ddev && n->dino == dino && strcmp(n->name, name) == 0;
}

int b2_ns_node_moved(b2_ns_node *n, int dirfd, const char *name) {
  struct stat dst;
  if (strlen(name) > B2_NS_NAME_MAX) return b2_fail(B2_E_NAMETOOLONG, "%.64s...: name too long", name);
  int nd = fstat(dirfd, &dst) < 0 ? -1 : fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
  if (nd < 0) return b2_fail(b2_from_errno(errno), "%s: directory: %s", name, strerror(errno));
  int rc = b2_frame_rehome(b2_file_frame(n->file), dirfd, name);
  if (rc < 0) {
    close(nd);
    return rc;
  }
  close(n->dfd);
  n->dfd = nd;
  n->ddev = dst.st_dev;
  n->dino = dst.st_ino;
  snprintf(n->name, sizeof n->name, "%s", name);
  return 0;
}

int b2_ns_node_entry(const b2_ns_node *n, int flags) {
  int fd = openat(n->dfd, n->name, flags | O_NOFOLLOW | O_CLOEXEC);
  return fd < 0 ? b2_fail(b2_from_errno(errno), "%s: %s", n->name, strerror(errno)) : fd;
}

int b2_ns_node_compact(b2_ns_node *n, const struct stat *expect) {
  int fd = b2_ns_node_entry(n, O_PATH);
  struct stat st;
  int here = fd >= 0 && fstat(fd, &st) == 0 && st.st_ino == expect->st_ino &&
             st.st_dev == expect->st_dev;
  if (fd >= 0) close(fd);
  if (!here) return 0; /* moved or replaced behind the caller's back */
  int rc = b2_file_compact(n->file);
  return rc < 0 ? rc : 1;
}

/* A new NAME.npy stored as NAME.b2nd whose header was no array: it ends
 * as the plain frame a plain NAME.npy is, NAME.npy.b2frame (when that name
 * is free; renamed in place, the same file). */
static void to_plain_name(b2_ns_node *n) {
  size_t stem;
  char plain[B2_NS_NAME_MAX + 1];
  if (b2_ns_name_kind(n->name, &stem) != B2_NS_NPY ||
      (size_t)snprintf(plain, sizeof plain, "%.*s.npy" B2_NS_NEW_SUFFIX, (int)stem, n->name) >=
          sizeof plain ||
      renameat2(n->dfd, n->name, n->dfd, plain, RENAME_NOREPLACE) != 0)
    return;
  int dfd = openat(n->dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)fsync(dfd);
    close(dfd);
  }
  snprintf(n->name, sizeof n->name, "%s", plain);
}

int b2_ns_node_close(b2_ns_node *n, int *entry) {
  if (!n) return 0;
  if (n->kind == B2_NS_NPY) (void)b2_file_flush(n->file); /* settles a new .npy */
  int plain = n->kind == B2_NS_NPY && b2_file_npy_fell_back(n->file);
  int rc = b2_file_close(n->file); /* a failed commit is tried once more */
  if (plain && rc == 0) to_plain_name(n);
  if (entry) *entry = openat(n->dfd, n->name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  close(n->dfd);
  free(n);
  return rc;
}
