/*
 * store.c - python-blosc2 stores under the mount (b2_store.h).
 *
 * A source entry NAME.b2e, NAME.b2d or NAME.b2z that b2_store_detect
 * recognises is shown as a directory (its short name NAME, names.c).  Its
 * inode (kind B2_NS_STORE, in the table like any source entry) holds the
 * store's namespace directory node (b2_ns_store: the current snapshot,
 * reopened when the store changed, checked at most once per attribute
 * timeout); the layer maps names to its keys' child nodes (b2_ns_key:
 * lookups, listings, sizes, reads with their retries, attributes), and
 * this file maps those nodes to inodes and replies.  The store's
 * groups, and the values that do not lie in a file of their own (zip
 * members, embedded values), are virtual inodes outside the table (kind
 * STORE too, `sn->root` set), read-only; a .b2d value that is a file of
 * its own is an ordinary frame inode, writable as such.  A .b2d takes new
 * values, each a file of its own (b2fs_store_create: NAME.npy an array,
 * other names an SChunk), and loses those in files when they are removed
 * (b2fs_store_file); otherwise a store is read-only as a namespace:
 * removing other entries, renaming, making directories, or anything new
 * in a .b2z or .b2e gives EROFS (ops_tree.c).  A store that cannot be opened
 * (damaged) answers EIO inside, with one log line naming it per change.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "b2_store.h"
#include "b2fs.h"

typedef struct b2fs_snode b2fs_snode;
struct b2fs_snode {
  /* The store's own inode (root == NULL): its namespace node. */
  b2_ns_store *node;
  /* A member (root != NULL, pinned): its key's child node. */
  b2fs_inode *root;
  b2_ns_key *key;
  b2fs_inode *self;         /* its inode */
  b2fs_snode *prev, *next;  /* all members (freed at unmount), linked by their
                               own state: an inode's sn is cleared before
                               its member leaves the list */
  b2fs_snode *hprev, *hnext; /* in bucket `bucket` of `byname` */
  size_t bucket;
};

/* Every member, and the same by store and key: a key looked up again is
 * the inode it was (one inode per key while the kernel knows it, as a
 * file system's: the kernel then keeps its dentries, and rename(2) sees
 * a directory's ancestors). */
#define BUCKETS 4096
static pthread_mutex_t members_mu = PTHREAD_MUTEX_INITIALIZER;
static b2fs_snode *members;
static b2fs_snode *byname[BUCKETS];

static size_t bucket_of(const b2fs_inode *root, const b2_ns_key *k) {
  uint64_t h = 1469598103934665603ull ^ (uint64_t)(uintptr_t)root ^ (uint64_t)b2_ns_key_is_group(k);
  for (const unsigned char *p = (const unsigned char *)b2_ns_key_name(k); *p; p++)
    h = (h ^ *p) * 1099511628211ull;
  return (size_t)(h % BUCKETS);
}

static void bucket_del(b2fs_snode *sn) {
  if (sn->hprev) sn->hprev->hnext = sn->hnext;
  else byname[sn->bucket] = sn->hnext;
  if (sn->hnext) sn->hnext->hprev = sn->hprev;
  sn->hprev = sn->hnext = NULL;
}

static void bucket_add(b2fs_snode *sn) {
  sn->bucket = bucket_of(sn->root, sn->key);
  sn->hprev = NULL;
  sn->hnext = byname[sn->bucket];
  if (sn->hnext) sn->hnext->hprev = sn;
  byname[sn->bucket] = sn;
}

static void members_add(b2fs_snode *sn) {
  pthread_mutex_lock(&members_mu);
  sn->prev = NULL;
  sn->next = members;
  if (members) members->prev = sn;
  members = sn;
  bucket_add(sn);
  pthread_mutex_unlock(&members_mu);
}

static void members_del(b2fs_snode *sn) {
  pthread_mutex_lock(&members_mu);
  if (sn->prev) sn->prev->next = sn->next;
  else members = sn->next;
  if (sn->next) sn->next->prev = sn->prev;
  sn->prev = sn->next = NULL;
  bucket_del(sn);
  pthread_mutex_unlock(&members_mu);
}

/* The member of store inode r for key k that the kernel still knows,
 * with one more lookup; NULL when there is none. */
