/*
 * store.c - python-blosc2 stores under the mount (b2_store.h).
 *
 * A source entry NAME.b2e, NAME.b2d or NAME.b2z that b2_store_detect
 * recognises is shown as a directory (its short name NAME, names.c).  Its
 * inode (kind B2_NS_STORE, in the table like any source entry) holds the
 * store's namespace directory node (b2_ns_store: the current snapshot,
 * reopened when the store changed, checked at most once per attribute
 * timeout); this file maps the node's keys to inodes and replies.  The store's
 * groups, and the values that do not lie in a file of their own (zip
 * members, embedded values), are virtual inodes outside the table (kind
 * STORE too, `sn->root` set), read-only; a .b2d value that is a file of
 * its own is an ordinary frame inode, writable as such.  As a namespace a
 * store is read-only: creating, removing or renaming entries in it, or the
 * store itself, gives EROFS (ops_tree.c).  A store that cannot be opened
 * (damaged) answers EIO inside, with one log line naming it per change.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "b2_store.h"
#include "b2fs.h"

/* Reads of a store that another process changes under its lock (python-
 * blosc2 with locking=True) fail with B2_E_STALE: the store is read again
 * and the call retried, at most this often. */
#define STALE_TRIES 20

typedef b2_ns_snap b2fs_snap; /* a snapshot of a store (b2_ns.h) */

typedef struct b2fs_snode b2fs_snode;
struct b2fs_snode {
  /* The store's own inode (root == NULL): its namespace node. */
  b2_ns_store *node;
  /* A member (root != NULL, pinned). */
  b2fs_inode *root;
  char *key;
  int group;
  int64_t size;             /* size shown, for size_snap */
  b2fs_snap *size_snap;
  b2fs_inode *self;         /* its inode */
  b2fs_snode *prev, *next;  /* all members (freed at unmount), linked by their
                               own state: an inode's sn is cleared before
                               its member leaves the list */
};

static pthread_mutex_t members_mu = PTHREAD_MUTEX_INITIALIZER;
static b2fs_snode *members;

static void members_add(b2fs_snode *sn) {
  pthread_mutex_lock(&members_mu);
  sn->prev = NULL;
  sn->next = members;
  if (members) members->prev = sn;
  members = sn;
  pthread_mutex_unlock(&members_mu);
}

static void members_del(b2fs_snode *sn) {
  pthread_mutex_lock(&members_mu);
  if (sn->prev) sn->prev->next = sn->next;
  else members = sn->next;
  if (sn->next) sn->next->prev = sn->prev;
  sn->prev = sn->next = NULL;
  pthread_mutex_unlock(&members_mu);
}

void b2fs_store_forget_all(void) {
  for (;;) {
    pthread_mutex_lock(&members_mu);
    b2fs_inode *in = members ? members->self : NULL;
    uint64_t n = in ? in->nlookup : 0;
    pthread_mutex_unlock(&members_mu);
    if (!in) return;
    b2fs_inode_forget(in, n);
  }
}

/* An open value (fuse fh). */
typedef struct sfile {
  b2fs_snap *snap;
  int64_t i;
  b2_file *f;               /* NULL: the raw frame (objects) */
} sfile;

/* An open store directory (fuse fh): the names shown. */
typedef struct sdir {
  char **names;
  unsigned char *types;
  size_t n;
} sdir;

static void snap_put(b2fs_snap *p) { b2_ns_snap_put(p); }

/* The store state of a store's own inode, made at its first use. */
static b2fs_snode *root_sn(b2fs_inode *in) {
  b2fs_snode *sn = atomic_load(&in->sn);
  if (sn) return sn;
  sn = calloc(1, sizeof *sn);
  if (sn && !(sn->node = b2_ns_store_new())) {
    free(sn);
    sn = NULL;
  }
  if (!sn) return NULL;
  b2fs_snode *none = NULL;
  if (!atomic_compare_exchange_strong(&in->sn, &none, sn)) { /* another thread was first */
    b2_ns_store_free(sn->node);
    free(sn);
    return none;
  }
  return sn;
}

/* The store inode of a store node. */
static b2fs_inode *root_of(b2fs_inode *in) {
  return in->sn && in->sn->root ? in->sn->root : in;
}

/* The current snapshot of the store of node `in`, with a reference (give
 * it back with snap_put); NULL with *err (negative errno). */
static b2fs_snap *snap_get(b2fs_inode *in, int *err) {
  b2fs_inode *r = root_of(in);
  b2fs_snode *sn = root_sn(r);
  if (!sn) {
    *err = -ENOMEM;
    return NULL;
  }
  b2fs_snap *p = NULL;
  int report = 0;
  int rc = b2_ns_store_get(sn->node, b2fs_g.env, r->fd, b2fs_g.opts.timeout, &p, &report);
  if (report) { /* a new snapshot's notes, or a failure not logged yet */
    char real[PATH_MAX];
    b2fs_src_path(r, real, sizeof real);
    if (rc < 0)
      b2fs_log("store %s: %s", real, b2_last_detail()[0] ? b2_last_detail() : b2_strerror(rc));
    for (int k = 0; rc == 0 && k < b2_store_nnotes(b2_ns_snap_store(p)); k++)
      b2fs_log("store %s: %s", real, b2_store_note(b2_ns_snap_store(p), k));
  }
  if (rc < 0) {
    *err = -b2fs_errno(rc);
    return NULL;
  }
  return p;
}

/* A read failed: check the store again at its next use (it may have been
 * changed in place), whatever the timeout. */
static void recheck(b2fs_inode *in) {
  b2fs_snode *sn = atomic_load(&root_of(in)->sn);
  if (sn) b2_ns_store_recheck(sn->node);
}

/* The entry of node `in` in snapshot p (the root group for the store
 * itself); B2_E_NOENT when the store no longer has it. */
static int64_t entry_of(b2fs_inode *in, b2fs_snap *p) {
  if (!in->sn || !in->sn->root) return 0;
  return in->sn->group ? b2_store_find_group(b2_ns_snap_store(p), in->sn->key)
                       : b2_store_find(b2_ns_snap_store(p), in->sn->key);
}

/* Snapshot and entry of a node, or a negative errno. */
static int resolve(b2fs_inode *in, b2fs_snap **p, int64_t *i) {
  int err = 0;
  *p = snap_get(in, &err);
  if (!*p) return err;
  *i = entry_of(in, *p);
  if (*i < 0) {
    snap_put(*p);
    return -ENOENT;
  }
  return 0;
}

void b2fs_store_free(b2fs_inode *in) {
  b2fs_snode *sn = atomic_exchange(&in->sn, NULL);
  if (!sn) return;
  if (sn->root) {
    members_del(sn);
    b2fs_inode_forget(sn->root, 1);
    free(sn->key);
    snap_put(sn->size_snap);
  } else {
    b2_ns_store_free(sn->node);
  }
  free(sn);
}

/* ---- attributes ------------------------------------------------------------ */

/* View a value is shown in: arrays as .npy, SChunks their bytes, objects
 * their raw frame (-1). */
static int view_of(const b2_store_entry *e) {
  return e->kind == B2_STORE_NDARRAY ? B2_VIEW_NPY
         : e->kind == B2_STORE_SCHUNK ? B2_VIEW_LOGICAL
                                      : -1;
}

/* Size of value i as shown (0 when it cannot be read), or B2_E_STALE. */
static int64_t value_size(b2fs_snap *p, int64_t i) {
  const b2_store_entry *e = b2_store_entry_at(b2_ns_snap_store(p), i);
  int view = view_of(e);
  if (view < 0) return b2_store_raw_size(b2_ns_snap_store(p), i);
  b2_file *f;
  int rc = b2_store_open_file(b2_ns_snap_store(p), NULL, i, view, &f);
  if (rc < 0) return rc == B2_E_STALE ? rc : 0;
  int64_t n = b2_file_size(f);
  b2_file_close(f);
  return n < 0 ? 0 : n;
}