static b2fs_inode *member_again(b2fs_inode *r, const b2_ns_key *k) {
  b2fs_inode *in = NULL;
  pthread_mutex_lock(&members_mu);
  for (b2fs_snode *sn = byname[bucket_of(r, k)]; sn && !in; sn = sn->hnext) {
    if (sn->root != r || !b2_ns_key_same(sn->key, k)) continue;
    /* Forgotten meanwhile (nlookup 0): being freed, not found again. */
    if (b2fs_inode_pin(sn->self)) in = sn->self;
  }
  pthread_mutex_unlock(&members_mu);
  return in;
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

/* A line the store node of inode `arg` reports: logged with the store's
 * source path. */
static void note(void *arg, const char *line) {
  char real[PATH_MAX];
  b2fs_log("store %s: %s", b2fs_src_path(arg, real, sizeof real), line);
}

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
  b2_ns_store_bind(sn->node, b2fs_g.env, in->fd, b2fs_g.opts.timeout, note, in);
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

/* The namespace node of the store of inode `in` (NULL: out of memory) and
 * the key of `in` in it (NULL: the store itself, its root group). */
static b2_ns_store *store_of(b2fs_inode *in) {
  b2fs_snode *sn = root_sn(root_of(in));
  return sn ? sn->node : NULL;
}
static b2_ns_key *key_of(b2fs_inode *in) { return in->sn && in->sn->root ? in->sn->key : NULL; }
static int is_group(b2fs_inode *in) { return !key_of(in) || b2_ns_key_is_group(key_of(in)); }

/* errno of a store node's engine code. */
static int store_errno(int rc) {
  switch (rc) {
  case B2_E_NOENT:
    return ENOENT;
  case B2_E_NOTDIR:
    return ENOTDIR;
  case B2_E_ISDIR:
    return EISDIR;
  case B2_E_NOTEMPTY:
    return ENOTEMPTY;
  default:
    return b2fs_errno(rc);
  }
}

void b2fs_store_free(b2fs_inode *in) {
  b2fs_snode *sn = atomic_exchange(&in->sn, NULL);
  if (!sn) return;
  if (sn->root) {
    members_del(sn);
    b2_ns_key_free(sn->key);
    b2fs_inode_forget(sn->root, 1);
  } else {
    b2_ns_store_free(sn->node);
  }
  free(sn);
}

/* ---- attributes ------------------------------------------------------------ */

int b2fs_store_stat(b2fs_inode *in, struct stat *st) {
  b2fs_inode *r = root_of(in);
  if (is_group(in) && store_of(in)) { /* a .b2d's directory: its own attributes */
    int fd = b2_ns_store_group_dir(store_of(in), key_of(in), 0);
    int rc = fd < 0 ? -1 : fstatat(fd, "", st, AT_EMPTY_PATH);
    if (fd >= 0) close(fd);
    if (rc == 0) {
      if (key_of(in)) st->st_ino = (ino_t)b2fs_inode_id(in);
      st->st_nlink = 2;
      st->st_size = 0;
      st->st_blksize = B2FS_IO_MAX;
      return 0;
    }
  }
  if (fstatat(r->fd, "", st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0) return -errno;
  mode_t perm = st->st_mode & 0444;
  /* A member is an inode of its own (find and du tell them apart). */
  if (key_of(in)) st->st_ino = (ino_t)b2fs_inode_id(in);
  /* Directories: searchable wherever readable; a .b2d's groups (the store
   * is a directory) writable where it is, as they take new values. */
  mode_t dperm = perm | (perm >> 2) | (S_ISDIR(st->st_mode) ? st->st_mode & 0222 : 0);
  st->st_blksize = B2FS_IO_MAX;
  if (is_group(in)) {
    st->st_mode = S_IFDIR | dperm;
    st->st_nlink = 2;
    st->st_size = 0;
    st->st_blocks = key_of(in) ? 0 : st->st_blocks;
    return 0;
  }
  if (!store_of(in)) return -ENOMEM;
  int64_t size, raw;
  int rc = b2_ns_key_size(key_of(in), &size, &raw);
  if (rc < 0) return -store_errno(rc);
  st->st_mode = S_IFREG | perm;
  st->st_nlink = 1;
  st->st_size = size;
  st->st_blocks = (raw + 511) / 512;
  return 0;
}

int b2fs_store_dir(b2fs_inode *in, int make) {
  if (!is_group(in)) return -EROFS;
  b2_ns_store *n = store_of(in);
  if (!n) return -ENOMEM;
  int fd = b2_ns_store_group_dir(n, key_of(in), make);
  return fd < 0 ? -store_errno(fd) : fd;
}

b2_ns_dir *b2fs_store_dir_ns(b2fs_inode *in, int dirfd) {
  struct stat dst;
  if (fstat(dirfd, &dst) < 0) return NULL;
  pthread_mutex_lock(&in->lock); /* replaced here only: no reader sees it put */
  b2_ns_dir *d = atomic_load(&in->nsdir);
  if (!d || !b2_ns_dir_is(d, &dst)) {
    b2_ns_dir *nd = NULL;
    if (b2_ns_dir_open(dirfd, &dst, &nd) == 0) {
      atomic_store(&in->nsdir, nd);
      b2_ns_dir_put(d);
    }
    d = nd;
  }
  d = b2_ns_dir_ref(d);
  pthread_mutex_unlock(&in->lock);
  return d;
}

int b2fs_store_setattr(b2fs_inode *in, int to_set, const struct stat *attr,
                       const struct timespec ts[2]) {
  if (is_group(in) && (to_set & FUSE_SET_ATTR_SIZE)) return -EISDIR;
  int fd = b2fs_store_dir(in, 1);
  if (fd < 0) return fd;
  char path[64];
  b2fs_fd_path(fd, path, sizeof path);
  int rc = 0;
  if ((to_set & FUSE_SET_ATTR_MODE) && chmod(path, attr->st_mode & 07777) < 0) rc = -errno;
  if (!rc && (to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID))) {
    uid_t u = (to_set & FUSE_SET_ATTR_UID) ? attr->st_uid : (uid_t)-1;
    gid_t g = (to_set & FUSE_SET_ATTR_GID) ? attr->st_gid : (gid_t)-1;
    if (fchownat(fd, "", u, g, AT_EMPTY_PATH) < 0) rc = -errno;
  }
  if (!rc && (ts[0].tv_nsec != UTIME_OMIT || ts[1].tv_nsec != UTIME_OMIT) &&
      utimensat(AT_FDCWD, path, ts, 0) < 0)
    rc = -errno;
  close(fd);
  return rc;
}

/* ---- lookup ------------------------------------------------------------------ */

/* A virtual inode for key k under store inode r (one lookup); takes k
 * over. */
static b2fs_inode *member(b2fs_inode *r, b2_ns_key *k) {
  b2fs_inode *in = calloc(1, sizeof *in);
  b2fs_snode *sn = calloc(1, sizeof *sn);
  int fd = fcntl(r->fd, F_DUPFD_CLOEXEC, 0);
  if (!in || !sn || fd < 0 || !b2fs_inode_pin(r)) {
    free(in);
    free(sn);
    b2_ns_key_free(k);
    if (fd >= 0) close(fd);
    return NULL;
  }
  sn->root = r;
  sn->key = k;
  in->fd = fd;
  in->dev = r->dev;
  in->ino = r->ino;
  in->shown = r->ino;
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

int b2fs_store_lookup(b2fs_inode *dir, const char *name, struct fuse_entry_param *ep) {
  b2_ns_store *n = store_of(dir);
  if (!n) return -ENOMEM;
  b2_ns_key *k = NULL;
  b2_ns_store_file file;
  int rc = b2_ns_store_lookup(n, key_of(dir), name, &k, &file);
  if (rc < 0) return -store_errno(rc);
  if (rc == 1) { /* a file of a .b2d: an ordinary frame (or plain) */
    /* A frame we rewrote under this name: its inode follows first (as
     * b2fs_entry_in's), else the new file would get an inode of its own. */
    if (file.kind != B2_NS_PLAIN) (void)b2fs_frame_settle_at(file.dirfd, file.name);
    rc = b2fs_entry(file.dirfd, file.name, file.kind, ep);
    close(file.dirfd);
    if (rc == 0) atomic_store(&b2fs_inode_get(ep->ino)->in_store, 1);
    return rc;
  }
  b2fs_inode *in = member_again(root_of(dir), k);
  if (in) b2_ns_key_free(k);
  else in = member(root_of(dir), k);
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

/* ---- new values ----------------------------------------------------------------- */

/* The store node of group dir and the owner a new entry there gets (the
 * caller of req): 0 or -errno. */
static int change_in(b2fs_inode *dir, fuse_req_t req, b2_ns_store **n, uid_t *uid, gid_t *gid) {
  if (!is_group(dir)) return -ENOTDIR;
  *n = store_of(dir);
  if (!*n) return -ENOMEM;
  b2fs_req_owner(req, uid, gid);
  return 0;
}

/* -errno of a change's engine code, logged unless the caller asked for
 * what cannot be (an existing name, a read-only place...). */
static int change_errno(int rc, const char *name, const char *what) {
  switch (rc) {
  case B2_E_EXIST: case B2_E_ROFS: case B2_E_ISDIR: case B2_E_INVAL:
  case B2_E_NOTEMPTY: case B2_E_NOENT: case B2_E_NOTDIR: case B2_E_XDEV:
    break;
  default:
    b2fs_log("store: %s: cannot %s: %s", name, what, b2_last_detail());
  }
  return -b2_to_errno(rc);
}

int b2fs_store_create(b2fs_inode *dir, const char *name, int replace, fuse_req_t req,
                      b2_ns_store_file *file) {
  b2_ns_store *n;
  uid_t uid;
  gid_t gid;
  int rc = change_in(dir, req, &n, &uid, &gid);
  if (rc < 0) return rc;
  rc = b2_ns_store_create(n, key_of(dir), name, replace, uid, gid, file);
  if (rc < 0 && b2fs_shed_retry(rc)) /* cold inodes forgotten: again */
    rc = b2_ns_store_create(n, key_of(dir), name, replace, uid, gid, file);
  return rc < 0 ? change_errno(rc, name, "create it") : rc;
}

int b2fs_store_mkdir(b2fs_inode *dir, const char *name, mode_t mode, fuse_req_t req,
                     struct fuse_entry_param *e) {
  b2_ns_store *n;
  uid_t uid;
  gid_t gid;
  int rc = change_in(dir, req, &n, &uid, &gid);
  if (rc < 0) return rc;
  rc = b2_ns_store_mkdir(n, key_of(dir), name, mode, uid, gid);
  return rc < 0 ? change_errno(rc, name, "make it") : b2fs_store_lookup(dir, name, e);
}

int b2fs_store_rmdir(b2fs_inode *dir, const char *name, char *base, size_t cap) {
  b2_ns_store *n = store_of(dir);
  if (!n) return -ENOMEM;
  int rc = b2_ns_store_rmdir(n, key_of(dir), name, base, cap);
  return rc < 0 ? change_errno(rc, name, "remove it") : rc;
}

int b2fs_store_rekey(b2fs_inode *dir, const char *name, b2fs_inode *ndir, const char *newname,
                     int replace) {
  b2_ns_store *n = store_of(dir);
  if (!n) return -ENOMEM;
  if (newname && !is_group(ndir)) return -ENOTDIR;
  int rc = b2_ns_store_rekey(n, key_of(dir), name, newname ? key_of(ndir) : NULL, newname, replace);
  return change_errno(rc, name, newname ? "rename it" : "remove it");
}

int b2fs_store_move_group(b2fs_inode *dir, const char *name, b2fs_inode *ndir,
                          const char *newname, int noreplace) {
  b2_ns_store *n = store_of(dir);
  if (!n) return -ENOMEM;
  if (!is_group(ndir)) return -ENOTDIR;
  char key[B2_STORE_KEY_CAP], nkey[B2_STORE_KEY_CAP];
  int rc = b2_ns_store_move_group(n, key_of(dir), name, key_of(ndir), newname, noreplace, key,
                                  nkey);
  if (rc < 0) return change_errno(rc, name, "rename it");
  if (rc != 0) return rc == 2;
  /* The inodes of the group and of those below it name their new keys
   * (the kernel keeps them), those of a group replaced are gone. */
  b2fs_inode *r = root_of(dir);
  pthread_mutex_lock(&members_mu);
  for (b2fs_snode *sn = members; sn; sn = sn->next) {
    if (sn->root != r) continue;
    (void)b2_ns_key_moved(sn->key, key, nkey);
    if (bucket_of(r, sn->key) != sn->bucket) {
      bucket_del(sn);
      bucket_add(sn);
    }
  }
  pthread_mutex_unlock(&members_mu);
  return 0;
}

int b2fs_store_file(b2fs_inode *dir, const char *name, b2_ns_store_file *file) {
  b2_ns_store *n = store_of(dir);
  if (!n) return -ENOMEM;
  b2_ns_key *k = NULL;
  int rc = b2_ns_store_lookup(n, key_of(dir), name, &k, file);
  if (rc == 0) { /* a group, an embedded value, a zip member */
    b2_ns_key_free(k);
    return -EROFS;
  }
  return rc < 0 ? -store_errno(rc) : 0;
}

int b2fs_store_same(b2fs_inode *a, b2fs_inode *b) {
  return a->kind == B2_NS_STORE && b->kind == B2_NS_STORE && root_of(a) == root_of(b);
}

void b2fs_store_changed(b2fs_inode *dir, int files) {
  b2_ns_store *n = store_of(dir);
  if (n) b2_ns_store_changed(n, files);
}

/* ---- listing ------------------------------------------------------------------ */

int b2fs_store_opendir(b2fs_inode *in, uint64_t *fh) {
  b2_ns_store *n = store_of(in);
  b2_ns_list *l = calloc(1, sizeof *l);
  int rc = !n || !l ? B2_E_NOMEM : b2_ns_store_list(n, key_of(in), l);
  if (rc < 0) {
    free(l);
    return -store_errno(rc);
  }
  *fh = (uint64_t)(uintptr_t)l;
  return 0;
}

size_t b2fs_store_readdir(fuse_req_t req, uint64_t fh, int plus, char *buf, size_t size,
                          off_t off) {
  b2_ns_list *l = (b2_ns_list *)(uintptr_t)fh;
  size_t pos = 0;
  for (size_t k = off < 0 ? 0 : (size_t)off; k < l->n; k++) { /* at offset k + 3 */
    struct fuse_entry_param e; /* plus: names only (entry 0), looked up after */
    memset(&e, 0, sizeof e);
    e.attr.st_mode = DTTOIF(l->e[k].type);
    e.attr.st_ino = l->e[k].ino;
    size_t len = plus ? fuse_add_direntry_plus(req, buf + pos, size - pos, l->e[k].shown, &e,
                                               (off_t)(k + 3))
                      : fuse_add_direntry(req, buf + pos, size - pos, l->e[k].shown, &e.attr,
                                          (off_t)(k + 3));
    if (len > size - pos) break;
    pos += len;
  }
  return pos;
}

void b2fs_store_releasedir(uint64_t fh) {
  b2_ns_list *l = (b2_ns_list *)(uintptr_t)fh;
  b2_ns_list_free(l);
  free(l);
}

/* ---- contents -------------------------------------------------------------------- */

int b2fs_store_open(b2fs_inode *in, int flags, uint64_t *fh) {
  if (is_group(in)) return -EISDIR;
  if ((flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC)) return -EROFS;
  if (!store_of(in)) return -ENOMEM;
  b2_ns_value *v;
  int rc = b2_ns_key_open(key_of(in), &v);
  if (rc < 0) return -store_errno(rc);
  *fh = (uint64_t)(uintptr_t)v;
  return 0;
}

ssize_t b2fs_store_read(b2fs_inode *in, uint64_t fh, void *buf, size_t size, off_t off) {
  ssize_t n = b2_ns_value_pread(key_of(in), (b2_ns_value *)(uintptr_t)fh, buf, size, off);
  return n < 0 ? -b2fs_errno((int)n) : n;
}

void b2fs_store_release(uint64_t fh) { b2_ns_value_close((b2_ns_value *)(uintptr_t)fh); }

/* ---- attributes: user.b2.* ---------------------------------------------------------- */

/* For a value: its frame's attributes (an object: only user.b2.kind); for
 * a group: its python attributes (user.b2.vlmeta.*).  name NULL: list. */
ssize_t b2fs_store_xattr(b2fs_inode *in, const char *name, char *buf, size_t size) {
  b2_ns_store *st = store_of(in);
  if (!st) return -ENOMEM;
  ssize_t n = b2_ns_key_xattr(st, key_of(in), name, buf, size);
  if (n == B2_E_RANGE) return -ERANGE;
  if (n == B2_E_NOENT) return -ENODATA;
  return n < 0 ? -b2fs_errno((int)n) : n;
}