int b2fs_store_stat(b2fs_inode *in, struct stat *st) {
  b2fs_inode *r = root_of(in);
  if (fstatat(r->fd, "", st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0) return -errno;
  mode_t perm = st->st_mode & 0444;
  /* A member is an inode of its own (find and du tell them apart). */
  if (in->sn && in->sn->root) st->st_ino = (ino_t)b2fs_inode_id(in);
  /* Directories: searchable wherever readable. */
  mode_t dperm = perm | (perm >> 2);
  st->st_blksize = B2FS_IO_MAX;
  if (!in->sn || !in->sn->root || in->sn->group) {
    st->st_mode = S_IFDIR | dperm;
    st->st_nlink = 2;
    st->st_size = 0;
    st->st_blocks = in->sn && in->sn->root ? 0 : st->st_blocks;
    return 0;
  }
  b2fs_snap *p;
  int64_t i, size = 0;
  b2fs_snode *sn = in->sn;
  int held = -1;
  for (int tries = 0;; tries++) {
    int rc = resolve(in, &p, &i);
    if (rc < 0) {
      b2_store_release(held);
      return rc;
    }
    pthread_mutex_lock(&in->lock);
    if (sn->size_snap != p) {
      int64_t n = value_size(p, i);
      if (n != B2_E_STALE) {
        snap_put(sn->size_snap);
        b2_ns_snap_ref(p);
        sn->size_snap = p;
        sn->size = n;
      }
    }
    int ok = sn->size_snap == p;
    size = sn->size;
    pthread_mutex_unlock(&in->lock);
    if (ok) break;
    /* Another process changed the store meanwhile: again, holding its
     * sidecar so that it cannot change once more in between. */
    if (held < 0) held = b2_store_hold(b2_ns_snap_store(p));
    snap_put(p);
    recheck(in);
    if (tries == STALE_TRIES) {
      b2_store_release(held);
      return -EIO;
    }
  }
  b2_store_release(held);
  st->st_mode = S_IFREG | perm;
  st->st_nlink = 1;
  st->st_size = size;
  st->st_blocks = (b2_store_raw_size(b2_ns_snap_store(p), i) + 511) / 512;
  snap_put(p);
  return 0;
}

/* ---- lookup ------------------------------------------------------------------ */

/* A virtual inode for entry i of p under store inode r (one lookup). */
static b2fs_inode *member(b2fs_inode *r, b2fs_snap *p, int64_t i) {
  const b2_store_entry *e = b2_store_entry_at(b2_ns_snap_store(p), i);
  b2fs_inode *in = calloc(1, sizeof *in);
  b2fs_snode *sn = calloc(1, sizeof *sn);
  char *key = strdup(e->key);
  int fd = fcntl(r->fd, F_DUPFD_CLOEXEC, 0);
  if (!in || !sn || !key || fd < 0 || !b2fs_inode_pin(r)) {
    free(in);
    free(sn);
    free(key);
    if (fd >= 0) close(fd);
    return NULL;
  }
  sn->root = r;
  sn->key = key;
  sn->group = e->kind == B2_STORE_GROUP;
  in->fd = fd;
  in->dev = r->dev;
  in->ino = r->ino;
  in->kind = B2_NS_STORE;
  in->nlookup = 1;
  in->outside = 1; /* not in the table */
  in->sn = sn;
  pthread_mutex_init(&in->lock, NULL);
  pthread_mutex_init(&in->wlock, NULL);
  pthread_mutex_init(&in->nslock, NULL);
  sn->self = in;
  members_add(sn);
  return in;
}

/* Open directory `rel` (a/b) below the store directory fd, following no
 * symbolic link: an O_PATH descriptor or -errno. */
static int open_dir_beneath(int fd, const char *rel, size_t len) {
  char buf[PATH_MAX];
  if (len >= sizeof buf) return -ENAMETOOLONG;
  memcpy(buf, rel, len);
  buf[len] = 0;
  int cur = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  for (char *p = buf, *slash; cur >= 0 && len; p = slash + 1) {
    slash = strchr(p, '/');
    if (slash) *slash = 0;
    int next = openat(cur, p, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int e = errno;
    close(cur);
    if (next < 0) return -e;
    cur = next;
    if (!slash) break;
  }
  return cur < 0 ? -errno : cur;
}

int b2fs_store_lookup(b2fs_inode *dir, const char *name, struct fuse_entry_param *ep) {
  if (dir->sn && dir->sn->root && !dir->sn->group) return -ENOTDIR;
  b2fs_snap *p;
  int64_t g;
  int rc = resolve(dir, &p, &g);
  if (rc < 0) return rc;
  int64_t i = b2_store_child(b2_ns_snap_store(p), g, name);
  if (i < 0) {
    snap_put(p);
    return -ENOENT;
  }
  const b2_store_entry *e = b2_store_entry_at(b2_ns_snap_store(p), i);
  b2fs_inode *r = root_of(dir);
  if (e->loc == B2_STORE_IN_FILE) {
    /* A file of a .b2d: an ordinary frame (or, for an object, plain). */
    const char *slash = strrchr(e->relpath, '/');
    size_t dlen = slash ? (size_t)(slash - e->relpath) : 0;
    int gfd = open_dir_beneath(r->fd, e->relpath, dlen);
    int kind = e->kind == B2_STORE_NDARRAY ? B2_NS_NPY
               : e->kind == B2_STORE_SCHUNK ? B2_NS_LOGICAL
                                            : B2_NS_PLAIN;
    rc = gfd < 0 ? gfd : b2fs_entry(gfd, slash ? slash + 1 : e->relpath, kind, ep);
    if (gfd >= 0) close(gfd);
    snap_put(p);
    return rc;
  }
  b2fs_inode *in = member(r, p, i);
  snap_put(p);
  if (!in) return -ENOMEM;
  memset(ep, 0, sizeof *ep);
  rc = b2fs_store_stat(in, &ep->attr);
  if (rc < 0) {
    b2fs_inode_forget(in, 1);
    return rc;
  }
  ep->ino = b2fs_inode_id(in);
  ep->attr.st_ino = (ino_t)ep->ino;
  ep->attr_timeout = b2fs_g.opts.timeout;
  ep->entry_timeout = b2fs_g.opts.timeout;
  return 0;
}

/* ---- listing ------------------------------------------------------------------ */

static void sdir_free(sdir *d) {
  for (size_t k = 0; k < d->n; k++) free(d->names[k]);
  free(d->names);
  free(d->types);
  free(d);
}

int b2fs_store_opendir(b2fs_inode *in, uint64_t *fh) {
  if (in->sn && in->sn->root && !in->sn->group) return -ENOTDIR;
  b2fs_snap *p;
  int64_t g;
  int rc = resolve(in, &p, &g);
  if (rc < 0) return rc;
  const b2_store_entry *ge = b2_store_entry_at(b2_ns_snap_store(p), g);
  size_t n = (size_t)ge->nchildren + 2;
  sdir *d = calloc(1, sizeof *d);
  if (d) {
    d->names = calloc(n, sizeof *d->names);
    d->types = calloc(n, 1);
  }
  if (!d || !d->names || !d->types) rc = -ENOMEM;
  for (size_t k = 0; !rc && k < n; k++) {
    const char *nm = k == 0 ? "." : k == 1 ? ".." : b2_store_entry_at(b2_ns_snap_store(p), ge->children[k - 2])->shown;
    int grp = k < 2 || b2_store_entry_at(b2_ns_snap_store(p), ge->children[k - 2])->kind == B2_STORE_GROUP;
    d->names[k] = strdup(nm);
    d->types[k] = grp ? DT_DIR : DT_REG;
    if (!d->names[k]) rc = -ENOMEM;
    d->n = k + 1;
  }
  snap_put(p);
  if (rc < 0) {
    if (d) sdir_free(d);
    return rc;
  }
  *fh = (uint64_t)(uintptr_t)d;
  return 0;
}

size_t b2fs_store_readdir(fuse_req_t req, uint64_t fh, int plus, char *buf, size_t size,
                          off_t off) {
  sdir *d = (sdir *)(uintptr_t)fh;
  size_t pos = 0;
  for (size_t k = off < 0 ? 0 : (size_t)off; k < d->n; k++) {
    struct fuse_entry_param e; /* plus: names only (entry 0), looked up after */
    memset(&e, 0, sizeof e);
    e.attr.st_mode = DTTOIF(d->types[k]);
    e.attr.st_ino = (ino_t)k + 1; /* readers skip entries of inode 0 */
    size_t len = plus ? fuse_add_direntry_plus(req, buf + pos, size - pos, d->names[k], &e,
                                               (off_t)(k + 1))
                      : fuse_add_direntry(req, buf + pos, size - pos, d->names[k], &e.attr,
                                          (off_t)(k + 1));
    if (len > size - pos) break;
    pos += len;
  }
  return pos;
}

void b2fs_store_releasedir(uint64_t fh) { sdir_free((sdir *)(uintptr_t)fh); }

/* ---- contents -------------------------------------------------------------------- */

int b2fs_store_open(b2fs_inode *in, int flags, uint64_t *fh) {
  if (!in->sn || !in->sn->root || in->sn->group) return -EISDIR;
  if ((flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC)) return -EROFS;
  sfile *sf = calloc(1, sizeof *sf);
  if (!sf) return -ENOMEM;
  int held = -1;
  for (int tries = 0;; tries++) {
    int rc = resolve(in, &sf->snap, &sf->i);
    if (rc < 0) {
      b2_store_release(held);
      free(sf);
      return rc;
    }
    int view = view_of(b2_store_entry_at(b2_ns_snap_store(sf->snap), sf->i));
    int erc = view < 0 ? 0 : b2_store_open_file(b2_ns_snap_store(sf->snap), b2fs_g.env, sf->i, view, &sf->f);
    if (erc == B2_E_STALE && tries < STALE_TRIES) {
      /* Changed meanwhile: again, holding the store's sidecar so that it
       * cannot change once more in between. */
      if (held < 0) held = b2_store_hold(b2_ns_snap_store(sf->snap));
      snap_put(sf->snap);
      recheck(in);
      continue;
    }
    b2_store_release(held);
    held = -1;
    if (erc < 0) {
      char real[PATH_MAX];
      b2fs_log("%s/%s: %s", b2fs_src_path(root_of(in), real, sizeof real), in->sn->key,
               b2_last_detail());
      recheck(in);
      snap_put(sf->snap);
      free(sf);
      return -b2fs_errno(erc);
    }
    break;
  }
  *fh = (uint64_t)(uintptr_t)sf;
  return 0;
}

ssize_t b2fs_store_read(b2fs_inode *in, uint64_t fh, void *buf, size_t size, off_t off) {
  sfile *sf = (sfile *)(uintptr_t)fh;
  size_t done = 0;
  while (done < size) {
    ssize_t n = sf->f ? b2_file_pread(sf->f, (char *)buf + done, size - done, off + (off_t)done)
                      : b2_store_pread_raw(b2_ns_snap_store(sf->snap), sf->i, (char *)buf + done, size - done,
                                           off + (off_t)done);
    if (n < 0) {
      char real[PATH_MAX];
      b2fs_log("%s/%s: read at offset %lld: %s", b2fs_src_path(root_of(in), real, sizeof real),
               in->sn->key, (long long)(off + (off_t)done), b2_last_detail());
      recheck(in);
      return -b2fs_errno((int)n);
    }
    if (n == 0) break;
    done += (size_t)n;
  }
  return (ssize_t)done;
}

void b2fs_store_release(uint64_t fh) {
  sfile *sf = (sfile *)(uintptr_t)fh;
  b2_file_close(sf->f);
  snap_put(sf->snap);
  free(sf);
}

/* ---- attributes: user.b2.* ---------------------------------------------------------- */

#define KIND_XATTR "user.b2.kind"

/* For a value: its frame's attributes (an object: only user.b2.kind); for
 * a group: its python attributes (user.b2.vlmeta.*).  name NULL: list. */
ssize_t b2fs_store_xattr(b2fs_inode *in, const char *name, char *buf, size_t size) {
  b2fs_snap *p;
  int64_t i;
  int rc = resolve(in, &p, &i);
  if (rc < 0) return rc;
  const b2_store_entry *e = b2_store_entry_at(b2_ns_snap_store(p), i);
  ssize_t n;
  if (e->kind == B2_STORE_GROUP) {
    n = name ? b2_store_xattr_get(b2_ns_snap_store(p), i, name, buf, size) : b2_store_xattr_list(b2_ns_snap_store(p), i, buf, size);
  } else if (view_of(e) < 0) {
    size_t kl = strlen(e->objkind);
    if (name && strcmp(name, KIND_XATTR)) n = B2_E_NOENT;
    else if (!name) n = size && size < sizeof KIND_XATTR ? B2_E_RANGE : (ssize_t)sizeof KIND_XATTR;
    else n = size && size < kl ? B2_E_RANGE : (ssize_t)kl;
    if (n > 0 && size) memcpy(buf, name ? e->objkind : KIND_XATTR, (size_t)n);
  } else {
    b2_file *f;
    n = b2_store_open_file(b2_ns_snap_store(p), NULL, i, view_of(e), &f);
    if (n == 0) {
      n = name ? b2_file_xattr_get(f, name, buf, size) : b2_file_xattr_list(f, buf, size);
      b2_file_close(f);
    }
  }
  snap_put(p);
  if (n == B2_E_RANGE) return -ERANGE;
  if (n == B2_E_NOENT) return -ENODATA;
  return n < 0 ? -b2fs_errno((int)n) : n;
}
